package mssql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/ethosbuilding/primeflow/pkg/store"
)

// QueueJobSummaryNow makes the job's AI summary due now
// (spPrimeflowQueueJobSummaryNow @JobId, §5.3 step 4): the spec's call
// shape, the job alone, so the procedure can be pointed at the live
// implementation (sql/README.md, "Integration points").
func (s *Store) QueueJobSummaryNow(ctx context.Context, jobID string) error {
	job, err := parseGUID(jobID)
	if err != nil {
		return err
	}
	if _, err := s.q().ExecContext(ctx, procQueueJobSummaryNow, sql.Named("JobId", job)); err != nil {
		return fmt.Errorf("mssql: queue job summary: %w", err)
	}
	return nil
}

// GetJobSummaryQueue reads a job's AI summary queue row
// (spPrimeflowGetJobSummaryQueue).
func (s *Store) GetJobSummaryQueue(ctx context.Context, jobID string) (store.JobSummaryQueueRow, bool, error) {
	job, ok := keyGUID(jobID)
	if !ok {
		return store.JobSummaryQueueRow{}, false, nil
	}
	var r store.JobSummaryQueueRow
	found, err := s.getOne(ctx, "get job summary queue", procGetJobSummaryQueue, []any{
		scanGUID{&r.JobID}, scanTime{&r.QueuedFor}, scanTime{&r.CreatedUTC}, scanTime{&r.UpdatedUTC},
	}, sql.Named("JobId", job))
	if !found || err != nil {
		return store.JobSummaryQueueRow{}, false, err
	}
	return r, true, nil
}
