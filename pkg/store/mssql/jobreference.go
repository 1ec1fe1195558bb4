package mssql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/ethosbuilding/primeflow/pkg/store"
	mssql "github.com/microsoft/go-mssqldb"
)

// The procedures behind the JobReferences methods (sql/mssql/001_webhook_log.sql).
const (
	procGetJobIDByReference = "dbo.spPrimeGetJobIDbyReference"
	procSaveJobReference    = "dbo.spPrimeSaveJobReference"
)

// errNumberReferenceConflict is the error spPrimeSaveJobReference throws when
// a reference is mapped to another job.
const errNumberReferenceConflict = 51001

// GetJobIDByReference reads the numeric reference map (spPrimeGetJobIDbyReference).
func (s *Store) GetJobIDByReference(ctx context.Context, numericReference int64) (string, bool, error) {
	var jobID string
	err := s.q().QueryRowContext(ctx, procGetJobIDByReference, sql.Named("NumericReference", numericReference)).Scan(scanGUID{&jobID})
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("mssql: get job id by reference: %w", err)
	}
	return jobID, true, nil
}

// SaveJobReference maps a reference when absent (spPrimeSaveJobReference).
// The procedure is race-safe on its own, so it needs no transaction here.
func (s *Store) SaveJobReference(ctx context.Context, numericReference int64, jobID string) (bool, error) {
	job, err := parseGUID(jobID)
	if err != nil {
		return false, err
	}
	var inserted bool
	err = s.q().QueryRowContext(ctx, procSaveJobReference,
		sql.Named("NumericReference", numericReference), sql.Named("JobId", job)).Scan(&inserted)
	if msg, ok := serverError(err, errNumberReferenceConflict); ok {
		return false, fmt.Errorf("mssql: %s: %w", msg, store.ErrReferenceConflict)
	}
	if err != nil {
		return false, fmt.Errorf("mssql: save job reference: %w", err)
	}
	return inserted, nil
}

// serverError reports whether err carries SQL Server error number, and its message.
func serverError(err error, number int32) (string, bool) {
	var e mssql.Error
	if !errors.As(err, &e) {
		return "", false
	}
	for _, one := range append([]mssql.Error{e}, e.All...) {
		if one.Number == number {
			return one.Message, true
		}
	}
	return "", false
}
