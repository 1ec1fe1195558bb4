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

	"github.com/ethosbuilding/primeflow/pkg/store/migration"
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
// and answer each with errRecorded; with exec set, an Exec is answered by
// exec instead (nil: done, no rows affected).
type recorder struct {
	mu   sync.Mutex
	sent []sent
	exec func(query string) error
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
	err := c.record(q, args)
	if c.r.exec == nil {
		return nil, err
	}
	if err := c.r.exec(q); err != nil {
		return nil, err
	}
	return driver.RowsAffected(0), nil
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
		switch v := v.(type) {
		case mssql.UniqueIdentifier:
			return true
		case sql.NullString:
			return !v.Valid // nullGUID: the driver writes no GUIDN NULL whole
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

// recording returns a Store whose statements go to a recorder; the database
// is closed when the test ends.
func recording(t *testing.T) (*Store, *recorder) {
	t.Helper()
	rec := &recorder{}
	db := sql.OpenDB(rec)
	t.Cleanup(func() { db.Close() })
	return &Store{db: db}, rec
}

// scriptModules returns the modules whose definition (the last, when a
// later script redefines one) is in the named scripts of sql/mssql, failing
// the test unless every script is found.
func scriptModules(t *testing.T, names ...string) map[string]module {
	t.Helper()
	scripts := loaded(t)
	found := 0
	for _, sc := range scripts {
		if slices.Contains(names, sc.name) {
			found++
		}
	}
	if found != len(names) {
		t.Fatalf("found %d of the scripts %v", found, names)
	}
	objs, err := migration.Objects(plainScripts(scripts))
	if err != nil {
		t.Fatalf("read the scripts: %v", err)
	}
	all := modules(t, scripts)
	out := map[string]module{}
	for _, o := range objs {
		if m, ok := all[o.Name]; ok && slices.Contains(names, o.DefinedIn()) {
			out[o.Name] = m
		}
	}
	return out
}

// checkCalls holds every call the recorder took against the procedures of
// mods, each in a subtest named after its procedure: the procedure exists,
// every argument names one of its parameters with a value fit accepts, and
// no required parameter is left out; more, when not nil, checks whatever else
// the call must hold. Then every procedure of mods must have been called. It
// returns how many procedures mods holds. Names compare as a
// case-insensitive instance compares them.
func checkCalls(t *testing.T, rec *recorder, mods map[string]module, fit func(procParam, any) bool, more func(is *is.I, c call)) int {
	t.Helper()
	byName := map[string]module{}
	for _, m := range mods {
		byName[strings.ToLower(m.name)] = m
	}
	called := map[string]bool{}
	for _, c := range calls(t, rec.take()) {
		m, ok := byName[strings.ToLower(c.proc)]
		t.Run(c.proc, func(t *testing.T) {
			is := is.New(t)
			is.True(ok)                   // the procedure exists in the scripts
			is.Equal(m.kind, "PROCEDURE") // and is a procedure
			params := map[string]procParam{}
			for _, p := range m.params {
				params[strings.ToLower(p.name)] = p
			}
			given := map[string]bool{}
			for name, v := range c.args {
				given[strings.ToLower(name)] = true
				p, ok := params[strings.ToLower(name)]
				if !ok {
					t.Logf("@%s is not a parameter of %s", name, c.proc)
				}
				is.True(ok) // every argument names a parameter
				if !fit(p, v) {
					t.Logf("@%s %s gets %T %v", name, p.typ, v, v)
				}
				is.True(fit(p, v)) // with a value of a fitting type
			}
			for _, p := range m.params {
				is.True(given[strings.ToLower(p.name)] || p.optional()) // no required parameter is left out
			}
			if more != nil {
				more(is, c)
			}
		})
		if ok {
			called[m.name] = true
		}
	}
	// A procedure only the scripts' own modules call is held to those
	// calls (TestProcedureCallsInTheScriptsFit), not to the adapter's.
	internal := map[string]bool{}
	for _, c := range scriptCalls(t, loaded(t)) {
		internal[c.proc] = true
	}
	for _, p := range adapterProcs(t) {
		delete(internal, p)
	}
	var procs []string
	for name, m := range mods {
		if m.kind == "PROCEDURE" && !internal[name] {
			procs = append(procs, name)
		}
	}
	is := is.New(t)
	is.Equal(slices.Sorted(maps.Keys(called)), slices.Sorted(slices.Values(procs))) // every procedure is called, none is missing
	return len(procs)
}
