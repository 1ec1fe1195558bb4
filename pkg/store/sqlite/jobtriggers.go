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

// The triage invite rule (sql/README.md, "Triage invites"; 061 on SQL
// Server): an invite answers one arrival of the job in a status.
//
// closeTriageInvitesSQL (?1 the time, ?2 the job, ?3 store.ArrivalSlack in
// days) closes the job's open invites whose arrival is over as the mirror
// shows it: the job mirrored in another status, or an entry of its status
// history more than the slack after the job as the invite saw it. Every
// write of the job (UpsertJob) and of its status history
// (ReplaceJobStatusHistory) runs it in its transaction, as QueueTriageInvite
// does before it looks.
var closeTriageInvitesSQL = prepare(`UPDATE ethTriageInviteQueue SET statusLeftUTC = ?1
	WHERE jobId = ?2 AND statusLeftUTC IS NULL
	  AND (EXISTS (SELECT 1 FROM primeJobs AS j WHERE j.jobId = ethTriageInviteQueue.jobId
	               AND j.statusId IS NOT NULL AND j.statusId IS NOT ethTriageInviteQueue.statusId)
	    OR EXISTS (SELECT 1 FROM primeJobStatusHistory AS h WHERE h.jobId = ethTriageInviteQueue.jobId
	               AND julianday(h.createdAt) > julianday(ethTriageInviteQueue.jobUpdatedAt) + ?3))`)

// openTriageInviteSQL (?1 the job, ?2 the status, ?3 the slack in days, ?4
// the time, ?5 1 for "only on the history's word", ?6 Queued) queues an
// invite, due at once, when the job is mirrored in the status and has no
// open invite. It answers the latest entry of the job's status history when
// that entry is an arrival in the status no invite answers yet (none is
// keyed on it, and it is more than the slack after the job as each earlier
// invite saw it); with ?5 = 1 it is queued only then.
var openTriageInviteSQL = prepare(`WITH latest AS (
		SELECT statusHistoryId, statusId, createdAt FROM primeJobStatusHistory
		WHERE jobId = ?1 ORDER BY createdAt DESC, statusHistoryId DESC LIMIT 1),
	entry AS (
		SELECT l.statusHistoryId, l.createdAt FROM latest AS l
		WHERE l.statusId = ?2
		  AND NOT EXISTS (SELECT 1 FROM ethTriageInviteQueue AS p WHERE p.jobId = ?1
		                  AND (p.statusHistoryId = l.statusHistoryId
		                       OR julianday(l.createdAt) <= julianday(p.jobUpdatedAt) + ?3)))
	INSERT INTO ethTriageInviteQueue
		(jobId, statusId, jobVersion, jobUpdatedAt, statusHistoryId, queuedUTC, state, attempts, nextAttemptUTC, updatedUTC)
	SELECT j.jobId, j.statusId, j.version,
	       CASE WHEN j.updatedAt IS NULL OR e.createdAt > j.updatedAt THEN e.createdAt ELSE j.updatedAt END,
	       e.statusHistoryId, ?4, ?6, 0, ?4, ?4
	FROM primeJobs AS j LEFT JOIN entry AS e ON 1
	WHERE j.jobId = ?1 AND j.statusId = ?2
	  AND (?5 = 0 OR e.statusHistoryId IS NOT NULL)
	  AND NOT EXISTS (SELECT 1 FROM ethTriageInviteQueue AS q WHERE q.jobId = ?1 AND q.statusLeftUTC IS NULL)`)

// arrivalSlack is store.ArrivalSlack in days, as julianday counts.
var arrivalSlack = store.ArrivalSlack.Hours() / 24

// closeTriageInvites runs closeTriageInvitesSQL for the job (lower case) in
// tx, the single writer's transaction.
func closeTriageInvites(ctx context.Context, tx *Store, jobID, now string) error {
	if _, err := tx.w().ExecContext(ctx, closeTriageInvitesSQL, now, jobID, arrivalSlack); err != nil {
		return fmt.Errorf("close triage invites: %w", err)
	}
	return nil
}

// openTriageInvite runs openTriageInviteSQL and reports whether it queued
// an invite.
func openTriageInvite(ctx context.Context, tx *Store, jobID, statusID, now string, onHistory bool) (bool, error) {
	n, err := tx.execCount(ctx, openTriageInviteSQL, jobID, statusID, arrivalSlack, now, onHistory, string(store.SendQueued))
	if err != nil {
		return false, fmt.Errorf("queue triage invite: %w", err)
	}
	return n == 1, nil
}

// reviewTriageInvites follows a write of the job's status history: the
// invites it shows over are closed, and a job an event invited before, in
// the status of its last invite and of its latest entry, is invited for an
// arrival that entry alone shows (both events of a leave and a return
// handled after the return found the job in the status).
func reviewTriageInvites(ctx context.Context, tx *Store, jobID, now string) error {
	if err := closeTriageInvites(ctx, tx, jobID, now); err != nil {
		return err
	}
	var status sql.NullString
	err := tx.r().QueryRowContext(ctx, `SELECT statusId FROM ethTriageInviteQueue WHERE jobId = ? ORDER BY id DESC LIMIT 1`, jobID).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !status.Valid) {
		return nil // no event invited the job
	}
	if err != nil {
		return fmt.Errorf("review triage invites: %w", err)
	}
	_, err = openTriageInvite(ctx, tx, jobID, status.String, now, true)
	return err
}

// QueueTriageInvite closes the job's invites whose arrival is over, then
// queues one when the mirrored status is the Initial-Contact-Made status and
// the job has no open invite (openTriageInviteSQL). The one writer makes
// the check and the insert atomic; the partial unique index keeps a job to
// one pending invite of an open arrival.
func (s *Store) QueueTriageInvite(ctx context.Context, jobID, initialContactMadeStatusID string) (bool, error) {
	if initialContactMadeStatusID == "" {
		return false, nil
	}
	now := formatTime(time.Now())
	jobID = strings.ToLower(jobID)
	var queued bool
	err := s.inTx(ctx, func(tx *Store) error {
		if err := closeTriageInvites(ctx, tx, jobID, now); err != nil {
			return err
		}
		var err error
		queued, err = openTriageInvite(ctx, tx, jobID, strings.ToLower(initialContactMadeStatusID), now, false)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("sqlite: %w", err)
	}
	return queued, nil
}

// ListTriageInvites lists a job's invites, oldest first.
func (s *Store) ListTriageInvites(ctx context.Context, jobID string) ([]store.TriageInvite, error) {
	return queryAll(ctx, s.r(), "list triage invites", `SELECT `+inviteColumns+`
		FROM ethTriageInviteQueue WHERE jobId = ? ORDER BY id`, scanInvite, strings.ToLower(jobID))
}
