package mssql

// Without a SQL Server, the adapter's side of each call is still checkable:
// a recording database/sql driver captures what the Store sends, and the test
// holds it against the procedures the scripts define: that each exists, that
// every parameter named exists with a Go value of a fitting type, and that no
// required parameter is left out.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
	mssql "github.com/microsoft/go-mssqldb"
)

var errRecorded = errors.New("recorded, not run")

// sent is one statement the Store sent.
type sent struct {
	query string
	args  []driver.NamedValue
}

// recorder is a driver.Connector whose connections record every statement
// and answer each with errRecorded.
type recorder struct {
	mu   sync.Mutex
	sent []sent
}

func (r *recorder) Connect(context.Context) (driver.Conn, error) { return recConn{r}, nil }
func (r *recorder) Driver() driver.Driver                        { return recDriver{r} }

func (r *recorder) take() []sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.sent
	r.sent = nil
	return out
}

type recDriver struct{ r *recorder }

func (d recDriver) Open(string) (driver.Conn, error) { return recConn(d), nil }

type recConn struct{ r *recorder }

func (c recConn) record(query string, args []driver.NamedValue) error {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	c.r.sent = append(c.r.sent, sent{query, slices.Clone(args)})
	return errRecorded
}

func (c recConn) Prepare(string) (driver.Stmt, error) { return nil, errRecorded }
func (c recConn) Close() error                        { return nil }
func (c recConn) Begin() (driver.Tx, error)           { return recTx{}, nil }
func (c recConn) BeginTx(context.Context, driver.TxOptions) (driver.Tx, error) {
	return recTx{}, nil
}
func (c recConn) CheckNamedValue(*driver.NamedValue) error { return nil } // pass the driver's own types through
func (c recConn) QueryContext(_ context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return nil, c.record(q, args)
}
func (c recConn) ExecContext(_ context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	return nil, c.record(q, args)
}

type recTx struct{}

func (recTx) Commit() error   { return nil }
func (recTx) Rollback() error { return nil }

// call is one procedure call: its name and its arguments by parameter name.
type call struct {
	proc string
	args map[string]any
}

// calls reads the procedure calls out of what was sent: a bare procedure name
// with named arguments (an RPC), or a batch of EXEC statements whose
// parameters are bound to @p1, @p2 … positionally.
func calls(t *testing.T, sends []sent) []call {
	t.Helper()
	exec := regexp.MustCompile(`(?s)EXEC\s+([\w.]+)\s+(.*?);`)
	bind := regexp.MustCompile(`^@(\w+)\s*=\s*@p(\d+)$`)
	var out []call
	for _, s := range sends {
		if isProcName(s.query) {
			c := call{proc: objectName(s.query), args: map[string]any{}}
			for _, a := range s.args {
				if a.Name == "" {
					t.Fatalf("%s: an argument without a name", s.query)
				}
				c.args[a.Name] = a.Value
			}
			out = append(out, c)
			continue
		}
		used := map[int]bool{}
		for _, m := range exec.FindAllStringSubmatch(s.query, -1) {
			c := call{proc: objectName(m[1]), args: map[string]any{}}
			for _, b := range strings.Split(m[2], ",") {
				bm := bind.FindStringSubmatch(strings.TrimSpace(b))
				if bm == nil {
					t.Fatalf("%s: cannot read the binding %q", c.proc, b)
				}
				n, _ := strconv.Atoi(bm[2])
				if n < 1 || n > len(s.args) || used[n] {
					t.Fatalf("%s: @p%d is not a fresh argument of the batch", c.proc, n)
				}
				used[n] = true
				c.args[bm[1]] = s.args[n-1].Value
			}
			out = append(out, c)
		}
		if len(used) != len(s.args) {
			t.Fatalf("a batch sends %d arguments and binds %d", len(s.args), len(used))
		}
	}
	return out
}

func isProcName(q string) bool { return regexp.MustCompile(`^[\w.]+$`).MatchString(q) }

