package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

func testStatus(t *testing.T, open Opener) {
	ctx := context.Background()
	t.Run("empty", func(t *testing.T) {
		is := is.New(t)
		o, err := open(t).StatusOverview(ctx, store.OverviewQuery{SyncQueuedSince: time.Now().Add(-time.Hour)})
		is.NoErr(err)
		is.Equal(o.Unprocessed+o.Capped+o.Processed+o.Unpublished, 0) // no rows
		is.Equal(o.InvitesFailed+o.EmailsFailed+o.EmailsRejected+o.SyncQueueRecentJobs, 0)
		is.Equal(o.EmailLastFailed.ID, int64(0))   // no failed email
		is.Equal(o.OldestUnprocessed.ID, int64(0)) // nothing queued
		is.Equal(len(o.Failing), 0)
		is.True(o.OutboxOldestUTC.IsZero())
		is.Equal(o.SMS[store.SendFailed], 0)                                          // every state, at 0
		is.True(o.SMSOldestWaitingUTC.IsZero() && o.InvitesOldestWaitingUTC.IsZero()) // nothing waits to be sent
		is.Equal(len(o.PlanDates), 0)
	})

	t.Run("seeded", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
		insert := func(action string, at time.Time) int64 {
			r := newRow(action)
			r.ReceivedUTC = at
			id, err := s.InsertWebhookLog(ctx, r)
			is.NoErr(err)
			return id
		}
		fail := func(id int64, n int, why string) {
			for range n {
				_, err := s.IncrementWebhookLogAttempt(ctx, id, "", why)
				is.NoErr(err)
			}
		}
		done := insert("change-job-status", t0)
		is.NoErr(s.SetWebhookLogProcessed(ctx, done, "", "Processed"))
		is.NoErr(s.SetWebhookLogPublished(ctx, []int64{done}, t0))
		oldest := insert("create-appointment", t0.Add(time.Minute))
		fail(oldest, 1, "prime: 503")
		newer := insert("create-appointment", t0.Add(2*time.Minute))
		fail(newer, 2, "prime: 404 appointment")
		capped := insert("change-job-status", t0.Add(3*time.Minute))
		fail(capped, store.MaxAttempts, "payload fault MissingIdentifier")
		insert("create-estimate", t0.Add(4*time.Minute))

		_, err := s.InsertOutbox(ctx, []store.OutboxMessage{{Subject: "x.y", MsgID: "m1", Data: []byte("{}")}})
		is.NoErr(err)

		id, _, err := s.QueueSMS(ctx, store.NewSMS{Recipient: onCall, Body: "make safe", Source: "test", Now: t0})
		is.NoErr(err)
		claimed, err := s.ClaimSMS(ctx, t0.Add(time.Second), time.Minute, 1, 10)
		is.NoErr(err)
		is.Equal(len(claimed), 1)
		is.NoErr(s.SetSMSFailed(ctx, id, claimed[0].Attempts, "sms endpoint: 400 bad number", time.Time{}, t0.Add(2*time.Second)))
		waiting, _, err := s.QueueSMS(ctx, store.NewSMS{Recipient: onCall, Body: "make safe", Source: "test", Now: t0.Add(time.Minute)})
		is.NoErr(err)
		claimed, err = s.ClaimSMS(ctx, t0.Add(2*time.Minute), time.Minute, 1, 10)
		is.NoErr(err)
		is.NoErr(s.DeferSMS(ctx, waiting, claimed[0].Attempts, "HTTP 503", t0.Add(3*time.Minute), t0.Add(2*time.Minute)))

		_, err = s.ClaimFirstSeen(ctx, jobA, done, store.ViaWebhook)
		is.NoErr(err)
		_, err = s.FailFirstSeen(ctx, jobA, "queue missing objects: locked")
		is.NoErr(err)
		_, err = s.UpsertJob(ctx, sampleJob(jobB, statusICM, 1))
		is.NoErr(err)
		queued, err := s.QueueTriageInvite(ctx, jobB, statusICM)
		is.NoErr(err)
		is.True(queued)
		// A second job's invite, given up on: Failed, still pending.
		_, err = s.UpsertJob(ctx, sampleJob(jobC, statusICM, 1))
		is.NoErr(err)
		queued, err = s.QueueTriageInvite(ctx, jobC, statusICM)
		is.NoErr(err)
		is.True(queued)
		invites, err := s.ClaimTriageInvites(ctx, time.Now().Add(time.Second), time.Minute, 3, 10)
		is.NoErr(err)
		is.Equal(len(invites), 2)
		for _, inv := range invites {
			if inv.JobID == jobC {
				is.NoErr(s.SetTriageInviteFailed(ctx, inv.ID, inv.Attempts, "invite endpoint: 400 no phone", time.Time{}, time.Now()))
			} else {
				is.NoErr(s.ReleaseTriageInvite(ctx, inv.ID, inv.Attempts, time.Now()))
			}
		}

		// Two emails Failed (the newer one's receipt last written), one
		// processed, and junk refused unread after them.
		for i, e := range []struct{ id, outcome, err string }{
			{"<a@prime>", store.EmailFailed, "no JobID in the email"},
			{"<b@prime>", store.EmailProcessed, ""},
			{"<c@prime>", store.EmailFailed, "prime: no job 259047"},
			{"<d@junk>", store.EmailRejected, "refused unread: the sender is not in MAIL_ALLOWED_SENDERS"},
			{"<e@junk>", store.EmailRejected, "refused unread: the sender is not in MAIL_ALLOWED_SENDERS"},
		} {
			r, _, err := s.RegisterEmail(ctx, store.EmailReceipt{InternetMessageID: e.id, Subject: "New Job " + e.id,
				ReceivedUTC: t0.Add(time.Duration(i) * time.Minute)})
			is.NoErr(err)
			r.Outcome, r.LastError, r.Attempts = e.outcome, e.err, 3
			r.MovedUTC, r.MovedTo = time.Now(), e.outcome
			if e.outcome == store.EmailRejected {
				r.MovedTo = store.EmailFailed // the folder it went to
			}
			is.NoErr(s.UpdateEmailReceipt(ctx, r))
			time.Sleep(2 * time.Millisecond) // each receipt written in a millisecond of its own
		}

		// Two jobs' objects queued for the drains just now.
		before := time.Now().Add(-time.Minute)
		for _, job := range []string{jobA, jobB} {
			_, err := s.QueueMissingObjectsByJob(ctx, job)
			is.NoErr(err)
		}

		is.NoErr(s.PlanUpsert(ctx, dayOne))
		is.NoErr(s.PlanUpsert(ctx, dayTwo))
		setStatus(t, s, dayOne, store.PlanRoutesCompleted)
		_, err = s.SetPlanStatus(ctx, store.PlanStatusWrite{PlanDate: "2026-03-12", Status: "E:ERR_INVALID_PARAM_FORMAT",
			ErrorText: "start_planning refused: ERR_INVALID_PARAM_FORMAT"})
		is.NoErr(err)
		is.NoErr(s.RecordOrderFailure(ctx, store.OptimoOrder{OrderNo: apptA, AppointmentID: apptA, JobID: jobA,
			Version: 3, ErrorText: "ERR_LOC_GEOCODING: no such street"}))

		o, err := s.StatusOverview(ctx, store.OverviewQuery{SyncQueuedSince: before})
		is.NoErr(err)
		is.Equal(o.Unprocessed, 3)               // queued under the cap
		is.Equal(o.Capped, 1)                    // at the cap
		is.Equal(o.Processed, 1)                 // done
		is.Equal(o.Unpublished, 4)               // all but the processed one wait for the relay
		is.Equal(o.OldestUnprocessed.ID, oldest) // the oldest queued row
		is.Equal(o.OldestUnprocessed.ProcessAttempts, 1)
		is.True(o.OldestUnprocessed.ReceivedUTC.Equal(t0.Add(time.Minute)))
		is.Equal(o.OldestUnprocessed.EventAction, "create-appointment")
		is.Equal(len(o.Failing), 2) // one row an action that failed
		byAction := map[string]store.WebhookLogRow{}
		for _, r := range o.Failing {
			byAction[r.EventAction] = r
		}
		is.Equal(byAction["create-appointment"].ID, newer)                               // the newest failure of the action
		is.Equal(byAction["create-appointment"].ProcessStatus, "prime: 404 appointment") // with its last error
		is.Equal(byAction["change-job-status"].ID, capped)                               // capped rows too
		is.Equal(o.OutboxUnpublished, 1)
		is.True(!o.OutboxOldestUTC.IsZero())
		is.Equal(o.SMS[store.SendFailed], 1)
		is.Equal(o.SMS[store.SendQueued], 1)
		is.Equal(o.SMSLastError, "HTTP 503")                                   // the newest: the one waiting
		is.True(o.SMSOldestWaitingUTC.Equal(t0.Add(time.Minute)))              // the one waiting, not the Failed one
		is.True(!o.InvitesOldestWaitingUTC.IsZero())                           // the invite not sent
		is.True(!o.InvitesOldestWaitingUTC.After(time.Now().Add(time.Minute))) // queued on the database's clock
		is.Equal(o.FirstSeenFailing, 1)
		is.Equal(o.FirstSeenLastErrorJob, jobA)
		is.Equal(o.FirstSeenLastError, "queue missing objects: locked")
		is.Equal(o.InvitesPending, 2)                                 // not sent, Failed or not
		is.Equal(o.InvitesFailed, 1)                                  // given up on
		is.Equal(o.EmailsFailed, 2)                                   // in the failed folder, for a person
		is.Equal(o.EmailsRejected, 2)                                 // junk, counted apart
		is.Equal(o.EmailLastFailed.InternetMessageID, "<c@prime>")    // the newest of the failed, not the junk after it
		is.Equal(o.EmailLastFailed.LastError, "prime: no job 259047") // with why
		is.Equal(o.EmailLastFailed.Subject, "New Job <c@prime>")      // and what it was
		is.Equal(o.SyncQueueRecentJobs, 2)                            // jobs with items queued since
		later, err := s.StatusOverview(ctx, store.OverviewQuery{SyncQueuedSince: time.Now().Add(time.Hour)})
		is.NoErr(err)
		is.Equal(later.SyncQueueRecentJobs, 0) // none queued since a time to come
		none, err := s.StatusOverview(ctx, store.OverviewQuery{})
		is.NoErr(err)
		is.Equal(none.SyncQueueRecentJobs, 0) // no start, no count
		plans := map[string]store.PlanDates{}
		for _, p := range o.PlanDates {
			plans[p.Status] = p
		}
		is.Equal(plans[store.PlanNotPlanned].Dates, 1) // dates by status
		is.Equal(plans[store.PlanNotPlanned].Earliest, dayTwo)
		is.Equal(plans[store.PlanRoutesCompleted].Earliest, dayOne)
		is.Equal(plans["E:ERR_INVALID_PARAM_FORMAT"].Dates, 1)
		is.Equal(o.PlanLastErrorDate, "2026-03-12")
		is.Equal(o.PlanLastError, "start_planning refused: ERR_INVALID_PARAM_FORMAT")
		is.Equal(o.OrdersFailing, 1)
		is.Equal(o.OrderLastErrorNo, apptA)
		is.Equal(o.OrderLastError, "ERR_LOC_GEOCODING: no such street")
	})
}
