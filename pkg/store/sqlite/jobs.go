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

// jobColumns are primeJobs' columns in the order jobArgs and scanJob use.
const jobColumns = `jobId, jobNumber, statusId, clientId, assignedId, estimatorId, caseManagerId,
	supervisorId, divisionId, region, description, incidentDate, createdAt, updatedAt, version,
	primeUrl, authorisedTotalIncludingTax, addressLine1, addressLine2, suburb, state, postcode,
	primaryContactId, attributes, syncedUTC`

const jobColumnCount = 25

// The statements every job event runs, prepared once (see prepare).
var (
	getJobVersionSQL  = prepare(`SELECT version, syncedUTC FROM primeJobs WHERE jobId = ?`)
	insertJobSQL      = prepare(`INSERT INTO primeJobs (` + jobColumns + `) VALUES (` + placeholders(jobColumnCount) + `)`)
	getJobSQL         = prepare(`SELECT ` + jobColumns + ` FROM primeJobs WHERE jobId = ?`)
	claimFirstSeenSQL = prepare(`INSERT INTO primeflowJobFirstSeen (jobId, logId, firstSeenUTC, via) VALUES (?, ?, ?, ?)
		ON CONFLICT (jobId) DO NOTHING`)
)

// updateJobSQL sets every column but jobId, in jobColumns order, then the id.
var updateJobSQL = prepare(`UPDATE primeJobs SET jobNumber = ?, statusId = ?, clientId = ?, assignedId = ?,
	estimatorId = ?, caseManagerId = ?, supervisorId = ?, divisionId = ?, region = ?, description = ?,
	incidentDate = ?, createdAt = ?, updatedAt = ?, version = ?, primeUrl = ?,
	authorisedTotalIncludingTax = ?, addressLine1 = ?, addressLine2 = ?, suburb = ?, state = ?,
	postcode = ?, primaryContactId = ?, attributes = ?, syncedUTC = ?
	WHERE jobId = ?`)

func jobArgs(j store.Job) []any {
	var version any
	if j.Version != 0 {
		version = j.Version
	}
	return []any{
		strings.ToLower(j.JobID), nullString(j.JobNumber), nullGUID(j.StatusID), nullGUID(j.ClientID),
		nullGUID(j.AssignedID), nullGUID(j.EstimatorID), nullGUID(j.CaseManagerID), nullGUID(j.SupervisorID),
		nullGUID(j.DivisionID), nullString(j.Region), nullString(j.Description), nullTime(j.IncidentDate),
		nullTime(j.CreatedAt), nullTime(j.UpdatedAt), version, nullString(j.PrimeURL),
		nullString(j.AuthorisedTotalIncludingTax), nullString(j.AddressLine1), nullString(j.AddressLine2),
		nullString(j.Suburb), nullString(j.State), nullString(j.Postcode), nullGUID(j.PrimaryContactID),
		nullString(j.Attributes), formatTime(j.SyncedUTC),
	}
}

// nullGUID stores a GUID lower-case, and the empty string as NULL.
func nullGUID(s string) any { return nullString(strings.ToLower(s)) }

// UpsertJob inserts or updates a primeJobs row (spPrimeflowUpsertJob), and
// closes the job's triage invites whose arrival the write shows over. The
// one write connection makes the check and the write atomic.
func (s *Store) UpsertJob(ctx context.Context, j store.Job) (bool, error) {
	if j.JobID == "" {
		return false, errors.New("sqlite: upsert job: no job id")
	}
	j.SyncedUTC = time.Now()
	var created bool
	err := s.inTx(ctx, func(tx *Store) error {
		var stored sql.NullInt64
		var synced time.Time
		err := tx.r().QueryRowContext(ctx, getJobVersionSQL, strings.ToLower(j.JobID)).Scan(&stored, scanTime{&synced})
		switch {
		case errors.Is(err, sql.ErrNoRows):
			_, err = tx.w().ExecContext(ctx, insertJobSQL, jobArgs(j)...)
			created = err == nil
		case err != nil:
			return err
		case stored.Valid && j.Version != 0 && stored.Int64 > j.Version && !j.AskedUTC.After(synced):
			return nil // the mirror holds a newer version, and nothing Prime said since gainsays it
		default:
			_, err = tx.w().ExecContext(ctx, updateJobSQL, append(jobArgs(j)[1:], strings.ToLower(j.JobID))...)
		}
		if err != nil {
			return err
		}
		// Whichever path wrote it: an open triage invite of another
		// status answered an arrival that is over.
		return closeTriageInvites(ctx, tx, strings.ToLower(j.JobID), formatTime(j.SyncedUTC))
	})
	if err != nil {
		return false, fmt.Errorf("sqlite: upsert job %s: %w", j.JobID, err)
	}
	return created, nil
}

