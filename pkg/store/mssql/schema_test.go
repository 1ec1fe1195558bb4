package mssql

import (
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/migration"
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

// The procedures the spec names, with its parameters first, in its order;
// a parameter primeflow adds after them has a default, so a call with the
// spec's parameters alone still works (what such a call does is the
// contract suite's, storetest's "spec call shapes"). Where the spec gives no
// parameter list, the name alone is held.
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
		// §4.2, §6, §5.5 / §6 / §7 (the email flow calls it with these two only), §8.4.
		{"spPrimeIdentifyGuid", []string{"Id", "ExpectedEntity"}, map[string]string{"ExpectedEntity": "NULL"}},
		{"spEthSyncQueueMissingObjectsByJobID", []string{"JobId"}, nil},
		{"spMakesafeUpsertPhoneCallFromPrimeJob", []string{"JobId", "QueueMakeAllocationChecks"}, nil},
		{"spOptimoRoutePlanSetStatus", []string{"PlanDate", "Status", "OnlyIfStatus"}, map[string]string{"OnlyIfStatus": "NULL"}},
		// Named by the spec without a parameter list (§6, §7, §8).
		{"spEthSyncQueueUpsert", nil, nil},
		{"spEthSyncQueueDelete", nil, nil},
		{"spOptimoRouteUpsertOrder", nil, nil},
		{"spOptimoRoutePlanUpsert", nil, nil},
		{"spOptimoRoutePlanGetQueue", nil, nil},
		{"spOptimoRouteGetAppointmentQueue", nil, nil},
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
					is.True(strings.EqualFold(p.def, want)) // the spec's default
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

// No batch of any script gives one name twice as a case-insensitive
// instance compares names (020's @estimates beside @Estimates failed CREATE
// with Msg 134 on a default SQL Server).
func TestNamesAreUniqueIgnoringCase(t *testing.T) {
	for _, sc := range loaded(t) {
		t.Run(sc.name, func(t *testing.T) {
			for _, b := range sc.batches {
				if same := sameNames(b.sql); len(same) > 0 {
					t.Errorf("batch from line %d gives a name twice, ignoring case: %s", b.line, strings.Join(same, "; "))
				}
			}
		})
	}
}

// The check sees each kind of name a case-insensitive instance takes for
// another, and only those.
func TestSameNamesCheck(t *testing.T) {
	for _, tc := range []struct {
		name  string
		batch string
		same  int
	}{
		{"020 as it was: a table variable beside the parameter", `CREATE OR ALTER PROCEDURE dbo.spPrimeflowReplaceJobEstimates
    @JobId UNIQUEIDENTIFIER, @Estimates NVARCHAR(MAX)
AS
BEGIN
    DECLARE @now DATETIME2(3) = SYSUTCDATETIME();
    DECLARE @estimates TABLE (estimateId UNIQUEIDENTIFIER NOT NULL PRIMARY KEY);
    INSERT INTO @estimates (estimateId) SELECT estimateId FROM OPENJSON(@Estimates) WITH (estimateId UNIQUEIDENTIFIER '$.estimateId');
END;`, 1},
		{"two variables of one DECLARE", "CREATE OR ALTER PROCEDURE dbo.p AS BEGIN DECLARE @Now DATETIME2(3), @now INT; END;", 1},
		{"distinct variables", "CREATE OR ALTER PROCEDURE dbo.p @NowUTC DATETIME2(3) AS BEGIN DECLARE @now DATETIME2(3) = @NowUTC; END;", 0},
		{"a variable in a comment", "CREATE OR ALTER PROCEDURE dbo.p @X INT AS BEGIN -- DECLARE @x INT;\n SELECT @X; END;", 0},
		{"columns of a table", "IF OBJECT_ID(N'dbo.t') IS NULL CREATE TABLE dbo.t (Id INT NOT NULL, [id] INT NULL, CONSTRAINT PK_t PRIMARY KEY (Id));", 1},
		{"columns of a table variable", "CREATE OR ALTER PROCEDURE dbo.p AS BEGIN DECLARE @t TABLE (a INT, b INT, A INT); END;", 1},
		{"columns OPENJSON reads", "CREATE OR ALTER PROCEDURE dbo.p @J NVARCHAR(MAX) AS SELECT * FROM OPENJSON(@J) WITH (a INT '$.a', A INT '$.A');", 1},
		{"columns of a table type", "IF TYPE_ID(N'dbo.l') IS NULL CREATE TYPE dbo.l AS TABLE (id BIGINT, ID BIGINT);", 1},
		{"aliases of one query", "CREATE OR ALTER PROCEDURE dbo.p AS SELECT 1 FROM dbo.a AS o JOIN dbo.b AS O ON O.x = o.x;", 1},
		{"aliases with hints", "CREATE OR ALTER PROCEDURE dbo.p AS DELETE f FROM dbo.a AS f WITH (UPDLOCK) JOIN @n AS F ON F.x = f.x;", 1},
		{"an alias again in a subquery", "CREATE OR ALTER PROCEDURE dbo.p AS SELECT 1 FROM dbo.a o WHERE NOT EXISTS (SELECT 1 FROM dbo.a o WHERE o.x = 1);", 0},
		{"an alias again in another branch of a UNION", "CREATE OR ALTER PROCEDURE dbo.p AS SELECT o.x FROM dbo.a o UNION ALL SELECT o.x FROM dbo.b o;", 0},
		{"an alias again in the next statement", "CREATE OR ALTER PROCEDURE dbo.p AS BEGIN SELECT 1 FROM dbo.a AS f; UPDATE f SET x = 1 FROM dbo.a AS f; END;", 0},
		{"a derived table's alias", "CREATE OR ALTER PROCEDURE dbo.p AS SELECT 1 FROM (VALUES (1)) AS o (x) JOIN dbo.b AS O ON O.x = o.x;", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := sameNames(tc.batch)
			if len(got) != tc.same {
				t.Errorf("found %d names given twice, want %d: %v", len(got), tc.same, got)
			}
		})
	}
}

