package mssql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// The procedures behind the StatusHistories methods (sql/mssql/060_sync_drains.sql).
const (
	procReplaceJobStatusHistory = "dbo.spPrimeflowReplaceJobStatusHistory"
	procListJobStatusHistory    = "dbo.spPrimeflowListJobStatusHistory"
)

// statusHistoryJSON is one status change as
// spPrimeflowReplaceJobStatusHistory reads it.
type statusHistoryJSON struct {
	StatusHistoryID *string `json:"statusHistoryId"`
	StatusID        *string `json:"statusId"`
	CreatedAt       *string `json:"createdAt"`
	Attributes      *string `json:"attributes"`
}

// ReplaceJobStatusHistory makes the job's status changes exactly hs
// (spPrimeflowReplaceJobStatusHistory). An entry given twice is stored as
// its last copy.
func (s *Store) ReplaceJobStatusHistory(ctx context.Context, jobID string, hs []store.JobStatusHistory) error {
	job, err := parseGUID(jobID)
	if err != nil {
		return fmt.Errorf("mssql: replace job status history: %w", err)
	}
	list, err := jsonRows(hs, func(h store.JobStatusHistory) (string, statusHistoryJSON, error) {
		id, err := requiredGUID("status history id", h.StatusHistoryID)
		if err != nil {
			return "", statusHistoryJSON{}, err
		}
		status, err := jsonGUID("status id", h.StatusID)
		if err != nil {
			return "", statusHistoryJSON{}, err
		}
		return *id, statusHistoryJSON{StatusHistoryID: id, StatusID: status, CreatedAt: jsonTime(h.CreatedAt),
			Attributes: jsonText(h.Attributes)}, nil
	})
	if err != nil {
		return err
	}
	if _, err := s.q().ExecContext(ctx, procReplaceJobStatusHistory, sql.Named("JobId", job), sql.Named("Histories", list)); err != nil {
		return fmt.Errorf("mssql: replace job status history: %w", err)
	}
	return nil
}

// ListJobStatusHistory reads a job's status changes
// (spPrimeflowListJobStatusHistory).
func (s *Store) ListJobStatusHistory(ctx context.Context, jobID string) ([]store.JobStatusHistory, error) {
	job, ok := keyGUID(jobID)
	if !ok {
		return nil, nil
	}
	return queryAll(ctx, s.q(), "list job status history", procListJobStatusHistory,
		func(sc sqlrows.Scanner) (store.JobStatusHistory, error) {
			var h store.JobStatusHistory
			err := sc.Scan(scanGUID{&h.StatusHistoryID}, scanGUID{&h.JobID}, scanGUID{&h.StatusID},
				scanTime{&h.CreatedAt}, scanString{&h.Attributes}, scanTime{&h.SyncedUTC})
			return h, err
		}, sql.Named("JobId", job))
}
