// Package sqlite is the embedded store: SQLite in WAL mode through
// modernc.org/sqlite (no cgo), with the schema in sql/sqlite.
//
// Writes go through one connection, so SQLite never answers SQLITE_BUSY
// among our own writers; reads use a pool of read-only connections, which WAL
// lets run beside the writer. Every commit is synced (synchronous=FULL), so a
// row the store says it wrote survives a power cut.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/migration"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
	schema "github.com/ethosbuilding/primeflow/sql"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Store is the SQLite adapter. The zero value is not usable; call Open.
type Store struct {
	write *sql.DB // one connection: every write and every transaction
	read  *sql.DB // read-only connections
	tx    *sql.Tx // set on a Store bound to a transaction by InTx
	// writeStmts and readStmts are the registered statements (see
	// prepared) prepared on write and read.
	writeStmts, readStmts map[string]*sql.Stmt
}

// prepared holds the statements the hot paths run, registered by prepare
// when the package initialises. Open prepares each once on every
// connection: modernc.org/sqlite parses a statement on every call
// otherwise, which costs about as much as inserting a row. Statements not
// registered run as they are.
var prepared = map[string]bool{}

// prepare registers query (a package-level constant) for preparing.
func prepare(query string) string {
	prepared[query] = true
	return query
}

// prepareAll prepares every registered statement on db.
func prepareAll(ctx context.Context, db *sql.DB) (map[string]*sql.Stmt, error) {
	stmts := make(map[string]*sql.Stmt, len(prepared))
	for q := range prepared {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			for _, st := range stmts {
				st.Close()
			}
			return nil, fmt.Errorf("sqlite: prepare %q: %w", q, err)
		}
		stmts[q] = st
	}
	return stmts, nil
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if need be) the database at path and brings its
// schema up to date. The database holds customers' names and numbers: it is
// its owner's only (ownerOnly), and so are its -wal and -shm files, which
// SQLite makes with the database's mode.
func Open(ctx context.Context, path string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	if err := ownerOnly(path); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	write, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	write.SetMaxOpenConns(1)
	write.SetConnMaxIdleTime(0)
	s := &Store{write: write}
	if err := s.migrate(ctx); err != nil {
		write.Close()
		return nil, err
	}
	read, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	read.SetMaxOpenConns(max(4, runtime.GOMAXPROCS(0)))
	s.read = read
	if s.writeStmts, err = prepareAll(ctx, write); err == nil {
		s.readStmts, err = prepareAll(ctx, read)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// ownerOnly makes the database at path, creating it empty if it is not
// there, readable and writable by its owner only (0600), and its -wal and
// -shm files too where they are: a database made before by a process with a
// wider umask is narrowed. A file of another owner, which this process may
// not change, is left as it is: that owner's mode is its own.
func ownerOnly(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o077 == 0 {
			continue
		}
		if err := os.Chmod(p, fi.Mode().Perm()&0o700); err != nil && !errors.Is(err, fs.ErrPermission) {
			return err
		}
	}
	return nil
}

func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "foreign_keys(ON)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Set("_txlock", "immediate")
	}
	return "file:" + path + "?" + q.Encode()
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.read.PingContext(ctx) }

// Close closes both pools (and with them the prepared statements).
func (s *Store) Close() error {
	return errors.Join(s.read.Close(), s.write.Close())
}

