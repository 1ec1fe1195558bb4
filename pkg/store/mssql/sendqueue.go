package mssql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// sendQueue is a send queue's procedures (smsQueue's of 030_sms,
// ethTriageInviteQueue's of 061_triage_invites): each outcome procedure
// takes @ID and @Attempt, the claim it is recorded against, and returns
// rowsUpdated; get returns one row, which scan reads.
type sendQueue[T any] struct {
	what                        string
	sent, failed, released, get string
	scan                        func(sqlrows.Scanner) (T, error)
}

// setSent records a send the endpoint accepted (store.SendSent), or one a
// sender that only logs handed on (store.SendLogged): the sent procedure's
// @State.
func (q sendQueue[T]) setSent(ctx context.Context, s *Store, id int64, attempt int, state store.SendState, at time.Time) error {
	return q.update(ctx, s, "set "+q.what+" "+strings.ToLower(string(state)), id, attempt, q.sent,
		sql.Named("SentUTC", sqlTime(at)), sql.Named("State", string(state)))
}

// setFailed records a failed send: queued again from retryAt, or failed for
// good when it is zero.
func (q sendQueue[T]) setFailed(ctx context.Context, s *Store, id int64, attempt int, cause string, retryAt, at time.Time) error {
	return q.update(ctx, s, "set "+q.what+" failed", id, attempt, q.failed, sql.Named("Error", statusParam(cause)),
		sql.Named("RetryUTC", sqlTime(retryAt)), sql.Named("NowUTC", sqlTime(at)))
}

// release gives back a claim that posted nothing.
func (q sendQueue[T]) release(ctx context.Context, s *Store, id int64, attempt int, at time.Time) error {
	return q.update(ctx, s, "release "+q.what, id, attempt, q.released, sql.Named("NowUTC", sqlTime(at)))
}

// deferRow gives back a claim whose row cannot be sent yet, due at until:
// the release procedure with @RetryUTC and @Error.
func (q sendQueue[T]) deferRow(ctx context.Context, s *Store, id int64, attempt int, cause string, until, at time.Time) error {
	return q.update(ctx, s, "defer "+q.what, id, attempt, q.released, sql.Named("NowUTC", sqlTime(at)),
		sql.Named("RetryUTC", sqlTime(until)), sql.Named("Error", statusParam(cause)))
}

// update calls an outcome procedure for the claim (id, attempt); no row
// updated is ErrNotFound for an unknown id, else ErrClaimLost.
func (q sendQueue[T]) update(ctx context.Context, s *Store, what string, id int64, attempt int, proc string, args ...any) error {
	var n int
	args = append([]any{sql.Named("ID", id), sql.Named("Attempt", attempt)}, args...)
	if err := s.q().QueryRowContext(ctx, proc, args...).Scan(&n); err != nil {
		return fmt.Errorf("mssql: %s %d: %w", what, id, err)
	}
	if n == 1 {
		return nil
	}
	if _, err := q.getRow(ctx, s, id); err != nil {
		return fmt.Errorf("mssql: %s: %w", what, err)
	}
	return fmt.Errorf("mssql: %s %d (attempt %d): %w", what, id, attempt, store.ErrClaimLost)
}

// getRow returns one row, or ErrNotFound.
func (q sendQueue[T]) getRow(ctx context.Context, s *Store, id int64) (T, error) {
	row, err := q.scan(s.q().QueryRowContext(ctx, q.get, sql.Named("ID", id)))
	if errors.Is(err, sql.ErrNoRows) {
		return row, fmt.Errorf("mssql: get %s %d: %w", q.what, id, store.ErrNotFound)
	}
	if err != nil {
		return row, fmt.Errorf("mssql: get %s %d: %w", q.what, id, err)
	}
	return row, nil
}

// nextDue calls a send queue's next-due procedure, which returns dueUTC.
func (s *Store) nextDue(ctx context.Context, what, proc string) (time.Time, bool, error) {
	var at time.Time
	if err := s.q().QueryRowContext(ctx, proc).Scan(scanTime{&at}); err != nil {
		return time.Time{}, false, fmt.Errorf("mssql: %s: %w", what, err)
	}
	return at, !at.IsZero(), nil
}

// oldestWaiting calls a send queue's oldest-waiting procedure, which
// returns queuedUTC.
func (s *Store) oldestWaiting(ctx context.Context, what, proc string) (time.Time, bool, error) {
	var at time.Time
	if err := s.q().QueryRowContext(ctx, proc).Scan(scanTime{&at}); err != nil {
		return time.Time{}, false, fmt.Errorf("mssql: %s: %w", what, err)
	}
	return at, !at.IsZero(), nil
}

// countStates calls a send queue's count procedure, which returns (state,
// n) rows; every state is in the answer, 0 when none is in it.
func (s *Store) countStates(ctx context.Context, what, proc string) (map[store.SendState]int, error) {
	out := store.SendCounts()
	rows, err := s.q().QueryContext(ctx, proc)
	if err != nil {
		return nil, fmt.Errorf("mssql: %s: %w", what, err)
	}
	defer rows.Close()
	for rows.Next() {
		var state string
		var n int
		if err := rows.Scan(&state, &n); err != nil {
			return nil, fmt.Errorf("mssql: %s: %w", what, err)
		}
		out[store.SendState(state)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mssql: %s: %w", what, err)
	}
	return out, nil
}
