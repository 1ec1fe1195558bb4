package primectl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/primebudget"
	"github.com/ethosbuilding/primeflow/pkg/status"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// status prints the pipeline's state at a glance (pkg/status): from the
// database, from NATS (NATS_URL: consumers, locks, the deployment's Prime
// budget and whether it is the database's instance's; before any process
// has spent the budget, the Prime client's metrics of the process at
// INGEST_URL) and from ingest (INGEST_URL's /livez). What cannot be
// reached is said, and the rest still printed. --json gives the Report.
// It exits with the report's verdict (status.Verdict): 0 all well, 1
// something needs a person, 2 the database, NATS or ingest could not be
// asked, or NATS is another instance's.
func (c *cli) status(ctx context.Context, args []string) error {
	fs := c.flags("status")
	asJSON := fs.Bool("json", false, "the same as JSON")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		fmt.Fprintf(c.stderr, "primectl status: unexpected argument %q\n", pos[0])
		return ErrUsage
	}
	st, err := c.open(ctx)
	if err != nil {
		return &ExitStatus{Code: int(status.CannotTell), Err: err}
	}
	defer st.Close()
	src := status.Sources{Store: st, Now: c.now, Ingest: status.Livez(c.cfg.ingestURL()), SyncGrace: c.cfg.SyncGrace}
	nc, err := c.connectNATS()
	if err != nil {
		src.JSErr = err
	} else {
		defer nc.Close()
		if src.JS, err = jetstream.New(nc); err != nil {
			src.JS, src.JSErr = nil, err
		}
	}
	src.Budget = status.FromBudgetBucket(src.JS, status.FromMetricsURL(c.cfg.ingestURL(), c.cfg.Admin))
	rep, err := status.Gather(ctx, src)
	if err != nil {
		return &ExitStatus{Code: int(status.CannotTell), Err: err}
	}
	if *asJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = writeStatus(c.stdout, rep)
	}
	if err != nil {
		return err
	}
	if v := rep.Verdict(); v != status.AllWell {
		return &ExitStatus{Code: int(v)}
	}
	return nil
}

// ExitStatus is an error that asks for an exit status of its own:
// primectl status's verdict. Err, when set, is said as any error is; a
// verdict alone has been printed already.
type ExitStatus struct {
	Code int
	Err  error
}

func (e *ExitStatus) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

func (e *ExitStatus) Unwrap() error { return e.Err }

// connectNATS connects to NATS_URL (or NATS_LISTEN's embedded server)
// once, without waiting for a server that is not there: status says so
// and goes on.
func (c *cli) connectNATS() (*nats.Conn, error) {
	opts := []nats.Option{nats.Name("primectl"), nats.Timeout(3 * time.Second), nats.MaxReconnects(0)}
	if c.cfg.NATSUser != "" {
		opts = append(opts, nats.UserInfo(c.cfg.NATSUser, c.cfg.NATSPassword))
	}
	if user := c.cfg.natsUser(); user != "" {
		// Each user reads replies on its own prefix only (pkg/natsauth).
		opts = append(opts, nats.CustomInboxPrefix(events.InboxPrefix(user)))
	}
	nc, err := nats.Connect(c.cfg.natsURL(), opts...)
	if err != nil {
		return nil, fmt.Errorf("NATS (NATS_URL, or NATS_LISTEN's embedded server) does not answer: %w", err) // the URL may hold a password: not echoed
	}
	return nc, nil
}

