package migration

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
)

// script makes a Script of batches (SQL Server's GO-separated pieces).
func script(name string, batches ...string) Script {
	return Script{Name: name, Text: strings.Join(batches, "\nGO\n"), Batches: batches}
}

func TestObjectsReadsTables(t *testing.T) {
	is := is.New(t)
	objs, err := Objects([]Script{
		script("001.sql", `IF OBJECT_ID(N'dbo.t', N'U') IS NULL
CREATE TABLE dbo.t (
    id INT NOT NULL CONSTRAINT PK_t PRIMARY KEY, -- a comment, with a comma
    [name] NVARCHAR (10) NULL, price DECIMAL(9, 2) NOT NULL, at DATETIME2 NULL,
    CONSTRAINT UQ_t UNIQUE (name)
);`, `ALTER TABLE dbo.t ADD extra INT NULL;`, `CREATE UNIQUE INDEX UX_t_name ON dbo.t (name) WHERE name IS NOT NULL;`,
			`IF TYPE_ID(N'dbo.l') IS NULL CREATE TYPE dbo.l AS TABLE (id BIGINT NOT NULL PRIMARY KEY);`),
		script("002.sql", `IF COLUMNPROPERTY(OBJECT_ID(N'dbo.t'), N'extra', N'IsComputed') = 0
BEGIN
    ALTER TABLE dbo.t DROP COLUMN extra;
END;`, `IF COL_LENGTH(N'dbo.t', N'extra') IS NULL ALTER TABLE dbo.t ADD extra AS (CONVERT(BIT, CASE WHEN price > 0 THEN 1 ELSE 0 END));`,
			`ALTER TABLE dbo.t ADD CONSTRAINT CK_t CHECK (price >= 0);`),
		Script{Name: "001_lite.sql", Batches: []string{`CREATE TABLE u (a TEXT, b INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (a));
ALTER TABLE u ADD COLUMN c INTEGER GENERATED ALWAYS AS (b + 1) VIRTUAL;`}},
	})
	is.NoErr(err)
	is.Equal(len(objs), 3) // t, the type l, u
	tab := objs[0]
	is.Equal(tab.Kind, Table)
	is.Equal(tab.Scripts, []string{"001.sql", "002.sql"}) // both scripts touch it
	var cols []string
	for _, c := range tab.Columns {
		cols = append(cols, c.Name+" "+c.Type)
	}
	is.Equal(cols, []string{"id INT", "name NVARCHAR(10)", "price DECIMAL(9,2)", "at DATETIME2(7)", "extra COMPUTED"}) // columns, not constraints, types normalised
	extra := tab.Columns[4]
	is.True(extra.Added && extra.Replaced)                                // dropped, then added again: a conversion
	is.True(!tab.Columns[1].Added)                                        // a CREATE TABLE column is not added to a live table
	is.Equal(len(tab.Indexes), 1)                                         // the index
	is.Equal(tab.Indexes[0], Index{Name: "UX_t_name", Script: "001.sql"}) // and who makes it
	is.Equal(objs[1].Kind, TableType)                                     // the table type
	is.Equal(objs[1].Columns[0].Type, "BIGINT")                           // with its column
	is.Equal(objs[2].Columns, []Column{{Name: "a", Type: "TEXT", Script: "001_lite.sql"}, {Name: "b", Type: "INTEGER", Script: "001_lite.sql"},
		{Name: "c", Type: Computed, Script: "001_lite.sql", Added: true}}) // SQLite DDL too
}

