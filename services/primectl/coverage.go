package primectl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
)

// The paths the coverage report compares (§7.1), in the order it prints them.
var coveragePaths = []string{store.ViaWebhook, store.ViaEmail, store.ViaBackstop}

// Coverage is what `primectl coverage` reports (--json gives it as it is):
// for the jobs Prime created since Since, how each path saw them. Stored
// text (job numbers, actions) goes to the terminal through Printable.
type Coverage struct {
	Since time.Time `json:"since"`
	// Jobs is how many jobs Prime created in the window.
	Jobs  int                     `json:"jobs"`
	Paths map[string]PathCoverage `json:"paths"`
	// Lags compares each pair of paths over the jobs both saw.
	Lags []PathLag `json:"lagBetweenPaths"`
	// WebhookNeverSaw are the jobs of the window no webhook event named.
	WebhookNeverSaw []UnseenJob `json:"webhookNeverSaw"`
	// Actions is §7.1's coverage check: webhook events by action, first
	// and last seen, over the same window.
	Actions []store.ActionCoverage `json:"actions"`
	// Emails are the emails the mail intake received in the window, by
	// their receipt's outcome (Processed, Failed, Dismissed, Rejected,
	// Pending): mail refused unread as not Prime's (Rejected) counts apart
	// from what failed for a person (Failed, then Dismissed once a person
	// closed it), and explains an email path that saw no job.
	Emails map[string]int `json:"emails"`
}

// PathCoverage is one path's share.
type PathCoverage struct {
	// Seen is how many of the jobs the path saw; OnlyThere how many it
	// alone saw.
	Seen      int `json:"seen"`
	OnlyThere int `json:"onlyThere"`
	// First is how many it saw before the other paths.
	First int `json:"first"`
	// MedianLagSeconds is the median time from the first sight of a job by
	// any path to this path's, over the jobs it saw.
	MedianLagSeconds float64 `json:"medianLagSeconds"`
}

// PathLag is the median of To's first sight less From's, over the jobs
// both saw: positive when To sees jobs later.
type PathLag struct {
	From          string  `json:"from"`
	To            string  `json:"to"`
	Jobs          int     `json:"jobs"`
	MedianSeconds float64 `json:"medianSeconds"`
}

// UnseenJob is a job no webhook event named, and how it was seen.
type UnseenJob struct {
	JobID     string    `json:"jobId"`
	JobNumber string    `json:"jobNumber"`
	CreatedAt time.Time `json:"createdAt"`
	// FirstSeenBy is the path that claimed its first sight ("" when
	// primeflow made none).
	FirstSeenBy string    `json:"firstSeenBy"`
	Email       time.Time `json:"email"`
	Backstop    time.Time `json:"backstop"`
}

// seenAt is when a path first saw a job; zero when it never did.
func seenAt(j store.JobCoverage, path string) time.Time {
	switch path {
	case store.ViaWebhook:
		return j.Webhook
	case store.ViaEmail:
		return j.Email
	}
	return j.Backstop
}

// firstPath is the path that saw a job first: the earliest sight, and on a
// tie the one that claimed its first sight.
func firstPath(j store.JobCoverage) string {
	first := ""
	var at time.Time
	for _, p := range coveragePaths {
		t := seenAt(j, p)
		switch {
		case t.IsZero():
		case first == "", t.Before(at), t.Equal(at) && p == j.Via:
			first, at = p, t
		}
	}
	return first
}

// buildCoverage works the report out of the store's rows.
func buildCoverage(since time.Time, jobs []store.JobCoverage, actions []store.ActionCoverage, emails map[string]int) Coverage {
	c := Coverage{Since: since, Jobs: len(jobs), Paths: map[string]PathCoverage{}, Actions: actions,
		WebhookNeverSaw: []UnseenJob{}, Emails: emails}
	lags := map[string][]time.Duration{}
	for _, j := range jobs {
		first := firstPath(j)
		var earliest time.Time
		if first != "" {
			earliest = seenAt(j, first)
		}
		seenBy := 0
		for _, p := range coveragePaths {
			if !seenAt(j, p).IsZero() {
				seenBy++
			}
		}
		for _, p := range coveragePaths {
			at := seenAt(j, p)
			if at.IsZero() {
				continue
			}
			pc := c.Paths[p]
			pc.Seen++
			if seenBy == 1 {
				pc.OnlyThere++
			}
			if p == first {
				pc.First++
			}
			c.Paths[p] = pc
			lags[p] = append(lags[p], at.Sub(earliest))
		}
		for i, from := range coveragePaths {
			for _, to := range coveragePaths[i+1:] {
				if a, b := seenAt(j, from), seenAt(j, to); !a.IsZero() && !b.IsZero() {
					lags[from+">"+to] = append(lags[from+">"+to], b.Sub(a))
				}
			}
		}
		if j.Webhook.IsZero() {
			c.WebhookNeverSaw = append(c.WebhookNeverSaw, UnseenJob{JobID: j.JobID, JobNumber: j.JobNumber, CreatedAt: j.CreatedAt,
				FirstSeenBy: j.Via, Email: j.Email, Backstop: j.Backstop})
		}
	}
	for _, p := range coveragePaths {
		pc := c.Paths[p]
		pc.MedianLagSeconds = median(lags[p]).Seconds()
		c.Paths[p] = pc
	}
	for i, from := range coveragePaths {
		for _, to := range coveragePaths[i+1:] {
			d := lags[from+">"+to]
			c.Lags = append(c.Lags, PathLag{From: from, To: to, Jobs: len(d), MedianSeconds: median(d).Seconds()})
		}
	}
	return c
}

