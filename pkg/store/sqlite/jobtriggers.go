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

// QueueClientWIPStatusChange queues a StatusChange trigger unless the job
// already has one from the same source (the unique index decides).
func (s *Store) QueueClientWIPStatusChange(ctx context.Context, jobID, source string) (bool, error) {
	if jobID == "" || source == "" {
		return false, errors.New("sqlite: queue client wip status change: job and source are required")
	}
	res, err := s.w().ExecContext(ctx, `INSERT INTO ethClientWIPTrigger (jobId, triggerType, source, queuedUTC)
		VALUES (?, ?, ?, ?) ON CONFLICT (jobId, source) DO NOTHING`,
		strings.ToLower(jobID), store.ClientWIPStatusChange, source, formatTime(time.Now()))
	if err != nil {
		return false, fmt.Errorf("sqlite: queue client wip status change: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("sqlite: queue client wip status change: %w", err)
	}
	return n == 1, nil
}

// ListClientWIPTriggers lists a job's triggers, oldest first.
func (s *Store) ListClientWIPTriggers(ctx context.Context, jobID string) ([]store.ClientWIPTrigger, error) {
	return queryAll(ctx, s.r(), "list client wip triggers", `SELECT id, jobId, triggerType, source, queuedUTC, processedUTC
		FROM ethClientWIPTrigger WHERE jobId = ? ORDER BY id`, func(sc sqlrows.Scanner) (store.ClientWIPTrigger, error) {
		var t store.ClientWIPTrigger
		err := sc.Scan(&t.ID, &t.JobID, &t.TriggerType, &t.Source, scanTime{&t.QueuedUTC}, scanTime{&t.ProcessedUTC})
		return t, err
	}, strings.ToLower(jobID))
}

// QueueTriageInvite queues an invite when the mirrored status is the
// Initial-Contact-Made status and the job has no open invite, after closing
// an open invite whose status the job is no longer in; the partial unique
// index keeps it to one open invite a job. A new invite is due at once.
func (s *Store) QueueTriageInvite(ctx context.Context, jobID, initialContactMadeStatusID string) (bool, error) {
	if initialContactMadeStatusID == "" {
		return false, nil
	}
	now := formatTime(time.Now())
	jobID = strings.ToLower(jobID)
	var queued bool
	err := s.inTx(ctx, func(tx *Store) error {
		if _, err := tx.w().ExecContext(ctx, `UPDATE ethTriageInviteQueue SET statusLeftUTC = ?
			WHERE jobId = ? AND statusLeftUTC IS NULL
			  AND EXISTS (SELECT 1 FROM primeJobs AS j WHERE j.jobId = ethTriageInviteQueue.jobId
			              AND j.statusId IS NOT ethTriageInviteQueue.statusId)`, now, jobID); err != nil {
			return err
		}
		n, err := tx.execCount(ctx, `INSERT INTO ethTriageInviteQueue
			(jobId, statusId, jobVersion, queuedUTC, state, attempts, nextAttemptUTC, updatedUTC)
			SELECT j.jobId, j.statusId, j.version, ?, ?, 0, ?, ? FROM primeJobs AS j
			WHERE j.jobId = ? AND j.statusId = ?
			  AND NOT EXISTS (SELECT 1 FROM ethTriageInviteQueue AS q WHERE q.jobId = j.jobId AND q.statusLeftUTC IS NULL)`,
			now, string(store.SendQueued), now, now, jobID, strings.ToLower(initialContactMadeStatusID))
		queued = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("sqlite: queue triage invite: %w", err)
	}
	return queued, nil
}

// ListTriageInvites lists a job's invites, oldest first.
func (s *Store) ListTriageInvites(ctx context.Context, jobID string) ([]store.TriageInvite, error) {
	return queryAll(ctx, s.r(), "list triage invites", `SELECT `+inviteColumns+`
		FROM ethTriageInviteQueue WHERE jobId = ? ORDER BY id`, scanInvite, strings.ToLower(jobID))
}
