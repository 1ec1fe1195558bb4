package primectl

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/database"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// ErrDifferences: primectl compare found the two databases to differ.
var ErrDifferences = errors.New("the databases differ")

// compare diffs what primeflow did (DATABASE_URL, the shadow run's database)
// against the live database (--live) for a period: the jobs created in it
// and their mirror rows, the make-safe calls raised for them, the orders
// and plan dates of its days. Each difference comes with the reason the
// data gives for it. The live database is read only, with the columns it
// has: one that lacks a compared column or table says so, and the rest is
// still compared.
func (c *cli) compare(ctx context.Context, args []string) error {
	fs := c.flags("compare")
	live := fs.String("live", "", "the live database: sqlserver://… or sqlite:<path> (default LIVE_DATABASE_URL)")
	since := fs.String("since", "24h", "from T (UTC, or a duration before now)")
	until := fs.String("until", "", "to T, not included (default now)")
	ahead := fs.Int("days-ahead", 14, "orders and plan dates: the period's days and this many days after it")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 || (*live == "" && c.cfg.LiveDatabaseURL == "") {
		fmt.Fprintln(c.stderr, "primectl compare: give --live <DSN> (or LIVE_DATABASE_URL) and no arguments")
		return ErrUsage
	}
	liveURL, err := c.liveURL(*live)
	if err != nil {
		return err
	}
	now := c.now().UTC()
	p := period{to: now}
	if p.from, err = parseTime(*since, now); err != nil {
		return fmt.Errorf("--since: %w", err)
	}
	if *until != "" {
		if p.to, err = parseTime(*until, now); err != nil {
			return fmt.Errorf("--until: %w", err)
		}
	}
	if !p.from.Before(p.to) {
		return errors.New("compare: --since must come before --until")
	}
	if *ahead < 0 {
		return errors.New("compare: --days-ahead cannot be negative")
	}
	p.lastDay = p.to.Add(-time.Millisecond).AddDate(0, 0, *ahead)
	ours, err := openSide(ctx, "primeflow", c.cfg.DatabaseURL, c.cfg.DataDir)
	if err != nil {
		return err
	}
	defer ours.db.Close()
	theirs, err := openSide(ctx, "live", liveURL, "")
	if err != nil {
		return err
	}
	defer theirs.db.Close()
	r, err := compareSides(ctx, ours, theirs, p)
	if err != nil {
		return err
	}
	r.write(c.stdout, ours, theirs, p)
	if n := r.differences(); n > 0 {
		return fmt.Errorf("%w: %d differences", ErrDifferences, n)
	}
	return nil
}

// liveURL is the live database compare reads: flag (--live) or
// LIVE_DATABASE_URL, with LIVE_DATABASE_PASSWORD as its user's password. A
// password on the command line, which any user of the host sees in ps, is
// taken with a warning.
func (c *cli) liveURL(flag string) (string, error) {
	dsn, from := flag, "--live"
	switch {
	case flag != "" && c.cfg.LiveDatabaseURL != "":
		return "", errors.New("compare: --live and LIVE_DATABASE_URL are both set: give the live database one way")
	case flag == "":
		dsn, from = c.cfg.LiveDatabaseURL, "LIVE_DATABASE_URL"
	}
	if u, err := url.Parse(dsn); flag != "" && err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			fmt.Fprintln(c.stderr, "primectl compare: --live holds a password, which ps shows any user of this host: "+
				"give it in LIVE_DATABASE_PASSWORD_FILE (or LIVE_DATABASE_URL_FILE) instead")
		}
	}
	return database.WithPasswordOf(from, "LIVE_DATABASE_PASSWORD", dsn, c.cfg.LiveDatabasePassword)
}

// period is [from, to) in UTC; lastDay is the last day whose orders and
// plan are compared (orders are made for the days ahead).
type period struct{ from, to, lastDay time.Time }

// side is one database of a comparison, read through plain SQL that both
// SQLite and SQL Server take; mssql marks the one that needs conversions.
type side struct {
	name  string
	where string // what to print for it: the scheme and host, never a password
	db    *sql.DB
	mssql bool
}

