package mssql

// MSSQL_USE_DATABASE=1: the contract suite runs in the database MSSQL_DSN
// names, for a login that may not create databases (a managed instance, a
// DBA's sandbox database) or a server that takes only its own collation. It
// creates no database and alters none: it makes the scripts' objects in the
// database's dbo schema (the names the spec gives, which primeflow's code
// calls), runs, and drops every one of them afterwards (cleanup). So that it
// never touches what it did not make, it refuses a database that already
// holds any of those objects; it marks its own with the table
// dbo.primeflowContractRun, made first and dropped last, so that what an
// interrupted run left is recognised and dropped by the next; and a session
// lock keeps two runs out of one database.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/store/migration"
	"github.com/matryer/is"
	"github.com/microsoft/go-mssqldb/msdsn"
)

// useDatabaseVar says: run in MSSQL_DSN's database, make none.
const useDatabaseVar = "MSSQL_USE_DATABASE"

// contractRunTable marks a database the suite is running in, or ran in and
// was stopped before it had cleaned up.
const contractRunTable = "primeflowContractRun"

// contractLock is the session lock a run holds on its database.
const contractLock = "primeflow contract suite"

// useGivenDatabase reads MSSQL_USE_DATABASE: unset or false makes a
// database for the run; 1 or true uses MSSQL_DSN's.
func useGivenDatabase() (bool, error) {
	v := os.Getenv(useDatabaseVar)
	if v == "" {
		return false, nil
	}
	use, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q: want 1 (run in MSSQL_DSN's database) or unset (make a database for the run)", useDatabaseVar, v)
	}
	return use, nil
}

// caseSensitive reports whether a collation tells apart names and text that
// differ only in case (a _CS or binary collation).
func caseSensitive(collation string) bool {
	return !strings.Contains(strings.ToUpper(collation), "_CI")
}

// givenDatabaseCollation is the collation of MSSQL_USE_DATABASE's database;
// "" when the suite made its own.
var givenDatabaseCollation string

