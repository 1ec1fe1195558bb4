package mssql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

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
);`

const selectApplied = `IF OBJECT_ID(N'dbo.primeflowSchemaMigrations', N'U') IS NOT NULL
    SELECT name FROM dbo.primeflowSchemaMigrations;`

// Migrate brings the database's schema up to date: it applies, in name order,
// each sql/mssql script not yet recorded in dbo.primeflowSchemaMigrations,
// each in one transaction (unless it carries noTxDirective), and records it.
// Running it again applies nothing; two running at once take turns.
func Migrate(ctx context.Context, db *sql.DB) error {
	scripts, err := loadScripts()
	if err != nil {
		return err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("mssql: migrate: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, sessionSettings); err != nil {
		return fmt.Errorf("mssql: migrate: session settings: %w", err)
	}
	if err := lockMigrations(ctx, conn); err != nil {
		return err
	}
	defer unlockMigrations(ctx, conn)
	if _, err := conn.ExecContext(ctx, createMigrationsTable); err != nil {
		return fmt.Errorf("mssql: migrate: migrations table: %w", err)
	}
	applied, err := appliedScripts(ctx, conn)
	if err != nil {
		return err
	}
	for _, sc := range scripts {
		if applied[sc.name] {
			continue
		}
		if err := applyScript(ctx, conn, sc); err != nil {
			return fmt.Errorf("mssql: migrate %s: %w", sc.name, err)
		}
	}
	return nil
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

// appliedScripts returns the names recorded in dbo.primeflowSchemaMigrations.
func appliedScripts(ctx context.Context, db interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}) (map[string]bool, error) {
	rows, err := db.QueryContext(ctx, selectApplied)
	if err != nil {
		return nil, fmt.Errorf("mssql: applied scripts: %w", err)
	}
	defer rows.Close()
	applied := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("mssql: applied scripts: %w", err)
		}
		applied[name] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mssql: applied scripts: %w", err)
	}
	return applied, nil
}

func applyScript(ctx context.Context, conn *sql.Conn, sc script) error {
	const record = `INSERT INTO dbo.primeflowSchemaMigrations (name) VALUES (@name);`
	if sc.noTx {
		if err := runBatches(ctx, conn, sc.batches); err != nil {
			return err
		}
		_, err := conn.ExecContext(ctx, record, sql.Named("name", sc.name))
		return err
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	err = runBatches(ctx, tx, sc.batches)
	if err == nil {
		_, err = tx.ExecContext(ctx, record, sql.Named("name", sc.name))
	}
	if err != nil {
		return errors.Join(err, sqlrows.Rollback(tx))
	}
	return tx.Commit()
}

// runBatches sends each batch as it is, without parameters, so SQL Server
// compiles it as a batch of its own (CREATE PROCEDURE must start one).
func runBatches(ctx context.Context, db interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}, batches []batch) error {
	for _, b := range batches {
		for range b.count {
			if _, err := db.ExecContext(ctx, b.sql); err != nil {
				return fmt.Errorf("batch from line %d: %w", b.line, err)
			}
		}
	}
	return nil
}

// checkSchema fails when a script of sql/mssql has not been applied.
func checkSchema(ctx context.Context, db *sql.DB) error {
	scripts, err := loadScripts()
	if err != nil {
		return err
	}
	applied, err := appliedScripts(ctx, db)
	if err != nil {
		return err
	}
	var missing []string
	for _, sc := range scripts {
		if !applied[sc.name] {
			missing = append(missing, sc.name)
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
	batches []batch
	noTx    bool
}

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
	sc := script{name: name, batches: batches}
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
