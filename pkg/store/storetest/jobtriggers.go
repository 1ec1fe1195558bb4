package storetest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

func testClientWIPTriggers(t *testing.T, open Opener) {
	ctx := context.Background()
	is := is.New(t)
	s := open(t)
	is.Equal(store.ClientWIPSource(12), "ethPrimeWebhookLog:12") // §5.1 step 5's source

	queued, err := s.QueueClientWIPStatusChange(ctx, strings.ToUpper(jobA), store.ClientWIPSource(12))
	is.NoErr(err)
	is.True(queued) // the first trigger from a source is queued
	queued, err = s.QueueClientWIPStatusChange(ctx, jobA, store.ClientWIPSource(12))
	is.NoErr(err)
	is.True(!queued) // the same source again (a replay) is not
	queued, err = s.QueueClientWIPStatusChange(ctx, jobA, store.ClientWIPSource(13))
	is.NoErr(err)
	is.True(queued) // another event of the job is
	queued, err = s.QueueClientWIPStatusChange(ctx, jobB, store.ClientWIPSource(12))
	is.NoErr(err)
	is.True(queued) // and the same source for another job is

	got, err := s.ListClientWIPTriggers(ctx, jobA)
	is.NoErr(err)
	is.Equal(len(got), 2) // two triggers for the job
	is.Equal(got[0].JobID, jobA)
	is.Equal(got[0].TriggerType, store.ClientWIPStatusChange) // StatusChange
	is.Equal(got[0].Source, "ethPrimeWebhookLog:12")
	is.Equal(got[1].Source, "ethPrimeWebhookLog:13") // oldest first
	is.True(!got[0].QueuedUTC.IsZero())
	is.True(got[0].ProcessedUTC.IsZero()) // not processed yet

	_, err = s.QueueClientWIPStatusChange(ctx, jobA, "")
	is.True(err != nil) // a trigger needs a source
}

func testTriageInvites(t *testing.T, open Opener) {
	ctx := context.Background()
	is := is.New(t)
	s := open(t)

	queued, err := s.QueueTriageInvite(ctx, jobA, statusICM)
	is.NoErr(err)
	is.True(!queued) // a job not in the mirror gets no invite

	_, err = s.UpsertJob(ctx, sampleJob(jobA, statusNew, 1))
	is.NoErr(err)
	queued, err = s.QueueTriageInvite(ctx, jobA, statusICM)
	is.NoErr(err)
	is.True(!queued) // nor one in another status

	_, err = s.UpsertJob(ctx, sampleJob(jobA, statusICM, 2))
	is.NoErr(err)
	queued, err = s.QueueTriageInvite(ctx, jobA, "")
	is.NoErr(err)
	is.True(!queued) // no Initial-Contact-Made status configured: nothing
	queued, err = s.QueueTriageInvite(ctx, strings.ToUpper(jobA), strings.ToUpper(statusICM))
	is.NoErr(err)
	is.True(queued) // Initial Contact Made: queued, whatever the GUIDs' case
	queued, err = s.QueueTriageInvite(ctx, jobA, statusICM)
	is.NoErr(err)
	is.True(!queued) // an invite is pending: skipped

	got, err := s.ListTriageInvites(ctx, jobA)
	is.NoErr(err)
	is.Equal(len(got), 1) // one invite
	is.Equal(got[0].JobID, jobA)
	is.Equal(got[0].StatusID, statusICM) // the status it was queued in
	is.True(got[0].Pending())            // waiting to be sent
	is.True(!got[0].QueuedUTC.IsZero())
	is.Equal(got[0].JobVersion, int64(2)) // and the job's version then
	none, err := s.ListTriageInvites(ctx, jobB)
	is.NoErr(err)
	is.Equal(len(none), 0) // other jobs have none

	// §10.4: the invite answers the job's arrival in the status; sent, it
	// still does, so a duplicate or replayed event invites nobody twice.
	claimed, err := s.ClaimTriageInvites(ctx, time.Now(), time.Minute, 5, 10)
	is.NoErr(err)
	is.Equal(len(claimed), 1)
	is.NoErr(s.SetTriageInviteSent(ctx, claimed[0].ID, claimed[0].Attempts, time.Now()))
	queued, err = s.QueueTriageInvite(ctx, jobA, statusICM)
	is.NoErr(err)
	is.True(!queued) // the same status change, after its invite was sent: nothing
	_, err = s.UpsertJob(ctx, sampleJob(jobA, statusICM, 3))
	is.NoErr(err)
	queued, err = s.QueueTriageInvite(ctx, jobA, statusICM)
	is.NoErr(err)
	is.True(!queued) // nor after another change of the job in the same status
	_, err = s.UpsertJob(ctx, sampleJob(jobA, statusNew, 4))
	is.NoErr(err)
	queued, err = s.QueueTriageInvite(ctx, jobA, statusICM)
	is.NoErr(err)
	is.True(!queued) // the job left the status
	got, err = s.ListTriageInvites(ctx, jobA)
	is.NoErr(err)
	is.True(!got[0].StatusLeftUTC.IsZero()) // which closes the change its invite answered
	_, err = s.UpsertJob(ctx, sampleJob(jobA, statusICM, 5))
	is.NoErr(err)
	queued, err = s.QueueTriageInvite(ctx, jobA, statusICM)
	is.NoErr(err)
	is.True(queued) // and its return to it is a change of its own
	queued, err = s.QueueTriageInvite(ctx, jobA, statusICM)
	is.NoErr(err)
	is.True(!queued) // once
	got, err = s.ListTriageInvites(ctx, jobA)
	is.NoErr(err)
	is.Equal(len(got), 2)
	is.Equal(got[1].JobVersion, int64(5))  // seen at the version it came back at
	is.True(got[1].StatusLeftUTC.IsZero()) // still open
	is.True(got[1].Pending() && got[1].ID > got[0].ID)
}

