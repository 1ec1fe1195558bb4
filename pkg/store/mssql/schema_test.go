package mssql

import (
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/store"
	schema "github.com/ethosbuilding/primeflow/sql"
	"github.com/matryer/is"
)

func loaded(t *testing.T) []script {
	t.Helper()
	scripts, err := loadScripts()
	if err != nil {
		t.Fatalf("load scripts: %v", err)
	}
	return scripts
}

// The procedures the spec names, with its parameters first, in its order
// (§3, §4.1); a parameter primeflow adds after them has a default, so a call
// with the spec's parameters alone still works. The spec gives
// spPrimeInsertWebhookLog no parameter list.
func TestSpecProceduresExist(t *testing.T) {
	mods := modules(t, loaded(t))
	for _, tc := range []struct {
		proc     string
		params   []string
		defaults map[string]string
	}{
		{"spPrimeInsertWebhookLog", nil, nil},
		{"spPrimeGetWebhookLogUnprocessed", []string{"Top", "MaxAttempts"},
			// §3 @Top=50, @MaxAttempts=5; §10.6: the service's cap equals the proc's default.
			map[string]string{"Top": strconv.Itoa(store.DefaultTop), "MaxAttempts": strconv.Itoa(store.MaxAttempts)}},
		{"spPrimeSetWebhookLogProcessed", []string{"ID", "JobId", "ProcessStatus"}, nil},
		{"spPrimeIncrementWebhookLogAttempt", []string{"ID", "JobId", "ProcessStatus"}, nil},
		{"spPrimeGetJobIDbyReference", []string{"NumericReference"}, nil},
		{"spPrimeSaveJobReference", []string{"NumericReference", "JobId"}, nil},
	} {
		t.Run(tc.proc, func(t *testing.T) {
			is := is.New(t)
			m, ok := mods[tc.proc]
			is.True(ok)                   // the procedure exists, spelled as the spec spells it
			is.Equal(m.kind, "PROCEDURE") // and it is a procedure
			if tc.params == nil {
				return
			}
			var names []string
			for _, p := range m.params[:min(len(tc.params), len(m.params))] {
				names = append(names, p.name)
			}
			is.Equal(names, tc.params) // the spec's parameters, in its order
			for _, p := range m.params[len(names):] {
				is.True(p.optional()) // what primeflow adds can be left out
			}
			for _, p := range m.params {
				if want, ok := tc.defaults[p.name]; ok {
					is.Equal(p.def, want) // the spec's default
				}
			}
		})
	}
}

// Every @MaxAttempts default in the scripts is the service's cap (§10.6).
func TestMaxAttemptsDefaultsMatchTheService(t *testing.T) {
	is := is.New(t)
	n := 0
	for _, m := range modules(t, loaded(t)) {
		for _, p := range m.params {
			if p.name == "MaxAttempts" && p.def != "" {
				is.Equal(p.def, strconv.Itoa(store.MaxAttempts)) // the same cap everywhere
				n++
			}
		}
	}
	is.True(n > 0) // there are such defaults to check
}

func TestUnprocessedIndexIsFiltered(t *testing.T) {
	is := is.New(t)
	all := code(readAll(t, schema.MSSQL, "mssql"))
	// §3: the claim never scans the whole log.
	re := regexp.MustCompile(`(?is)CREATE\s+NONCLUSTERED\s+INDEX\s+IX_ethPrimeWebhookLog_unprocessed\s+ON\s+dbo\.ethPrimeWebhookLog\s*\([^)]*\)(\s*INCLUDE\s*\([^)]*\))?\s*WHERE\s+processedUTC\s+IS\s+NULL\s*;`)
	is.True(re.MatchString(all)) // IX_ethPrimeWebhookLog_unprocessed is filtered on processedUTC IS NULL
}

