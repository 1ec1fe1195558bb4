package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// smsColumns are the smsQueue columns scanSMS reads, in its order.
const smsColumns = `ID, Recipient, Body, Source, DedupeKey, State, Attempts, NextAttemptUTC,
	ClaimedUntilUTC, LastError, QueuedUTC, SentUTC, FailedUTC, UpdatedUTC`

// lapsedOnLastAttempt is LastError of a message whose last claim lapsed.
const lapsedOnLastAttempt = "the claim of the last attempt lapsed: the sender stopped before it recorded the outcome"

func scanSMS(r sqlrows.Scanner) (store.SMSMessage, error) {
	var m store.SMSMessage
	var state string
	err := r.Scan(&m.ID, &m.Recipient, &m.Body, scanString{&m.Source}, scanString{&m.DedupeKey}, &state, &m.Attempts,
		scanTime{&m.NextAttemptUTC}, scanTime{&m.ClaimedUntilUTC}, scanString{&m.LastError}, scanTime{&m.QueuedUTC},
		scanTime{&m.SentUTC}, scanTime{&m.FailedUTC}, scanTime{&m.UpdatedUTC})
	m.State = store.SendState(state)
	return m, err
}

// QueueSMS queues a message, once for a dedupe key.
func (s *Store) QueueSMS(ctx context.Context, m store.NewSMS) (int64, bool, error) {
	var id int64
	var queued bool
	err := s.inTx(ctx, func(tx *Store) error {
		var err error
		id, queued, err = tx.queueSMS(ctx, m)
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("sqlite: queue sms: %w", err)
	}
	return id, queued, nil
}

// queueSMS runs inside a transaction. A dedupe key whose message was
// archived (smsArchivedDedupeKey) stays used: nothing is queued, and the
// archived message's id is returned.
func (s *Store) queueSMS(ctx context.Context, m store.NewSMS) (int64, bool, error) {
	now := m.Now
	if now.IsZero() {
		now = time.Now()
	}
	at := formatTime(now)
	var id int64
	if m.DedupeKey != "" {
		err := s.tx.QueryRowContext(ctx, `SELECT SmsQueueID FROM smsArchivedDedupeKey WHERE DedupeKey = ?`, m.DedupeKey).Scan(&id)
		if err == nil {
			return id, false, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return 0, false, err
		}
	}
	err := s.tx.QueryRowContext(ctx, `INSERT INTO smsQueue
		(Recipient, Body, Source, DedupeKey, State, Attempts, NextAttemptUTC, QueuedUTC, UpdatedUTC)
		VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?)
		ON CONFLICT DO NOTHING RETURNING ID`,
		m.Recipient, m.Body, nullString(m.Source), nullString(m.DedupeKey), string(store.SendQueued), at, at, at).Scan(&id)
	if err == nil {
		return id, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) || m.DedupeKey == "" {
		return 0, false, err
	}
	err = s.tx.QueryRowContext(ctx, `SELECT ID FROM smsQueue WHERE DedupeKey = ?`, m.DedupeKey).Scan(&id)
	return id, false, err
}

// ClaimSMS claims the messages due at now.
func (s *Store) ClaimSMS(ctx context.Context, now time.Time, lease time.Duration, maxAttempts, limit int) ([]store.SMSMessage, error) {
	out, err := claimSendQueue(ctx, s, limit, scanSMS, func(m store.SMSMessage) int64 { return m.ID }, `UPDATE smsQueue
			SET State = ?, FailedUTC = ?, UpdatedUTC = ?, ClaimedUntilUTC = NULL, LastError = ?
			WHERE State = ? AND ClaimedUntilUTC <= ? AND Attempts >= ?`, `UPDATE smsQueue
			SET State = ?, Attempts = Attempts + 1, ClaimedUntilUTC = ?, UpdatedUTC = ?
			WHERE ID IN (SELECT ID FROM smsQueue
				WHERE (State = ? AND NextAttemptUTC <= ?) OR (State = ? AND ClaimedUntilUTC <= ?)
				ORDER BY ID LIMIT ?)
			RETURNING `+smsColumns, now, lease, maxAttempts)
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim sms: %w", err)
	}
	return out, nil
}