// GetJob reads one primeJobs row.
func (s *Store) GetJob(ctx context.Context, jobID string) (store.Job, bool, error) {
	return queryOne(ctx, s.r(), "get job", getJobSQL, func(sc sqlrows.Scanner) (store.Job, error) {
		var j store.Job
		var version sql.NullInt64
		err := sc.Scan(&j.JobID, scanString{&j.JobNumber}, scanString{&j.StatusID}, scanString{&j.ClientID},
			scanString{&j.AssignedID}, scanString{&j.EstimatorID}, scanString{&j.CaseManagerID}, scanString{&j.SupervisorID},
			scanString{&j.DivisionID}, scanString{&j.Region}, scanString{&j.Description}, scanTime{&j.IncidentDate},
			scanTime{&j.CreatedAt}, scanTime{&j.UpdatedAt}, &version, scanString{&j.PrimeURL},
			scanString{&j.AuthorisedTotalIncludingTax}, scanString{&j.AddressLine1}, scanString{&j.AddressLine2},
			scanString{&j.Suburb}, scanString{&j.State}, scanString{&j.Postcode}, scanString{&j.PrimaryContactID},
			scanString{&j.Attributes}, scanTime{&j.SyncedUTC})
		j.Version = version.Int64
		return j, err
	}, strings.ToLower(jobID))
}

// ClaimFirstSeen records a job's first sight; the primary key lets one claim win.
func (s *Store) ClaimFirstSeen(ctx context.Context, jobID string, logID int64, via string) (bool, error) {
	return claimFirstSeen(ctx, s.w(), jobID, logID, via)
}

func claimFirstSeen(ctx context.Context, q sqlrows.Querier, jobID string, logID int64, via string) (bool, error) {
	var log any
	if logID > 0 {
		log = logID
	}
	res, err := q.ExecContext(ctx, claimFirstSeenSQL, strings.ToLower(jobID), log, formatTime(time.Now()), nullString(via))
	if err != nil {
		return false, fmt.Errorf("sqlite: claim first seen: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("sqlite: claim first seen: %w", err)
	}
	return n == 1, nil
}

const firstSeenColumns = `jobId, logId, firstSeenUTC, pipelineCompletedUTC, pipelineAttempts, pipelineStatus, via`

func scanFirstSeen(sc sqlrows.Scanner) (store.FirstSeen, error) {
	var f store.FirstSeen
	var logID sql.NullInt64
	err := sc.Scan(&f.JobID, &logID, scanTime{&f.FirstSeenUTC}, scanTime{&f.PipelineCompletedUTC}, &f.PipelineAttempts,
		scanString{&f.PipelineStatus}, scanString{&f.Via})
	f.LogID = logID.Int64
	return f, err
}

// GetFirstSeen reads a job's first-sight row.
func (s *Store) GetFirstSeen(ctx context.Context, jobID string) (store.FirstSeen, bool, error) {
	return queryOne(ctx, s.r(), "get first seen", `SELECT `+firstSeenColumns+` FROM primeflowJobFirstSeen WHERE jobId = ?`,
		scanFirstSeen, strings.ToLower(jobID))
}

// CompleteFirstSeen stamps a job's pipeline finished; a second stamp keeps the first.
func (s *Store) CompleteFirstSeen(ctx context.Context, jobID, status string) error {
	res, err := s.w().ExecContext(ctx, `UPDATE primeflowJobFirstSeen
		SET pipelineCompletedUTC = COALESCE(pipelineCompletedUTC, ?), pipelineStatus = ?
		WHERE jobId = ?`, formatTime(time.Now()), store.TruncateStatus(status), strings.ToLower(jobID))
	return affectedOne(res, err, "complete first seen", "first seen "+jobID)
}

// FailFirstSeen records a failed attempt of a job's pipeline.
func (s *Store) FailFirstSeen(ctx context.Context, jobID, cause string) (int, error) {
	var attempts int
	err := s.w().QueryRowContext(ctx, `UPDATE primeflowJobFirstSeen
		SET pipelineAttempts = pipelineAttempts + 1, pipelineStatus = ?
		WHERE jobId = ? RETURNING pipelineAttempts`, store.TruncateStatus(cause), strings.ToLower(jobID)).Scan(&attempts)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("first seen %s: %w", jobID, store.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("sqlite: fail first seen: %w", err)
	}
	return attempts, nil
}

// ListFirstSeen lists first-sight rows in a state, oldest first.
func (s *Store) ListFirstSeen(ctx context.Context, state store.FirstSeenState, limit int) ([]store.FirstSeen, error) {
	if limit <= 0 {
		limit = 100
	}
	where := ""
	switch state {
	case store.FirstSeenPending:
		where = ` WHERE pipelineCompletedUTC IS NULL`
	case store.FirstSeenFailed:
		where = ` WHERE pipelineCompletedUTC IS NULL AND pipelineAttempts > 0`
	case store.FirstSeenCompleted:
		where = ` WHERE pipelineCompletedUTC IS NOT NULL`
	}
	return queryAll(ctx, s.r(), "list first seen", `SELECT `+firstSeenColumns+` FROM primeflowJobFirstSeen`+where+
		` ORDER BY firstSeenUTC, jobId LIMIT ?`, scanFirstSeen, limit)
}