// median is the middle duration (the mean of the two middle ones for an
// even count); 0 for none.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func (c *cli) coverage(ctx context.Context, args []string) error {
	fs := c.flags("coverage")
	sinceFlag := fs.String("since", "7d", "the jobs Prime created at or after T")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		fmt.Fprintf(c.stderr, "primectl coverage: unexpected argument %q\n", pos[0])
		return ErrUsage
	}
	since, err := parseTime(*sinceFlag, c.now())
	if err != nil || since.IsZero() {
		return fmt.Errorf("--since: %w", err)
	}
	st, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	jobs, err := st.ListJobCoverage(ctx, since)
	if err != nil {
		return err
	}
	actions, err := st.WebhookActionCoverage(ctx, since)
	if err != nil {
		return err
	}
	emails, err := st.CountEmailReceipts(ctx, since)
	if err != nil {
		return err
	}
	cov := buildCoverage(since, jobs, actions, emails)
	if *asJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(cov)
	}
	return printCoverage(c.stdout, cov)
}

func printCoverage(w io.Writer, c Coverage) error {
	fmt.Fprintf(w, "Coverage of the %d jobs Prime created since %s UTC (§7.1)\n\n", c.Jobs, c.Since.Format("2006-01-02 15:04:05"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tJOBS SEEN\tSEEN ONLY THERE\tSEEN FIRST\tMEDIAN LAG BEHIND THE FIRST")
	for _, p := range coveragePaths {
		pc := c.Paths[p]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", p, pc.Seen, pc.OnlyThere, pc.First, medianOf(pc.Seen, pc.MedianLagSeconds))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BETWEEN PATHS\tJOBS BOTH SAW\tMEDIAN LAG (+: THE SECOND LATER)")
	for _, l := range c.Lags {
		fmt.Fprintf(tw, "%s → %s\t%d\t%s\n", l.From, l.To, l.Jobs, medianOf(l.Jobs, l.MedianSeconds))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	printEmails(w, c)

	fmt.Fprintf(w, "\nJobs the webhook never saw: %d\n", len(c.WebhookNeverSaw))
	if len(c.WebhookNeverSaw) > 0 {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "JOB\tNUMBER\tCREATED (UTC)\tFIRST SEEN BY\tEMAIL (UTC)\tBACKSTOP (UTC)")
		for _, j := range c.WebhookNeverSaw {
			writeRow(tw, j.JobID, dash(cut(j.JobNumber, 20)), utc(j.CreatedAt), dash(cut(j.FirstSeenBy, 20)), utc(j.Email), utc(j.Backstop))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	fmt.Fprintf(w, "\nWebhook events by action since %s UTC (§7.1's coverage check)\n", c.Since.Format("2006-01-02 15:04:05"))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ACTION\tEVENTS\tFIRST SEEN (UTC)\tLAST SEEN (UTC)")
	for _, a := range c.Actions {
		writeRow(tw, dash(cut(a.Action, 60)), strconv.Itoa(a.Events), utc(a.FirstSeen), utc(a.LastSeen))
	}
	return tw.Flush()
}

// emailOutcomes are the receipts' outcomes (the only ones the intake, the
// n8n flow's one-parameter receipt, or primectl emails dismiss writes) as
// the report prints them.
var emailOutcomes = []struct{ outcome, says string }{
	{store.EmailProcessed, "processed"},
	{store.EmailFailed, "failed (for a person: primectl status)"},
	{store.EmailDismissed, "dismissed by a person"},
	{store.EmailRejected, "rejected unread as not Prime's"},
	{store.EmailPending, "pending"},
}

// printEmails prints the window's emails by outcome, and says so when the
// intake refused every one of them: Prime's own mail, most likely, not
// passing MAIL_ALLOWED_SENDERS or its authentication check.
func printEmails(w io.Writer, c Coverage) {
	var parts []string
	for _, o := range emailOutcomes {
		parts = append(parts, fmt.Sprintf("%d %s", c.Emails[o.outcome], o.says))
	}
	fmt.Fprintf(w, "\nEmails received since %s UTC: %s\n", c.Since.Format(timeLayout), strings.Join(parts, ", "))
	if c.Emails[store.EmailRejected] > 0 && c.Emails[store.EmailProcessed] == 0 {
		fmt.Fprintln(w, "Every email received was refused as not Prime's: check MAIL_ALLOWED_SENDERS against the From of one of Prime's "+
			"notifications, and its Authentication-Results (docs/operations.md, New-job emails); the receipts say why (lastError).")
	}
}

// medianOf prints a median lag over jobs, rounded to the second; "-" over
// none, where a 0s would read as "no lag".
func medianOf(jobs int, s float64) string {
	if jobs == 0 {
		return "-"
	}
	return time.Duration(s * float64(time.Second)).Round(time.Second).String()
}

// timeLayout is how primectl prints a time.
const timeLayout = "2006-01-02 15:04:05"

// utc is a time as primectl prints it; "-" for none.
func utc(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(timeLayout)
}