// claimSendQueue claims up to limit rows of a send queue in one
// transaction: lapse fails the rows whose lapsed claim was the maxAttempts-th
// (its parameters: Failed, now, now, the error, Sending, now, maxAttempts),
// then claim claims the due ones and returns them (Sending, the lease's end,
// now, Queued, now, Sending, now, limit), which scan reads. They come back
// in the order of their ids.
func claimSendQueue[T any](ctx context.Context, s *Store, limit int, scan func(sqlrows.Scanner) (T, error), id func(T) int64,
	lapse, claim string, now time.Time, lease time.Duration, maxAttempts int) ([]T, error) {
	if limit <= 0 {
		return nil, nil
	}
	at, until := formatTime(now), formatTime(now.Add(lease))
	var out []T
	err := s.inTx(ctx, func(tx *Store) error {
		if _, err := tx.tx.ExecContext(ctx, lapse, string(store.SendFailed), at, at, lapsedOnLastAttempt,
			string(store.SendSending), at, maxAttempts); err != nil {
			return err
		}
		var err error
		out, err = sqlrows.All(ctx, tx.tx, claim, scan, string(store.SendSending), until, at,
			string(store.SendQueued), at, string(store.SendSending), at, limit)
		return err
	})
	if err != nil {
		return nil, err
	}
	// RETURNING gives the rows in no set order.
	slices.SortFunc(out, func(a, b T) int { return cmp.Compare(id(a), id(b)) })
	return out, nil
}

// smsTable is smsQueue as a send queue's table.
var smsTable = sendTable{what: "sms", table: "smsQueue", exists: func(ctx context.Context, s *Store, id int64) error {
	_, err := s.GetSMS(ctx, id)
	return err
}}

// SetSMSSent marks a message Sent, if it still holds the claim.
func (s *Store) SetSMSSent(ctx context.Context, id int64, attempt int, at time.Time) error {
	return smsTable.setDone(ctx, s, id, attempt, store.SendSent, at)
}

// SetSMSLogged marks a message Logged (handed to the log, never sent), if
// it still holds the claim.
func (s *Store) SetSMSLogged(ctx context.Context, id int64, attempt int, at time.Time) error {
	return smsTable.setDone(ctx, s, id, attempt, store.SendLogged, at)
}

// SetSMSFailed records a failed send against its claim: Queued again from
// retryAt, or Failed.
func (s *Store) SetSMSFailed(ctx context.Context, id int64, attempt int, cause string, retryAt, at time.Time) error {
	return smsTable.setFailed(ctx, s, id, attempt, cause, retryAt, at)
}

// ReleaseSMS gives back a claim that posted nothing, its attempt uncounted.
func (s *Store) ReleaseSMS(ctx context.Context, id int64, attempt int, at time.Time) error {
	return smsTable.release(ctx, s, id, attempt, at)
}

// DeferSMS gives back a claim whose message the endpoint did not take: due
// at until, its attempt uncounted, cause its last error.
func (s *Store) DeferSMS(ctx context.Context, id int64, attempt int, cause string, until, at time.Time) error {
	return smsTable.deferRow(ctx, s, id, attempt, cause, until, at)
}

// sendTable is a send queue's table (smsQueue, ethTriageInviteQueue). Both
// have the same columns (State, Attempts, SentUTC … in smsQueue, state,
// attempts, sentUTC … in ethTriageInviteQueue: SQLite reads a name in any
// case), so one set of outcome statements serves both; each is recorded
// against the claim (the row's id and attempt) and changes nothing when
// the row no longer holds it.
type sendTable struct {
	what, table string
	// exists returns ErrNotFound for an unknown id.
	exists func(ctx context.Context, s *Store, id int64) error
}

// setDone marks a row Sent, or Logged: sent, or handed to the log.
func (q sendTable) setDone(ctx context.Context, s *Store, id int64, attempt int, state store.SendState, at time.Time) error {
	t := formatTime(at)
	return q.update(ctx, s, "set "+q.what+" "+strings.ToLower(string(state)), id, attempt,
		`state = ?, sentUTC = ?, updatedUTC = ?, claimedUntilUTC = NULL`, string(state), t, t)
}

// setFailed records a failed send: Queued again from retryAt, or Failed
// when it is zero, the cause cut to MaxStatusLen.
func (q sendTable) setFailed(ctx context.Context, s *Store, id int64, attempt int, cause string, retryAt, at time.Time) error {
	t := formatTime(at)
	cause = store.TruncateStatus(cause)
	if retryAt.IsZero() {
		return q.update(ctx, s, "set "+q.what+" failed", id, attempt,
			`state = ?, failedUTC = ?, updatedUTC = ?, claimedUntilUTC = NULL, lastError = ?`,
			string(store.SendFailed), t, t, cause)
	}
	return q.update(ctx, s, "set "+q.what+" failed", id, attempt,
		`state = ?, nextAttemptUTC = ?, updatedUTC = ?, claimedUntilUTC = NULL, lastError = ?`,
		string(store.SendQueued), formatTime(retryAt), t, cause)
}

// release gives back a claim that posted nothing, its attempt uncounted.
func (q sendTable) release(ctx context.Context, s *Store, id int64, attempt int, at time.Time) error {
	return q.update(ctx, s, "release "+q.what, id, attempt,
		`state = ?, attempts = attempts - 1, updatedUTC = ?, claimedUntilUTC = NULL`,
		string(store.SendQueued), formatTime(at))
}

