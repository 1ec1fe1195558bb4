package mssql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store/migration"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
	schema "github.com/ethosbuilding/primeflow/sql"
)

// noTxDirective, on a line of its own in a script, runs that script's batches
// outside a transaction, for the statements T-SQL refuses inside one
// (ALTER DATABASE, full-text catalogues and the like).
const noTxDirective = "-- primeflow:no-transaction"

// migrateLock serialises concurrent migrations (sp_getapplock).
const migrateLock = "primeflow migrate"

// sessionSettings are the SET options migrations run under: the ones filtered
// indexes require, which procedures also capture at creation (ANSI_NULLS,
// QUOTED_IDENTIFIER), and XACT_ABORT so any error rolls the script back whole.
const sessionSettings = `SET ANSI_NULLS ON;
SET ANSI_PADDING ON;
SET ANSI_WARNINGS ON;
SET ARITHABORT ON;
SET CONCAT_NULL_YIELDS_NULL ON;
SET QUOTED_IDENTIFIER ON;
SET NUMERIC_ROUNDABORT OFF;
SET XACT_ABORT ON;`

const createMigrationsTable = `IF OBJECT_ID(N'dbo.primeflowSchemaMigrations', N'U') IS NULL
CREATE TABLE dbo.primeflowSchemaMigrations (
    name       NVARCHAR(260) NOT NULL CONSTRAINT PK_primeflowSchemaMigrations PRIMARY KEY,
    appliedUTC DATETIME2(3)  NOT NULL CONSTRAINT DF_primeflowSchemaMigrations_appliedUTC DEFAULT SYSUTCDATETIME()
);
IF COL_LENGTH(N'dbo.primeflowSchemaMigrations', N'checksum') IS NULL
    ALTER TABLE dbo.primeflowSchemaMigrations ADD checksum NVARCHAR(64) NULL;`

// recordScript writes a script's history row: applied now, with its checksum.
const recordScript = `UPDATE dbo.primeflowSchemaMigrations SET appliedUTC = SYSUTCDATETIME(), checksum = @checksum WHERE name = @name;
IF @@ROWCOUNT = 0
    INSERT INTO dbo.primeflowSchemaMigrations (name, checksum) VALUES (@name, @checksum);`

// markOwner sets the ownership mark (migration.OwnerProperty) of a dbo
// object of level-1 type @type (TABLE, PROCEDURE, FUNCTION, VIEW, TYPE).
const markOwner = `IF EXISTS (SELECT 1 FROM sys.fn_listextendedproperty(N'` + migration.OwnerProperty + `', N'SCHEMA', N'dbo', @type, @object, NULL, NULL))
    EXEC sys.sp_updateextendedproperty @name = N'` + migration.OwnerProperty + `', @value = @mark,
        @level0type = N'SCHEMA', @level0name = N'dbo', @level1type = @type, @level1name = @object;
ELSE
    EXEC sys.sp_addextendedproperty @name = N'` + migration.OwnerProperty + `', @value = @mark,
        @level0type = N'SCHEMA', @level0name = N'dbo', @level1type = @type, @level1name = @object;`

// Options say how Migrate treats the database, which may be a live one
// that other things use (§11).
type Options struct {
	// PlanOnly reads the database and plans, and changes nothing.
	PlanOnly bool
	// Adopt names live objects primeflow does not own that the migration
	// may alter; without it a migration that would alter one applies
	// nothing and fails with a *migration.RefusedError.
	Adopt []string
	// CaptureDir is where the definition of each adopted object is written
	// before anything changes it: <CaptureDir>/<UTC time>/Programmable,
	// Tables or Types/dbo.<name>.sql. Required when Adopt adopts anything.
	CaptureDir string
	// Settings are primeflowSettings rows to write once the scripts are
	// applied (migration.Setting.Want; empty leaves a row as it is).
	Settings []migration.Setting
	// Now is the clock for capture folders and marks; nil is time.Now.
	Now func() time.Time
}

