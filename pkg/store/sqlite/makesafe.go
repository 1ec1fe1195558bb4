package sqlite

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

// UpsertMakeSafePhoneCallFromJob is the rule of
// spMakesafeUpsertPhoneCallFromPrimeJob, run in Go in one write transaction.
// SQLite has one writer, so the check for an existing call and the insert
// cannot interleave with another detection; the unique index on PrimeJobID
// would refuse a second row regardless.
func (s *Store) UpsertMakeSafePhoneCallFromJob(ctx context.Context, d store.MakesafeDetection) (store.MakesafeOutcome, error) {
	var out store.MakesafeOutcome
	jobID := strings.ToLower(d.JobID)
	now := d.Now
	if now.IsZero() {
		now = time.Now()
	}
	err := s.inTx(ctx, func(tx *Store) error {
		var addressLine1, suburb, state, postcode string
		err := tx.tx.QueryRowContext(ctx, `SELECT jobNumber, createdAt, addressLine1, suburb, state, postcode
			FROM primeJobs WHERE jobId = ?`, jobID).Scan(scanString{&out.JobNumber}, scanTime{&out.JobCreatedUTC},
			scanString{&addressLine1}, scanString{&suburb}, scanString{&state}, scanString{&postcode})
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		out.JobFound = true
		out.OutsideBusinessHours = store.IsOutsideBusinessHours(out.JobCreatedUTC)
		if err := tx.tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM primeAllocations
			WHERE jobId = ? AND isMakeSafe = 1)`, jobID).Scan(&out.HasMakeSafe); err != nil {
			return err
		}
		err = tx.tx.QueryRowContext(ctx, `SELECT ID FROM makesafePhoneCall WHERE PrimeJobID = ?`, jobID).Scan(&out.PhoneCallID)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if out.PhoneCallID == 0 && out.HasMakeSafe && out.OutsideBusinessHours {
			if strings.TrimSpace(d.SMSRecipient) == "" {
				// The spec's callers name nobody: the configured default.
				if d.SMSRecipient, _, err = tx.GetSetting(ctx, store.SettingMakesafeSMSRecipient); err != nil {
					return err
				}
			}
			return tx.raisePhoneCall(ctx, d, jobID, now, &out, addressLine1, suburb, state, postcode)
		}
		if d.QueueChecks && !out.HasMakeSafe && out.PhoneCallID == 0 {
			from := d.ChecksFrom
			if from.IsZero() {
				from = now
			}
			checks := d.Checks
			if len(checks) == 0 {
				checks = store.DefaultMakesafeLadder
			}
			return tx.queueChecks(ctx, jobID, checks, from, now, &out)
		}
		return nil
	})
	if err != nil {
		return store.MakesafeOutcome{}, fmt.Errorf("sqlite: upsert make-safe phone call of job %s: %w", jobID, err)
	}
	return out, nil
}

// raisePhoneCall inserts the job's phone call and queues its SMS.
func (s *Store) raisePhoneCall(ctx context.Context, d store.MakesafeDetection, jobID string, now time.Time,
	out *store.MakesafeOutcome, addressLine1, suburb, state, postcode string) error {
	smsID, _, err := s.queueSMS(ctx, store.NewSMS{
		Recipient: strings.TrimSpace(d.SMSRecipient),
		Body:      store.MakesafeSMSBody(jobID, out.JobNumber, addressLine1, suburb, state, postcode),
		Source:    store.MakesafeSMSSource,
		DedupeKey: store.MakesafeSMSKey(jobID),
		Now:       now,
	})
	if err != nil {
		return err
	}
	if err := s.tx.QueryRowContext(ctx, `INSERT INTO makesafePhoneCall
		(PrimeJobID, JobNumber, JobCreatedUTC, RaisedUTC, State, SmsQueueID) VALUES (?, ?, ?, ?, ?, ?)
		RETURNING ID`, jobID, nullString(out.JobNumber), nullTime(out.JobCreatedUTC), formatTime(now),
		store.PhoneCallRaised, smsID).Scan(&out.PhoneCallID); err != nil {
		return err
	}
	out.Raised, out.SMSID = true, smsID
	return nil
}

// queueChecks queues the rungs of the ladder that are not queued yet.
func (s *Store) queueChecks(ctx context.Context, jobID string, offsets []time.Duration, from, now time.Time, out *store.MakesafeOutcome) error {
	for i, off := range offsets {
		c := store.MakesafeCheck{PrimeJobID: jobID, Rung: i + 1, DueUTC: from.Add(off), QueuedUTC: now}
		res, err := s.tx.ExecContext(ctx, `INSERT INTO makesafeAllocationCheck (PrimeJobID, Rung, DueUTC, QueuedUTC)
			VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`, jobID, c.Rung, formatTime(c.DueUTC), formatTime(now))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 1 {
			c.DueUTC, c.QueuedUTC = c.DueUTC.UTC().Truncate(time.Millisecond), now.UTC().Truncate(time.Millisecond)
			out.Checks = append(out.Checks, c)
		}
	}
	return nil
}

// GetMakesafePhoneCall returns the job's phone call.
func (s *Store) GetMakesafePhoneCall(ctx context.Context, jobID string) (store.MakesafePhoneCall, bool, error) {
	return queryOne(ctx, s.r(), "get make-safe phone call", `SELECT ID, PrimeJobID, JobNumber, JobCreatedUTC, RaisedUTC, State, SmsQueueID
		FROM makesafePhoneCall WHERE PrimeJobID = ?`, func(sc sqlrows.Scanner) (store.MakesafePhoneCall, error) {
		var c store.MakesafePhoneCall
		var smsID sql.NullInt64
		err := sc.Scan(&c.ID, &c.PrimeJobID, scanString{&c.JobNumber}, scanTime{&c.JobCreatedUTC}, scanTime{&c.RaisedUTC},
			&c.State, &smsID)
		c.SMSID = smsID.Int64
		return c, err
	}, strings.ToLower(jobID))
}

// ListMakesafeChecks returns the job's rungs in order.
func (s *Store) ListMakesafeChecks(ctx context.Context, jobID string) ([]store.MakesafeCheck, error) {
	return queryAll(ctx, s.r(), "list make-safe checks", `SELECT PrimeJobID, Rung, DueUTC, QueuedUTC, FiredUTC, Outcome
		FROM makesafeAllocationCheck WHERE PrimeJobID = ? ORDER BY Rung`, scanCheck, strings.ToLower(jobID))
}

func scanCheck(sc sqlrows.Scanner) (store.MakesafeCheck, error) {
	var c store.MakesafeCheck
	err := sc.Scan(&c.PrimeJobID, &c.Rung, scanTime{&c.DueUTC}, scanTime{&c.QueuedUTC},
		scanTime{&c.FiredUTC}, scanString{&c.Outcome})
	return c, err
}

// SetMakesafeCheckFired records that a rung ran.
func (s *Store) SetMakesafeCheckFired(ctx context.Context, jobID string, rung int, outcome string, at time.Time) error {
	res, err := s.w().ExecContext(ctx, `UPDATE makesafeAllocationCheck SET FiredUTC = ?, Outcome = ?
		WHERE PrimeJobID = ? AND Rung = ?`, formatTime(at), store.TruncateStatus(outcome), strings.ToLower(jobID), rung)
	return affectedOne(res, err, "set make-safe check fired", fmt.Sprintf("job %s rung %d", jobID, rung))
}

// ListDueMakesafeChecks returns rungs not fired and due before dueBefore.
func (s *Store) ListDueMakesafeChecks(ctx context.Context, dueBefore time.Time, limit int) ([]store.MakesafeCheck, error) {
	if limit <= 0 {
		return nil, nil
	}
	return queryAll(ctx, s.r(), "list due make-safe checks", `SELECT PrimeJobID, Rung, DueUTC, QueuedUTC, FiredUTC, Outcome
		FROM makesafeAllocationCheck WHERE FiredUTC IS NULL AND DueUTC < ? ORDER BY DueUTC, PrimeJobID, Rung LIMIT ?`,
		scanCheck, formatTime(dueBefore), limit)
}
