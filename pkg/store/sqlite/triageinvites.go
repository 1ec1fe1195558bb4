package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// inviteColumns are the ethTriageInviteQueue columns scanInvite reads, in
// its order.
const inviteColumns = `id, jobId, statusId, queuedUTC, sentUTC, state, attempts, nextAttemptUTC,
	claimedUntilUTC, lastError, failedUTC, updatedUTC, jobVersion, statusLeftUTC, payload, statusHistoryId, jobUpdatedAt`

func scanInvite(r sqlrows.Scanner) (store.TriageInvite, error) {
	var t store.TriageInvite
	var state string
	err := r.Scan(&t.ID, &t.JobID, scanString{&t.StatusID}, scanTime{&t.QueuedUTC}, scanTime{&t.SentUTC}, &state,
		&t.Attempts, scanTime{&t.NextAttemptUTC}, scanTime{&t.ClaimedUntilUTC}, scanString{&t.LastError},
		scanTime{&t.FailedUTC}, scanTime{&t.UpdatedUTC}, scanNullInt64{&t.JobVersion}, scanTime{&t.StatusLeftUTC},
		scanString{&t.Payload}, scanString{&t.StatusHistoryID}, scanTime{&t.JobUpdatedAt})
	t.State = store.SendState(state)
	return t, err
}

// ListTriageInviteQueue lists invites in a state, oldest first.
func (s *Store) ListTriageInviteQueue(ctx context.Context, state store.InviteListState, limit int) ([]store.TriageInvite, error) {
	where := listWhere(state, `sentUTC IS NULL AND state <> '`+string(store.SendDismissed)+`'`, `state = '`+string(store.SendFailed)+`'`)
	return queryAll(ctx, s.r(), "list triage invite queue", `SELECT `+inviteColumns+` FROM ethTriageInviteQueue`+where+
		` ORDER BY id LIMIT ?`, scanInvite, listLimit(limit))
}

// ClaimTriageInvites claims the invites due at now, as ClaimSMS claims
// messages. An invite another writer stamped sent (sentUTC) is never
// claimed: it is recorded Sent first when it is Queued, Failed, or Sending
// under a lapsed claim, so that it neither waits in Queued nor fails for
// good, nor keeps the drainer waking for a claim nothing takes.
func (s *Store) ClaimTriageInvites(ctx context.Context, now time.Time, lease time.Duration, maxAttempts, limit int) ([]store.TriageInvite, error) {
	if limit > 0 {
		at := formatTime(now)
		if _, err := s.w().ExecContext(ctx, `UPDATE ethTriageInviteQueue
			SET state = ?, claimedUntilUTC = NULL, updatedUTC = ?
			WHERE sentUTC IS NOT NULL AND (state IN (?, ?) OR (state = ? AND claimedUntilUTC <= ?))`,
			string(store.SendSent), at, string(store.SendQueued), string(store.SendFailed), string(store.SendSending), at); err != nil {
			return nil, fmt.Errorf("sqlite: claim triage invites: settle those sent by another writer: %w", err)
		}
	}
	out, err := claimSendQueue(ctx, s, limit, scanInvite, func(t store.TriageInvite) int64 { return t.ID }, `UPDATE ethTriageInviteQueue
			SET state = ?, failedUTC = ?, updatedUTC = ?, claimedUntilUTC = NULL, lastError = ?
			WHERE state = ? AND claimedUntilUTC <= ? AND attempts >= ? AND sentUTC IS NULL`, `UPDATE ethTriageInviteQueue
			SET state = ?, attempts = attempts + 1, claimedUntilUTC = ?, updatedUTC = ?
			WHERE id IN (SELECT id FROM ethTriageInviteQueue
				WHERE sentUTC IS NULL AND ((state = ? AND nextAttemptUTC <= ?) OR (state = ? AND claimedUntilUTC <= ?))
				ORDER BY id LIMIT ?)
			RETURNING `+inviteColumns, now, lease, maxAttempts)
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim triage invites: %w", err)
	}
	return out, nil
}

// inviteTable is ethTriageInviteQueue as a send queue's table.
var inviteTable = sendTable{what: "triage invite", table: "ethTriageInviteQueue", exists: func(ctx context.Context, s *Store, id int64) error {
	_, err := s.GetTriageInvite(ctx, id)
	return err
}}