// Migrate plans a migration of the database to sql/mssql and, unless
// opts.PlanOnly, applies it: every script not yet applied, or changed since
// it was (every batch is safe to run twice), in name order, each in one
// transaction (unless it carries noTxDirective) with its history row and
// the ownership marks of what it created or adopted. Before anything is
// applied it refuses, with a *migration.RefusedError, a migration that would
// alter a live object primeflow does not own and opts.Adopt does not name,
// and captures the objects it adopts. A module batch whose definition the
// database already holds, or that a later script redefines, is not sent.
// Running it again applies nothing; two running at once take turns. It
// returns the plan it acted on.
func Migrate(ctx context.Context, db *sql.DB, opts Options) (migration.Plan, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return migration.Plan{}, fmt.Errorf("mssql: migrate: %w", err)
	}
	defer conn.Close()
	return migrate(ctx, conn, opts, readState)
}

// migrate is Migrate on one connection, with the database's state read by
// read (readState; tests give their own).
func migrate(ctx context.Context, conn *sql.Conn, opts Options, read func(context.Context, sqlrows.Querier) (liveState, error)) (migration.Plan, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	scripts, err := loadScripts()
	if err != nil {
		return migration.Plan{}, err
	}
	if _, err := conn.ExecContext(ctx, sessionSettings); err != nil {
		return migration.Plan{}, fmt.Errorf("mssql: migrate: session settings: %w", err)
	}
	if !opts.PlanOnly {
		if err := lockMigrations(ctx, conn); err != nil {
			return migration.Plan{}, err
		}
		defer unlockMigrations(ctx, conn)
	}
	st, err := read(ctx, conn)
	if err != nil {
		return migration.Plan{}, err
	}
	plan, err := migration.Decide(migration.Status(plainScripts(scripts), st.history, true), st.catalog, true, opts.Adopt)
	plan.Backend = "SQL Server"
	for _, s := range opts.Settings {
		s.Current, s.Found = st.settings[s.Name]
		plan.Settings = append(plan.Settings, s)
	}
	if err != nil || opts.PlanOnly {
		return plan, err
	}
	if refused := plan.Refused(); len(refused) > 0 {
		return plan, &migration.RefusedError{Items: refused}
	}
	now := opts.Now()
	if err := capture(plan.Adopted(), opts.CaptureDir, now); err != nil {
		return plan, err
	}
	if _, err := conn.ExecContext(ctx, createMigrationsTable); err != nil {
		return plan, fmt.Errorf("mssql: migrate: migrations table: %w", err)
	}
	for i, sc := range scripts {
		if !plan.Scripts[i].Runs {
			continue
		}
		if err := applyScript(ctx, conn, sc, plan, now); err != nil {
			return plan, fmt.Errorf("mssql: migrate %s: %w", sc.name, err)
		}
	}
	for _, set := range plan.Settings {
		if set.Want == "" || (set.Found && set.Current == set.Want) {
			continue
		}
		if err := setSetting(ctx, conn, set.Name, set.Want); err != nil {
			return plan, fmt.Errorf("mssql: migrate: setting %s: %w", set.Name, err)
		}
	}
	return plan, nil
}

func plainScripts(scripts []script) []migration.Script {
	out := make([]migration.Script, len(scripts))
	for i, sc := range scripts {
		out[i] = migration.Script{Name: sc.name, Text: sc.text}
		for _, b := range sc.batches {
			out[i].Batches = append(out[i].Batches, b.sql)
		}
	}
	return out
}

func lockMigrations(ctx context.Context, conn *sql.Conn) error {
	_, err := conn.ExecContext(ctx, `DECLARE @result INT;
EXEC @result = sys.sp_getapplock @Resource = N'`+migrateLock+`', @LockMode = N'Exclusive',
    @LockOwner = N'Session', @LockTimeout = 120000;
IF @result < 0
    THROW 51000, N'another migration held the lock for two minutes', 1;`)
	if err != nil {
		return fmt.Errorf("mssql: migrate: lock: %w", err)
	}
	return nil
}