// Every batch of every script can run a second time: modules are CREATE OR
// ALTER, everything else is guarded by an existence check.
func TestScriptsAreIdempotent(t *testing.T) {
	for _, sc := range loaded(t) {
		t.Run(sc.name, func(t *testing.T) {
			is := is.New(t)
			for _, b := range sc.batches {
				problems := unguarded(b.sql)
				if len(problems) > 0 {
					t.Logf("batch from line %d: %s", b.line, strings.Join(problems, "; "))
				}
				is.Equal(len(problems), 0) // every statement is safe to repeat
			}
		})
	}
}

// The idempotency check itself tells safe batches from unsafe ones.
func TestUnguardedCheck(t *testing.T) {
	for _, tc := range []struct {
		name  string
		batch string
		safe  bool
	}{
		{"module", "-- why\nCREATE OR ALTER PROCEDURE dbo.p AS BEGIN INSERT INTO dbo.t VALUES (1); END;", true},
		{"guarded table", "IF OBJECT_ID(N'dbo.t', N'U') IS NULL\nCREATE TABLE dbo.t (a INT);", true},
		{"guarded block", "IF COL_LENGTH(N'dbo.t', N'b') IS NULL\nBEGIN\n ALTER TABLE dbo.t ADD b INT;\n EXEC sys.sp_executesql N'UPDATE dbo.t SET b = 1';\nEND;", true},
		{"guarded index", "IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX') CREATE INDEX IX ON dbo.t (a);", true},
		{"drop if exists", "DROP TABLE IF EXISTS dbo.t;", true},
		{"settings", "SET XACT_ABORT ON;", true},
		{"bare table", "CREATE TABLE dbo.t (a INT);", false},
		{"bare column", "ALTER TABLE dbo.t ADD b INT;", false},
		{"bare index", "CREATE INDEX IX ON dbo.t (a);", false},
		{"procedure without OR ALTER", "CREATE PROCEDURE dbo.p AS SELECT 1;", false},
		{"type", "CREATE TYPE dbo.l AS TABLE (id BIGINT);", false},
		{"guard that tests nothing", "IF 1 = 1 CREATE TABLE dbo.t (a INT);", false},
		{"write after the guarded statement", "IF OBJECT_ID(N'dbo.t') IS NULL CREATE TABLE dbo.t (a INT);\nINSERT INTO dbo.t VALUES (1);", false},
		{"bare insert", "INSERT INTO dbo.t VALUES (1);", false},
		{"drop", "DROP TABLE dbo.t;", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			is.Equal(len(unguarded(tc.batch)) == 0, tc.safe) // the check's verdict
		})
	}
}

// The two backends have the same tables with the same column names, and the
// same indexes: later scripts must keep them in step.
func TestSchemaMatchesSQLite(t *testing.T) {
	is := is.New(t)
	sqlServer := readAll(t, schema.MSSQL, "mssql")
	sqlite := readAll(t, schema.SQLite, "sqlite")
	ms, lite := tables(sqlServer), tables(sqlite)
	is.True(len(ms) > 0)                                                   // tables were read
	is.Equal(slices.Sorted(maps.Keys(ms)), slices.Sorted(maps.Keys(lite))) // the same tables
	for name, cols := range ms {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			is.True(len(cols) > 0)     // columns were read
			is.Equal(cols, lite[name]) // the same column names
		})
	}
	is.Equal(indexes(sqlServer), indexes(sqlite)) // the same indexes on each table
}

func TestTablesReader(t *testing.T) {
	is := is.New(t)
	got := tables(`IF OBJECT_ID(N'dbo.t', N'U') IS NULL
CREATE TABLE dbo.t (
    id INT NOT NULL CONSTRAINT PK_t PRIMARY KEY, -- a comment, with a comma
    [name] NVARCHAR(10) NULL, price DECIMAL(9, 2) NOT NULL,
    CONSTRAINT UQ_t UNIQUE (name)
);
GO
ALTER TABLE dbo.t ADD extra INT NULL;
CREATE TABLE u (a TEXT, PRIMARY KEY (a));`)
	is.Equal(got, map[string][]string{"t": {"extra", "id", "name", "price"}, "u": {"a"}}) // columns, not constraints
}
