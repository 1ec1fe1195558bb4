package mssql

import (
	"context"
	"database/sql"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// scanInvite reads the columns the invite procedures return, in their order.
func scanInvite(r sqlrows.Scanner) (store.TriageInvite, error) {
	var t store.TriageInvite
	var state string
	err := r.Scan(&t.ID, scanGUID{&t.JobID}, scanGUID{&t.StatusID}, scanTime{&t.QueuedUTC}, scanTime{&t.SentUTC},
		scanString{&state}, &t.Attempts, scanTime{&t.NextAttemptUTC}, scanTime{&t.ClaimedUntilUTC},
		scanString{&t.LastError}, scanTime{&t.FailedUTC}, scanTime{&t.UpdatedUTC}, scanInt64{&t.JobVersion},
		scanTime{&t.StatusLeftUTC}, scanString{&t.Payload}, scanGUID{&t.StatusHistoryID}, scanTime{&t.JobUpdatedAt})
	t.State = store.SendState(state)
	return t, err
}

// ListTriageInviteQueue lists invites in a state (spPrimeflowListTriageInviteQueue).
func (s *Store) ListTriageInviteQueue(ctx context.Context, state store.InviteListState, limit int) ([]store.TriageInvite, error) {
	return queryAll(ctx, s.q(), "list triage invite queue", procListTriageInviteQueue, scanInvite, listArgs(state, limit)...)
}

// ClaimTriageInvites claims the invites due at now (spPrimeflowClaimTriageInvites).
func (s *Store) ClaimTriageInvites(ctx context.Context, now time.Time, lease time.Duration, maxAttempts, limit int) ([]store.TriageInvite, error) {
	if limit <= 0 {
		return nil, nil
	}
	return queryAll(ctx, s.q(), "claim triage invites", procClaimTriageInvites, scanInvite,
		sql.Named("NowUTC", sqlTime(now)), sql.Named("LeaseUntilUTC", sqlTime(now.Add(lease))),
		sql.Named("MaxAttempts", maxAttempts), sql.Named("Top", limit))
}

// inviteQueue is ethTriageInviteQueue's procedures.
var inviteQueue = sendQueue[store.TriageInvite]{what: "triage invite", sent: procSetTriageInviteSent,
	failed: procSetTriageInviteFailed, released: procReleaseTriageInvite, get: procGetTriageInvite, scan: scanInvite}

// SetTriageInviteSent marks an invite Sent, if it still holds the claim
// (spPrimeflowSetTriageInviteSent).
func (s *Store) SetTriageInviteSent(ctx context.Context, id int64, attempt int, at time.Time) error {
	return inviteQueue.setSent(ctx, s, id, attempt, store.SendSent, at)
}

// SetTriageInviteLogged marks an invite Logged, if it still holds the claim
// (spPrimeflowSetTriageInviteSent @State = 'Logged').
func (s *Store) SetTriageInviteLogged(ctx context.Context, id int64, attempt int, at time.Time) error {
	return inviteQueue.setSent(ctx, s, id, attempt, store.SendLogged, at)
}

// SetTriageInviteFailed records a failed send against its claim
// (spPrimeflowSetTriageInviteFailed).
func (s *Store) SetTriageInviteFailed(ctx context.Context, id int64, attempt int, cause string, retryAt, at time.Time) error {
	return inviteQueue.setFailed(ctx, s, id, attempt, cause, retryAt, at)
}

// ReleaseTriageInvite gives back a claim that posted nothing
// (spPrimeflowReleaseTriageInvite).
func (s *Store) ReleaseTriageInvite(ctx context.Context, id int64, attempt int, at time.Time) error {
	return inviteQueue.release(ctx, s, id, attempt, at)
}

// DeferTriageInvite gives back a claim whose invite cannot be sent yet, due
// at until (spPrimeflowReleaseTriageInvite @RetryUTC, @Error).
func (s *Store) DeferTriageInvite(ctx context.Context, id int64, attempt int, cause string, until, at time.Time) error {
	return inviteQueue.deferRow(ctx, s, id, attempt, cause, until, at)
}

// SetTriageInvitePayload fixes the body to post, under the claim, once
// (spPrimeflowSetTriageInvitePayload).
func (s *Store) SetTriageInvitePayload(ctx context.Context, id int64, attempt int, payload string) error {
	return inviteQueue.update(ctx, s, "set triage invite payload", id, attempt, procSetTriageInvitePayload, sql.Named("Payload", payload))
}

// GetTriageInvite returns one invite (spPrimeflowGetTriageInvite).
func (s *Store) GetTriageInvite(ctx context.Context, id int64) (store.TriageInvite, error) {
	return inviteQueue.getRow(ctx, s, id)
}

// NextTriageInviteDue returns when the next invite is due
// (spPrimeflowNextTriageInviteDue).
func (s *Store) NextTriageInviteDue(ctx context.Context) (time.Time, bool, error) {
	return s.nextDue(ctx, "next triage invite due", procNextTriageInviteDue)
}

// OldestTriageInviteWaiting returns when the oldest invite not sent yet was
// queued (spPrimeflowOldestTriageInviteWaiting).
func (s *Store) OldestTriageInviteWaiting(ctx context.Context) (time.Time, bool, error) {
	return s.oldestWaiting(ctx, "oldest triage invite waiting", procOldestInviteWaiting)
}

// CountTriageInvites counts the invites in each state
// (spPrimeflowCountTriageInvites).
func (s *Store) CountTriageInvites(ctx context.Context) (map[store.SendState]int, error) {
	return s.countStates(ctx, "count triage invites", procCountTriageInvites)
}
