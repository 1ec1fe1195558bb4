// Package primectl is the operators' command line (bin/primectl): it lists
// and shows the rows of ethPrimeWebhookLog, replays one row or a filtered set
// (§3, §9: reset the attempts to replay a row from its stored payload), shows
// the new-job pipeline's state and how each path saw new jobs (§7.1), plans
// and applies migrations (migrate.go) and compares a shadow run with the
// live database (compare.go), and applies the streams and consumers to NATS
// (streams.go). It reads DATABASE_URL and DATA_DIR as the services do.
package primectl

import (
	"bufio"
	"cmp"
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
	"github.com/ethosbuilding/primeflow/pkg/version"
)

// Config is what primectl reads from the environment.
type Config struct {
	// DatabaseURL is sqlite:<path> or sqlserver://…; empty is SQLite under DataDir.
	DatabaseURL string `env:"DATABASE_URL" secret:"true"`
	// DatabasePassword, when set, is the password of DatabaseURL's user
	// (sqlserver:// only).
	DatabasePassword string `env:"DATABASE_PASSWORD" secret:"true"`
	DataDir          string `env:"DATA_DIR" envDefault:"./data"`
	// IngestURL is ingest's base URL, for replay --now; unset, it is where
	// OPS_ADDR, or else HTTP_ADDR, is reached from this machine
	// (opshttp.LocalURL), the ports bin/primeflow read from the same
	// environment.
	IngestURL string `env:"INGEST_URL"`
	HTTPAddr  string `env:"HTTP_ADDR" envDefault:"127.0.0.1:8080"`
	OpsAddr   string `env:"OPS_ADDR"`
	Admin     opshttp.Credentials
	// NATS is where status reads the consumers and the locks (the
	// operators' NATS user, in a deployment with users); NATS_URL unset is
	// bin/primeflow's embedded server, at NATS_LISTEN.
	NATSURL      string `env:"NATS_URL" secret:"true"`
	NATSListen   string `env:"NATS_LISTEN" envDefault:"127.0.0.1:4222"`
	NATSUser     string `env:"NATS_USER"`
	NATSPassword string `env:"NATS_PASSWORD" secret:"true"`
	// StreamReplicas, above zero, overrides num_replicas of
	// streams/*.json for streams apply and check, as the services'
	// NATS_STREAM_REPLICAS does for theirs.
	StreamReplicas int `env:"NATS_STREAM_REPLICAS"`
	// SyncGrace is the sync drains' SYNC_DRAIN_EMPTY_GRACE, as child-mirror
	// reads it: status counts the drains' redeliveries within it as kept
	// for a later pass (§7, §9), not trouble.
	SyncGrace time.Duration `env:"SYNC_DRAIN_EMPTY_GRACE" envDefault:"15m"`
	// MakesafeSMSTo is what migrate writes as the default make-safe SMS
	// recipient (the setting MakesafeSMSRecipient).
	MakesafeSMSTo string `env:"MAKESAFE_SMS_TO"`
	// LiveDatabaseURL is compare's live database when --live is not given
	// (it, or LIVE_DATABASE_URL_FILE, keeps a password off the command line,
	// where ps shows it).
	LiveDatabaseURL string `env:"LIVE_DATABASE_URL" secret:"true"`
	// LiveDatabasePassword, when set, is the password of the live
	// database's user (sqlserver:// only), so that neither --live nor
	// LIVE_DATABASE_URL need hold it.
	LiveDatabasePassword string `env:"LIVE_DATABASE_PASSWORD" secret:"true"`
}

// natsUser is the NATS user primectl logs in as: NATS_USER, or the user
// of NATS_URL's first URL; "" for none (bin/primeflow's embedded server).
func (c Config) natsUser() string {
	if c.NATSUser != "" {
		return c.NATSUser
	}
	first, _, _ := strings.Cut(c.NATSURL, ",")
	if u, err := url.Parse(strings.TrimSpace(first)); err == nil && u.User != nil {
		return u.User.Username()
	}
	return ""
}

