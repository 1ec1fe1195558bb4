package mssql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// The procedures behind the Resolutions methods (sql/mssql/082_resolutions.sql).
const (
	procResolve         = "dbo.spPrimeflowResolve"
	procListResolutions = "dbo.spPrimeflowListResolutions"
	procListSMS         = "dbo.spSmsQueueList"
	procListEmails      = "dbo.spPrimeflowEmailJobRegisteredList"
)

// Resolve applies a person's answer to a row that waits for one, and
// records it (spPrimeflowResolve).
func (s *Store) Resolve(ctx context.Context, r store.Resolution) (int64, error) {
	if err := r.Check(); err != nil {
		return 0, fmt.Errorf("mssql: resolve: %w", err)
	}
	var id sql.NullInt64
	var state sql.NullString
	var inFolder bool
	if err := s.q().QueryRowContext(ctx, procResolve, sql.Named("Table", string(r.Table)), sql.Named("ID", r.RowID),
		sql.Named("Action", string(r.Action)), sql.Named("By", r.By), sql.Named("Reason", sqlString(r.Reason)),
		sql.Named("NowUTC", sqlTime(r.ResolvedUTC))).Scan(&id, &state, &inFolder); err != nil {
		return 0, fmt.Errorf("mssql: resolve: %w", err)
	}
	if !id.Valid {
		return 0, fmt.Errorf("mssql: resolve: %w", store.Unresolved(r, state.Valid, state.String, inFolder))
	}
	return id.Int64, nil
}

// ListResolutions returns the resolutions of table's rows with these ids
// (spPrimeflowListResolutions).
func (s *Store) ListResolutions(ctx context.Context, table store.Resolvable, rowIDs []int64) ([]store.Resolution, error) {
	if len(rowIDs) == 0 {
		return nil, nil
	}
	if len(rowIDs) > store.MaxArchiveBatch {
		return nil, fmt.Errorf("mssql: list resolutions: %d ids, more than %d a call", len(rowIDs), store.MaxArchiveBatch)
	}
	return queryAll(ctx, s.q(), "list resolutions", procListResolutions, func(sc sqlrows.Scanner) (store.Resolution, error) {
		var r store.Resolution
		var table, action string
		err := sc.Scan(&r.ID, scanString{&table}, &r.RowID, scanString{&action}, scanString{&r.By}, scanString{&r.Reason},
			scanTime{&r.ResolvedUTC})
		r.Table, r.Action = store.Resolvable(table), store.ResolveAction(action)
		return r, err
	}, sql.Named("Table", string(table)), sql.Named("IDs", idList(rowIDs)))
}

// ListSMSQueue lists messages in a state (spSmsQueueList).
func (s *Store) ListSMSQueue(ctx context.Context, state store.InviteListState, limit int) ([]store.SMSMessage, error) {
	return queryAll(ctx, s.q(), "list sms queue", procListSMS, scanSMS, listArgs(state, limit)...)
}

// ListEmailReceipts lists receipts in a state (spPrimeflowEmailJobRegisteredList).
func (s *Store) ListEmailReceipts(ctx context.Context, state store.InviteListState, limit int) ([]store.EmailReceipt, error) {
	return queryAll(ctx, s.q(), "list email receipts", procListEmails, scanReceipt, listArgs(state, limit)...)
}

// listArgs are a list procedure's @State and @Top (100 when limit is not
// above zero).
func listArgs(state store.InviteListState, limit int) []any {
	if limit <= 0 {
		limit = 100
	}
	return []any{sql.Named("State", int(state)), sql.Named("Top", limit)}
}