// The triage invite queue is a send queue like smsQueue: claimed, failed,
// retried, sent once, Failed for a person, each outcome against its claim.
func testTriageInviteQueue(t *testing.T, open Opener) {
	ctx := context.Background()
	const lease = time.Minute
	queue := func(t *testing.T, s store.Store, job string) store.TriageInvite {
		t.Helper()
		is := is.New(t)
		_, err := s.UpsertJob(ctx, sampleJob(job, statusICM, 1))
		is.NoErr(err)
		queued, err := s.QueueTriageInvite(ctx, job, statusICM)
		is.NoErr(err)
		is.True(queued)
		got, err := s.ListTriageInvites(ctx, job)
		is.NoErr(err)
		return got[len(got)-1]
	}

	t.Run("queued, sending, failed, queued, sending, sent", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		_, ok, err := s.NextTriageInviteDue(ctx)
		is.NoErr(err)
		is.True(!ok) // nothing waits in an empty queue
		inv := queue(t, s, jobA)
		is.Equal(inv.State, store.SendQueued) // a new invite is queued
		is.Equal(inv.Attempts, 0)
		due, ok, err := s.NextTriageInviteDue(ctx)
		is.NoErr(err)
		is.True(ok && !due.After(time.Now())) // and due at once

		t0 := time.Now().Add(time.Second).Truncate(time.Millisecond)
		got, err := s.ClaimTriageInvites(ctx, t0, lease, 3, 10)
		is.NoErr(err)
		is.Equal(len(got), 1)                                // claimed
		is.Equal(got[0].ID, inv.ID)                          // the invite
		is.Equal(got[0].JobID, jobA)                         // of the job
		is.Equal(got[0].StatusID, statusICM)                 // in the status it was queued in
		is.Equal(got[0].State, store.SendSending)            // now Sending
		is.Equal(got[0].Attempts, 1)                         // first attempt
		is.True(got[0].ClaimedUntilUTC.Equal(t0.Add(lease))) // until the lease ends
		got, err = s.ClaimTriageInvites(ctx, t0.Add(time.Second), lease, 3, 10)
		is.NoErr(err)
		is.Equal(len(got), 0) // not claimed twice

		is.NoErr(s.SetTriageInviteFailed(ctx, inv.ID, 1, "HTTP 503", t0.Add(30*time.Second), t0.Add(time.Second)))
		m, err := s.GetTriageInvite(ctx, inv.ID)
		is.NoErr(err)
		is.Equal(m.State, store.SendQueued)                       // queued again
		is.Equal(m.LastError, "HTTP 503")                         // with the error
		is.True(m.NextAttemptUTC.Equal(t0.Add(30 * time.Second))) // from the retry time
		got, err = s.ClaimTriageInvites(ctx, t0.Add(10*time.Second), lease, 3, 10)
		is.NoErr(err)
		is.Equal(len(got), 0) // not before it
		got, err = s.ClaimTriageInvites(ctx, t0.Add(30*time.Second), lease, 3, 10)
		is.NoErr(err)
		is.Equal(len(got), 1)        // claimed at it
		is.Equal(got[0].Attempts, 2) // second attempt

		err = s.SetTriageInviteSent(ctx, inv.ID, 1, t0.Add(31*time.Second))
		is.True(errors.Is(err, store.ErrClaimLost)) // an earlier claim records nothing
		is.NoErr(s.SetTriageInviteSent(ctx, inv.ID, 2, t0.Add(31*time.Second)))
		m, err = s.GetTriageInvite(ctx, inv.ID)
		is.NoErr(err)
		is.Equal(m.State, store.SendSent)                  // sent
		is.True(m.SentUTC.Equal(t0.Add(31 * time.Second))) // stamped when
		is.True(!m.Pending())                              // no longer pending
		got, err = s.ClaimTriageInvites(ctx, t0.Add(time.Hour), lease, 3, 10)
		is.NoErr(err)
		is.Equal(len(got), 0) // never claimed again
		counts, err := s.CountTriageInvites(ctx)
		is.NoErr(err)
		is.Equal(counts, map[store.SendState]int{store.SendQueued: 0, store.SendSending: 0, store.SendSent: 1, store.SendLogged: 0, store.SendFailed: 0, store.SendDismissed: 0})

		_, err = s.GetTriageInvite(ctx, inv.ID+100)
		is.True(errors.Is(err, store.ErrNotFound)) // an unknown id
		is.True(errors.Is(s.SetTriageInviteSent(ctx, inv.ID+100, 1, t0), store.ErrNotFound))
		is.True(errors.Is(s.ReleaseTriageInvite(ctx, inv.ID+100, 1, t0), store.ErrNotFound))
		is.True(errors.Is(s.DeferTriageInvite(ctx, inv.ID+100, 1, "wait", t0, t0), store.ErrNotFound))
		is.True(errors.Is(s.SetTriageInvitePayload(ctx, inv.ID+100, 1, "{}"), store.ErrNotFound))
	})

	t.Run("the body is fixed once, by the claim that holds the invite", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		inv := queue(t, s, jobA)
		is.Equal(inv.Payload, "") // none until a claim builds it
		t0 := time.Now().Add(time.Second).Truncate(time.Millisecond)
		got, err := s.ClaimTriageInvites(ctx, t0, lease, 3, 10)
		is.NoErr(err)
		is.True(errors.Is(s.SetTriageInvitePayload(ctx, inv.ID, got[0].Attempts+1, `{"id":1}`), store.ErrClaimLost)) // not by another claim
		is.NoErr(s.SetTriageInvitePayload(ctx, inv.ID, got[0].Attempts, `{"id":1,"name":"Zoë"}`))
		is.True(errors.Is(s.SetTriageInvitePayload(ctx, inv.ID, got[0].Attempts, `{"id":2}`), store.ErrClaimLost)) // nor twice
		is.NoErr(s.SetTriageInviteFailed(ctx, inv.ID, got[0].Attempts, "HTTP 503", t0, t0))
		got, err = s.ClaimTriageInvites(ctx, t0, lease, 3, 10)
		is.NoErr(err)
		is.Equal(len(got), 1)
		is.Equal(got[0].Payload, `{"id":1,"name":"Zoë"}`) // the next claim gets it as it was
	})

	t.Run("a deferred invite waits without using an attempt", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		inv := queue(t, s, jobA)
		t0 := time.Now().Add(time.Second).Truncate(time.Millisecond)
		got, err := s.ClaimTriageInvites(ctx, t0, lease, 1, 10)
		is.NoErr(err)
		is.Equal(got[0].Attempts, 1)
		until := t0.Add(time.Minute)
		is.NoErr(s.DeferTriageInvite(ctx, inv.ID, 1, "the primary contact is not mirrored yet", until, t0))
		m, err := s.GetTriageInvite(ctx, inv.ID)
		is.NoErr(err)
		is.Equal(m.State, store.SendQueued)                                                             // given back
		is.Equal(m.Attempts, 0)                                                                         // its attempt not counted
		is.True(m.NextAttemptUTC.Equal(until))                                                          // due when the wait ends
		is.Equal(m.LastError, "the primary contact is not mirrored yet")                                // saying why it waits
		is.True(errors.Is(s.DeferTriageInvite(ctx, inv.ID, 1, "again", until, t0), store.ErrClaimLost)) // once a claim
		got, err = s.ClaimTriageInvites(ctx, until.Add(-time.Millisecond), lease, 1, 10)
		is.NoErr(err)
		is.Equal(len(got), 0) // not before
		got, err = s.ClaimTriageInvites(ctx, until, lease, 1, 10)
		is.NoErr(err)
		is.Equal(len(got), 1)        // then claimed
		is.Equal(got[0].Attempts, 1) // as its first attempt, the last of MaxAttempts 1
	})

	t.Run("the oldest invite not sent yet is the one that has waited longest", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		_, ok, err := s.OldestTriageInviteWaiting(ctx)
		is.NoErr(err)
		is.True(!ok) // none in an empty queue
		first := queue(t, s, jobA)
		second := queue(t, s, jobB)
		oldest, ok, err := s.OldestTriageInviteWaiting(ctx)
		is.NoErr(err)
		is.True(ok && oldest.Equal(first.QueuedUTC)) // the first queued
		t0 := time.Now().Add(time.Second).Truncate(time.Millisecond)
		got, err := s.ClaimTriageInvites(ctx, t0, lease, 3, 1)
		is.NoErr(err)
		is.Equal(got[0].ID, first.ID)
		oldest, _, err = s.OldestTriageInviteWaiting(ctx)
		is.NoErr(err)
		is.True(oldest.Equal(first.QueuedUTC)) // a Sending one still waits
		is.NoErr(s.SetTriageInviteSent(ctx, first.ID, 1, t0))
		oldest, ok, err = s.OldestTriageInviteWaiting(ctx)
		is.NoErr(err)
		is.True(ok && oldest.Equal(second.QueuedUTC)) // then the next
		got, err = s.ClaimTriageInvites(ctx, t0, lease, 3, 1)
		is.NoErr(err)
		is.NoErr(s.SetTriageInviteFailed(ctx, got[0].ID, 1, "HTTP 400", time.Time{}, t0))
		_, ok, err = s.OldestTriageInviteWaiting(ctx)
		is.NoErr(err)
		is.True(!ok) // a Failed one waits for a person, not to be sent
	})

	t.Run("logged, never sent, is told apart from sent", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		inv := queue(t, s, jobA)
		t0 := time.Now().Add(time.Second).Truncate(time.Millisecond)
		got, err := s.ClaimTriageInvites(ctx, t0, lease, 3, 10)
		is.NoErr(err)
		is.Equal(len(got), 1)
		is.NoErr(s.SetTriageInviteLogged(ctx, inv.ID, got[0].Attempts, t0))
		m, err := s.GetTriageInvite(ctx, inv.ID)
		is.NoErr(err)
		is.Equal(m.State, store.SendLogged) // Logged, not Sent
		is.True(m.SentUTC.Equal(t0))        // done with, stamped
		is.True(!m.Pending())               // and no longer pending
		counts, err := s.CountTriageInvites(ctx)
		is.NoErr(err)
		is.Equal(counts[store.SendLogged], 1) // counted apart
		is.Equal(counts[store.SendSent], 0)
		is.True(errors.Is(s.SetTriageInviteLogged(ctx, inv.ID, got[0].Attempts, t0), store.ErrClaimLost)) // once
	})

	t.Run("failed for good, it answers its change until the job leaves the status", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		inv := queue(t, s, jobA)
		t0 := time.Now().Add(time.Second).Truncate(time.Millisecond)
		_, err := s.ClaimTriageInvites(ctx, t0, lease, 5, 10)
		is.NoErr(err)
		is.NoErr(s.SetTriageInviteFailed(ctx, inv.ID, 1, strings.Repeat("e", 2*store.MaxStatusLen), time.Time{}, t0))
		m, err := s.GetTriageInvite(ctx, inv.ID)
		is.NoErr(err)
		is.Equal(m.State, store.SendFailed)            // Failed
		is.True(m.FailedUTC.Equal(t0))                 // when
		is.Equal(len(m.LastError), store.MaxStatusLen) // the error cut to size
		is.True(m.Pending())                           // not sent
		queued, err := s.QueueTriageInvite(ctx, jobA, statusICM)
		is.NoErr(err)
		is.True(!queued) // so no second invite for the same change while a person looks at it

		other := queue(t, s, jobB)
		pending, err := s.ListTriageInviteQueue(ctx, store.InvitesPending, 0)
		is.NoErr(err)
		is.Equal(len(pending), 2) // the failed one and the queued one
		is.Equal(pending[0].ID, inv.ID)
		failed, err := s.ListTriageInviteQueue(ctx, store.InvitesFailed, 0)
		is.NoErr(err)
		is.Equal(len(failed), 1) // the failed one alone
		is.Equal(failed[0].ID, inv.ID)
		_, err = s.ClaimTriageInvites(ctx, t0, lease, 5, 10)
		is.NoErr(err)
		is.NoErr(s.SetTriageInviteSent(ctx, other.ID, 1, t0))
		all, err := s.ListTriageInviteQueue(ctx, store.InvitesAll, 1)
		is.NoErr(err)
		is.Equal(len(all), 1) // the limit holds
		pending, err = s.ListTriageInviteQueue(ctx, store.InvitesPending, 0)
		is.NoErr(err)
		is.Equal(len(pending), 1) // the sent one is no longer pending

		// The job leaves the status and comes back: a new change, invited
		// though the Failed invite is still there for a person.
		_, err = s.UpsertJob(ctx, sampleJob(jobA, statusNew, 2))
		is.NoErr(err)
		queued, err = s.QueueTriageInvite(ctx, jobA, statusICM)
		is.NoErr(err)
		is.True(!queued)
		_, err = s.UpsertJob(ctx, sampleJob(jobA, statusICM, 3))
		is.NoErr(err)
		queued, err = s.QueueTriageInvite(ctx, jobA, statusICM)
		is.NoErr(err)
		is.True(queued) // not blocked by the Failed one
		m, err = s.GetTriageInvite(ctx, inv.ID)
		is.NoErr(err)
		is.Equal(m.State, store.SendFailed) // which stays Failed
		pending, err = s.ListTriageInviteQueue(ctx, store.InvitesPending, 0)
		is.NoErr(err)
		is.Equal(len(pending), 2) // both are unsent
	})

	t.Run("a lapsed claim is claimed again until the last attempt; a release uses none", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		inv := queue(t, s, jobA)
		t0 := time.Now().Add(time.Second).Truncate(time.Millisecond)
		got, err := s.ClaimTriageInvites(ctx, t0, lease, 2, 10)
		is.NoErr(err)
		is.NoErr(s.ReleaseTriageInvite(ctx, inv.ID, got[0].Attempts, t0))
		m, err := s.GetTriageInvite(ctx, inv.ID)
		is.NoErr(err)
		is.Equal(m.State, store.SendQueued) // given back
		is.Equal(m.Attempts, 0)             // its attempt not counted
		for attempt := 1; attempt <= 2; attempt++ {
			now := t0.Add(time.Duration(attempt) * 2 * lease)
			got, err := s.ClaimTriageInvites(ctx, now, lease, 2, 10)
			is.NoErr(err)
			is.Equal(len(got), 1)              // claimed (again, once the claim lapsed)
			is.Equal(got[0].Attempts, attempt) // counting attempts
		}
		got, err = s.ClaimTriageInvites(ctx, t0.Add(10*lease), lease, 2, 10)
		is.NoErr(err)
		is.Equal(len(got), 0) // the last attempt's lapsed claim is not sent again
		m, err = s.GetTriageInvite(ctx, inv.ID)
		is.NoErr(err)
		is.Equal(m.State, store.SendFailed) // it failed
		is.True(m.LastError != "")          // saying why
	})
}