// fits reports whether a Go value suits a T-SQL parameter type.
func fits(p procParam, v any) bool {
	typ := p.typ
	if i := strings.Index(typ, "("); i >= 0 {
		typ = typ[:i]
	}
	switch typ {
	case "UNIQUEIDENTIFIER":
		switch v.(type) {
		case mssql.UniqueIdentifier, mssql.NullUniqueIdentifier:
			return true
		}
	case "DATETIME2":
		switch v := v.(type) {
		case sql.NullTime:
			return !v.Valid
		case time.Time:
			return v.Location() == time.UTC && v.Nanosecond()%int(time.Millisecond) == 0 // UTC, whole milliseconds
		}
	case "NVARCHAR":
		switch v.(type) {
		case string, sql.NullString:
			return true
		}
	case "BIT":
		_, ok := v.(bool)
		return ok
	case "INT", "BIGINT", "TINYINT":
		switch v.(type) {
		case int, int64:
			return true
		}
	default:
		if tvp, ok := v.(mssql.TVP); ok && p.readonly {
			return strings.EqualFold(objectName(tvp.TypeName), objectName(typ))
		}
	}
	return false
}

func TestCallsMatchTheProcedures(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	rec := &recorder{}
	db := sql.OpenDB(rec)
	defer db.Close()
	s := &Store{db: db}

	const job = "0B6A3C52-3E0F-4A57-9A39-2F1D7C1E4B10"
	row := store.NewWebhookLogRow{ReceivedUTC: time.Now(), EventAction: "create-appointment", JobID: job,
		Payload: "{}", Headers: "{}", RemoteIP: "203.0.113.7", IsAuthenticated: true}
	filter := store.LogFilter{IDs: []int64{1, 2, 2}, Action: "change-job-status", JobID: job,
		From: time.Now().Add(-time.Hour), To: time.Now(), State: store.Capped, Unpublished: true, Limit: 5}
	errs := []error{}
	try := func(err error) { errs = append(errs, err) }
	_, err := s.InsertWebhookLog(ctx, row)
	try(err)
	_, err = s.InsertWebhookLogs(ctx, []store.NewWebhookLogRow{row, {Payload: "{}"}})
	try(err)
	_, err = s.GetWebhookLog(ctx, 1)
	try(err)
	_, err = s.GetWebhookLogUnprocessed(ctx, 0, 0)
	try(err)
	try(s.SetWebhookLogProcessed(ctx, 1, job, "Processed"))
	_, err = s.IncrementWebhookLogAttempt(ctx, 1, "", "boom")
	try(err)
	_, err = s.GetWebhookLogUnpublished(ctx, time.Now(), 10)
	try(err)
	try(s.SetWebhookLogPublished(ctx, []int64{1, 2}, time.Now()))
	_, err = s.ResetWebhookLog(ctx, filter)
	try(err)
	_, err = s.ListWebhookLog(ctx, filter)
	try(err)
	_, err = s.CountWebhookLog(ctx, store.LogFilter{})
	try(err)
	_, _, err = s.GetJobIDByReference(ctx, 2402073)
	try(err)
	_, err = s.SaveJobReference(ctx, 2402073, job)
	try(err)
	for _, err := range errs {
		is.True(errors.Is(err, errRecorded)) // every method reached the database
	}

	mods := modules(t, loaded(t))
	called := map[string]bool{}
	for _, c := range calls(t, rec.take()) {
		t.Run(c.proc, func(t *testing.T) {
			is := is.New(t)
			m, ok := mods[c.proc]
			is.True(ok)                   // the procedure exists in sql/mssql
			is.Equal(m.kind, "PROCEDURE") // and is a procedure
			params := map[string]procParam{}
			for _, p := range m.params {
				params[p.name] = p
			}
			for name, v := range c.args {
				p, ok := params[name]
				if !ok {
					t.Logf("@%s is not a parameter of %s", name, c.proc)
				}
				is.True(ok) // every argument names a parameter
				if !fits(p, v) {
					t.Logf("@%s %s gets %T %v", name, p.typ, v, v)
				}
				is.True(fits(p, v)) // with a value of a fitting type
			}
			for _, p := range m.params {
				_, given := c.args[p.name]
				is.True(given || p.optional()) // no required parameter is left out
			}
		})
		called[c.proc] = true
	}
	// The procedures of this subject's script are all used; later scripts
	// bring their own methods and their own checks.
	var procs []string
	for _, sc := range loaded(t) {
		if sc.name != "001_webhook_log.sql" {
			continue
		}
		for name, m := range modules(t, []script{sc}) {
			if m.kind == "PROCEDURE" {
				procs = append(procs, name)
			}
		}
	}
	is.True(len(procs) > 0)                                                         // the script was found
	is.Equal(slices.Sorted(maps.Keys(called)), slices.Sorted(slices.Values(procs))) // every procedure is called, none is missing
}