// An index a later script drops is no longer one the scripts make: T-SQL
// names its table, SQLite does not.
func TestObjectsDropIndex(t *testing.T) {
	is := is.New(t)
	objs, err := Objects([]Script{
		script("001.sql", `IF OBJECT_ID(N'dbo.t', N'U') IS NULL CREATE TABLE dbo.t (a INT, b INT);`,
			`CREATE UNIQUE INDEX UX_t_a ON dbo.t (a) WHERE b IS NULL;`, `CREATE INDEX IX_t_b ON dbo.t (b);`),
		script("002.sql", `IF EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'UX_t_a') DROP INDEX UX_t_a ON dbo.t;`,
			`CREATE UNIQUE INDEX UX_t_a_open ON dbo.t (a) WHERE b IS NOT NULL;`),
		Script{Name: "001_lite.sql", Batches: []string{`CREATE TABLE u (a TEXT); CREATE INDEX IX_u_a ON u (a); DROP INDEX IX_u_a;`}},
	})
	is.NoErr(err)
	var names []string
	for _, ix := range objs[0].Indexes {
		names = append(names, ix.Name)
	}
	is.Equal(names, []string{"IX_t_b", "UX_t_a_open"}) // the dropped index is gone, the others stay
	is.Equal(len(objs[1].Indexes), 0)                  // SQLite's DROP INDEX too
}

func TestObjectsLastDefinitionWins(t *testing.T) {
	is := is.New(t)
	objs, err := Objects([]Script{
		script("010.sql", "CREATE OR ALTER PROCEDURE dbo.p @A INT AS SELECT @A;", "CREATE OR ALTER FUNCTION dbo.f (@X INT) RETURNS INT AS BEGIN RETURN @X; END;"),
		script("020.sql", "-- why\nCREATE OR ALTER PROCEDURE [dbo].[P] @A INT, @B INT = 0 AS SELECT @A + @B;"),
	})
	is.NoErr(err)
	is.Equal(len(objs), 2)                                    // one object a name, whatever its case
	is.Equal(objs[0].Scripts, []string{"010.sql", "020.sql"}) // defined twice
	is.Equal(objs[0].DefinedIn(), "020.sql")                  // the later definition counts
	is.Equal(len(objs[0].Module.Params), 2)                   // with its parameters
	is.True(objs[0].Module.Params[1].Optional())              // @B has a default
	is.Equal(objs[1].Kind, Function)                          // the function
	is.Equal(objs[1].Module.Params[0].Type, "INT")            // and its parameter

	_, err = Objects([]Script{script("a.sql", "CREATE OR ALTER PROCEDURE dbo.x AS SELECT 1;"), script("b.sql", "CREATE OR ALTER FUNCTION dbo.x () RETURNS INT AS BEGIN RETURN 1; END;")})
	is.True(err != nil) // one name cannot be two kinds of module
}

func TestNormaliseDefinition(t *testing.T) {
	const base = "CREATE OR ALTER PROCEDURE dbo.p\n    @A INT = 0\nAS\nBEGIN\n    SELECT @A AS a, N'Hello' AS b FROM dbo.t WHERE x IN (1, 2);\nEND;"
	for _, tc := range []struct {
		name  string
		other string
		same  bool
	}{
		{"identical", base, true},
		{"comments and spaces", "-- captured\n/* a /* nested */ comment */ CREATE   PROCEDURE dbo.p @A INT=0 AS BEGIN SELECT @A AS a,N'Hello' AS b FROM dbo.t WHERE x IN(1,2) END", true},
		{"case of code and brackets", "create or alter proc [dbo].[P] @a int = 0 as begin select @a as A, N'Hello' as B from [dbo].[T] where X in (1, 2); end", true},
		{"ALTER as stored", "ALTER PROCEDURE dbo.p @A INT = 0 AS BEGIN SELECT @A AS a, N'Hello' AS b FROM dbo.t WHERE x IN (1, 2); END;", true},
		{"a string's case", "CREATE PROCEDURE dbo.p @A INT = 0 AS BEGIN SELECT @A AS a, N'hello' AS b FROM dbo.t WHERE x IN (1, 2); END;", false},
		{"a string's spaces", "CREATE PROCEDURE dbo.p @A INT = 0 AS BEGIN SELECT @A AS a, N'Hello ' AS b FROM dbo.t WHERE x IN (1, 2); END;", false},
		{"the code", "CREATE PROCEDURE dbo.p @A INT = 1 AS BEGIN SELECT @A AS a, N'Hello' AS b FROM dbo.t WHERE x IN (1, 2); END;", false},
		{"a bracketed name that needs them", "CREATE PROCEDURE dbo.p @A INT = 0 AS BEGIN SELECT @A AS [a b], N'Hello' AS b FROM dbo.t WHERE x IN (1, 2); END;", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			is.Equal(NormaliseDefinition(tc.other) == NormaliseDefinition(base), tc.same) // compared as a case-insensitive instance would
		})
	}
}

