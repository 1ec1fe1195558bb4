package mssql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// The procedures behind the EmailReceipts methods (sql/mssql/050_email_intake.sql).
const (
	procRegisterEmail = "dbo.spPrimeEmailJobRegisteredInsert"
	procUpdateEmail   = "dbo.spPrimeflowEmailJobRegisteredUpdate"
	procGetEmail      = "dbo.spPrimeflowEmailJobRegisteredGet"
)

// scanReceipt reads a receipt as scanEmail does, without the flag.
func scanReceipt(sc sqlrows.Scanner) (store.EmailReceipt, error) {
	r, _, err := scanEmail(sc)
	return r, err
}

// scanEmail reads a receipt, and the inserted flag both procedures end with.
func scanEmail(sc sqlrows.Scanner) (store.EmailReceipt, bool, error) {
	var r store.EmailReceipt
	var ref sql.NullInt64
	var inserted bool
	err := sc.Scan(&r.ID, scanString{&r.InternetMessageID}, scanString{&r.Subject}, scanTime{&r.ReceivedUTC}, scanString{&r.From},
		scanString{&r.BodyPreview}, scanString{&r.JobID}, scanString{&r.JobIDKind}, &ref, scanString{&r.JobNumber},
		scanGUID{&r.PrimeJobID}, &r.Outcome, scanString{&r.LastError}, &r.Attempts, scanTime{&r.MovedUTC}, scanString{&r.MovedTo},
		scanTime{&r.RegisteredUTC}, scanTime{&r.UpdatedUTC}, &inserted)
	r.NumericReference = ref.Int64
	return r, inserted, err
}

// RegisterEmail records a message's receipt unless it has one
// (spPrimeEmailJobRegisteredInsert).
func (s *Store) RegisterEmail(ctx context.Context, r store.EmailReceipt) (store.EmailReceipt, bool, error) {
	if r.InternetMessageID == "" {
		return store.EmailReceipt{}, false, errors.New("mssql: register email: no internetMessageId")
	}
	stored, inserted, err := scanEmail(s.q().QueryRowContext(ctx, procRegisterEmail,
		sql.Named("BodyPreview", r.BodyPreview),
		sql.Named("InternetMessageId", r.InternetMessageID),
		sql.Named("Subject", sqlString(store.Truncate(r.Subject, 400))),
		sql.Named("ReceivedDateTime", sqlTime(r.ReceivedUTC)),
		sql.Named("FromAddress", sqlString(store.Truncate(r.From, 320))),
	))
	if err != nil {
		return store.EmailReceipt{}, false, fmt.Errorf("mssql: register email: %w", err)
	}
	return stored, inserted, nil
}

// UpdateEmailReceipt writes what became of a message (spPrimeflowEmailJobRegisteredUpdate).
func (s *Store) UpdateEmailReceipt(ctx context.Context, r store.EmailReceipt) error {
	job, err := guidParam(r.PrimeJobID)
	if err != nil {
		return fmt.Errorf("mssql: update email receipt: %w", err)
	}
	var updated int64
	if err := s.q().QueryRowContext(ctx, procUpdateEmail,
		sql.Named("InternetMessageId", r.InternetMessageID),
		sql.Named("JobID", sqlString(r.JobID)),
		sql.Named("JobIDKind", sqlString(r.JobIDKind)),
		sql.Named("NumericReference", sqlInt64(r.NumericReference)),
		sql.Named("JobNumber", sqlString(store.Truncate(r.JobNumber, 50))),
		sql.Named("PrimeJobId", job),
		sql.Named("Outcome", r.Outcome),
		sql.Named("LastError", sqlString(r.LastError)),
		sql.Named("Attempts", r.Attempts),
		sql.Named("MovedUTC", sqlTime(r.MovedUTC)),
		sql.Named("MovedTo", sqlString(r.MovedTo)),
	).Scan(&updated); err != nil {
		return fmt.Errorf("mssql: update email receipt: %w", err)
	}
	if updated == 0 {
		return fmt.Errorf("email %s: %w", r.InternetMessageID, store.ErrNotFound)
	}
	return nil
}

// GetEmailReceipt reads a message's receipt (spPrimeflowEmailJobRegisteredGet).
func (s *Store) GetEmailReceipt(ctx context.Context, internetMessageID string) (store.EmailReceipt, bool, error) {
	r, _, err := scanEmail(s.q().QueryRowContext(ctx, procGetEmail, sql.Named("InternetMessageId", internetMessageID)))
	if errors.Is(err, sql.ErrNoRows) {
		return store.EmailReceipt{}, false, nil
	}
	if err != nil {
		return store.EmailReceipt{}, false, fmt.Errorf("mssql: get email receipt: %w", err)
	}
	return r, true, nil
}
