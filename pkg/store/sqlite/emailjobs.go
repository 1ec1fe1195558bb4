package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

const emailColumns = `id, internetMessageId, subject, receivedDateTime, fromAddress, bodyPreview, JobID, JobIDKind,
	NumericReference, JobNumber, primeJobId, outcome, lastError, attempts, movedUTC, movedTo, registeredUTC, updatedUTC`

func scanEmail(sc sqlrows.Scanner) (store.EmailReceipt, error) {
	var r store.EmailReceipt
	var ref sql.NullInt64
	err := sc.Scan(&r.ID, scanString{&r.InternetMessageID}, scanString{&r.Subject}, scanTime{&r.ReceivedUTC}, scanString{&r.From},
		scanString{&r.BodyPreview}, scanString{&r.JobID}, scanString{&r.JobIDKind}, &ref, scanString{&r.JobNumber},
		scanString{&r.PrimeJobID}, &r.Outcome, scanString{&r.LastError}, &r.Attempts, scanTime{&r.MovedUTC}, scanString{&r.MovedTo},
		scanTime{&r.RegisteredUTC}, scanTime{&r.UpdatedUTC})
	r.NumericReference = ref.Int64
	return r, err
}

// RegisterEmail records a message's receipt unless it has one
// (spPrimeEmailJobRegisteredInsert).
func (s *Store) RegisterEmail(ctx context.Context, r store.EmailReceipt) (store.EmailReceipt, bool, error) {
	if r.InternetMessageID == "" {
		return store.EmailReceipt{}, false, errors.New("sqlite: register email: no internetMessageId")
	}
	var stored store.EmailReceipt
	var inserted bool
	now := formatTime(time.Now())
	err := s.inTx(ctx, func(tx *Store) error {
		res, err := tx.w().ExecContext(ctx, `INSERT INTO PrimeEmailJobRegistered
			(bodyPreview, registeredUTC, internetMessageId, subject, receivedDateTime, fromAddress, outcome, attempts, updatedUTC)
			VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?)
			ON CONFLICT (internetMessageId) WHERE internetMessageId IS NOT NULL DO NOTHING`,
			r.BodyPreview, now, r.InternetMessageID, nullString(r.Subject), nullTime(r.ReceivedUTC), nullString(r.From), store.EmailPending, now)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		inserted = n == 1
		stored, _, err = tx.GetEmailReceipt(ctx, r.InternetMessageID)
		return err
	})
	if err != nil {
		return store.EmailReceipt{}, false, fmt.Errorf("sqlite: register email: %w", err)
	}
	return stored, inserted, nil
}

// UpdateEmailReceipt writes what became of a message (spPrimeflowEmailJobRegisteredUpdate).
func (s *Store) UpdateEmailReceipt(ctx context.Context, r store.EmailReceipt) error {
	var ref any
	if r.NumericReference > 0 {
		ref = r.NumericReference
	}
	res, err := s.w().ExecContext(ctx, `UPDATE PrimeEmailJobRegistered
		SET JobID = ?, JobIDKind = ?, NumericReference = ?, JobNumber = ?, primeJobId = ?, outcome = ?, lastError = ?,
		    attempts = ?, movedUTC = ?, movedTo = ?, updatedUTC = ?
		WHERE internetMessageId = ?`,
		nullString(r.JobID), nullString(r.JobIDKind), ref, nullString(r.JobNumber), nullGUID(r.PrimeJobID), r.Outcome,
		nullString(store.Truncate(r.LastError, store.MaxEmailErrorLen)), r.Attempts, nullTime(r.MovedUTC), nullString(r.MovedTo),
		formatTime(time.Now()), r.InternetMessageID)
	return affectedOne(res, err, "update email receipt", "email "+r.InternetMessageID)
}

// GetEmailReceipt reads a message's receipt.
func (s *Store) GetEmailReceipt(ctx context.Context, internetMessageID string) (store.EmailReceipt, bool, error) {
	return queryOne(ctx, s.r(), "get email receipt", `SELECT `+emailColumns+` FROM PrimeEmailJobRegistered WHERE internetMessageId = ?`,
		scanEmail, internetMessageID)
}