func TestStatus(t *testing.T) {
	is := is.New(t)
	a, b, c, d := script("a.sql", "x"), script("b.sql", "y"), script("c.sql", "z"), script("d.sql", "w")
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	history := []Applied{
		{Name: "a.sql", AppliedUTC: at, Checksum: a.Checksum()},
		{Name: "b.sql", AppliedUTC: at, Checksum: c.Checksum()},
		{Name: "c.sql", AppliedUTC: at},
	}
	got := Status([]Script{a, b, c, d}, history, true)
	var st []ScriptStatus
	var runs []bool
	for _, s := range got {
		st = append(st, s.Status)
		runs = append(runs, s.Runs)
	}
	is.Equal(st, []ScriptStatus{Current, Changed, Unrecorded, Pending}) // each script's standing
	is.Equal(got[0].Applied.AppliedUTC, at)                             // with its history row
	is.Equal(runs, []bool{false, true, true, true})                     // a changed script is applied again
	runs = nil
	for _, s := range Status([]Script{a, b, c, d}, history, false) {
		runs = append(runs, s.Runs)
	}
	is.Equal(runs, []bool{false, false, false, true}) // unless its backend runs scripts once
}

// The plan over a live database that holds some objects already: its own,
// primeflow's, and primeflow's changed by hand.
func planFixture(t *testing.T, adopt ...string) (Plan, error) {
	t.Helper()
	old := script("001.sql",
		"IF OBJECT_ID(N'dbo.logT', N'U') IS NULL CREATE TABLE dbo.logT (id BIGINT NOT NULL, payload NVARCHAR(MAX) NOT NULL);",
		"IF COL_LENGTH(N'dbo.logT', N'publishedUTC') IS NULL ALTER TABLE dbo.logT ADD publishedUTC DATETIME2(3) NULL;",
		"IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_logT') CREATE INDEX IX_logT ON dbo.logT (id);",
		"CREATE OR ALTER PROCEDURE dbo.spInsert @Payload NVARCHAR(MAX), @At DATETIME2(3) = NULL AS SELECT 1;",
		"CREATE OR ALTER PROCEDURE dbo.spMine @A INT AS SELECT @A;",
		"CREATE OR ALTER PROCEDURE dbo.spDrift @A INT AS SELECT @A;")
	next := script("002.sql",
		"IF OBJECT_ID(N'dbo.newT', N'U') IS NULL CREATE TABLE dbo.newT (id INT NOT NULL);",
		"CREATE OR ALTER PROCEDURE dbo.spMine @A INT, @B INT = 0 AS SELECT @A + @B;",
		"CREATE OR ALTER PROCEDURE dbo.spSame AS SELECT 2;",
		"CREATE OR ALTER PROCEDURE dbo.spLegacy @Id INT, @Extra INT AS SELECT 3;")
	catalog := Catalog{
		Key(Table, "logT"): {Kind: Table, Name: "logT", Columns: []Column{{Name: "id", Type: "BIGINT"}, {Name: "payload", Type: "NVARCHAR(MAX)"}}},
		Key(Procedure, "spInsert"): {Kind: Procedure, Name: "spInsert",
			Definition: "CREATE PROCEDURE dbo.spInsert @Payload NVARCHAR(MAX), @Headers NVARCHAR(MAX) AS SELECT 0;"},
		Key(Procedure, "spMine"):   {Kind: Procedure, Name: "spMine", Definition: old.Batches[4], Owner: "created by 001.sql"},
		Key(Procedure, "spDrift"):  {Kind: Procedure, Name: "spDrift", Definition: "CREATE PROCEDURE dbo.spDrift @A INT AS SELECT @A + 1;", Owner: "created by 001.sql"},
		Key(Procedure, "spSame"):   {Kind: Procedure, Name: "SPSAME", Definition: "create procedure [dbo].[spSame] as select 2"},
		Key(Procedure, "spLegacy"): {Kind: Procedure, Name: "spLegacy", Definition: "CREATE PROCEDURE dbo.spLegacy @Id INT AS SELECT 3;"},
	}
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	scripts := Status([]Script{old, next}, []Applied{{Name: "001.sql", AppliedUTC: at, Checksum: "0000"}}, true)
	return Decide(scripts, catalog, true, adopt)
}