// unlockMigrations releases the session's lock; when it cannot, it discards
// the connection, since ending the session releases the lock too.
func unlockMigrations(ctx context.Context, conn *sql.Conn) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, err := conn.ExecContext(ctx, `EXEC sys.sp_releaseapplock @Resource = N'`+migrateLock+`', @LockOwner = N'Session';`)
	if err != nil {
		conn.Raw(func(any) error { return driver.ErrBadConn })
	}
}

// capture writes each adopted object's live definition to its own file
// under dir/<now>/, before the migration changes anything (§11: "capture
// them as Programmable/ files before changing any of them"). The files are
// their owner's only (0600, in folders of 0700), whatever dir's mode: a
// definition of the live database may hold what it holds.
func capture(items []migration.Item, dir string, now time.Time) error {
	if len(items) == 0 {
		return nil
	}
	if dir == "" {
		return errors.New("mssql: migrate: adopting needs a capture folder for the definitions it replaces")
	}
	run := filepath.Join(dir, now.UTC().Format("20060102T150405Z"))
	if err := os.MkdirAll(filepath.Dir(run), 0o700); err != nil {
		return fmt.Errorf("mssql: migrate: capture: %w", err)
	}
	if err := os.Mkdir(run, 0o700); err != nil {
		return fmt.Errorf("mssql: migrate: capture: %w", err)
	}
	for _, it := range items {
		folder := "Programmable"
		switch it.Kind {
		case migration.Table:
			folder = "Tables"
		case migration.TableType:
			folder = "Types"
		}
		if err := os.MkdirAll(filepath.Join(run, folder), 0o700); err != nil {
			return fmt.Errorf("mssql: migrate: capture: %w", err)
		}
		file := filepath.Join(run, folder, "dbo."+it.Live.Name+".sql")
		if err := os.WriteFile(file, []byte(captureText(*it.Live, now)), 0o600); err != nil {
			return fmt.Errorf("mssql: migrate: capture %s: %w", it.Name, err)
		}
	}
	return nil
}