// A return to the triage status is a change of its own however the mirror
// learns of it (§10.4): a write of the job in another status, by any path
// (an event, the backstop, an ensure, a child's event), closes the invite
// that answered the arrival before; Prime's status history, where the mirror
// holds it, tells one arrival from the next when the mirror never held the
// job in another status; and neither invites twice for one arrival.
func testTriageInviteArrivals(t *testing.T, open Opener) {
	ctx := context.Background()
	updated := sampleJob(jobA, statusICM, 1).UpdatedAt // Prime's updatedAt of the sample job
	at := func(j store.Job, version int64, d time.Duration) store.Job {
		j.Version, j.UpdatedAt = version, updated.Add(d)
		return j
	}
	mirror := func(t *testing.T, s store.Store, j store.Job) {
		t.Helper()
		if _, err := s.UpsertJob(ctx, j); err != nil {
			t.Fatalf("upsert job: %v", err)
		}
	}
	queued := func(t *testing.T, s store.Store, job string) bool {
		t.Helper()
		q, err := s.QueueTriageInvite(ctx, job, statusICM)
		if err != nil {
			t.Fatalf("queue triage invite: %v", err)
		}
		return q
	}
	invites := func(t *testing.T, s store.Store, job string) []store.TriageInvite {
		t.Helper()
		got, err := s.ListTriageInvites(ctx, job)
		if err != nil {
			t.Fatalf("list triage invites: %v", err)
		}
		return got
	}
	send := func(t *testing.T, s store.Store) {
		t.Helper()
		claimed, err := s.ClaimTriageInvites(ctx, time.Now(), time.Minute, 5, 10)
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claim: %d claimed, %v", len(claimed), err)
		}
		if err := s.SetTriageInviteSent(ctx, claimed[0].ID, claimed[0].Attempts, time.Now()); err != nil {
			t.Fatalf("sent: %v", err)
		}
	}
	const (
		hNew   = "2a2b3c4d-0000-4000-8000-000000000001"
		hICM   = "2a2b3c4d-0000-4000-8000-000000000002"
		hOther = "2a2b3c4d-0000-4000-8000-000000000003"
		hBack  = "2a2b3c4d-0000-4000-8000-000000000004"
	)
	entry := func(id, status string, d time.Duration) store.JobStatusHistory {
		return store.JobStatusHistory{StatusHistoryID: id, StatusID: status, CreatedAt: updated.Add(d)}
	}
	first := []store.JobStatusHistory{entry(hNew, statusNew, -time.Hour), entry(hICM, statusICM, 0)}
	returned := append(slices.Clone(first), entry(hOther, statusNew, 2*time.Hour), entry(hBack, statusICM, 3*time.Hour))

	t.Run("a return the mirror saw only as writes of the job is invited", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		mirror(t, s, sampleJob(jobA, statusICM, 1))
		is.True(queued(t, s, jobA))
		send(t, s)
		mirror(t, s, sampleJob(jobA, statusNew, 2))             // the backstop or an ensure wrote it: no event saw it
		is.True(!invites(t, s, jobA)[0].StatusLeftUTC.IsZero()) // the write closes the change the invite answered
		mirror(t, s, sampleJob(jobA, statusICM, 3))
		is.True(queued(t, s, jobA))  // and the return is invited
		is.True(!queued(t, s, jobA)) // once
		is.Equal(len(invites(t, s, jobA)), 2)
	})

	t.Run("an older write closes nothing", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		mirror(t, s, sampleJob(jobA, statusICM, 5))
		is.True(queued(t, s, jobA))
		mirror(t, s, sampleJob(jobA, statusNew, 4))            // a late answer from before the arrival
		is.True(invites(t, s, jobA)[0].StatusLeftUTC.IsZero()) // the mirror kept the newer job, and the invite its change
		is.True(!queued(t, s, jobA))
	})

	t.Run("an invite answers the status-history entry of its arrival", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		mirror(t, s, sampleJob(jobA, statusICM, 1))
		is.NoErr(s.ReplaceJobStatusHistory(ctx, jobA, first))
		is.Equal(len(invites(t, s, jobA)), 0) // the history alone starts no invite
		is.True(queued(t, s, jobA))
		got := invites(t, s, jobA)
		is.Equal(got[0].StatusHistoryID, hICM) // keyed on the arrival's entry
		send(t, s)
		is.True(!queued(t, s, jobA))                          // a duplicate or a replay of the change, after the send
		is.NoErr(s.ReplaceJobStatusHistory(ctx, jobA, first)) // the history drained again
		is.True(!queued(t, s, jobA))
		is.Equal(len(invites(t, s, jobA)), 1) // one invite for the arrival
	})

	t.Run("a return only Prime's status history shows is invited, once", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		mirror(t, s, sampleJob(jobA, statusICM, 1))
		is.True(queued(t, s, jobA)) // no history mirrored yet: the version rule
		send(t, s)
		// Prime stamps one change's entry a moment apart from the job's
		// updatedAt: the same arrival.
		is.NoErr(s.ReplaceJobStatusHistory(ctx, jobA, []store.JobStatusHistory{entry(hNew, statusNew, -time.Hour), entry(hICM, statusICM, 30*time.Second)}))
		is.True(!queued(t, s, jobA))
		is.Equal(len(invites(t, s, jobA)), 1)
		is.True(invites(t, s, jobA)[0].StatusLeftUTC.IsZero())

		// Both events of a leave and a return were handled after the return
		// (an outage, a backlog): each found the job in the status, and the
		// mirror never held it elsewhere. Its history, drained after, shows
		// the return.
		mirror(t, s, at(sampleJob(jobA, statusICM, 1), 3, 3*time.Hour))
		is.True(!queued(t, s, jobA))
		is.True(!queued(t, s, jobA))
		is.NoErr(s.ReplaceJobStatusHistory(ctx, jobA, returned))
		got := invites(t, s, jobA)
		is.Equal(len(got), 2)                   // the return is invited
		is.True(!got[0].StatusLeftUTC.IsZero()) // the first arrival's change is over
		is.Equal(got[1].StatusHistoryID, hBack) // the new invite answers the return's entry
		is.True(got[1].Pending() && got[1].StatusLeftUTC.IsZero())
		is.True(!queued(t, s, jobA))                             // a replay of the return's event
		is.NoErr(s.ReplaceJobStatusHistory(ctx, jobA, returned)) // the history drained again
		is.NoErr(s.ReplaceJobStatusHistory(ctx, jobA, first))    // a late answer from before the return
		is.True(!queued(t, s, jobA))
		is.NoErr(s.ReplaceJobStatusHistory(ctx, jobA, returned))
		is.True(!queued(t, s, jobA))
		got = invites(t, s, jobA)
		is.Equal(len(got), 2)                  // still one invite an arrival
		is.True(got[1].StatusLeftUTC.IsZero()) // the return's still open
	})

	t.Run("an event after the history keys its invite on the return's entry", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		mirror(t, s, sampleJob(jobA, statusICM, 1))
		is.NoErr(s.ReplaceJobStatusHistory(ctx, jobA, first))
		is.True(queued(t, s, jobA))
		send(t, s)
		mirror(t, s, at(sampleJob(jobA, statusNew, 2), 2, 2*time.Hour))
		is.NoErr(s.ReplaceJobStatusHistory(ctx, jobA, returned)) // drained while the mirror held the job elsewhere
		is.Equal(len(invites(t, s, jobA)), 1)                    // nothing queued for a job the mirror holds in another status
		mirror(t, s, at(sampleJob(jobA, statusICM, 3), 3, 3*time.Hour))
		is.True(queued(t, s, jobA)) // the return's event
		is.True(!queued(t, s, jobA))
		got := invites(t, s, jobA)
		is.Equal(len(got), 2)
		is.Equal(got[1].StatusHistoryID, hBack) // keyed on the return's entry

		mirror(t, s, sampleJob(jobB, statusICM, 1))
		is.NoErr(s.ReplaceJobStatusHistory(ctx, jobB, returned))
		is.Equal(len(invites(t, s, jobB)), 0) // a job no event invited gets none from its history
	})
}