func TestDecide(t *testing.T) {
	is := is.New(t)
	p, err := planFixture(t, "SPLEGACY")
	is.NoErr(err)
	want := map[string]struct {
		state  State
		action Action
	}{
		"logT":     {Different, Refuse}, // a live table primeflow does not own, which 001 (changed, so run again) alters
		"spInsert": {Different, Refuse}, // a live procedure with other parameters
		"spMine":   {Different, Alter},  // primeflow's, redefined by 002
		"spDrift":  {Different, Alter},  // primeflow's, changed by hand; 001 runs again
		"newT":     {Absent, Create},
		"spSame":   {Same, None},       // the same, whoever made it: nothing to do
		"spLegacy": {Different, Adopt}, // named in --adopt, in another case
	}
	is.Equal(len(p.Items), len(want)) // every object of the scripts
	for _, it := range p.Items {
		w, ok := want[it.Name]
		is.True(ok) // an object of the scripts
		if it.State != w.state || it.Action != w.action {
			t.Errorf("%s: %s, %s; want %s, %s (%v)", it.Name, it.State, it.Action, w.state, w.action, it.Reasons)
		}
	}
	logT, _ := p.Item(Table, "LOGT")
	is.Equal(logT.Reasons, []string{"001.sql adds column publishedUTC DATETIME2(3)", "001.sql adds index IX_logT"}) // what would change
	ins, _ := p.Item(Procedure, "spInsert")
	is.True(strings.Contains(strings.Join(ins.Reasons, "\n"), "@Headers NVARCHAR(MAX) is not a parameter of 001.sql's version: callers that pass it fail")) // the callers' view
	is.True(strings.Contains(strings.Join(ins.Reasons, "\n"), "001.sql adds @At (optional)"))
	legacy, _ := p.Item(Procedure, "spLegacy")
	is.True(strings.Contains(strings.Join(legacy.Reasons, "\n"), "002.sql adds @Extra, required: callers that leave it out fail"))
	is.Equal(len(p.Refused()), 2) // logT and spInsert stop a migration
	is.Equal(len(p.Adopted()), 1) // spLegacy is captured first
	is.True(p.Runs())             // 001 changed, 002 is new

	_, err = planFixture(t, "spNothing")
	is.True(err != nil && strings.Contains(err.Error(), "spNothing")) // a name the scripts do not touch is a mistake
}

func TestDecideNothingPending(t *testing.T) {
	is := is.New(t)
	sc := script("001.sql", "CREATE OR ALTER PROCEDURE dbo.p AS SELECT 1;", "IF OBJECT_ID(N'dbo.t', N'U') IS NULL CREATE TABLE dbo.t (a INT);")
	scripts := Status([]Script{sc}, []Applied{{Name: "001.sql", Checksum: sc.Checksum()}}, true)
	p, err := Decide(scripts, Catalog{
		Key(Procedure, "p"): {Kind: Procedure, Name: "p", Definition: "CREATE PROCEDURE dbo.p AS SELECT 2;", Owner: "x"},
	}, true, nil)
	is.NoErr(err)
	is.True(!p.Runs()) // nothing to apply
	pr, _ := p.Item(Procedure, "p")
	is.Equal(pr.State, Different)                                                              // changed by hand
	is.Equal(pr.Action, None)                                                                  // but no script runs to change it back
	is.True(strings.Contains(strings.Join(pr.Reasons, "\n"), "changed in the database after")) // said so
	tab, _ := p.Item(Table, "t")
	is.Equal(tab.State, Absent)                                                  // gone
	is.Equal(tab.Action, None)                                                   // and not recreated by a script already applied
	is.True(strings.Contains(strings.Join(tab.Reasons, "\n"), "dropped since?")) // said so
}