// InTx runs fn in one write transaction.
func (s *Store) InTx(ctx context.Context, fn func(store.Store) error) error {
	if s.tx != nil {
		return fn(s)
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	if err := fn(&Store{write: s.write, read: s.read, tx: tx, writeStmts: s.writeStmts, readStmts: s.readStmts}); err != nil {
		return errors.Join(err, sqlrows.Rollback(tx))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	return nil
}

// queryAll runs query on q and reads every row with scan; what names the
// call in the errors. No rows is a nil list.
func queryAll[T any](ctx context.Context, q sqlrows.Querier, what, query string, scan func(sqlrows.Scanner) (T, error), args ...any) ([]T, error) {
	out, err := sqlrows.All(ctx, q, query, scan, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", what, err)
	}
	return out, nil
}

// queryOne runs query on q for at most one row and reads it with scan;
// found is false when there is none. what names the call in the error.
func queryOne[T any](ctx context.Context, q sqlrows.Querier, what, query string, scan func(sqlrows.Scanner) (T, error), args ...any) (T, bool, error) {
	v, err := scan(q.QueryRowContext(ctx, query, args...))
	var zero T
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return zero, false, nil
	case err != nil:
		return zero, false, fmt.Errorf("sqlite: %s: %w", what, err)
	}
	return v, true, nil
}

// replaceRows makes the rows del deletes (with delArgs) exactly rows, in one
// transaction: del, then ins for each row with the arguments args gives it
// (now is the syncedUTC they carry; an error, such as a row with no id,
// writes nothing). what names the call in the error.
func replaceRows[T any](ctx context.Context, s *Store, what, del string, delArgs []any, ins string, rows []T,
	args func(r T, now string) ([]any, error)) error {
	now := formatTime(time.Now())
	err := s.inTx(ctx, func(tx *Store) error {
		if _, err := tx.tx.ExecContext(ctx, del, delArgs...); err != nil {
			return err
		}
		for _, r := range rows {
			a, err := args(r, now)
			if err != nil {
				return err
			}
			if _, err := tx.tx.ExecContext(ctx, ins, a...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: %s: %w", what, err)
	}
	return nil
}

// affectedOne checks the outcome of a statement that must change a row: its
// error, or store.ErrNotFound naming the row when it changed none.
func affectedOne(res sql.Result, err error, what, row string) error {
	if err != nil {
		return fmt.Errorf("sqlite: %s: %w", what, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("sqlite: %s: %w", what, err)
	}
	if n == 0 {
		return fmt.Errorf("sqlite: %s: %s: %w", what, row, store.ErrNotFound)
	}
	return nil
}

// insertRow runs a one-row INSERT into a table whose id is its rowid and
// returns the new id. It reads the rowid off the result: RETURNING makes
// SQLite keep a statement journal and buffer the row, and database/sql open
// a result set, which costs more CPU than the insert itself
// (BenchmarkInsertRowAgainstReturning).
func insertRow(ctx context.Context, q sqlrows.Querier, query string, args ...any) (int64, error) {
	res, err := q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// w is where writes go: the transaction, or the write connection.
func (s *Store) w() sqlrows.Querier {
	if s.tx != nil {
		return stmtQuerier{s.tx, s.writeStmts}
	}
	return stmtQuerier{s.write, s.writeStmts}
}

// r is where reads go: the transaction (to see its own writes), or the read pool.
func (s *Store) r() sqlrows.Querier {
	if s.tx != nil {
		return s.w()
	}
	return stmtQuerier{s.read, s.readStmts}
}

// stmtQuerier runs a registered statement prepared, and any other as it is,
// on a pool or a transaction.
type stmtQuerier struct {
	sqlrows.Querier
	stmts map[string]*sql.Stmt
}

func (sq stmtQuerier) stmt(ctx context.Context, query string) *sql.Stmt {
	st := sq.stmts[query]
	if tx, ok := sq.Querier.(*sql.Tx); ok && st != nil {
		return tx.StmtContext(ctx, st) // the statement prepared on the tx's connection
	}
	return st
}

func (sq stmtQuerier) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := sq.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return sq.Querier.ExecContext(ctx, query, args...)
}

func (sq stmtQuerier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := sq.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return sq.Querier.QueryContext(ctx, query, args...)
}

func (sq stmtQuerier) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := sq.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return sq.Querier.QueryRowContext(ctx, query, args...)
}

// inTx runs fn in the current transaction, or a new one.
func (s *Store) inTx(ctx context.Context, fn func(*Store) error) error {
	return s.InTx(ctx, func(tx store.Store) error { return fn(tx.(*Store)) })
}

// migrate applies, in name order, each sql/sqlite script not yet recorded
// in primeflowSchemaMigrations, each in one transaction with its history row
// and checksum. SQLite scripts run once: one changed after it was applied is
// not applied again (migrate --plan says so).
func (s *Store) migrate(ctx context.Context) error {
	if _, err := s.write.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS primeflowSchemaMigrations (
		name TEXT PRIMARY KEY, appliedUTC TEXT NOT NULL, checksum TEXT)`); err != nil {
		return fmt.Errorf("sqlite: migrations table: %w", err)
	}
	var hasChecksum bool
	if err := s.write.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pragma_table_info('primeflowSchemaMigrations')
		WHERE name = 'checksum')`).Scan(&hasChecksum); err != nil {
		return fmt.Errorf("sqlite: migrations table: %w", err)
	}
	if !hasChecksum { // a database migrated before checksums were kept
		if _, err := s.write.ExecContext(ctx, `ALTER TABLE primeflowSchemaMigrations ADD COLUMN checksum TEXT`); err != nil {
			return fmt.Errorf("sqlite: migrations table: %w", err)
		}
	}
	// Until checksums were kept, a row was named by the script's path in
	// sql (sqlite/001_webhook_log.sql); it is named by its file, as on SQL
	// Server.
	if _, err := s.write.ExecContext(ctx, `UPDATE primeflowSchemaMigrations SET name = substr(name, 8) WHERE name LIKE 'sqlite/%'`); err != nil {
		return fmt.Errorf("sqlite: migrations table: %w", err)
	}
	scripts, err := loadScripts()
	if err != nil {
		return err
	}
	for _, sc := range scripts {
		err := s.inTx(ctx, func(tx *Store) error {
			var checksum sql.NullString
			err := tx.tx.QueryRowContext(ctx, `SELECT checksum FROM primeflowSchemaMigrations WHERE name = ?`, sc.Name).Scan(&checksum)
			switch {
			case err == nil && !checksum.Valid:
				// Applied before checksums were kept; SQLite scripts are
				// never edited, so this is the text that ran.
				_, err = tx.tx.ExecContext(ctx, `UPDATE primeflowSchemaMigrations SET checksum = ? WHERE name = ?`, sc.Checksum(), sc.Name)
				return err
			case err == nil:
				return nil
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
			if _, err := tx.tx.ExecContext(ctx, sc.Text); err != nil {
				return err
			}
			_, err = tx.tx.ExecContext(ctx, `INSERT INTO primeflowSchemaMigrations (name, appliedUTC, checksum) VALUES (?, ?, ?)`,
				sc.Name, formatTime(time.Now()), sc.Checksum())
			return err
		})
		if err != nil {
			return fmt.Errorf("sqlite: migrate %s: %w", sc.Name, err)
		}
	}
	return nil
}

// loadScripts reads sql/sqlite in name order; a script is one batch.
func loadScripts() ([]migration.Script, error) {
	return migration.Read(schema.SQLite, "sqlite", func(text string) ([]string, error) { return []string{text}, nil })
}

// timeLayout is how times are stored: UTC, millisecond precision, sortable.
const timeLayout = "2006-01-02 15:04:05.000"

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// nullTime stores the zero time as NULL.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return formatTime(t)
}

// nullString stores the empty string as NULL.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// scanTime reads a stored time; NULL is the zero time.
type scanTime struct{ t *time.Time }

func (st scanTime) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		*st.t = time.Time{}
		return nil
	case string:
		t, err := time.ParseInLocation(timeLayout, v, time.UTC)
		*st.t = t
		return err
	case time.Time:
		*st.t = v.UTC()
		return nil
	default:
		return fmt.Errorf("sqlite: time column holds %T", v)
	}
}

// scanString reads a nullable text column; NULL is "".
type scanString struct{ s *string }

func (ss scanString) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		*ss.s = ""
	case string:
		*ss.s = v
	case []byte:
		*ss.s = string(v)
	default:
		*ss.s = fmt.Sprint(v)
	}
	return nil
}

// placeholders returns "?, ?, ?" for n values.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