// ingestURL is INGEST_URL, or where OPS_ADDR or HTTP_ADDR is reached.
func (c Config) ingestURL() string {
	if c.IngestURL != "" {
		return strings.TrimSuffix(c.IngestURL, "/")
	}
	return opshttp.LocalURL(cmp.Or(c.OpsAddr, c.HTTPAddr))
}

// natsURL is NATS_URL, or bin/primeflow's embedded server at NATS_LISTEN.
func (c Config) natsURL() string {
	if c.NATSURL != "" {
		return c.NATSURL
	}
	return "nats://" + strings.TrimPrefix(opshttp.LocalURL(c.NATSListen), "http://")
}

// ErrUsage is returned for a command line primectl does not understand; the
// usage has been printed.
var ErrUsage = errors.New("usage")

// errHelped: a command's -h printed its help; nothing else is to be done.
var errHelped = errors.New("help shown")

// commands are primectl's commands and their usage lines, in the order
// --help lists them.
var commands = []struct{ name, usage string }{
	{"status", "primectl status [--json]"},
	{"list", `primectl list [--state unprocessed|capped|processed|all] [--action A] [--job GUID]
                [--since T] [--until T] [--limit N] [--oldest]`},
	{"show", "primectl show ID"},
	{"replay", `primectl replay ID… [--yes] [--now]
  primectl replay [--action A] [--job GUID] [--since T] [--until T] [--state S] [--all] [--yes] [--now]
  primectl replay --from-archive FILE [ID…] [the same filters] [--all] [--yes] [--now]`},
	{"firstseen", "primectl firstseen [--failed | --all] [--limit N]"},
	{"syncqueue", "primectl syncqueue [--object O] [--job GUID] [--limit N]"},
	{"sms", `primectl sms [--failed | --all] [--limit N]
  primectl sms requeue ID… [--reason R] [--by WHO]
  primectl sms dismiss ID… --reason R [--by WHO]`},
	{"invites", `primectl invites [--failed | --all] [--limit N]
  primectl invites requeue ID… [--reason R] [--by WHO]
  primectl invites dismiss ID… --reason R [--by WHO]`},
	{"emails", `primectl emails [--failed | --all] [--limit N]
  primectl emails dismiss ID… --reason R [--by WHO]`},
	{"coverage", "primectl coverage [--since T] [--json]"},
	{"archive", "primectl archive --before T [--out FILE] [--batch N] [--yes]"},
	{"migrate", "primectl migrate [--plan] [--adopt NAME,…] [--capture DIR]"},
	{"streams", "primectl streams apply|check [--wait D]"},
	{"compare", "primectl compare [--live DSN] [--since T] [--until T] [--days-ahead N]"},
	{"version", "primectl --version"},
}

// commandUsage is a command's usage lines.
func commandUsage(name string) string {
	for _, c := range commands {
		if c.name == name {
			return "  " + c.usage
		}
	}
	return ""
}

const about = `primectl — look after primeflow: its state at a glance, the webhook log
(list, show, replay, archive), the new-job pipeline, migrations and shadow runs`