func TestDecideWithoutOwnership(t *testing.T) {
	is := is.New(t)
	sc := script("001.sql", "CREATE TABLE t (a INTEGER);\nCREATE INDEX IX_t ON t (a);")
	p, err := Decide(Status([]Script{sc}, nil, false), Catalog{Key(Table, "t"): {Kind: Table, Name: "t", Columns: []Column{{Name: "a", Type: "INTEGER"}}}}, false, nil)
	is.NoErr(err)
	it, _ := p.Item(Table, "t")
	is.True(it.Owned())          // SQLite: the file is primeflow's
	is.True(it.Action != Refuse) // never refused
}

func TestPlanWrite(t *testing.T) {
	is := is.New(t)
	p, err := planFixture(t)
	is.NoErr(err)
	p.Backend = "SQL Server"
	p.Settings = []Setting{{Name: "MakesafeSMSRecipient", Want: "+61400000000", From: "MAKESAFE_SMS_TO"}}
	var b bytes.Buffer
	is.NoErr(p.Write(&b))
	out := b.String()
	for _, want := range []string{
		"001.sql  CHANGED since it was applied 2026-03-01 10:00:00: applied again",
		"002.sql  pending",
		"REFUSED: not primeflow's; name it in --adopt to take it over",
		"001.sql adds column publishedUTC DATETIME2(3)",
		"MakesafeSMSRecipient  (none)",
		"set to +61400000000 (MAKESAFE_SMS_TO)",
		"1 to create, 2 to alter, 0 to adopt (captured first), 3 refused, 1 unchanged",
		"a migration now would refuse: 3 live objects",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the plan lacks %q:\n%s", want, out)
		}
	}
}

func TestRefusedError(t *testing.T) {
	is := is.New(t)
	p, err := planFixture(t)
	is.NoErr(err)
	rerr := &RefusedError{Items: p.Refused()}
	is.True(errors.Is(rerr, ErrRefused))                                // matches
	is.True(strings.Contains(rerr.Error(), "logT, spInsert, spLegacy")) // names them
	is.True(strings.Contains(rerr.Error(), "--adopt"))                  // and says what to do
}

// A procedure's WITH options end its parameters: EXECUTE AS OWNER's AS is
// not the body's.
func TestParseModuleReadsPastProcedureOptions(t *testing.T) {
	for _, tc := range []struct{ name, batch string }{
		{"execute as owner", "CREATE OR ALTER PROCEDURE dbo.p\n    @ID BIGINT,\n    @Count INT = 0\nWITH EXECUTE AS OWNER\nAS\nBEGIN SELECT 1; END;"},
		{"two options", "CREATE PROCEDURE dbo.p @ID BIGINT, @Count INT = 0 WITH RECOMPILE, EXECUTE AS 'loader' AS SELECT 1;"},
		{"none", "CREATE PROCEDURE dbo.p @ID BIGINT, @Count INT = 0 AS WITH x AS (SELECT 1 AS a) SELECT a FROM x;"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			m, ok, err := ParseModule(tc.batch)
			is.NoErr(err)
			is.True(ok)
			is.Equal(len(m.Params), 2)          // both parameters
			is.Equal(m.Params[1].Default, "0")  // the last one whole
			is.Equal(m.Params[1].Name, "Count") // named
		})
	}
}

// An OUTPUT parameter, with a default or without, is read as one.
func TestParseModuleReadsOutputParameters(t *testing.T) {
	is := is.New(t)
	m, ok, err := ParseModule("CREATE OR ALTER PROCEDURE dbo.p\n    @ID BIGINT,\n    @Done BIT = 0 OUTPUT,\n    @Count INT OUT\nAS\nBEGIN SELECT 1; END;")
	is.NoErr(err)
	is.True(ok)
	is.Equal(len(m.Params), 3)
	is.True(!m.Params[0].Output)                               // an input
	is.True(m.Params[1].Output && m.Params[1].Default == "0")  // OUTPUT with its default
	is.True(m.Params[2].Output && m.Params[2].Type == "INT")   // OUT, the short form
	is.True(m.Params[1].Optional() && !m.Params[2].Optional()) // a default makes it optional, as any
}
