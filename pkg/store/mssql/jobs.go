package mssql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
	mssql "github.com/microsoft/go-mssqldb"
)

// The procedures behind the Jobs and FirstSeens methods (sql/mssql/010_jobs.sql;
// the first-sight claim, get and list as 051_new_job_path.sql redefines them).
const (
	procUpsertJob         = "dbo.spPrimeflowUpsertJob"
	procGetJob            = "dbo.spPrimeflowGetJob"
	procClaimFirstSeen    = "dbo.spPrimeflowClaimJobFirstSeen"
	procGetFirstSeen      = "dbo.spPrimeflowGetJobFirstSeen"
	procCompleteFirstSeen = "dbo.spPrimeflowCompleteJobFirstSeen"
	procFailFirstSeen     = "dbo.spPrimeflowFailJobFirstSeen"
	procListFirstSeen     = "dbo.spPrimeflowListJobFirstSeen"
	defaultFirstSeenLimit = 100
)

// UpsertJob inserts or updates a primeJobs row (spPrimeflowUpsertJob); the
// procedure holds the key from its check to its write.
func (s *Store) UpsertJob(ctx context.Context, j store.Job) (bool, error) {
	id, err := parseGUID(j.JobID)
	if err != nil {
		return false, fmt.Errorf("mssql: upsert job: %w", err)
	}
	var created bool
	err = s.q().QueryRowContext(ctx, procUpsertJob,
		sql.Named("JobId", id),
		sql.Named("JobNumber", sqlString(j.JobNumber)),
		sql.Named("StatusId", looseGUID(j.StatusID)),
		sql.Named("ClientId", looseGUID(j.ClientID)),
		sql.Named("AssignedId", looseGUID(j.AssignedID)),
		sql.Named("EstimatorId", looseGUID(j.EstimatorID)),
		sql.Named("CaseManagerId", looseGUID(j.CaseManagerID)),
		sql.Named("SupervisorId", looseGUID(j.SupervisorID)),
		sql.Named("DivisionId", looseGUID(j.DivisionID)),
		sql.Named("Region", sqlString(j.Region)),
		sql.Named("Description", sqlString(j.Description)),
		sql.Named("IncidentDate", sqlTime(j.IncidentDate)),
		sql.Named("CreatedAt", sqlTime(j.CreatedAt)),
		sql.Named("UpdatedAt", sqlTime(j.UpdatedAt)),
		sql.Named("Version", sqlInt64(j.Version)),
		sql.Named("PrimeUrl", sqlString(j.PrimeURL)),
		sql.Named("AuthorisedTotalIncludingTax", sqlString(j.AuthorisedTotalIncludingTax)),
		sql.Named("AddressLine1", sqlString(j.AddressLine1)),
		sql.Named("AddressLine2", sqlString(j.AddressLine2)),
		sql.Named("Suburb", sqlString(j.Suburb)),
		sql.Named("State", sqlString(j.State)),
		sql.Named("Postcode", sqlString(j.Postcode)),
		sql.Named("PrimaryContactId", looseGUID(j.PrimaryContactID)),
		sql.Named("Attributes", sqlString(j.Attributes)),
		sql.Named("AskedUTC", sqlTime(j.AskedUTC)),
	).Scan(&created)
	if err != nil {
		return false, fmt.Errorf("mssql: upsert job %s: %w", j.JobID, err)
	}
	return created, nil
}

// GetJob reads one primeJobs row (spPrimeflowGetJob).
func (s *Store) GetJob(ctx context.Context, jobID string) (store.Job, bool, error) {
	id, ok := jobGUID(jobID)
	if !ok {
		return store.Job{}, false, nil // no row's jobId equals a non-GUID
	}
	var j store.Job
	var version sql.NullInt64
	err := s.q().QueryRowContext(ctx, procGetJob, sql.Named("JobId", id)).Scan(
		scanGUID{&j.JobID}, scanString{&j.JobNumber}, scanGUID{&j.StatusID}, scanGUID{&j.ClientID},
		scanGUID{&j.AssignedID}, scanGUID{&j.EstimatorID}, scanGUID{&j.CaseManagerID}, scanGUID{&j.SupervisorID},
		scanGUID{&j.DivisionID}, scanString{&j.Region}, scanString{&j.Description}, scanTime{&j.IncidentDate},
		scanTime{&j.CreatedAt}, scanTime{&j.UpdatedAt}, &version, scanString{&j.PrimeURL},
		scanString{&j.AuthorisedTotalIncludingTax}, scanString{&j.AddressLine1}, scanString{&j.AddressLine2},
		scanString{&j.Suburb}, scanString{&j.State}, scanString{&j.Postcode}, scanGUID{&j.PrimaryContactID},
		scanString{&j.Attributes}, scanTime{&j.SyncedUTC})
	if errors.Is(err, sql.ErrNoRows) {
		return store.Job{}, false, nil
	}
	if err != nil {
		return store.Job{}, false, fmt.Errorf("mssql: get job: %w", err)
	}
	j.Version = version.Int64
	return j, true, nil
}