// openSide opens url (DATABASE_URL's forms) read only.
func openSide(ctx context.Context, name, url, dataDir string) (side, error) {
	s := side{name: name}
	if path, ok := database.SQLitePath(url, dataDir); ok {
		if _, err := os.Stat(path); path == "" || err != nil {
			return s, fmt.Errorf("%s database: no SQLite file at %q", name, path)
		}
		db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)")
		if err != nil {
			return s, fmt.Errorf("%s database: %w", name, err)
		}
		s.db, s.where = db, "sqlite:"+path
	} else if strings.HasPrefix(url, "sqlserver://") {
		db, err := sql.Open("sqlserver", url)
		if err != nil {
			return s, fmt.Errorf("%s database: not a SQL Server DSN", name) // it holds a password: never echoed
		}
		s.db, s.mssql, s.where = db, true, redactDSN(url)
	} else {
		return s, fmt.Errorf("%s database: want sqlite:<path> or sqlserver://…", name)
	}
	if err := s.db.PingContext(ctx); err != nil {
		s.db.Close()
		return s, fmt.Errorf("%s database (%s): %w", name, s.where, err)
	}
	return s, nil
}

// redactDSN is a SQL Server DSN with its user and password left out.
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "sqlserver://…"
	}
	return "sqlserver://" + u.Host + "/" + u.Query().Get("database")
}

// kind says how a column is read as text alike from both backends.
type kind int

const (
	text  kind = iota
	guid       // uniqueidentifier on SQL Server, lower-case text on SQLite
	stamp      // DATETIME2 / TEXT 'YYYY-MM-DD HH:MM:SS.fff'
	day        // DATE / TEXT 'YYYY-MM-DD'
)

type column struct {
	name string
	kind kind
}

// expr reads a column as text.
func (s side) expr(alias string, c column) string {
	col := alias + "." + c.name
	if !s.mssql {
		if c.kind == guid {
			return "lower(" + col + ")"
		}
		return col
	}
	switch c.kind {
	case guid:
		return "LOWER(CONVERT(NVARCHAR(36), " + col + "))"
	case stamp:
		return "CONVERT(NVARCHAR(33), " + col + ", 126)"
	case day:
		return "CONVERT(NVARCHAR(10), " + col + ", 23)"
	}
	return "CONVERT(NVARCHAR(4000), " + col + ")"
}

// between is the condition that col (of kind k) falls in the period, and
// its arguments: a time in [from, to), a day in [from's day, lastDay].
func (s side) between(col string, p period, k kind) (string, []any) {
	cond := col + " >= " + s.mark(1) + " AND " + col + " < " + s.mark(2)
	switch {
	case k == day:
		return cond, []any{p.from.Format(time.DateOnly), p.lastDay.AddDate(0, 0, 1).Format(time.DateOnly)}
	case s.mssql:
		return cond, []any{p.from.Truncate(time.Millisecond), p.to.Truncate(time.Millisecond)}
	}
	const layout = "2006-01-02 15:04:05.000"
	return cond, []any{p.from.Format(layout), p.to.Format(layout)}
}

// mark is the placeholder of the n-th parameter.
func (s side) mark(n int) string {
	if s.mssql {
		return fmt.Sprintf("@p%d", n)
	}
	return "?"
}

// columns returns the table's columns, by lower-case name, or false when
// the table is not there.
func (s side) columns(ctx context.Context, table string) (map[string]bool, bool) {
	rows, err := s.db.QueryContext(ctx, "SELECT * FROM "+table+" WHERE 1 = 0")
	if err != nil {
		return nil, false
	}
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		return nil, false
	}
	out := map[string]bool{}
	for _, n := range names {
		out[strings.ToLower(n)] = true
	}
	return out, true
}

// subject is one compared set of rows: a table, its key, the fields
// compared, and how the period picks its rows — by a column of its own
// (within), or by its job's creation (a job column joined to primeJobs).
type subject struct {
	title  string
	table  string
	key    column
	fields []column
	within column // the period's column, when the rows are picked by their own
	jobCol string // the job column, when they are picked by their job
}

var (
	jobsSubject = subject{title: "jobs created in the period (primeJobs)", table: "primeJobs",
		key: column{"jobId", guid}, fields: []column{{"jobNumber", text}, {"statusId", guid}, {"version", text}},
		within: column{"createdAt", stamp}}
	appointmentsSubject = subject{title: "their appointments (primeAppointments)", table: "primeAppointments",
		key: column{"appointmentId", guid}, fields: []column{{"jobId", guid}, {"startDate", stamp}, {"version", text}}, jobCol: "jobId"}
	allocationsSubject = subject{title: "their allocations (primeAllocations)", table: "primeAllocations",
		key: column{"allocationId", guid}, fields: []column{{"jobId", guid}, {"allocationType", text}, {"version", text}}, jobCol: "jobId"}
	callsSubject = subject{title: "make-safe calls raised for them (makesafePhoneCall)", table: "makesafePhoneCall",
		key: column{"PrimeJobID", guid}, jobCol: "PrimeJobID"}
	ordersSubject = subject{title: "orders of the period's days (optimoRouteOrder)", table: "optimoRouteOrder",
		key: column{"orderNo", text}, fields: []column{{"orderDate", day}, {"state", text}}, within: column{"orderDate", day}}
	plansSubject = subject{title: "plan dates of the period (optimoRoutePlan)", table: "optimoRoutePlan",
		key: column{"PlanDate", day}, fields: []column{{"PlanStatus", text}}, within: column{"PlanDate", day}}
)