// readHistory reads the history table (none when there is no table).
func readHistory(ctx context.Context, q sqlrows.Querier) ([]migration.Applied, error) {
	out, err := sqlrows.All(ctx, q, selectHistory, func(sc sqlrows.Scanner) (migration.Applied, error) {
		var a migration.Applied
		err := sc.Scan(&a.Name, scanTime{&a.AppliedUTC}, scanString{&a.Checksum})
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("mssql: migration history: %w", err)
	}
	return out, nil
}

// applyScript runs one script's batches (those the plan says to send),
// marks what it created or adopted, and records it, in one transaction.
func applyScript(ctx context.Context, conn *sql.Conn, sc script, plan migration.Plan, now time.Time) error {
	var batches []batch
	for _, b := range sc.batches {
		if m, ok, _ := migration.ParseModule(b.sql); ok {
			it, found := plan.Item(m.Kind, m.Name)
			if found && (it.DefinedIn() != sc.name || it.State == migration.Same) {
				continue // superseded by a later script, or already as written
			}
		}
		batches = append(batches, b)
	}
	marks := ownerMarks(plan, sc.name, now)
	run := func(q execer) error {
		if err := runBatches(ctx, q, batches); err != nil {
			return err
		}
		for _, mk := range marks {
			if _, err := q.ExecContext(ctx, markOwner, sql.Named("type", mk.level), sql.Named("object", mk.name), sql.Named("mark", mk.value)); err != nil {
				return fmt.Errorf("mark %s %s as primeflow's: %w", mk.level, mk.name, err)
			}
		}
		_, err := q.ExecContext(ctx, recordScript, sql.Named("name", sc.name), sql.Named("checksum", sc.checksum()))
		return err
	}
	if sc.noTx {
		return run(conn)
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := run(tx); err != nil {
		return errors.Join(err, sqlrows.Rollback(tx))
	}
	return tx.Commit()
}

// mark is one ownership mark to set.
type mark struct{ level, name, value string }

// ownerMarks are the marks a script sets: on each object it creates (a
// table or type where it first runs, a module where its definition is), and
// on each adopted object it is the last running script to touch.
func ownerMarks(plan migration.Plan, script string, now time.Time) []mark {
	runs := map[string]bool{}
	for _, s := range plan.Scripts {
		runs[s.Name] = s.Runs
	}
	var out []mark
	for _, it := range plan.Items {
		var by string
		switch it.Action {
		case migration.Create:
			if it.Kind.IsModule() {
				by = it.DefinedIn()
			} else {
				for _, s := range it.Scripts {
					if runs[s] {
						by = s
						break
					}
				}
			}
		case migration.Adopt:
			for _, s := range it.Scripts {
				if runs[s] && (!it.Kind.IsModule() || s == it.DefinedIn()) {
					by = s
				}
			}
		}
		if by != script {
			continue
		}
		value := "created by " + script
		if it.Action == migration.Adopt {
			value = fmt.Sprintf("adopted by %s at %s", script, now.UTC().Format(time.RFC3339))
		}
		out = append(out, mark{level: levelType(it.Kind), name: it.Name, value: value})
	}
	return out
}

// levelType is the level-1 type sp_addextendedproperty names an object by.
func levelType(k migration.Kind) string {
	if k == migration.TableType {
		return "TYPE"
	}
	return strings.ToUpper(string(k))
}

// execer is what a connection and a transaction share.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// runBatches sends each batch as it is, without parameters, so SQL Server
// compiles it as a batch of its own (CREATE PROCEDURE must start one).
func runBatches(ctx context.Context, db execer, batches []batch) error {
	for _, b := range batches {
		for range b.count {
			if _, err := db.ExecContext(ctx, b.sql); err != nil {
				return fmt.Errorf("batch from line %d: %w", b.line, err)
			}
		}
	}
	return nil
}

// checkSchema fails when a script of sql/mssql has not been applied, or has
// changed since it was.
func checkSchema(ctx context.Context, db *sql.DB) error {
	scripts, err := loadScripts()
	if err != nil {
		return err
	}
	history, err := readHistory(ctx, db)
	if err != nil {
		return err
	}
	var missing []string
	for _, st := range migration.Status(plainScripts(scripts), history, true) {
		switch st.Status {
		case migration.Pending:
			missing = append(missing, st.Name)
		case migration.Changed, migration.Unrecorded:
			missing = append(missing, st.Name+" (changed since it was applied)")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("mssql: the database lacks %s: run primectl migrate", strings.Join(missing, ", "))
	}
	return nil
}

// script is one file of sql/mssql, split into batches.
type script struct {
	name    string // the file's base name, its key in dbo.primeflowSchemaMigrations
	text    string
	batches []batch
	noTx    bool
}

// checksum is what the history row records of the script.
func (sc script) checksum() string { return migration.Script{Text: sc.text}.Checksum() }

// batch is the text between two GO lines, and how many times it runs (GO n).
type batch struct {
	sql   string
	count int
	line  int // the script line the batch starts on
}

// loadScripts reads sql/mssql in name order.
func loadScripts() ([]script, error) {
	names, err := fs.Glob(schema.MSSQL, "mssql/*.sql")
	if err != nil {
		return nil, fmt.Errorf("mssql: scripts: %w", err)
	}
	slices.Sort(names)
	scripts := make([]script, 0, len(names))
	for _, name := range names {
		text, err := schema.MSSQL.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("mssql: scripts: %w", err)
		}
		sc, err := parseScript(path.Base(name), string(text))
		if err != nil {
			return nil, err
		}
		scripts = append(scripts, sc)
	}
	return scripts, nil
}

func parseScript(name, text string) (script, error) {
	batches, err := splitBatches(text)
	if err != nil {
		return script{}, fmt.Errorf("mssql: script %s: %w", name, err)
	}
	sc := script{name: name, text: text, batches: batches}
	for line := range strings.Lines(text) {
		if strings.TrimSpace(line) == noTxDirective {
			sc.noTx = true
		}
	}
	return sc, nil
}

// splitBatches splits a script the way sqlcmd does: a line holding only GO
// (any case, optionally a repeat count and a -- comment) ends a batch, unless
// it falls inside a block comment, a string or a quoted identifier. Blank
// batches are dropped; the others keep their text as written, so the line
// numbers SQL Server reports count from the batch's first line.
func splitBatches(text string) ([]batch, error) {
	var (
		out   []batch
		cur   strings.Builder
		lex   lexer
		start = 1
	)
	flush := func(count int) {
		if strings.TrimSpace(cur.String()) != "" {
			out = append(out, batch{sql: cur.String(), count: count, line: start})
		}
		cur.Reset()
	}
	lines := strings.Split(text, "\n")
	for i, raw := range lines {
		n := i + 1
		line := strings.TrimSuffix(raw, "\r")
		if lex.normal() {
			count, isGO, err := goLine(line)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			if isGO {
				flush(count)
				start = n + 1
				continue
			}
		}
		cur.WriteString(raw)
		if i < len(lines)-1 {
			cur.WriteByte('\n')
		}
		lex.scan(line, n)
	}
	if !lex.normal() {
		return nil, fmt.Errorf("line %d: %s never ends", lex.from, lex.what())
	}
	flush(1)
	return out, nil
}

// goLine reports whether line is a batch separator, and its repeat count.
func goLine(line string) (count int, isGO bool, err error) {
	if i := strings.Index(line, "--"); i >= 0 {
		line = line[:i]
	}
	f := strings.Fields(line)
	if len(f) == 0 || !strings.EqualFold(f[0], "GO") {
		return 0, false, nil
	}
	switch len(f) {
	case 1:
		return 1, true, nil
	case 2:
		n, err := strconv.Atoi(f[1])
		if err != nil || n < 1 {
			return 0, false, fmt.Errorf("GO takes a count of 1 or more, not %q", f[1])
		}
		return n, true, nil
	default:
		return 0, false, fmt.Errorf("GO takes at most a count, not %q", strings.Join(f[1:], " "))
	}
}

// lexer follows just enough T-SQL across lines to know whether a line starts
// in plain code: block comments (which nest), strings, and identifiers quoted
// with "" or [].
type lexer struct {
	depth int  // open /* */ comments
	quote byte // the byte that closes the string or identifier we are in
	from  int  // the line the open comment or quote began on
}

func (l *lexer) normal() bool { return l.depth == 0 && l.quote == 0 }

func (l *lexer) what() string {
	switch l.quote {
	case 0:
		return "a block comment"
	case '\'':
		return "a string"
	default:
		return "a quoted identifier"
	}
}

// scan advances over one line, numbered n.
func (l *lexer) scan(line string, n int) {
	for i := 0; i < len(line); i++ {
		c, next := line[i], byte(0)
		if i+1 < len(line) {
			next = line[i+1]
		}
		switch {
		case l.quote != 0:
			if c == l.quote {
				if next == l.quote {
					i++ // a doubled quote stands for itself
				} else {
					l.quote = 0
				}
			}
		case l.depth > 0:
			if c == '/' && next == '*' {
				l.depth++
				i++
			} else if c == '*' && next == '/' {
				l.depth--
				i++
			}
		case c == '-' && next == '-':
			return
		case c == '/' && next == '*':
			l.depth, l.from = 1, n
			i++
		case c == '\'' || c == '"':
			l.quote, l.from = c, n
		case c == '[':
			l.quote, l.from = ']', n
		}
	}
}
