// Package primectl is the operators' command line (bin/primectl): it lists
// and shows the rows of ethPrimeWebhookLog, replays one row or a filtered set
// (§3, §9: reset the attempts to replay a row from its stored payload), shows
// the new-job pipeline's state and how each path saw new jobs (§7.1), plans
// and applies migrations (migrate.go) and compares a shadow run with the
// live database (compare.go). It reads
// DATABASE_URL and DATA_DIR as the services do.
package primectl

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/database"
	"github.com/ethosbuilding/primeflow/pkg/opshttp"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// Config is what primectl reads from the environment.
type Config struct {
	// DatabaseURL is sqlite:<path> or sqlserver://…; empty is SQLite under DataDir.
	DatabaseURL string `env:"DATABASE_URL" secret:"true"`
	// DatabasePassword, when set, is the password of DatabaseURL's user
	// (sqlserver:// only).
	DatabasePassword string `env:"DATABASE_PASSWORD" secret:"true"`
	DataDir          string `env:"DATA_DIR" envDefault:"./data"`
	// IngestURL is ingest's base URL, for replay --now.
	IngestURL string `env:"INGEST_URL" envDefault:"http://127.0.0.1:8080"`
	Admin     opshttp.Credentials
	// MakesafeSMSTo is what migrate writes as the default make-safe SMS
	// recipient (the setting MakesafeSMSRecipient).
	MakesafeSMSTo string `env:"MAKESAFE_SMS_TO"`
}

// ErrUsage is returned for a command line primectl does not understand; the
// usage has been printed.
var ErrUsage = errors.New("usage")

const usage = `primectl — look after primeflow's webhook log

Usage:
  primectl list [--state unprocessed|capped|processed|all] [--action A] [--job GUID]
                [--since T] [--until T] [--limit N]
  primectl show ID
  primectl replay ID… [--yes] [--now]
  primectl replay [--action A] [--job GUID] [--since T] [--until T] [--state S] [--all] [--yes] [--now]
  primectl firstseen [--failed | --all] [--limit N]
  primectl syncqueue [--object O] [--job GUID] [--limit N]
  primectl invites [--failed | --all] [--limit N]
  primectl coverage [--since T] [--json]
  primectl migrate [--plan] [--adopt NAME,…] [--capture DIR]
  primectl compare --live DSN [--since T] [--until T] [--days-ahead N]

T is a time in UTC (2026-11-30, "2026-11-30 14:05:00", RFC 3339) or a duration
before now (90m, 24h, 7d). replay shows how many rows it would reset and asks
before it does; --yes skips the question, --all allows a replay of every row,
--now asks ingest (INGEST_URL, ADMIN_USER/ADMIN_PASSWORD) to publish the reset
rows at once instead of at its relay's next tick. coverage compares the paths
new jobs came by (webhook, email, backstop) over the jobs Prime created since T
(default 7d), and prints §7.1's coverage query by action. syncqueue shows
ethSyncQueue by object and its items (§6: the drains' work); invites lists the
triage invites not sent yet, or only the Failed ones, which wait for a person.

migrate --plan lists every object the scripts create or alter: absent, the
same or different in the database, whose it is, and what a migration would
do; migrate applies, refusing to alter a live object primeflow does not own
unless --adopt names it (its definition is captured under --capture first),
and writes MAKESAFE_SMS_TO as the default make-safe SMS recipient. compare
diffs this database (a shadow run's) against the live one for a period.

Environment: DATABASE_URL (sqlite:<path> or sqlserver://…), DATABASE_PASSWORD,
DATA_DIR, MAKESAFE_SMS_TO; a secret (DATABASE_URL, DATABASE_PASSWORD,
ADMIN_PASSWORD) may be given as a file with _FILE.
`