// rowSet is a subject's rows on one side: fields by key.
type rowSet map[string]map[string]string

// read reads a subject's rows of the period, with the fields the table has;
// missing names what it lacks (the whole table, or a compared column).
func (s side) read(ctx context.Context, sub subject, p period) (rows rowSet, missing []string, err error) {
	cols, ok := s.columns(ctx, sub.table)
	if !ok {
		return nil, []string{"table " + sub.table}, nil
	}
	if !cols[strings.ToLower(sub.key.name)] {
		return nil, []string{sub.table + "." + sub.key.name}, nil
	}
	var fields []column
	for _, f := range sub.fields {
		if cols[strings.ToLower(f.name)] {
			fields = append(fields, f)
		} else {
			missing = append(missing, sub.table+"."+f.name)
		}
	}
	sel := []string{s.expr("t", sub.key)}
	for _, f := range fields {
		sel = append(sel, s.expr("t", f))
	}
	var from, where string
	var args []any
	if sub.jobCol != "" {
		if _, ok := s.columns(ctx, "primeJobs"); !ok {
			return nil, append(missing, "table primeJobs"), nil
		}
		from = sub.table + " t JOIN primeJobs j ON j.jobId = t." + sub.jobCol
		where, args = s.between("j.createdAt", p, stamp)
	} else {
		if !cols[strings.ToLower(sub.within.name)] {
			return nil, append(missing, sub.table+"."+sub.within.name), nil
		}
		from = sub.table + " t"
		where, args = s.between("t."+sub.within.name, p, sub.within.kind)
	}
	q := "SELECT " + strings.Join(sel, ", ") + " FROM " + from + " WHERE " + where
	res, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, missing, fmt.Errorf("%s database: %s: %w", s.name, sub.table, err)
	}
	defer res.Close()
	rows = rowSet{}
	for res.Next() {
		vals := make([]sql.NullString, len(sel))
		dest := make([]any, len(vals))
		for i := range vals {
			dest[i] = &vals[i]
		}
		if err := res.Scan(dest...); err != nil {
			return nil, missing, fmt.Errorf("%s database: %s: %w", s.name, sub.table, err)
		}
		row := map[string]string{}
		for i, f := range fields {
			row[f.name] = normalise(f, vals[i+1].String)
		}
		rows[normalise(sub.key, vals[0].String)] = row
	}
	return rows, missing, res.Err()
}

// normalise writes a value the one way both backends' texts compare: times
// as UTC to the millisecond, dates as YYYY-MM-DD, GUIDs in lower case.
func normalise(c column, v string) string {
	v = strings.TrimSpace(v)
	switch c.kind {
	case guid:
		return strings.ToLower(v)
	case stamp:
		if t, ok := parseStamp(v); ok {
			return t.Format("2006-01-02 15:04:05.000")
		}
	case day:
		if len(v) >= 10 {
			return v[:10]
		}
	}
	return v
}

