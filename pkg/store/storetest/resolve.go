package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

func testResolutions(t *testing.T, open Opener) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	by := "alice@ops-1"

	t.Run("sms: a Failed message requeued or dismissed, recorded, and counted no more", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		t0 := now.Add(-time.Hour)
		var ids []int64
		for i, outcome := range []store.SendState{store.SendFailed, store.SendFailed, store.SendSent} {
			id, _, err := s.QueueSMS(ctx, store.NewSMS{Recipient: onCall, Body: "make safe", Source: "test", Now: t0})
			is.NoErr(err)
			ids = append(ids, id)
			claimed, err := s.ClaimSMS(ctx, t0.Add(time.Second), time.Minute, 5, 1)
			is.NoErr(err)
			is.Equal(len(claimed), 1)
			at := t0.Add(time.Duration(i+1) * time.Minute)
			if outcome == store.SendSent {
				is.NoErr(s.SetSMSSent(ctx, id, claimed[0].Attempts, at))
			} else {
				is.NoErr(s.SetSMSFailed(ctx, id, claimed[0].Attempts, "HTTP 400: no such number", time.Time{}, at))
			}
		}
		requeued, dismissed, sent := ids[0], ids[1], ids[2]
		o, err := s.StatusOverview(ctx, store.OverviewQuery{})
		is.NoErr(err)
		is.Equal(o.SMS[store.SendFailed], 2) // both wait for a person

		rid, err := s.Resolve(ctx, store.Resolution{Table: store.ResolvableSMS, RowID: requeued, Action: store.ResolveRequeue,
			By: by, Reason: "the gateway's number list is fixed", ResolvedUTC: now})
		is.NoErr(err)
		is.True(rid > 0)
		m, err := s.GetSMS(ctx, requeued)
		is.NoErr(err)
		is.Equal(m.State, store.SendQueued)               // queued again
		is.Equal(m.Attempts, 0)                           // with every attempt back
		is.True(m.NextAttemptUTC.Equal(now))              // due at once
		is.True(m.QueuedUTC.Equal(now))                   // queued anew: its wait counts from now
		is.Equal(m.LastError, "HTTP 400: no such number") // why it failed, kept
		_, err = s.Resolve(ctx, store.Resolution{Table: store.ResolvableSMS, RowID: dismissed, Action: store.ResolveDismiss,
			By: by, Reason: "phoned the on-call", ResolvedUTC: now.Add(time.Second)})
		is.NoErr(err)
		m, err = s.GetSMS(ctx, dismissed)
		is.NoErr(err)
		is.Equal(m.State, store.SendDismissed) // stays, dismissed
		is.Equal(m.Body, "make safe")          // as it was
		claimed, err := s.ClaimSMS(ctx, now.Add(time.Second), time.Minute, 5, 10)
		is.NoErr(err)
		is.Equal(len(claimed), 1) // the requeued one alone goes again
		is.Equal(claimed[0].ID, requeued)
		is.Equal(claimed[0].Attempts, 1) // its first attempt of a new count
		is.NoErr(s.SetSMSSent(ctx, requeued, claimed[0].Attempts, now.Add(2*time.Second)))

		o, err = s.StatusOverview(ctx, store.OverviewQuery{})
		is.NoErr(err)
		is.Equal(o.SMS[store.SendFailed], 0)    // nothing waits for a person
		is.Equal(o.SMS[store.SendDismissed], 1) // the dismissed one, counted as such
		is.Equal(o.SMSLastError, "")            // and its error no longer stands

		// Only what waits for a person is resolved.
		_, err = s.Resolve(ctx, store.Resolution{Table: store.ResolvableSMS, RowID: sent, Action: store.ResolveDismiss, By: by, Reason: "x"})
		is.True(errors.Is(err, store.ErrNotResolvable)) // a Sent message
		_, err = s.Resolve(ctx, store.Resolution{Table: store.ResolvableSMS, RowID: dismissed, Action: store.ResolveRequeue, By: by})
		is.True(errors.Is(err, store.ErrNotResolvable)) // one dismissed already
		_, err = s.Resolve(ctx, store.Resolution{Table: store.ResolvableSMS, RowID: sent + 100, Action: store.ResolveRequeue, By: by})
		is.True(errors.Is(err, store.ErrNotFound)) // no such message
		_, err = s.Resolve(ctx, store.Resolution{Table: store.ResolvableSMS, RowID: sent, Action: store.ResolveDismiss, By: by})
		is.True(err != nil && !errors.Is(err, store.ErrNotResolvable)) // a dismissal without a reason is refused first

		recs, err := s.ListResolutions(ctx, store.ResolvableSMS, ids)
		is.NoErr(err)
		is.Equal(len(recs), 2) // one a resolution, the refused ones not recorded
		is.Equal(recs[0].RowID, requeued)
		is.Equal(recs[0].ID, rid)
		is.Equal(recs[0].Action, store.ResolveRequeue)
		is.Equal(recs[0].By, by)
		is.Equal(recs[0].Reason, "the gateway's number list is fixed")
		is.True(recs[0].ResolvedUTC.Equal(now))
		is.Equal(recs[1].RowID, dismissed)
		is.Equal(recs[1].Action, store.ResolveDismiss)
		is.Equal(recs[1].Table, store.ResolvableSMS)
		other, err := s.ListResolutions(ctx, store.ResolvableTriageInvite, ids)
		is.NoErr(err)
		is.Equal(len(other), 0) // another table's rows of the same ids have none

		pending, err := s.ListSMSQueue(ctx, store.InvitesPending, 10)
		is.NoErr(err)
		is.Equal(len(pending), 0) // nothing left to send
		all, err := s.ListSMSQueue(ctx, store.InvitesAll, 10)
		is.NoErr(err)
		is.Equal(len(all), 3) // every one stays, queryable
		is.Equal(all[1].State, store.SendDismissed)
	})

	t.Run("triage invites: a Failed invite requeued or dismissed", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		var ids []int64
		for _, job := range []string{jobA, jobB} {
			_, err := s.UpsertJob(ctx, sampleJob(job, statusICM, 1))
			is.NoErr(err)
			queued, err := s.QueueTriageInvite(ctx, job, statusICM)
			is.NoErr(err)
			is.True(queued)
			claimed, err := s.ClaimTriageInvites(ctx, time.Now().Add(time.Second), time.Minute, 5, 1)
			is.NoErr(err)
			is.Equal(len(claimed), 1)
			is.NoErr(s.SetTriageInviteFailed(ctx, claimed[0].ID, claimed[0].Attempts, "no primary contact", time.Time{}, now))
			ids = append(ids, claimed[0].ID)
		}
		requeued, dismissed := ids[0], ids[1]
		at := time.Now().UTC().Truncate(time.Millisecond)
		_, err := s.Resolve(ctx, store.Resolution{Table: store.ResolvableTriageInvite, RowID: requeued, Action: store.ResolveRequeue,
			By: by, ResolvedUTC: at})
		is.NoErr(err)
		_, err = s.Resolve(ctx, store.Resolution{Table: store.ResolvableTriageInvite, RowID: dismissed, Action: store.ResolveDismiss,
			By: by, Reason: "invited by phone", ResolvedUTC: at})
		is.NoErr(err)
		inv, err := s.GetTriageInvite(ctx, dismissed)
		is.NoErr(err)
		is.Equal(inv.State, store.SendDismissed)
		is.True(!inv.Pending()) // not to be sent
		inv, err = s.GetTriageInvite(ctx, requeued)
		is.NoErr(err)
		is.Equal(inv.State, store.SendQueued)
		is.Equal(inv.Attempts, 0)
		is.True(inv.QueuedUTC.Equal(at)) // its contact wait counts from the requeue
		is.True(inv.Pending())

		o, err := s.StatusOverview(ctx, store.OverviewQuery{})
		is.NoErr(err)
		is.Equal(o.InvitesFailed, 0)  // nothing waits for a person
		is.Equal(o.InvitesPending, 1) // the requeued one waits to be sent, the dismissed one does not
		pending, err := s.ListTriageInviteQueue(ctx, store.InvitesPending, 10)
		is.NoErr(err)
		is.Equal(len(pending), 1)
		is.Equal(pending[0].ID, requeued)
		failed, err := s.ListTriageInviteQueue(ctx, store.InvitesFailed, 10)
		is.NoErr(err)
		is.Equal(len(failed), 0)
		claimed, err := s.ClaimTriageInvites(ctx, at.Add(time.Second), time.Minute, 5, 10)
		is.NoErr(err)
		is.Equal(len(claimed), 1) // the requeued one goes again
		is.Equal(claimed[0].ID, requeued)
		queued, err := s.QueueTriageInvite(ctx, jobB, statusICM)
		is.NoErr(err)
		is.True(!queued) // a dismissed invite still answers its status change: nobody is invited twice for it
		recs, err := s.ListResolutions(ctx, store.ResolvableTriageInvite, ids)
		is.NoErr(err)
		is.Equal(len(recs), 2)
		is.Equal(recs[0].Reason, "") // a requeue's reason may be left out
	})

	t.Run("emails: a Failed receipt dismissed once it left the folder", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		var ids []int64
		for _, e := range []struct{ id, outcome, movedTo string }{
			{"<moved@p>", store.EmailFailed, store.EmailFailed}, {"<still@p>", store.EmailFailed, ""}, {"<done@p>", store.EmailProcessed, store.EmailProcessed},
		} {
			r, _, err := s.RegisterEmail(ctx, store.EmailReceipt{InternetMessageID: e.id, Subject: "New Job", ReceivedUTC: now})
			is.NoErr(err)
			ids = append(ids, r.ID)
			r.Outcome, r.MovedTo, r.LastError = e.outcome, e.movedTo, "no JobID"
			if e.movedTo != "" {
				r.MovedUTC = now
			}
			is.NoErr(s.UpdateEmailReceipt(ctx, r))
		}
		moved, still, done := ids[0], ids[1], ids[2]
		_, err := s.Resolve(ctx, store.Resolution{Table: store.ResolvableEmailReceipt, RowID: moved, Action: store.ResolveDismiss,
			By: by, Reason: "a supplier's newsletter"})
		is.NoErr(err)
		r, found, err := s.GetEmailReceipt(ctx, "<moved@p>")
		is.NoErr(err)
		is.True(found)
		is.Equal(r.Outcome, store.EmailDismissed)
		is.Equal(r.MovedTo, store.EmailFailed) // where it went, kept
		is.Equal(r.LastError, "no JobID")

		_, err = s.Resolve(ctx, store.Resolution{Table: store.ResolvableEmailReceipt, RowID: still, Action: store.ResolveDismiss, By: by, Reason: "x"})
		is.True(errors.Is(err, store.ErrNotResolvable)) // still in the folder: the mail intake's
		_, err = s.Resolve(ctx, store.Resolution{Table: store.ResolvableEmailReceipt, RowID: done, Action: store.ResolveDismiss, By: by, Reason: "x"})
		is.True(errors.Is(err, store.ErrNotResolvable)) // Processed
		_, err = s.Resolve(ctx, store.Resolution{Table: store.ResolvableEmailReceipt, RowID: moved, Action: store.ResolveRequeue, By: by})
		is.True(err != nil && !errors.Is(err, store.ErrNotResolvable)) // an email is not requeued: it is moved back

		o, err := s.StatusOverview(ctx, store.OverviewQuery{})
		is.NoErr(err)
		is.Equal(o.EmailsFailed, 1) // the one still in the folder alone
		is.Equal(o.EmailLastFailed.ID, still)
		pending, err := s.ListEmailReceipts(ctx, store.InvitesPending, 10)
		is.NoErr(err)
		is.Equal(len(pending), 1)
		is.Equal(pending[0].ID, still)
		failed, err := s.ListEmailReceipts(ctx, store.InvitesFailed, 10)
		is.NoErr(err)
		is.Equal(len(failed), 1)
		all, err := s.ListEmailReceipts(ctx, store.InvitesAll, 10)
		is.NoErr(err)
		is.Equal(len(all), 3)
		is.Equal(all[0].Outcome, store.EmailDismissed)
		recs, err := s.ListResolutions(ctx, store.ResolvableEmailReceipt, ids)
		is.NoErr(err)
		is.Equal(len(recs), 1)
		is.Equal(recs[0].Reason, "a supplier's newsletter")
	})
}