// SetTriageInviteSent marks an invite Sent, if it still holds the claim.
func (s *Store) SetTriageInviteSent(ctx context.Context, id int64, attempt int, at time.Time) error {
	return inviteTable.setDone(ctx, s, id, attempt, store.SendSent, at)
}

// SetTriageInviteLogged marks an invite Logged (handed to the log, never
// sent), if it still holds the claim.
func (s *Store) SetTriageInviteLogged(ctx context.Context, id int64, attempt int, at time.Time) error {
	return inviteTable.setDone(ctx, s, id, attempt, store.SendLogged, at)
}

// SetTriageInviteFailed records a failed send against its claim.
func (s *Store) SetTriageInviteFailed(ctx context.Context, id int64, attempt int, cause string, retryAt, at time.Time) error {
	return inviteTable.setFailed(ctx, s, id, attempt, cause, retryAt, at)
}

// ReleaseTriageInvite gives back a claim that posted nothing.
func (s *Store) ReleaseTriageInvite(ctx context.Context, id int64, attempt int, at time.Time) error {
	return inviteTable.release(ctx, s, id, attempt, at)
}

// DeferTriageInvite gives back a claim whose invite cannot be sent yet: due
// at until, its attempt uncounted, cause its last error.
func (s *Store) DeferTriageInvite(ctx context.Context, id int64, attempt int, cause string, until, at time.Time) error {
	return inviteTable.deferRow(ctx, s, id, attempt, cause, until, at)
}

// SetTriageInvitePayload fixes the body to post, under the claim, once.
func (s *Store) SetTriageInvitePayload(ctx context.Context, id int64, attempt int, payload string) error {
	n, err := s.execCount(ctx, `UPDATE ethTriageInviteQueue SET payload = ?
		WHERE id = ? AND state = ? AND attempts = ? AND payload IS NULL`, payload, id, string(store.SendSending), attempt)
	if err != nil {
		return fmt.Errorf("sqlite: set triage invite payload %d: %w", id, err)
	}
	if n == 1 {
		return nil
	}
	if _, err := s.GetTriageInvite(ctx, id); err != nil {
		return fmt.Errorf("sqlite: set triage invite payload: %w", err)
	}
	return fmt.Errorf("sqlite: set triage invite payload %d (attempt %d): %w", id, attempt, store.ErrClaimLost)
}

// GetTriageInvite returns one invite.
func (s *Store) GetTriageInvite(ctx context.Context, id int64) (store.TriageInvite, error) {
	t, err := scanInvite(s.r().QueryRowContext(ctx, `SELECT `+inviteColumns+` FROM ethTriageInviteQueue WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("sqlite: get triage invite %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return t, fmt.Errorf("sqlite: get triage invite %d: %w", id, err)
	}
	return t, nil
}

// NextTriageInviteDue returns when the next invite is due or the next claim
// lapses.
func (s *Store) NextTriageInviteDue(ctx context.Context) (time.Time, bool, error) {
	return s.nextDue(ctx, "next triage invite due", `SELECT MIN(t) FROM (
		SELECT MIN(nextAttemptUTC) AS t FROM ethTriageInviteQueue WHERE state = ? AND sentUTC IS NULL
		UNION ALL
		SELECT MIN(claimedUntilUTC) FROM ethTriageInviteQueue WHERE state = ?)`)
}

// OldestTriageInviteWaiting returns when the oldest invite not sent yet was
// queued.
func (s *Store) OldestTriageInviteWaiting(ctx context.Context) (time.Time, bool, error) {
	return s.oldestWaiting(ctx, "oldest triage invite waiting",
		`SELECT MIN(queuedUTC) FROM ethTriageInviteQueue WHERE state IN ('Queued', 'Sending') AND sentUTC IS NULL`)
}

// CountTriageInvites counts the invites in each state.
func (s *Store) CountTriageInvites(ctx context.Context) (map[store.SendState]int, error) {
	return s.countStates(ctx, "count triage invites", `SELECT state, COUNT(*) FROM ethTriageInviteQueue GROUP BY state`)
}
