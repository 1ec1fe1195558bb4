package sqlite

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// ReplaceJobStatusHistory makes the job's status changes exactly hs and,
// in the same transaction, reviews the job's triage invites by them.
func (s *Store) ReplaceJobStatusHistory(ctx context.Context, jobID string, hs []store.JobStatusHistory) error {
	if jobID == "" {
		return errors.New("sqlite: replace job status history: no job id")
	}
	return s.inTx(ctx, func(tx *Store) error {
		if err := replaceJobStatusHistory(ctx, tx, jobID, hs); err != nil {
			return err
		}
		if err := reviewTriageInvites(ctx, tx, strings.ToLower(jobID), formatTime(time.Now())); err != nil {
			return fmt.Errorf("sqlite: replace job status history: %w", err)
		}
		return nil
	})
}

// replaceJobStatusHistory is the replace itself.
func replaceJobStatusHistory(ctx context.Context, s *Store, jobID string, hs []store.JobStatusHistory) error {
	return replaceRows(ctx, s, "replace job status history", `DELETE FROM primeJobStatusHistory WHERE jobId = ?`,
		[]any{mirrorGUID(jobID)}, `INSERT INTO primeJobStatusHistory
			(statusHistoryId, jobId, statusId, createdAt, attributes, syncedUTC)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (statusHistoryId) DO UPDATE SET
				jobId = excluded.jobId, statusId = excluded.statusId, createdAt = excluded.createdAt,
				attributes = excluded.attributes, syncedUTC = excluded.syncedUTC`, hs,
		func(h store.JobStatusHistory, now string) ([]any, error) {
			if h.StatusHistoryID == "" {
				return nil, errors.New("a status history entry has no id")
			}
			return []any{mirrorGUID(h.StatusHistoryID), mirrorGUID(jobID), mirrorGUID(h.StatusID), nullTime(h.CreatedAt),
				nullString(h.Attributes), now}, nil
		})
}

// ListJobStatusHistory reads a job's status changes, oldest first.
func (s *Store) ListJobStatusHistory(ctx context.Context, jobID string) ([]store.JobStatusHistory, error) {
	return queryAll(ctx, s.r(), "list job status history", `SELECT statusHistoryId, jobId, statusId, createdAt,
		attributes, syncedUTC FROM primeJobStatusHistory WHERE jobId = ? ORDER BY createdAt, statusHistoryId`,
		func(sc sqlrows.Scanner) (store.JobStatusHistory, error) {
			var h store.JobStatusHistory
			err := sc.Scan(&h.StatusHistoryID, scanString{&h.JobID}, scanString{&h.StatusID}, scanTime{&h.CreatedAt},
				scanString{&h.Attributes}, scanTime{&h.SyncedUTC})
			return h, err
		}, mirrorGUID(jobID))
}