// writeStatus prints the report as text, every stored text Printable.
func writeStatus(w io.Writer, r status.Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(label string, fields ...string) { writeRow(tw, append([]string{label}, fields...)...) }
	at := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format(timeLayout) + " UTC (" + r.At.Sub(*t).Round(time.Second).String() + " ago)"
	}
	fmt.Fprintf(tw, "primeflow at %s UTC\n", r.At.Format(timeLayout))
	if len(r.Unreachable) > 0 {
		fmt.Fprintln(tw, "\ncould not ask, so what follows may not be the whole story (exit status 2):")
		for _, u := range r.Unreachable {
			fmt.Fprintln(tw, "  "+Printable(u))
		}
	}
	fmt.Fprintln(tw)
	switch p := r.Instance; {
	case p == nil:
	case !p.Known():
		line("instance", "the database is not paired with a NATS yet: a resolver pairs them when it starts")
	case p.Same():
		line("instance", "the database and NATS are one instance's ("+events.StreamWebhook+" created "+p.NATS+")")
	default:
		line("instance", "NATS is NOT this database's: above")
	}

	line("webhook log", fmt.Sprintf("%d unprocessed, %d capped, %d processed, %d unpublished",
		r.Log.Unprocessed, r.Log.Capped, r.Log.Processed, r.Log.Unpublished))
	if o := r.Log.OldestUnprocessed; o != nil {
		line("", fmt.Sprintf("oldest unprocessed: row %d (%s), received %s, %s", o.ID, dash(o.Action), at(&o.ReceivedUTC), count(o.Attempts, "attempt")))
	}
	if t := r.Outbox.OldestUTC; t != nil {
		line("outbox", fmt.Sprintf("%s not published", count(r.Outbox.Unpublished, "hand-off")), "oldest written "+at(t))
	} else {
		line("outbox", fmt.Sprintf("%s not published", count(r.Outbox.Unpublished, "hand-off")))
	}
	for i, l := range r.Locks {
		label := ""
		if i == 0 {
			label = "locks"
		}
		if l.Held {
			line(label, l.Key+": held by "+l.Holder)
		} else {
			line(label, l.Key+": free")
		}
	}
	if t := r.SMS.OldestWaitingUTC; t != nil {
		line("sms", smsStates(r.SMS.ByState), "oldest not sent queued "+at(t))
	} else {
		line("sms", smsStates(r.SMS.ByState))
	}
	invites := fmt.Sprintf("%d pending, %d failed", r.Invites.Pending, r.Invites.Failed)
	if t := r.Invites.OldestWaitingUTC; t != nil {
		line("triage invites", invites, "oldest not sent queued "+at(t))
	} else {
		line("triage invites", invites)
	}
	line("new-job emails", fmt.Sprintf("%d failed", r.Emails.Failed), fmt.Sprintf("%d rejected unread as not Prime's", r.Emails.Rejected))
	var dates []string
	for _, p := range r.PlanDates {
		dates = append(dates, fmt.Sprintf("%s %d (from %s)", p.Status, p.Dates, p.Earliest))
	}
	line("plan dates", dashJoin(dates))
	if b := r.PrimeBudget; b != nil {
		left := fmt.Sprintf("%s calls left this minute, %s today", known(b.Minute), known(b.Day))
		if b.InFlight != nil && b.Processes != nil {
			procs := fmt.Sprintf("%d processes", *b.Processes)
			if *b.Processes == 1 {
				procs = "1 process"
			}
			left += fmt.Sprintf("; %d in flight, %s spending it", *b.InFlight, procs)
		}
		if b.HoldSeconds > 0 {
			left += fmt.Sprintf("; every call held %s more (a 429)", (time.Duration(b.HoldSeconds * float64(time.Second))).Round(time.Second))
		}
		line("prime budget", left, "from "+b.Source)
		if f := b.Forecast; f != nil {
			line("prime day", dayForecast(*f))
		}
		if b.UnreachableSince != nil {
			line("prime", "unreachable since "+at(b.UnreachableSince)+": events wait, no attempt counted")
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w, "\nconsumer lag")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	writeRow(tw, "  STAGE", "CONSUMER", "PENDING", "UNACKED", "REDELIVERED")
	for _, cs := range r.Consumers {
		if cs.Missing {
			writeRow(tw, "  "+cs.Stage, cs.Stream+"/"+cs.Name, "missing: "+events.ApplyCommand+" makes it")
			continue
		}
		redelivered := strconv.Itoa(cs.Redelivered)
		if cs.Kept > 0 {
			redelivered += fmt.Sprintf(" (+%d kept for a later pass)", cs.Kept)
		}
		writeRow(tw, "  "+cs.Stage, cs.Stream+"/"+cs.Name, strconv.FormatUint(cs.Pending, 10), strconv.Itoa(cs.AckPending), redelivered)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, cs := range r.Consumers {
		if cs.Kept > 0 {
			fmt.Fprintf(w, "  %s/%s: %s of a job queued within SYNC_DRAIN_EMPTY_GRACE is the §7/§9 grace, not trouble: Prime had nothing yet, and the items are kept for a later pass\n",
				cs.Stream, cs.Name, count(cs.Kept, "redelivery"))
		}
	}

	fmt.Fprintln(w, "\nlast error of each stage")
	if len(r.LastErrors) == 0 {
		fmt.Fprintln(w, "  none standing")
	} else {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		writeRow(tw, "  STAGE", "WHERE", "ERROR")
		for _, e := range r.LastErrors {
			writeRow(tw, "  "+e.Stage, e.What, cut(e.Error, 100))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if p := r.Waits(); len(p) > 0 {
		fmt.Fprintln(w, "\nwaiting, no attempt counted")
		for _, s := range p {
			fmt.Fprintln(w, "  "+Printable(s))
		}
	}
	if len(r.NeedsPerson) > 0 {
		fmt.Fprintln(w, "\nneeds a person")
		for _, s := range r.NeedsPerson {
			fmt.Fprintln(w, "  "+Printable(s))
		}
	}
	if len(r.Unread) > 0 {
		fmt.Fprintln(w, "\nnot read")
		for _, s := range r.Unread {
			fmt.Fprintln(w, "  "+Printable(s))
		}
	}
	return nil
}

// dayForecast is the day's forecast in a line: the calls, their pace,
// and when at that pace the day's budget is down to the reserve.
func dayForecast(f primebudget.Forecast) string {
	s := fmt.Sprintf("%d calls today, %.0f an hour: ", f.Calls, f.PerHour)
	if f.Calls == 1 {
		s = fmt.Sprintf("1 call today, %.0f an hour: ", f.PerHour)
	}
	ends := "the day ends " + f.End.UTC().Format(timeLayout) + " UTC"
	switch {
	case f.ReserveAt == nil:
		return s + fmt.Sprintf("not down to the reserve (%d) at this pace; %s", f.Reserve, ends)
	case f.Short:
		return s + fmt.Sprintf("down to the reserve (%d) at %s UTC at this pace, BEFORE %s: then only make-safe work goes out",
			f.Reserve, f.ReserveAt.UTC().Format(timeLayout), ends)
	}
	return s + fmt.Sprintf("down to the reserve (%d) at %s UTC at this pace, after %s", f.Reserve, f.ReserveAt.UTC().Format(timeLayout), ends)
}

func known(f *float64) string {
	if f == nil {
		return "not known yet"
	}
	return strconv.FormatFloat(*f, 'f', -1, 64)
}

func smsStates(by map[string]int) string {
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(by)) {
		parts = append(parts, fmt.Sprintf("%s %d", s, by[s]))
	}
	return dashJoin(parts)
}

func dashJoin(parts []string) string { return dash(strings.Join(parts, ", ")) }