// Run runs one primectl command: args are the command line without the
// program name; stdin answers the replay question.
func Run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	var cfg Config
	if err := config.Parse(getenv, &cfg); err != nil {
		return err
	}
	var err error
	if cfg.DatabaseURL, err = database.WithPassword(cfg.DatabaseURL, cfg.DatabasePassword); err != nil {
		return err
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return ErrUsage
		}
		return nil
	}
	c := &cli{cfg: cfg, stdin: bufio.NewReader(stdin), stdout: stdout, stderr: stderr, now: time.Now}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "list":
		return c.list(ctx, rest)
	case "show":
		return c.show(ctx, rest)
	case "replay":
		return c.replay(ctx, rest)
	case "firstseen":
		return c.firstSeen(ctx, rest)
	case "coverage":
		return c.coverage(ctx, rest)
	case "syncqueue":
		return c.syncQueue(ctx, rest)
	case "invites":
		return c.invites(ctx, rest)
	case "migrate":
		return c.migrate(ctx, rest)
	case "compare":
		return c.compare(ctx, rest)
	}
	fmt.Fprintf(stderr, "primectl: unknown command %q\n\n%s", cmd, usage)
	return ErrUsage
}

type cli struct {
	cfg    Config
	stdin  *bufio.Reader
	stdout io.Writer
	stderr io.Writer
	now    func() time.Time
}

// open opens the database the pipeline writes; it never makes a new one.
func (c *cli) open(ctx context.Context) (store.Store, error) {
	return database.OpenExisting(ctx, c.cfg.DatabaseURL, c.cfg.DataDir)
}

// flags makes a flag set that reports its errors on stderr.
func (c *cli) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("primectl "+name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	return fs
}

// parse parses flags that may come before, between or after the positional
// arguments, and returns the positional ones.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, ErrUsage
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// filterFlags are the row filters list and replay share.
type filterFlags struct {
	state, action, job, since, until string
}

func (f *filterFlags) add(fs *flag.FlagSet, defaultState string) {
	fs.StringVar(&f.state, "state", defaultState, "unprocessed, capped, processed or all")
	fs.StringVar(&f.action, "action", "", "only rows of this eventAction")
	fs.StringVar(&f.job, "job", "", "only rows of this job (GUID)")
	fs.StringVar(&f.since, "since", "", "only rows received at or after T")
	fs.StringVar(&f.until, "until", "", "only rows received before T")
}

// filter turns the flags into a store.LogFilter; filtered reports whether
// any filter was given.
func (f *filterFlags) filter(now time.Time) (lf store.LogFilter, filtered bool, err error) {
	switch f.state {
	case "", "all":
	case "unprocessed":
		lf.State = store.Unprocessed
	case "capped":
		lf.State = store.Capped
	case "processed":
		lf.State = store.Processed
	default:
		return lf, false, fmt.Errorf("--state %q: want unprocessed, capped, processed or all", f.state)
	}
	lf.Action = f.action
	if f.job != "" {
		if !isGUID(f.job) {
			return lf, false, fmt.Errorf("--job %q: want the job's GUID", f.job)
		}
		lf.JobID = strings.ToLower(f.job)
	}
	if lf.From, err = parseTime(f.since, now); err != nil {
		return lf, false, fmt.Errorf("--since: %w", err)
	}
	if lf.To, err = parseTime(f.until, now); err != nil {
		return lf, false, fmt.Errorf("--until: %w", err)
	}
	filtered = lf.State != store.AnyState || lf.Action != "" || lf.JobID != "" || !lf.From.IsZero() || !lf.To.IsZero()
	return lf, filtered, nil
}

// parseTime reads T: a UTC time or date, RFC 3339, or a duration before now.
func parseTime(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d).UTC(), nil
	}
	if days, err := strconv.Atoi(strings.TrimSuffix(s, "d")); err == nil && days > 0 && strings.HasSuffix(s, "d") {
		return now.Add(-time.Duration(days) * 24 * time.Hour).UTC(), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05", "2006-01-02T15:04:05", "2006-01-02 15:04", time.DateOnly} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time (2026-11-30, \"2026-11-30 14:05:00\", RFC 3339) or a duration (24h, 7d)", s)
}

func isGUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, r := range s {
		switch i {
		case 8, 13, 18, 23:
			if r != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
				return false
			}
		}
	}
	return true
}