// ClaimFirstSeen records a job's first sight (spPrimeflowClaimJobFirstSeen).
func (s *Store) ClaimFirstSeen(ctx context.Context, jobID string, logID int64, via string) (bool, error) {
	id, err := parseGUID(jobID)
	if err != nil {
		return false, fmt.Errorf("mssql: claim first seen: %w", err)
	}
	var claimed bool
	if err := s.q().QueryRowContext(ctx, procClaimFirstSeen, sql.Named("JobId", id), sql.Named("LogId", sqlInt64(logID)),
		sql.Named("Via", sqlString(via))).Scan(&claimed); err != nil {
		return false, fmt.Errorf("mssql: claim first seen: %w", err)
	}
	return claimed, nil
}

func scanFirstSeen(sc sqlrows.Scanner) (store.FirstSeen, error) {
	var f store.FirstSeen
	var logID sql.NullInt64
	err := sc.Scan(scanGUID{&f.JobID}, &logID, scanTime{&f.FirstSeenUTC}, scanTime{&f.PipelineCompletedUTC},
		&f.PipelineAttempts, scanString{&f.PipelineStatus}, scanString{&f.Via})
	f.LogID = logID.Int64
	return f, err
}

// GetFirstSeen reads a job's first-sight row (spPrimeflowGetJobFirstSeen).
func (s *Store) GetFirstSeen(ctx context.Context, jobID string) (store.FirstSeen, bool, error) {
	id, ok := jobGUID(jobID)
	if !ok {
		return store.FirstSeen{}, false, nil
	}
	f, err := scanFirstSeen(s.q().QueryRowContext(ctx, procGetFirstSeen, sql.Named("JobId", id)))
	if errors.Is(err, sql.ErrNoRows) {
		return store.FirstSeen{}, false, nil
	}
	if err != nil {
		return store.FirstSeen{}, false, fmt.Errorf("mssql: get first seen: %w", err)
	}
	return f, true, nil
}

// CompleteFirstSeen stamps a job's pipeline finished (spPrimeflowCompleteJobFirstSeen).
func (s *Store) CompleteFirstSeen(ctx context.Context, jobID, status string) error {
	id, err := parseGUID(jobID)
	if err != nil {
		return fmt.Errorf("mssql: complete first seen: %w", err)
	}
	var updated int64
	if err := s.q().QueryRowContext(ctx, procCompleteFirstSeen, sql.Named("JobId", id),
		sql.Named("PipelineStatus", statusParam(status))).Scan(&updated); err != nil {
		return fmt.Errorf("mssql: complete first seen: %w", err)
	}
	if updated == 0 {
		return fmt.Errorf("first seen %s: %w", jobID, store.ErrNotFound)
	}
	return nil
}

// FailFirstSeen records a failed attempt of a job's pipeline (spPrimeflowFailJobFirstSeen).
func (s *Store) FailFirstSeen(ctx context.Context, jobID, cause string) (int, error) {
	id, err := parseGUID(jobID)
	if err != nil {
		return 0, fmt.Errorf("mssql: fail first seen: %w", err)
	}
	var attempts int
	err = s.q().QueryRowContext(ctx, procFailFirstSeen, sql.Named("JobId", id),
		sql.Named("PipelineStatus", statusParam(cause))).Scan(&attempts)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("first seen %s: %w", jobID, store.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("mssql: fail first seen: %w", err)
	}
	return attempts, nil
}

// ListFirstSeen lists first-sight rows in a state (spPrimeflowListJobFirstSeen).
func (s *Store) ListFirstSeen(ctx context.Context, state store.FirstSeenState, limit int) ([]store.FirstSeen, error) {
	if limit <= 0 {
		limit = defaultFirstSeenLimit
	}
	var st int
	switch state {
	case store.FirstSeenPending:
		st = 1
	case store.FirstSeenFailed:
		st = 2
	case store.FirstSeenCompleted:
		st = 3
	}
	return queryAll(ctx, s.q(), "list first seen", procListFirstSeen, scanFirstSeen, sql.Named("State", st), sql.Named("Top", limit))
}

// jobGUID parses a GUID read for a lookup; ok is false for a value that is
// not a GUID, which no row can hold.
func jobGUID(s string) (mssql.UniqueIdentifier, bool) {
	id, err := parseGUID(s)
	return id, err == nil
}