func TestBatchInsertBindsEveryRow(t *testing.T) {
	is := is.New(t)
	rec := &recorder{}
	db := sql.OpenDB(rec)
	defer db.Close()
	s := &Store{db: db}
	rows := make([]store.NewWebhookLogRow, insertBatchRows+3)
	for i := range rows {
		rows[i] = store.NewWebhookLogRow{EventAction: strconv.Itoa(i), Payload: "{}"}
	}
	_, err := s.InsertWebhookLogs(context.Background(), rows)
	is.True(errors.Is(err, errRecorded)) // the first request reached the database
	sends := rec.take()
	is.Equal(len(sends), 1) // the transaction stops at the first failure
	cs := calls(t, sends)
	is.Equal(len(cs), insertBatchRows) // one request carries a full chunk
	for i, c := range cs {
		is.Equal(c.args["EventAction"], strconv.Itoa(i)) // row i is bound to EXEC i
	}
	is.True(len(sends[0].args) <= 2100) // under SQL Server's parameter limit
}

func TestNoCallForImpossibleArguments(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	rec := &recorder{}
	db := sql.OpenDB(rec)
	defer db.Close()
	s := &Store{db: db}

	_, err := s.InsertWebhookLog(ctx, store.NewWebhookLogRow{JobID: "259047", Payload: "{}"})
	is.True(err != nil && !errors.Is(err, errRecorded)) // a jobId that is not a GUID is refused here
	_, err = s.SaveJobReference(ctx, 1, "not-a-guid")
	is.True(err != nil && !errors.Is(err, errRecorded)) // so is a mapping to one
	rows, err := s.ListWebhookLog(ctx, store.LogFilter{JobID: "259047"})
	is.NoErr(err)
	is.Equal(len(rows), 0) // no row's jobId equals a non-GUID
	n, err := s.CountWebhookLog(ctx, store.LogFilter{JobID: "259047"})
	is.NoErr(err)
	is.Equal(n, 0) // nor counts
	n, err = s.ResetWebhookLog(ctx, store.LogFilter{JobID: "259047"})
	is.NoErr(err)
	is.Equal(n, 0)                                           // nor resets
	is.NoErr(s.SetWebhookLogPublished(ctx, nil, time.Now())) // no ids, nothing to send
	got, err := s.GetWebhookLogUnpublished(ctx, time.Now(), 0)
	is.NoErr(err)
	is.Equal(len(got), 0)        // a limit of 0 returns nothing
	is.Equal(len(rec.take()), 0) // and none of this reached the database
}

// Every function call in the scripts passes as many arguments as the
// function has parameters (T-SQL has no named arguments for functions).
func TestFunctionCallsHaveEveryArgument(t *testing.T) {
	is := is.New(t)
	scripts := loaded(t)
	mods := modules(t, scripts)
	n := 0
	for name, m := range mods {
		if m.kind != "FUNCTION" {
			continue
		}
		re := regexp.MustCompile(`(?i)dbo\.` + name + `\s*\(`)
		for _, sc := range scripts {
			for _, b := range sc.batches {
				c := code(b.sql)
				for _, loc := range re.FindAllStringIndex(c, -1) {
					if regexp.MustCompile(`(?i)FUNCTION\s+$`).MatchString(c[:loc[0]]) {
						continue // the definition, not a call
					}
					open := loc[1] - 1
					args := splitTop(c[open+1 : closing(c, open)])
					is.Equal(len(args), len(m.params)) // one argument a parameter
					n++
				}
			}
		}
	}
	is.True(n > 0) // there are calls to check
}
