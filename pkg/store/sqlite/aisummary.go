package sqlite

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// QueueJobSummaryNow makes the job's AI summary due now (§5.3 step 4).
func (s *Store) QueueJobSummaryNow(ctx context.Context, jobID string) error {
	if jobID == "" {
		return errors.New("sqlite: queue job summary: no job id")
	}
	at := formatTime(time.Now())
	_, err := s.w().ExecContext(ctx, `INSERT INTO ethAIJobSummaryQueue (jobId, QueuedFor, createdUTC, updatedUTC)
		VALUES (?, ?, ?, ?)
		ON CONFLICT (jobId) DO UPDATE SET QueuedFor = excluded.QueuedFor, updatedUTC = excluded.updatedUTC`,
		mirrorGUID(jobID), at, at, at)
	if err != nil {
		return fmt.Errorf("sqlite: queue job summary: %w", err)
	}
	return nil
}

// GetJobSummaryQueue reads a job's AI summary queue row.
func (s *Store) GetJobSummaryQueue(ctx context.Context, jobID string) (store.JobSummaryQueueRow, bool, error) {
	return queryOne(ctx, s.r(), "get job summary queue", `SELECT jobId, QueuedFor, createdUTC, updatedUTC
		FROM ethAIJobSummaryQueue WHERE jobId = ?`, func(sc sqlrows.Scanner) (store.JobSummaryQueueRow, error) {
		var r store.JobSummaryQueueRow
		err := sc.Scan(&r.JobID, scanTime{&r.QueuedFor}, scanTime{&r.CreatedUTC}, scanTime{&r.UpdatedUTC})
		return r, err
	}, mirrorGUID(jobID))
}