func parseStamp(v string) (time.Time, bool) {
	for _, layout := range []string{"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999", time.RFC3339Nano} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// difference is one row that differs: only on one side, or with fields
// that differ; why is the reason the data gives.
type difference struct {
	key, what, detail, why string
}

// section is one subject's comparison.
type section struct {
	subject
	ours, theirs int
	diffs        []difference
	missing      []string
}

// report is a whole comparison.
type report struct{ sections []section }

func (r report) differences() int {
	n := 0
	for _, s := range r.sections {
		n += len(s.diffs)
	}
	return n
}

// compareSides compares every subject.
func compareSides(ctx context.Context, ours, theirs side, p period) (report, error) {
	var r report
	data := map[string][2]rowSet{}
	for _, sub := range []subject{jobsSubject, appointmentsSubject, allocationsSubject, callsSubject, ordersSubject, plansSubject} {
		a, missA, err := ours.read(ctx, sub, p)
		if err != nil {
			return r, err
		}
		b, missB, err := theirs.read(ctx, sub, p)
		if err != nil {
			return r, err
		}
		data[sub.table] = [2]rowSet{a, b}
		sec := section{subject: sub, ours: len(a), theirs: len(b)}
		for _, m := range missA {
			sec.missing = append(sec.missing, "primeflow's database has no "+m)
		}
		for _, m := range missB {
			sec.missing = append(sec.missing, "the live database has no "+m)
		}
		if a == nil || b == nil {
			r.sections = append(r.sections, sec)
			continue
		}
		why := reasons{ctx: ctx, ours: ours, data: data}
		for _, k := range sortedKeys(a, b) {
			ra, inA := a[k]
			rb, inB := b[k]
			switch {
			case inA && !inB:
				sec.diffs = append(sec.diffs, difference{key: k, what: "only primeflow", detail: describe(sub, ra), why: why.onlyOurs(sub, k, ra)})
			case inB && !inA:
				sec.diffs = append(sec.diffs, difference{key: k, what: "only live", detail: describe(sub, rb), why: why.onlyTheirs(sub, k, rb)})
			default:
				var differ []string
				for _, f := range sub.fields {
					va, okA := ra[f.name]
					vb, okB := rb[f.name]
					if okA && okB && va != vb {
						differ = append(differ, fmt.Sprintf("%s %s in primeflow, %s live", f.name, orDash(va), orDash(vb)))
					}
				}
				if len(differ) > 0 {
					sec.diffs = append(sec.diffs, difference{key: k, what: "differs", detail: strings.Join(differ, "; "), why: why.differ(sub, ra, rb)})
				}
			}
		}
		r.sections = append(r.sections, sec)
	}
	return r, nil
}

func sortedKeys(a, b rowSet) []string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

func describe(sub subject, row map[string]string) string {
	var parts []string
	for _, f := range sub.fields {
		if v := row[f.name]; v != "" && f.name != "jobId" {
			parts = append(parts, f.name+" "+v)
		}
	}
	return strings.Join(parts, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// reasons explain differences from what the data holds: the rows read so
// far (data, by table: primeflow's, then the live ones) and primeflow's own
// database.
type reasons struct {
	ctx  context.Context
	ours side
	data map[string][2]rowSet
}

func (w reasons) onlyOurs(sub subject, key string, row map[string]string) string {
	switch sub.table {
	case "primeJobs":
		return "the live system has not mirrored it: its email flow or Jobs by Date sync has not reached it yet, or missed it"
	case "makesafePhoneCall":
		why := "primeflow raised it: " + w.makeSafeView(key)
		if !w.hasMakeSafe(1, key) {
			why += "; the live mirror holds no Make Safe allocation for the job"
		}
		return why + "; the live system raised none"
	case "optimoRouteOrder":
		return "the live system made no order for it (yet): its Create and Plan flow runs on its schedule (§8.1)"
	case "optimoRoutePlan":
		return "the live system has no plan row for the day: it wrote no order for it"
	}
	if job := row["jobId"]; job != "" {
		if _, ok := w.data["primeJobs"][1][job]; !ok {
			return "the live system has not mirrored its job either"
		}
	}
	return "the live system has not synced it yet (its ethSyncQueue drains run on a schedule)"
}

func (w reasons) onlyTheirs(sub subject, key string, row map[string]string) string {
	switch sub.table {
	case "primeJobs":
		if n := w.logRows(key); n > 0 {
			return fmt.Sprintf("primeflow has %d webhook rows for it but no mirror row: primectl list --job %s --state all", n, key)
		}
		return "no webhook for this job reached primeflow (a job the email flow found first? primectl coverage shows the paths)"
	case "makesafePhoneCall":
		return "primeflow raised none: " + w.makeSafeView(key)
	case "optimoRouteOrder":
		st, err := w.ourOrder(key)
		switch {
		case err != nil:
			return "primeflow's order row could not be read: " + err.Error()
		case st.found && st.errorText != "":
			return "primeflow recorded it as not sent: " + st.errorText
		case st.found:
			return fmt.Sprintf("primeflow holds it %s on %s", strings.ToLower(st.state), orDash(st.date))
		}
		return "primeflow has no order row: its appointment or work order is not in primeflow's mirror, or has not been handled yet"
	case "optimoRoutePlan":
		return "primeflow wrote no order for the day"
	}
	if job := row["jobId"]; job != "" {
		if _, ok := w.data["primeJobs"][0][job]; !ok {
			return "primeflow has not mirrored its job either"
		}
	}
	switch sub.table {
	case "primeAllocations":
		return "primeflow has no row: no create-allocation event reached it, and no make-safe re-check synced the job's allocations"
	case "primeAppointments":
		return "primeflow has no row: no appointment event reached it, and the §8.1 sweep has not run over its day"
	}
	return "primeflow has no row"
}

func (w reasons) differ(sub subject, a, b map[string]string) string {
	switch {
	case a["version"] != "" && b["version"] != "" && a["version"] != b["version"]:
		newer := "primeflow"
		if less(a["version"], b["version"]) {
			newer = "the live system"
		}
		return newer + " holds the later version: the other has not synced Prime's latest change"
	case sub.table == "optimoRouteOrder" && a["orderDate"] != b["orderDate"]:
		return "the order is on another day: its appointment moved and one side has not caught up"
	case sub.table == "optimoRoutePlan":
		return "the day's planning is at another stage: an order written on one side queued it again, or a run has not finished"
	}
	return "the same version, mirrored differently"
}

// less compares two versions as numbers.
func less(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// makeSafeView is what primeflow's mirror says of a job's make-safe rule.
func (w reasons) makeSafeView(job string) string {
	created, ok := w.jobCreated(job)
	switch {
	case !ok:
		return "primeflow has not mirrored the job"
	case !w.hasMakeSafe(0, job):
		return "primeflow's mirror holds no Make Safe allocation for the job"
	}
	local := created.In(melbourne()).Format("Mon 2006-01-02 15:04")
	if !store.IsOutsideBusinessHours(created) {
		return "the job was created inside business hours (" + local + " Melbourne)"
	}
	return "the job was created outside business hours (" + local + " Melbourne) and has a Make Safe allocation"
}

// hasMakeSafe reports whether a side's allocations of the job hold a Make
// Safe, by the rule's allocation type (the live database may have no
// isMakeSafe column).
func (w reasons) hasMakeSafe(side int, job string) bool {
	for _, a := range w.data["primeAllocations"][side] {
		if a["jobId"] == job && (prime.Allocation{Type: a["allocationType"]}).IsMakeSafe() {
			return true
		}
	}
	return false
}

func (w reasons) jobCreated(job string) (time.Time, bool) {
	var v sql.NullString
	q := "SELECT " + w.ours.expr("t", column{"createdAt", stamp}) + " FROM primeJobs t WHERE " + w.ours.expr("t", column{"jobId", guid}) + " = " + w.ours.mark(1)
	if err := w.ours.db.QueryRowContext(w.ctx, q, job).Scan(&v); err != nil {
		return time.Time{}, false
	}
	t, ok := parseStamp(v.String)
	return t, ok
}

func (w reasons) logRows(job string) int {
	var n int
	q := "SELECT COUNT(*) FROM ethPrimeWebhookLog t WHERE " + w.ours.expr("t", column{"jobId", guid}) + " = " + w.ours.mark(1)
	if w.ours.db.QueryRowContext(w.ctx, q, job).Scan(&n) != nil {
		return 0
	}
	return n
}

type orderRow struct {
	found                  bool
	state, date, errorText string
}

func (w reasons) ourOrder(orderNo string) (orderRow, error) {
	var st, date, errText sql.NullString
	q := "SELECT t.state, " + w.ours.expr("t", column{"orderDate", day}) + ", t.errorText FROM optimoRouteOrder t WHERE t.orderNo = " + w.ours.mark(1)
	err := w.ours.db.QueryRowContext(w.ctx, q, orderNo).Scan(&st, &date, &errText)
	if errors.Is(err, sql.ErrNoRows) {
		return orderRow{}, nil
	}
	if err != nil {
		return orderRow{}, err
	}
	return orderRow{found: true, state: st.String, date: date.String, errorText: errText.String}, nil
}

func melbourne() *time.Location {
	loc, err := time.LoadLocation(store.BusinessZone)
	if err != nil {
		return time.UTC
	}
	return loc
}

// write prints the report: a section a subject with its counts, each
// difference with its reason, and what could not be compared.
func (r report) write(w io.Writer, ours, theirs side, p period) {
	fmt.Fprintf(w, "primeflow (%s) against live (%s), %s to %s UTC; orders and plans of %s to %s\n", ours.where, theirs.where,
		p.from.Format("2006-01-02 15:04:05"), p.to.Format("2006-01-02 15:04:05"), p.from.Format(time.DateOnly), p.lastDay.Format(time.DateOnly))
	for _, s := range r.sections {
		fmt.Fprintf(w, "\n%s: %d in primeflow, %d live, %d differences\n", s.title, s.ours, s.theirs, len(s.diffs))
		for _, d := range s.diffs {
			fmt.Fprintf(w, "  %-14s  %s  %s\n", d.what, printable(d.key), printable(d.detail))
			fmt.Fprintf(w, "      why: %s\n", printable(d.why))
		}
		for _, m := range s.missing {
			fmt.Fprintf(w, "  not compared: %s\n", m)
		}
	}
	fmt.Fprintf(w, "\n%d differences\n", r.differences())
}

// printable replaces control characters of a value read from a database.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}