func (c *cli) list(ctx context.Context, args []string) error {
	fs := c.flags("list")
	var ff filterFlags
	ff.add(fs, "unprocessed")
	limit := fs.Int("limit", 100, "at most this many rows, oldest first")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		fmt.Fprintf(c.stderr, "primectl list: unexpected argument %q\n", pos[0])
		return ErrUsage
	}
	f, _, err := ff.filter(c.now())
	if err != nil {
		return err
	}
	f.Limit = *limit
	st, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	rows, err := st.ListWebhookLog(ctx, f)
	if err != nil {
		return err
	}
	total, err := st.CountWebhookLog(ctx, f)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tRECEIVED (UTC)\tACTION\tJOB\tATTEMPTS\tSTATE\tSTATUS")
	for _, r := range rows {
		writeRow(tw, strconv.FormatInt(r.ID, 10), r.ReceivedUTC.Format("2006-01-02 15:04:05"),
			dash(r.EventAction), dash(r.JobID), strconv.Itoa(r.ProcessAttempts), state(r), dash(cut(r.ProcessStatus, 60)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "%d of %d rows\n", len(rows), total)
	return nil
}

func state(r store.WebhookLogRow) string {
	switch {
	case r.Processed():
		return "processed"
	case r.Capped():
		return "capped"
	}
	return "unprocessed"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cut shortens s to n characters on one line.
func cut(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

func (c *cli) show(ctx context.Context, args []string) error {
	if len(args) != 1 {
		fmt.Fprintln(c.stderr, "primectl show: give one row id")
		return ErrUsage
	}
	id, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || id <= 0 {
		return fmt.Errorf("primectl show: %q is not a row id", args[0])
	}
	st, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	r, err := st.GetWebhookLog(ctx, id)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	for _, kv := range [][2]string{
		{"id", strconv.FormatInt(r.ID, 10)},
		{"receivedUTC", r.ReceivedUTC.Format(time.RFC3339Nano)},
		{"eventAction", dash(r.EventAction)},
		{"jobId", dash(r.JobID)},
		{"remoteIP", dash(r.RemoteIP)},
		{"isAuthenticated", strconv.FormatBool(r.IsAuthenticated)},
		{"state", state(r)},
		{"processedUTC", timeOrDash(r.ProcessedUTC)},
		{"processAttempts", strconv.Itoa(r.ProcessAttempts)},
		{"processStatus", dash(r.ProcessStatus)},
		{"publishedUTC", timeOrDash(r.PublishedUTC)},
		{"replayCount", strconv.Itoa(r.ReplayCount)},
	} {
		writeRow(tw, kv[0]+":", kv[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "payload:\n%s\nheaders:\n%s\n", indent(r.Payload), indent(r.Headers))
	return nil
}

func timeOrDash(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format(time.RFC3339Nano)
}

// indent pretty-prints JSON, and gives anything else on one line; either
// way Printable, line by line.
func indent(s string) string {
	var v any
	if json.Unmarshal([]byte(s), &v) == nil {
		if b, err := json.MarshalIndent(v, "  ", "  "); err == nil {
			return "  " + printableLines(string(b))
		}
	}
	return "  " + Printable(s)
}

func (c *cli) replay(ctx context.Context, args []string) error {
	fs := c.flags("replay")
	var ff filterFlags
	ff.add(fs, "all")
	all := fs.Bool("all", false, "allow a replay with no filter: every row of the log")
	yes := fs.Bool("yes", false, "do not ask before resetting")
	now := fs.Bool("now", false, "ask ingest to publish the reset rows now")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	f, filtered, err := ff.filter(c.now())
	if err != nil {
		return err
	}
	for _, p := range pos {
		id, err := strconv.ParseInt(p, 10, 64)
		if err != nil || id <= 0 {
			return fmt.Errorf("primectl replay: %q is not a row id", p)
		}
		f.IDs = append(f.IDs, id)
	}
	if len(f.IDs) == 0 && !filtered && !*all {
		fmt.Fprintln(c.stderr, "primectl replay: no rows named and no filter given; name rows, give a filter, or pass --all to replay the whole log")
		return ErrUsage
	}
	st, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := missingRows(ctx, st, f.IDs); err != nil {
		return err
	}
	n, err := st.CountWebhookLog(ctx, f)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "%d rows would be reset for replay\n", n)
	if n == 0 {
		return nil
	}
	if !*yes {
		fmt.Fprintf(c.stdout, "Reset %d rows? [y/N] ", n)
		answer, err := c.stdin.ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			fmt.Fprintln(c.stdout, "Nothing reset.")
			return nil
		}
	}
	reset, err := st.ResetWebhookLog(ctx, f)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "%d rows reset: ingest's relay publishes them again\n", reset)
	if *now {
		return c.processNow(ctx)
	}
	return nil
}

// missingRows fails naming the ids the log has no row for: a mistyped id
// resets nothing rather than passing as "0 rows".
func missingRows(ctx context.Context, st store.Store, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	rows, err := st.ListWebhookLog(ctx, store.LogFilter{IDs: ids, Limit: len(ids)})
	if err != nil {
		return err
	}
	found := make(map[int64]bool, len(rows))
	for _, r := range rows {
		found[r.ID] = true
	}
	var missing []string
	for _, id := range ids {
		if !found[id] {
			missing = append(missing, strconv.FormatInt(id, 10))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("primectl replay: no row %s in the log; nothing reset", strings.Join(missing, ", "))
	}
	return nil
}

// processNow asks ingest to run its relay now (POST
// /api/prime/webhooklog/process), so the reset rows go out at once.
func (c *cli) processNow(ctx context.Context) error {
	target := strings.TrimSuffix(c.cfg.IngestURL, "/") + "/api/prime/webhooklog/process"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, nil)
	if err != nil {
		return fmt.Errorf("INGEST_URL: %w", err)
	}
	req.SetBasicAuth(c.cfg.Admin.User, c.cfg.Admin.Password)
	hc := &http.Client{Timeout: time.Minute}
	resp, err := hc.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // the error without the URL
		}
		return fmt.Errorf("ask ingest to publish now: %w (the relay still publishes them at its next tick)", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch resp.StatusCode {
	case http.StatusOK:
		fmt.Fprintf(c.stdout, "ingest published them: %s\n", Printable(strings.TrimSpace(string(body))))
		return nil
	case http.StatusConflict:
		fmt.Fprintln(c.stdout, "ingest's relay is running already; it picks the rows up")
		return nil
	case http.StatusUnauthorized:
		return errors.New("ingest refused ADMIN_USER/ADMIN_PASSWORD (the relay still publishes the rows at its next tick)")
	}
	return fmt.Errorf("ingest answered %s (the relay still publishes the rows at its next tick)", resp.Status)
}

func (c *cli) firstSeen(ctx context.Context, args []string) error {
	fs := c.flags("firstseen")
	failed := fs.Bool("failed", false, "only jobs whose pipeline has failed and not completed since")
	all := fs.Bool("all", false, "completed jobs too")
	limit := fs.Int("limit", 100, "at most this many jobs, oldest first")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 || (*failed && *all) {
		fmt.Fprintln(c.stderr, "primectl firstseen: takes --failed or --all, and no arguments")
		return ErrUsage
	}
	want := store.FirstSeenPending
	switch {
	case *failed:
		want = store.FirstSeenFailed
	case *all:
		want = store.FirstSeenAny
	}
	st, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	rows, err := st.ListFirstSeen(ctx, want, *limit)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tFIRST SEEN (UTC)\tLOG ID\tPIPELINE\tATTEMPTS\tSTATUS")
	for _, r := range rows {
		pipeline := "pending"
		switch {
		case r.Completed():
			pipeline = "completed " + r.PipelineCompletedUTC.Format("2006-01-02 15:04:05")
		case r.PipelineAttempts > 0:
			pipeline = "failing"
		}
		logID := "-"
		if r.LogID > 0 {
			logID = strconv.FormatInt(r.LogID, 10)
		}
		writeRow(tw, r.JobID, r.FirstSeenUTC.Format("2006-01-02 15:04:05"), logID,
			pipeline, strconv.Itoa(r.PipelineAttempts), dash(cut(r.PipelineStatus, 60)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "%d jobs\n", len(rows))
	return nil
}