const explained = `status shows the pipeline at a glance: the log's rows by state, the consumers'
lag, the outbox, the locks, failed SMS, invites and emails, plan dates, Prime's budget,
each stage's last error and what needs a person; --json gives the same as JSON. It exits
0 when all is well, 1 when something needs a person, 2 when the database, NATS or ingest
could not be asked, or NATS is not the database's instance's: for cron or a probe. A
1 clears once a person has dealt with each thing it lists: a capped row replayed
(replay), a Failed SMS or invite requeued or dismissed, a Failed email moved back into
MAIL_FOLDER or dismissed (below).

list shows the newest rows first (--oldest: the oldest first). T is a time in UTC
(2026-11-30, "2026-11-30 14:05:00", RFC 3339) or a duration before now (90m, 24h, 7d).
replay shows how many rows it would reset and asks before it does; --yes skips
the question, --all allows a replay of every row, --now asks ingest (INGEST_URL,
ADMIN_USER/ADMIN_PASSWORD) to publish the reset rows at once instead of at its
relay's next tick, and makes sure first that it can. coverage compares the paths
new jobs came by (webhook, email, backstop) over the jobs Prime created since T
(default 7d), and prints §7.1's coverage query by action. syncqueue shows
ethSyncQueue by object and its items (§6: the drains' work).

sms, invites and emails list the SMS, triage invites and new-job emails not done yet
(--failed: only those given up on, which wait for a person; --all: every one), each
with who resolved it. requeue ID… sends a Failed SMS or invite again, due now, with
every attempt; dismiss ID… --reason R closes a Failed one unsent (the on-call phoned,
the customer invited, the email junk or dealt with by hand). Either is recorded with
--reason and who (--by, or the OS user @ host), the row stays, in its new state, and
status no longer counts it. An email is tried again by moving it back into MAIL_FOLDER.

archive writes the rows finished before T — processed webhook log rows, SMS and
triage invites sent or dismissed, email receipts processed, rejected or dismissed —
to a gzip'd JSON-lines file, reads it
back and checks it, then deletes them a short batch at a time; replay --from-archive
puts the archived log rows a filter selects back under their own ids, queued for replay.

migrate --plan lists every object the scripts create or alter: absent, the
same or different in the database, whose it is, and what a migration would
do; migrate applies, refusing to alter a live object primeflow does not own
unless --adopt names it (its definition is captured under --capture first),
and writes MAKESAFE_SMS_TO as the default make-safe SMS recipient. compare
diffs this database (a shadow run's) against the live one for a period: --live,
or LIVE_DATABASE_URL (or its _FILE), with the password in LIVE_DATABASE_PASSWORD
(or its _FILE) rather than on the command line, where ps shows it.

streams apply is migrate for NATS, with the operators' NATS user: it makes
every stream of streams/ and every durable consumer as defined, and says
what it changed (a service may only read them, and waits at start until
they are as defined). streams check says what is missing or different and
changes nothing. Both wait up to --wait (1m) for JetStream to answer.
`

// writeCommands writes what primectl is and its commands' usage lines.
func writeCommands(w io.Writer) {
	fmt.Fprintf(w, "%s\n\nUsage:\n", about)
	for _, c := range commands {
		fmt.Fprintf(w, "  %s\n", c.usage)
	}
}

// writeUsage writes primectl's help: the commands, what they do and the
// environment, listed from Config's tags.
func writeUsage(w io.Writer) error {
	writeCommands(w)
	fmt.Fprintf(w, "\n%s\nEnvironment:\n\n", explained)
	vars, err := config.Variables(Config{})
	if err != nil {
		return err
	}
	if err := config.WriteVariables(w, vars); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nINGEST_URL unset is where OPS_ADDR, or HTTP_ADDR, is reached on this machine, and NATS_URL\n"+
		"unset bin/primeflow's embedded server at NATS_LISTEN.\n"+
		"What each variable means: docs/configuration.md; how to use it: docs/operations.md.\n\n%s\n", version.String("primectl"))
	return nil
}