// deferRow gives back a claim whose row cannot be sent yet: due at until,
// its attempt uncounted, cause (cut to MaxStatusLen) its last error.
func (q sendTable) deferRow(ctx context.Context, s *Store, id int64, attempt int, cause string, until, at time.Time) error {
	return q.update(ctx, s, "defer "+q.what, id, attempt,
		`state = ?, attempts = attempts - 1, nextAttemptUTC = ?, lastError = ?, updatedUTC = ?, claimedUntilUTC = NULL`,
		string(store.SendQueued), formatTime(until), store.TruncateStatus(cause), formatTime(at))
}

// update runs UPDATE table SET set on the row while it holds the claim:
// args, then the row's id, Sending and attempt. No row updated is the error
// exists returns for the row (ErrNotFound for an unknown id), else
// ErrClaimLost.
func (q sendTable) update(ctx context.Context, s *Store, what string, id int64, attempt int, set string, args ...any) error {
	n, err := s.execCount(ctx, `UPDATE `+q.table+` SET `+set+` WHERE id = ? AND state = ? AND attempts = ?`,
		append(args, id, string(store.SendSending), attempt)...)
	if err != nil {
		return fmt.Errorf("sqlite: %s %d: %w", what, id, err)
	}
	if n == 1 {
		return nil
	}
	if err := q.exists(ctx, s, id); err != nil {
		return fmt.Errorf("sqlite: %s: %w", what, err)
	}
	return fmt.Errorf("sqlite: %s %d (attempt %d): %w", what, id, attempt, store.ErrClaimLost)
}

// GetSMS returns one message.
func (s *Store) GetSMS(ctx context.Context, id int64) (store.SMSMessage, error) {
	m, err := scanSMS(s.r().QueryRowContext(ctx, `SELECT `+smsColumns+` FROM smsQueue WHERE ID = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return m, fmt.Errorf("sqlite: get sms %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return m, fmt.Errorf("sqlite: get sms %d: %w", id, err)
	}
	return m, nil
}

// NextSMSDue returns when the next message is due or the next claim lapses.
func (s *Store) NextSMSDue(ctx context.Context) (time.Time, bool, error) {
	return s.nextDue(ctx, "next sms due", `SELECT MIN(t) FROM (
		SELECT MIN(NextAttemptUTC) AS t FROM smsQueue WHERE State = ?
		UNION ALL
		SELECT MIN(ClaimedUntilUTC) FROM smsQueue WHERE State = ?)`)
}

// nextDue runs a send queue's query for the earliest due time, given Queued
// and Sending.
func (s *Store) nextDue(ctx context.Context, what, query string) (time.Time, bool, error) {
	var at time.Time
	if err := s.r().QueryRowContext(ctx, query, string(store.SendQueued), string(store.SendSending)).Scan(scanTime{&at}); err != nil {
		return time.Time{}, false, fmt.Errorf("sqlite: %s: %w", what, err)
	}
	return at, !at.IsZero(), nil
}

// OldestSMSWaiting returns when the oldest message not sent yet was queued.
func (s *Store) OldestSMSWaiting(ctx context.Context) (time.Time, bool, error) {
	return s.oldestWaiting(ctx, "oldest sms waiting", `SELECT MIN(QueuedUTC) FROM smsQueue WHERE State IN ('Queued', 'Sending')`)
}

// oldestWaiting runs a send queue's query for the earliest queue time of
// the rows not sent yet. The query names the states as the table's partial
// index on them does (030's IX_smsQueue_pending, 061's
// IX_ethTriageInviteQueue_unsent), so that SQLite reads that index alone.
func (s *Store) oldestWaiting(ctx context.Context, what, query string) (time.Time, bool, error) {
	var at time.Time
	if err := s.r().QueryRowContext(ctx, query).Scan(scanTime{&at}); err != nil {
		return time.Time{}, false, fmt.Errorf("sqlite: %s: %w", what, err)
	}
	return at, !at.IsZero(), nil
}

// CountSMS counts the messages in each state.
func (s *Store) CountSMS(ctx context.Context) (map[store.SendState]int, error) {
	return s.countStates(ctx, "count sms", `SELECT State, COUNT(*) FROM smsQueue GROUP BY State`)
}

// countStates runs a send queue's (state, count) query; every state is in
// the answer, 0 when none is in it.
func (s *Store) countStates(ctx context.Context, what, query string) (map[store.SendState]int, error) {
	out := store.SendCounts()
	rows, err := s.r().QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", what, err)
	}
	defer rows.Close()
	for rows.Next() {
		var state string
		var n int
		if err := rows.Scan(&state, &n); err != nil {
			return nil, fmt.Errorf("sqlite: %s: %w", what, err)
		}
		out[store.SendState(state)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", what, err)
	}
	return out, nil
}