// givenDatabase prepares the run in dsn's own database and returns how to
// clean up after it.
func givenDatabase(dsn string) (func(), error) {
	cfg, err := msdsn.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("MSSQL_DSN: %w", err)
	}
	if cfg.Database == "" {
		return nil, fmt.Errorf("%s: MSSQL_DSN names no database (sqlserver://…?database=name); the suite would run in the login's default one", useDatabaseVar)
	}
	drops, err := cleanupStatements()
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	db, err := sql.Open("sqlserver", dsn)
	if err != nil {
		return nil, err
	}
	// The lock is the session's: this connection is held until the end.
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to MSSQL_DSN: %w", err)
	}
	fail := func(err error) (func(), error) {
		conn.Close()
		db.Close()
		return nil, err
	}
	var name, collation, instance string
	if err := conn.QueryRowContext(ctx, `SELECT DB_NAME(), CONVERT(NVARCHAR(128), DATABASEPROPERTYEX(DB_NAME(), 'Collation')),
    CONVERT(NVARCHAR(128), SERVERPROPERTY('Collation'))`).Scan(&name, &collation, &instance); err != nil {
		return fail(fmt.Errorf("connect to MSSQL_DSN: %w", err))
	}
	var locked int
	if err := conn.QueryRowContext(ctx, `DECLARE @result INT;
EXEC @result = sys.sp_getapplock @Resource = N'`+contractLock+`', @LockMode = N'Exclusive', @LockOwner = N'Session', @LockTimeout = 0;
SELECT @result;`).Scan(&locked); err != nil {
		return fail(fmt.Errorf("lock database %s for the run: %w", name, err))
	}
	if locked < 0 {
		return fail(fmt.Errorf("another contract run holds database %s (sp_getapplock %q answered %d)", name, contractLock, locked))
	}
	var present []string
	marked := false
	for _, obj := range cleanupObjects(drops) {
		var found bool
		if err := conn.QueryRowContext(ctx, `SELECT CASE WHEN OBJECT_ID(@name) IS NULL AND TYPE_ID(@name) IS NULL THEN 0 ELSE 1 END`,
			sql.Named("name", obj)).Scan(&found); err != nil {
			return fail(fmt.Errorf("look for %s in database %s: %w", obj, name, err))
		}
		switch {
		case !found:
		case obj == "dbo."+contractRunTable:
			marked = true
		default:
			present = append(present, obj)
		}
	}
	switch {
	case marked:
		fmt.Fprintf(os.Stderr, "mssql: database %s holds what an interrupted contract run left (dbo.%s marks it): dropping it first\n", name, contractRunTable)
		if err := cleanup(ctx, conn, drops); err != nil {
			return fail(err)
		}
	case len(present) > 0:
		some := strings.Join(present[:min(len(present), 5)], ", ")
		if len(present) > 5 {
			some += ", …"
		}
		return fail(fmt.Errorf("%s: database %s already holds %d of the objects primeflow's scripts create (%s): the suite makes, empties and drops them, so it runs only in a database without them (a sandbox, not one primeflow or n8n uses)",
			useDatabaseVar, name, len(present), some))
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE dbo.`+contractRunTable+` (startedUTC DATETIME2(3) NOT NULL DEFAULT SYSUTCDATETIME(), host NVARCHAR(128) NULL DEFAULT HOST_NAME());
INSERT INTO dbo.`+contractRunTable+` DEFAULT VALUES;`); err != nil {
		return fail(fmt.Errorf("mark database %s as the run's (CREATE TABLE dbo.%s): %w", name, contractRunTable, err))
	}
	givenDatabaseCollation = collation
	fmt.Fprintf(os.Stderr, "mssql: contract suite in the existing database %s (%s=1; collation %s, the instance's %s): no database is created or altered; the %d objects it makes are dropped when it ends\n",
		name, useDatabaseVar, collation, instance, len(drops))
	if caseSensitive(collation) {
		fmt.Fprintf(os.Stderr, "mssql: NOTE — database %s has a case-sensitive collation (%s). primeflow's scripts and the live database are case-insensitive: TestContractDatabaseIsCaseInsensitive is skipped, the rest runs, and a failure where names or text differ only in case comes from this collation, not from what the live database will do\n", name, collation)
	}
	return func() {
		defer db.Close()
		defer conn.Close()
		if err := cleanup(ctx, conn, drops); err != nil {
			fmt.Fprintln(os.Stderr, "mssql:", err)
		}
	}, nil
}

// cleanup runs every drop, each on its own so that one failure leaves no
// other object behind, and says which failed.
func cleanup(ctx context.Context, conn *sql.Conn, drops []string) error {
	var errs []error
	for _, d := range drops {
		if _, err := conn.ExecContext(ctx, d); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("the contract run's cleanup left objects behind: %w", errors.Join(errs...))
	}
	return nil
}

// dropOrder is the order objects are dropped in: what refers to a table
// before the table, the functions and table types procedures and tables
// use after them.
var dropOrder = []migration.Kind{migration.Procedure, migration.Trigger, migration.View, migration.Table, migration.Function, migration.TableType}

var dropWord = map[migration.Kind]string{migration.Procedure: "PROCEDURE", migration.Trigger: "TRIGGER", migration.View: "VIEW",
	migration.Table: "TABLE", migration.Function: "FUNCTION", migration.TableType: "TYPE"}

// cleanupStatements drops every object the scripts create, the migrations
// table Migrate keeps, and the run's mark last.
func cleanupStatements() ([]string, error) {
	scripts, err := loadScripts()
	if err != nil {
		return nil, err
	}
	objs, err := migration.Objects(plainScripts(scripts))
	if err != nil {
		return nil, fmt.Errorf("read the scripts: %w", err)
	}
	var out []string
	for _, kind := range dropOrder {
		var names []string
		if kind == migration.Table {
			names = append(names, "primeflowSchemaMigrations")
		}
		for _, o := range objs {
			if o.Kind == kind {
				names = append(names, o.Name)
			}
		}
		slices.Sort(names)
		for _, n := range names {
			out = append(out, "DROP "+dropWord[kind]+" IF EXISTS dbo."+n+";")
		}
	}
	for _, o := range objs {
		if dropWord[o.Kind] == "" {
			return nil, fmt.Errorf("the scripts create %s %s, which the contract run's cleanup does not drop: teach cleanupStatements it", o.Kind, o.Name)
		}
	}
	return append(out, "DROP TABLE IF EXISTS dbo."+contractRunTable+";"), nil
}

var dropStatement = regexp.MustCompile(`^DROP (PROCEDURE|TRIGGER|VIEW|TABLE|FUNCTION|TYPE) IF EXISTS (dbo\.\w+);$`)

// cleanupObjects are the objects drops name, as dbo.name.
func cleanupObjects(drops []string) []string {
	var out []string
	for _, d := range drops {
		if m := dropStatement.FindStringSubmatch(d); m != nil {
			out = append(out, m[2])
		}
	}
	return out
}

// The contract run's cleanup drops every object the scripts create, each by
// its kind and its name as written, after whatever refers to it, and
// nothing else: it is read against the scripts' own text as well as against
// the objects pkg/store/migration finds in them.
func TestCleanupDropsEveryObjectTheScriptsCreate(t *testing.T) {
	is := is.New(t)
	drops, err := cleanupStatements()
	is.NoErr(err)
	dropped := map[string]string{} // dbo.name: kind
	at := map[string]int{}
	for i, d := range drops {
		m := dropStatement.FindStringSubmatch(d)
		if m == nil {
			t.Errorf("%q is not DROP <kind> IF EXISTS dbo.<name>;", d)
			continue
		}
		if _, twice := dropped[m[2]]; twice {
			t.Errorf("%s dropped twice", m[2])
		}
		dropped[m[2]], at[m[2]] = m[1], i
	}
	is.Equal(drops[len(drops)-1], "DROP TABLE IF EXISTS dbo."+contractRunTable+";") // the run's mark goes last

	// Every CREATE in the scripts' text, in a string run by EXEC too.
	create := regexp.MustCompile(`(?i)\bCREATE\s+(?:OR\s+ALTER\s+)?(PROC|PROCEDURE|FUNCTION|VIEW|TRIGGER|TABLE|TYPE|SEQUENCE|SYNONYM|SCHEMA|ROLE|USER|DEFAULT|RULE)\s+([\w.\[\]"]+)`)
	created := map[string]bool{"dbo.primeflowSchemaMigrations": true, "dbo." + contractRunTable: true}
	for _, sc := range loaded(t) {
		for _, b := range sc.batches {
			for _, m := range create.FindAllStringSubmatch(migration.Code(b.sql)+"\n"+b.sql, -1) {
				kind := strings.ToUpper(m[1])
				if kind == "PROC" {
					kind = "PROCEDURE"
				}
				name := "dbo." + objectName(m[2])
				if strings.HasPrefix(objectName(m[2]), "@") || strings.HasPrefix(objectName(m[2]), "#") {
					continue // a table variable or a temporary table
				}
				created[name] = true
				if dropped[name] != kind {
					t.Errorf("%s: CREATE %s %s, which the cleanup does not drop as a %s", sc.name, kind, name, kind)
				}
			}
		}
	}
	for name := range dropped {
		is.True(created[name]) // nothing is dropped that the scripts or the suite do not create
	}

	// What refers to a table goes before it; the types and functions
	// procedures use, after them; no foreign key orders the tables.
	for name, kind := range dropped {
		for other, okind := range dropped {
			if slices.Index(dropWords, kind) < slices.Index(dropWords, okind) && at[name] > at[other] && !strings.HasSuffix(other, contractRunTable) && !strings.HasSuffix(name, contractRunTable) {
				t.Errorf("%s %s is dropped after %s %s", kind, name, okind, other)
			}
		}
	}
	for _, sc := range loaded(t) {
		if regexp.MustCompile(`(?i)\b(FOREIGN\s+KEY|REFERENCES)\b`).MatchString(migration.Code(sc.text)) {
			t.Errorf("%s declares a foreign key: the cleanup must drop the referring table first", sc.name)
		}
		if regexp.MustCompile(`(?i)\b(ALTER|CREATE|DROP)\s+DATABASE\b`).MatchString(migration.Code(sc.text)) {
			t.Errorf("%s changes a database: %s=1 promises to create and alter none", sc.name, useDatabaseVar)
		}
	}
}

var dropWords = []string{"PROCEDURE", "TRIGGER", "VIEW", "TABLE", "FUNCTION", "TYPE"}

// MSSQL_USE_DATABASE takes 1 or true, and refuses anything it cannot read.
func TestUseDatabaseVariable(t *testing.T) {
	for _, tc := range []struct {
		v   string
		use bool
		ok  bool
	}{{"", false, true}, {"1", true, true}, {"true", true, true}, {"0", false, true}, {"yes", false, false}} {
		t.Setenv(useDatabaseVar, tc.v)
		use, err := useGivenDatabase()
		if use != tc.use || (err == nil) != tc.ok {
			t.Errorf("%s=%q: use %v, error %v", useDatabaseVar, tc.v, use, err)
		}
		if err != nil && !strings.Contains(err.Error(), useDatabaseVar) {
			t.Errorf("the error %q does not name %s", err, useDatabaseVar)
		}
	}
	is := is.New(t)
	is.True(caseSensitive("Latin1_General_100_CS_AS"))
	is.True(caseSensitive("Latin1_General_BIN2"))
	is.True(!caseSensitive("SQL_Latin1_General_CP1_CI_AS"))
}

// On a case-sensitive database an object's name matches only as it is
// written, so every dbo.<name> the scripts and the adapter's source use is
// spelt as the scripts create it. (Columns and variables are not read here;
// the wire test holds the adapter's parameter names to the declarations.)
func TestObjectNamesAreWrittenAsCreated(t *testing.T) {
	objs, err := migration.Objects(plainScripts(loaded(t)))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{"primeflowschemamigrations": "primeflowSchemaMigrations"}
	for _, o := range objs {
		names[strings.ToLower(o.Name)] = o.Name
	}
	texts := map[string]string{}
	for _, sc := range loaded(t) {
		texts[sc.name] = migration.Code(sc.text)
	}
	_, files := parsePackage(t)
	for name := range files {
		if !strings.HasSuffix(name, "_test.go") {
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			texts[name] = string(b)
		}
	}
	ref := regexp.MustCompile(`(?i)\bdbo\.\[?(\w+)`)
	n := 0
	for file, text := range texts {
		for _, m := range ref.FindAllStringSubmatch(text, -1) {
			n++
			if want, ok := names[strings.ToLower(m[1])]; ok && want != m[1] {
				t.Errorf("%s: dbo.%s, which the scripts create as dbo.%s", file, m[1], want)
			}
		}
	}
	if n == 0 {
		t.Error("no dbo.<name> read: the check reads nothing")
	}
}
