package mssql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// The procedures behind the SMSQueue methods (sql/mssql/030_sms.sql).
const (
	procSMSInsert    = "dbo.spSmsQueueInsert"
	procSMSClaim     = "dbo.spSmsQueueClaim"
	procSMSSetSent   = "dbo.spSmsQueueSetSent"
	procSMSSetFailed = "dbo.spSmsQueueSetFailed"
	procSMSRelease   = "dbo.spSmsQueueRelease"
	procSMSGet       = "dbo.spSmsQueueGet"
	procSMSNextDue   = "dbo.spSmsQueueNextDue"
	procSMSCount     = "dbo.spSmsQueueCount"
	procSMSOldest    = "dbo.spSmsQueueOldestWaiting"
)

// scanSMS reads the columns the SMS procedures return, in their order.
func scanSMS(r sqlrows.Scanner) (store.SMSMessage, error) {
	var m store.SMSMessage
	var state string
	err := r.Scan(&m.ID, scanString{&m.Recipient}, scanString{&m.Body}, scanString{&m.Source},
		scanString{&m.DedupeKey}, scanString{&state}, &m.Attempts, scanTime{&m.NextAttemptUTC},
		scanTime{&m.ClaimedUntilUTC}, scanString{&m.LastError}, scanTime{&m.QueuedUTC},
		scanTime{&m.SentUTC}, scanTime{&m.FailedUTC}, scanTime{&m.UpdatedUTC})
	m.State = store.SendState(state)
	return m, err
}

// QueueSMS queues a message, once for a dedupe key (spSmsQueueInsert).
func (s *Store) QueueSMS(ctx context.Context, m store.NewSMS) (int64, bool, error) {
	var id int64
	var queued bool
	err := s.q().QueryRowContext(ctx, procSMSInsert,
		sql.Named("Recipient", m.Recipient), sql.Named("Body", m.Body),
		sql.Named("Source", sqlString(m.Source)), sql.Named("DedupeKey", sqlString(m.DedupeKey)),
		sql.Named("NowUTC", sqlTime(m.Now))).Scan(&id, &queued)
	if err != nil {
		return 0, false, fmt.Errorf("mssql: queue sms: %w", err)
	}
	return id, queued, nil
}

// ClaimSMS claims the messages due at now (spSmsQueueClaim).
func (s *Store) ClaimSMS(ctx context.Context, now time.Time, lease time.Duration, maxAttempts, limit int) ([]store.SMSMessage, error) {
	if limit <= 0 {
		return nil, nil
	}
	return queryAll(ctx, s.q(), "claim sms", procSMSClaim, scanSMS,
		sql.Named("NowUTC", sqlTime(now)), sql.Named("LeaseUntilUTC", sqlTime(now.Add(lease))),
		sql.Named("MaxAttempts", maxAttempts), sql.Named("Top", limit))
}

// smsQueue is smsQueue's procedures.
var smsQueue = sendQueue[store.SMSMessage]{what: "sms", sent: procSMSSetSent, failed: procSMSSetFailed,
	released: procSMSRelease, get: procSMSGet, scan: scanSMS}

// SetSMSSent marks a message Sent, if it still holds the claim
// (spSmsQueueSetSent).
func (s *Store) SetSMSSent(ctx context.Context, id int64, attempt int, at time.Time) error {
	return smsQueue.setSent(ctx, s, id, attempt, store.SendSent, at)
}

// SetSMSLogged marks a message Logged, if it still holds the claim
// (spSmsQueueSetSent @State = 'Logged').
func (s *Store) SetSMSLogged(ctx context.Context, id int64, attempt int, at time.Time) error {
	return smsQueue.setSent(ctx, s, id, attempt, store.SendLogged, at)
}

// SetSMSFailed records a failed send against its claim (spSmsQueueSetFailed).
func (s *Store) SetSMSFailed(ctx context.Context, id int64, attempt int, cause string, retryAt, at time.Time) error {
	return smsQueue.setFailed(ctx, s, id, attempt, cause, retryAt, at)
}

// ReleaseSMS gives back a claim that posted nothing (spSmsQueueRelease).
func (s *Store) ReleaseSMS(ctx context.Context, id int64, attempt int, at time.Time) error {
	return smsQueue.release(ctx, s, id, attempt, at)
}

// DeferSMS gives back a claim whose message the endpoint did not take, due
// at until (spSmsQueueRelease @RetryUTC, @Error).
func (s *Store) DeferSMS(ctx context.Context, id int64, attempt int, cause string, until, at time.Time) error {
	return smsQueue.deferRow(ctx, s, id, attempt, cause, until, at)
}

// callUpdating calls a procedure that returns rowsUpdated; 0 is ErrNotFound.
func (s *Store) callUpdating(ctx context.Context, what string, id any, proc string, args ...any) error {
	var n int
	if err := s.q().QueryRowContext(ctx, proc, args...).Scan(&n); err != nil {
		return fmt.Errorf("mssql: %s: %w", what, err)
	}
	if n == 0 {
		return fmt.Errorf("mssql: %s: %v: %w", what, id, store.ErrNotFound)
	}
	return nil
}

// GetSMS returns one message (spSmsQueueGet).
func (s *Store) GetSMS(ctx context.Context, id int64) (store.SMSMessage, error) {
	return smsQueue.getRow(ctx, s, id)
}

// NextSMSDue returns when the next message is due (spSmsQueueNextDue).
func (s *Store) NextSMSDue(ctx context.Context) (time.Time, bool, error) {
	return s.nextDue(ctx, "next sms due", procSMSNextDue)
}

// OldestSMSWaiting returns when the oldest message not sent yet was queued
// (spSmsQueueOldestWaiting).
func (s *Store) OldestSMSWaiting(ctx context.Context) (time.Time, bool, error) {
	return s.oldestWaiting(ctx, "oldest sms waiting", procSMSOldest)
}

// CountSMS counts the messages in each state (spSmsQueueCount).
func (s *Store) CountSMS(ctx context.Context) (map[store.SendState]int, error) {
	return s.countStates(ctx, "count sms", procSMSCount)
}
