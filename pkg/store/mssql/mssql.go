// Package mssql is the SQL Server store: github.com/microsoft/go-mssqldb
// calling the stored procedures in sql/mssql, one procedure a store method.
// Migrate applies those scripts (`primectl migrate`); Open refuses a database
// that is missing any of them.
//
// Layout: this file holds the connection, transactions and value
// conversions; one file a subject holds its methods (webhooklog.go,
// jobreference.go), the way the scripts hold one subject a file.
package mssql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
	mssql "github.com/microsoft/go-mssqldb"
	"github.com/microsoft/go-mssqldb/msdsn"
)

// Store is the SQL Server adapter. The zero value is not usable; call Open.
type Store struct {
	db *sql.DB
	tx *sql.Tx // set on a Store bound to a transaction by InTx
}

var _ store.Store = (*Store)(nil)

// Open connects to the database the DSN names (go-mssqldb's "sqlserver"
// driver: sqlserver://user:password@host?database=name, or the ADO form) and
// checks that every script in sql/mssql has been applied.
func Open(ctx context.Context, dsn string) (*Store, error) {
	c, err := connector(dsn)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(c)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("mssql: connect: %w", err)
	}
	if err := checkSchema(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	return &Store{db: db}, nil
}

// connector is go-mssqldb's connector for dsn, set the way the adapter
// sends its parameters.
func connector(dsn string) (*mssql.Connector, error) {
	cfg, err := msdsn.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("mssql: parse dsn: %w", err)
	}
	// The adapter orders GUID bytes itself (guid.go); the driver's optional
	// conversion would reorder them a second time.
	cfg.Encoding.GuidConversion = false
	return mssql.NewConnectorConfig(cfg), nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("mssql: ping: %w", err)
	}
	return nil
}

// Close closes the connection pool.
func (s *Store) Close() error {
	return s.db.Close()
}

// InTx runs fn in one transaction; on a Store already in one it runs fn there.
func (s *Store) InTx(ctx context.Context, fn func(store.Store) error) error {
	if s.tx != nil {
		return fn(s)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("mssql: begin: %w", err)
	}
	if err := fn(&Store{db: s.db, tx: tx}); err != nil {
		return errors.Join(err, sqlrows.Rollback(tx))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("mssql: commit: %w", err)
	}
	return nil
}

// inTx runs fn in the current transaction, or a new one.
func (s *Store) inTx(ctx context.Context, fn func(*Store) error) error {
	return s.InTx(ctx, func(tx store.Store) error { return fn(tx.(*Store)) })
}

// queryAll calls proc (or runs a query) on q and reads every row with scan;
// what names the call in the errors. No rows is a nil list.
func queryAll[T any](ctx context.Context, q sqlrows.Querier, what, proc string, scan func(sqlrows.Scanner) (T, error), args ...any) ([]T, error) {
	out, err := sqlrows.All(ctx, q, proc, scan, args...)
	if err != nil {
		return nil, fmt.Errorf("mssql: %s: %w", what, err)
	}
	return out, nil
}

// q is where statements go: the transaction, or the pool.
func (s *Store) q() sqlrows.Querier {
	if s.tx != nil {
		return s.tx
	}
	return s.db
}

// scanTime reads a DATETIME2 column; NULL is the zero time. DATETIME2 has no
// zone: the driver labels it with the DSN's time zone (UTC unless set), so the
// clock reading is taken as the UTC it was stored as.
type scanTime struct{ t *time.Time }

func (st scanTime) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		*st.t = time.Time{}
	case time.Time:
		*st.t = time.Date(v.Year(), v.Month(), v.Day(), v.Hour(), v.Minute(), v.Second(), v.Nanosecond(), time.UTC)
	default:
		return fmt.Errorf("mssql: time column holds %T", v)
	}
	return nil
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
		return fmt.Errorf("mssql: text column holds %T", v)
	}
	return nil
}