// Run runs one primectl command: args are the command line without the
// program name; stdin answers the replay question.
func Run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		writeCommands(stderr)
		fmt.Fprintln(stderr, "\nprimectl --help says more, and lists the environment.")
		return ErrUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		return writeUsage(stdout)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, version.String("primectl"))
		return nil
	}
	var cfg Config
	if err := config.Parse(getenv, &cfg); err != nil {
		return err
	}
	var err error
	if cfg.DatabaseURL, err = database.WithPassword(cfg.DatabaseURL, cfg.DatabasePassword); err != nil {
		return err
	}
	c := &cli{cfg: cfg, stdin: bufio.NewReader(stdin), stdout: stdout, stderr: stderr, now: time.Now}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "status":
		err = c.status(ctx, rest)
	case "list":
		err = c.list(ctx, rest)
	case "show":
		err = c.show(ctx, rest)
	case "replay":
		err = c.replay(ctx, rest)
	case "firstseen":
		err = c.firstSeen(ctx, rest)
	case "coverage":
		err = c.coverage(ctx, rest)
	case "archive":
		err = c.archive(ctx, rest)
	case "syncqueue":
		err = c.syncQueue(ctx, rest)
	case "sms":
		err = c.sms(ctx, rest)
	case "invites":
		err = c.invites(ctx, rest)
	case "emails":
		err = c.emails(ctx, rest)
	case "migrate":
		err = c.migrate(ctx, rest)
	case "streams":
		err = c.streams(ctx, rest)
	case "compare":
		err = c.compare(ctx, rest)
	default:
		fmt.Fprintf(stderr, "primectl: unknown command %q (primectl --help lists them)\n", cmd)
		return ErrUsage
	}
	if errors.Is(err, errHelped) {
		return nil
	}
	return err
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

// flags makes a flag set for a command; c.parse reports its errors.
func (c *cli) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("primectl "+name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Usage = func() {} // c.parse writes the command's own usage, not the flag package's list
	return fs
}

// parse parses flags that may come before, between or after the positional
// arguments, and returns the positional ones. A flag it does not know, or a
// value it cannot read, is said on stderr with the command's usage
// (ErrUsage); -h writes the usage and the flags on stdout (errHelped).
func (c *cli) parse(fs *flag.FlagSet, args []string) ([]string, error) {
	name := strings.TrimPrefix(fs.Name(), "primectl ")
	var pos []string
	for {
		switch err := fs.Parse(args); {
		case errors.Is(err, flag.ErrHelp):
			fmt.Fprintf(c.stdout, "usage:\n%s\n\n", commandUsage(name))
			fs.SetOutput(c.stdout)
			fs.PrintDefaults()
			return nil, errHelped
		case err != nil:
			fmt.Fprintf(c.stderr, "usage:\n%s\n(primectl %s -h explains its flags; primectl --help lists every command)\n", commandUsage(name), name)
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
	limit := fs.Int("limit", 100, "at most this many rows")
	oldest := fs.Bool("oldest", false, "the oldest rows first (by default the newest first)")
	pos, err := c.parse(fs, args)
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
	f.Limit, f.Newest = *limit, !*oldest
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
	order := "newest first"
	if *oldest {
		order = "oldest first"
	}
	fmt.Fprintf(c.stdout, "%d of %s, %s\n", len(rows), count(total, "row"), order)
	return nil
}

// count is n with its noun: "1 row", "2 rows".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
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
		return fmt.Errorf("show: %q is not a row id", args[0])
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
	fromArchive := fs.String("from-archive", "", "put the rows chosen back from this archive file (primectl archive), queued for replay")
	pos, err := c.parse(fs, args)
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
			return fmt.Errorf("replay: %q is not a row id", p)
		}
		f.IDs = append(f.IDs, id)
	}
	if len(f.IDs) == 0 && !filtered && !*all {
		fmt.Fprintln(c.stderr, "primectl replay: no rows named and no filter given; name rows, give a filter, or pass --all to replay the whole log (or archive)")
		return ErrUsage
	}
	if *fromArchive != "" {
		return c.replayFromArchive(ctx, *fromArchive, f, *yes, *now)
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
	fmt.Fprintf(c.stdout, "%s would be reset for replay\n", count(n, "row"))
	if n == 0 {
		return nil
	}
	if *now {
		// Before anything is reset: a replay that asks ingest for what it
		// cannot have leaves rows reset and no one to publish them now.
		if err := c.reachIngest(ctx); err != nil {
			return fmt.Errorf("%w; nothing reset", err)
		}
	}
	if ok, err := c.confirm(*yes, fmt.Sprintf("Reset %s?", count(n, "row")), "Nothing reset."); !ok {
		return err
	}
	reset, err := st.ResetWebhookLog(ctx, f)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "%s reset: ingest's relay publishes them again\n", count(reset, "row"))
	if *now {
		return c.processNow(ctx)
	}
	return nil
}

