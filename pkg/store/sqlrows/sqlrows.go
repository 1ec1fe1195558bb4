// Package sqlrows holds what the database/sql adapters (SQLite, SQL Server)
// share: the surface of a pool or transaction, and reading rows from it.
package sqlrows

import (
	"context"
	"database/sql"
	"errors"
)

// Querier is what *sql.DB and *sql.Tx share.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Scanner is a *sql.Row or *sql.Rows.
type Scanner interface{ Scan(dest ...any) error }

// All runs query on q and reads every row with scan. No rows is a nil list.
func All[T any](ctx context.Context, q Querier, query string, scan func(Scanner) (T, error), args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// Counts runs a query of (name, count) rows on q and returns the counts by
// name.
func Counts(ctx context.Context, q Querier, query string, args ...any) (map[string]int, error) {
	type count struct {
		name string
		n    int
	}
	rows, err := All(ctx, q, query, func(sc Scanner) (count, error) {
		var c count
		err := sc.Scan(&c.name, &c.n)
		return c, err
	}, args...)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int, len(rows))
	for _, c := range rows {
		out[c.name] = c.n
	}
	return out, nil
}

// Text reads a row of one text column.
func Text(sc Scanner) (string, error) {
	var t string
	err := sc.Scan(&t)
	return t, err
}

// Rollback rolls tx back after a failed transaction; a transaction the
// driver already ended is no further error.
func Rollback(tx *sql.Tx) error {
	if err := tx.Rollback(); !errors.Is(err, sql.ErrTxDone) {
		return err
	}
	return nil
}