// A parameter declared NVARCHAR(MAX) and written as it is into a shorter
// column fails the call once a value is longer than the column (error 2628
// under ANSI_WARNINGS, which go-mssqldb's sessions have on), where one
// declared at the column's length is cut without a word. Each such write is
// either cut on purpose (LEFT) or listed here with its reason.
func TestMaxParametersFitTheirColumns(t *testing.T) {
	fails := map[string]string{ // procedure.@param: why failing is right
		"spPrimeflowOutboxInsert.@Subject": "a cut subject would publish elsewhere",
		"spPrimeflowOutboxInsert.@MsgId":   "a cut Nats-Msg-Id could be dropped as another message's duplicate",
		// spEthProcessNewPrimeJob writes its hand-off to the outbox as spPrimeflowOutboxInsert does.
		"spEthProcessNewPrimeJob.@HandOffSubject": "a cut subject would publish elsewhere",
		"spEthProcessNewPrimeJob.@HandOffMsgId":   "a cut Nats-Msg-Id could be dropped as another message's duplicate",
	}
	objs, err := migration.Objects(plainScripts(loaded(t)))
	if err != nil {
		t.Fatal(err)
	}
	colType := map[string]string{} // table.column (lower case) → type
	for _, o := range objs {
		for _, c := range o.Columns {
			colType[strings.ToLower(o.Name+"."+c.Name)] = c.Type
		}
	}
	insert := regexp.MustCompile(`(?is)\bINSERT\s+INTO\s+([\w.\[\]]+)\s*\(([^)]*)\)\s*VALUES\s*\(`)
	update := regexp.MustCompile(`(?is)\bUPDATE\s+(dbo\.\w+)(?:\s+WITH\s*\([^)]*\))?\s+SET\s+(.*?)(?:\bWHERE\b|\bFROM\b|\bOUTPUT\b|;)`)
	checked := 0
	for _, o := range objs {
		if o.Kind != migration.Procedure {
			continue
		}
		maxParams := map[string]bool{}
		for _, p := range o.Module.Params {
			if p.Type == "NVARCHAR(MAX)" {
				maxParams[strings.ToLower("@"+p.Name)] = true
			}
		}
		body := code(o.Definition)
		check := func(table, col, expr string) {
			expr = strings.TrimSpace(expr)
			if !maxParams[strings.ToLower(expr)] {
				return
			}
			checked++
			typ := colType[strings.ToLower(objectName(table)+"."+strings.TrimSpace(col))]
			if typ == "NVARCHAR(MAX)" || typ == "" {
				return
			}
			if _, ok := fails[o.Name+"."+expr]; ok {
				return
			}
			t.Errorf("%s writes %s NVARCHAR(MAX) into %s.%s %s as it is: cut it (LEFT) or declare it at the column's length", o.Name, expr, table, strings.TrimSpace(col), typ)
		}
		for _, m := range insert.FindAllStringSubmatchIndex(body, -1) {
			table, cols := body[m[2]:m[3]], splitTop(body[m[4]:m[5]])
			open := m[1] - 1
			vals := splitTop(body[open+1 : closing(body, open)])
			for i := range min(len(cols), len(vals)) {
				check(table, cols[i], vals[i])
			}
		}
		for _, m := range update.FindAllStringSubmatch(body, -1) {
			for _, set := range splitTop(m[2]) {
				if col, expr, ok := strings.Cut(set, "="); ok {
					check(m[1], col, expr)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no NVARCHAR(MAX) parameter was found written to a column: the check reads nothing")
	}
}

// A procedure a module of the scripts calls exists, and the call names each
// argument as one of its parameters (exactly: a case-sensitive instance
// compares them so), passes an OUTPUT parameter OUTPUT and nothing else so,
// and leaves out no required one: SQL Server resolves such a call only when
// it runs, so a wrong one would fail an event, not the migration.
func TestProcedureCallsInTheScriptsFit(t *testing.T) {
	mods := modules(t, loaded(t))
	cs := scriptCalls(t, loaded(t))
	if len(cs) == 0 {
		t.Fatal("no calls read")
	}
	for _, c := range cs {
		t.Run(c.caller+"→"+c.proc, func(t *testing.T) {
			is := is.New(t)
			m, ok := mods[c.proc]
			is.True(ok && m.kind == "PROCEDURE") // a procedure of the scripts
			params := map[string]procParam{}
			for _, p := range m.params {
				params[p.name] = p
			}
			for name, output := range c.args {
				p, ok := params[name]
				if !ok {
					t.Logf("@%s is not a parameter of %s", name, c.proc)
				}
				is.True(ok)                // a parameter, spelled as declared
				is.Equal(output, p.output) // OUTPUT where, and only where, it is one
			}
			for _, p := range m.params {
				_, given := c.args[p.name]
				is.True(given || p.optional()) // no required parameter left out
			}
		})
	}
}