// confirm asks question on stdout and reads the answer: ok is true for y
// or yes, or without asking when yes is set; otherwise it says no.
func (c *cli) confirm(yes bool, question, no string) (ok bool, err error) {
	if yes {
		return true, nil
	}
	fmt.Fprintf(c.stdout, "%s [y/N] ", question)
	answer, err := c.stdin.ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		fmt.Fprintln(c.stdout, no)
		return false, nil
	}
	return true, nil
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
		return fmt.Errorf("replay: no row %s in the log; nothing reset", strings.Join(missing, ", "))
	}
	return nil
}

// ingestProcessPath is ingest's relay trigger (ingest.ProcessPath).
const ingestProcessPath = "/api/prime/webhooklog/process"

// reachIngest makes sure replay --now can ask ingest to publish: ingest's
// /healthz, asked with ADMIN_USER/ADMIN_PASSWORD, answers, takes the login
// and is ingest's (or bin/primeflow's, which runs ingest).
func (c *cli) reachIngest(ctx context.Context) error {
	if c.cfg.Admin.User == "" || c.cfg.Admin.Password == "" {
		// Blank, ingest refuses every login: asking would only say "refused".
		return errors.New("replay --now: ADMIN_USER and ADMIN_PASSWORD (or ADMIN_PASSWORD_FILE) are not both set: --now asks ingest with the admin login (after make run: export ADMIN_USER=admin ADMIN_PASSWORD_FILE=data/admin-password)")
	}
	base := c.cfg.ingestURL()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/healthz", nil)
	if err != nil {
		return fmt.Errorf("INGEST_URL %s: %w", base, err)
	}
	req.SetBasicAuth(c.cfg.Admin.User, c.cfg.Admin.Password)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("replay --now: ingest does not answer at %s (INGEST_URL, or OPS_ADDR/HTTP_ADDR when it is unset): %w", base, withoutURL(err))
	}
	defer resp.Body.Close()
	var h opshttp.Health
	decodeErr := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&h)
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("replay --now: %s refused ADMIN_USER/ADMIN_PASSWORD", base)
	case resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable, decodeErr != nil:
		return fmt.Errorf("replay --now: %s/healthz answered %s, not a primeflow process's health", base, resp.Status)
	case h.Service != "ingest" && h.Service != "primeflow":
		return fmt.Errorf("replay --now: %s is %s, not ingest (INGEST_URL names ingest's port, OPS_ADDR's where it has one)", base, Printable(cmp.Or(h.Service, "a process that does not say")))
	}
	return nil
}

// withoutURL is an HTTP client's error without the URL it names (which
// the message says already).
func withoutURL(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return err
}

// processNow asks ingest to run its relay now (POST
// /api/prime/webhooklog/process), so the reset rows go out at once.
func (c *cli) processNow(ctx context.Context) error {
	target := c.cfg.ingestURL() + ingestProcessPath
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, nil)
	if err != nil {
		return fmt.Errorf("INGEST_URL %s: %w", c.cfg.ingestURL(), err)
	}
	req.SetBasicAuth(c.cfg.Admin.User, c.cfg.Admin.Password)
	hc := &http.Client{Timeout: time.Minute}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("ask ingest to publish now: %w (the relay still publishes them at its next tick)", withoutURL(err))
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
	pos, err := c.parse(fs, args)
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
	fmt.Fprintln(c.stdout, count(len(rows), "job"))
	return nil
}
