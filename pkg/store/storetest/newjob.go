package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

const jobC = "9e8d7c6b-5a49-4382-b716-f5e4d3c2b1a0"

// detectHandOff is a hand-off like the new-job pipeline's.
func detectHandOff(jobID string) store.OutboxMessage {
	return store.OutboxMessage{Subject: "makesafe.detect", MsgID: "makesafe.detect:firstseen:" + jobID,
		Data: []byte(`{"jobId":"` + jobID + `","queueChecks":true,"source":"firstseen"}`)}
}

func testNewJobPath(t *testing.T, open Opener) {
	ctx := context.Background()

	t.Run("runs once a job, whoever claimed it", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		claimed, err := s.ClaimFirstSeen(ctx, jobA, 42, store.ViaWebhook)
		is.NoErr(err)
		is.True(claimed)

		run, err := s.ProcessNewPrimeJob(ctx, strings.ToUpper(jobA), 0, store.ViaManual, detectHandOff(jobA))
		is.NoErr(err)
		is.True(run.Ran)               // the pipeline's SQL ran
		is.Equal(run.Queued, 4)        // step 1: the four missing objects
		is.Equal(len(run.HandOff), 1)  // step 2's hand-off
		is.True(run.HandOff[0].ID > 0) // stored in the outbox
		is.Equal(run.HandOff[0].MsgID, "makesafe.detect:firstseen:"+jobA)
		is.Equal(string(run.HandOff[0].Data), string(detectHandOff(jobA).Data))
		row, _, err := s.GetFirstSeen(ctx, jobA)
		is.NoErr(err)
		is.True(row.Completed()) // stamped completed
		is.Equal(row.PipelineStatus, store.NewJobCompletedStatus(4))
		is.Equal(row.Via, store.ViaWebhook) // the claim stays the first claimer's
		is.Equal(row.LogID, int64(42))
		pending, err := s.GetOutboxUnpublished(ctx, 0, time.Now().Add(time.Minute), 10)
		is.NoErr(err)
		is.Equal(len(pending), 1) // one message to publish

		again, err := s.ProcessNewPrimeJob(ctx, jobA, 0, store.ViaEmail, detectHandOff(jobA))
		is.NoErr(err)
		is.True(!again.Ran)             // completed: nothing runs twice
		is.Equal(len(again.HandOff), 0) // and nothing is handed off
		pending, err = s.GetOutboxUnpublished(ctx, 0, time.Now().Add(time.Minute), 10)
		is.NoErr(err)
		is.Equal(len(pending), 1) // still the one
	})

	t.Run("claims a job nobody claimed", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		run, err := s.ProcessNewPrimeJob(ctx, jobB, 7, store.ViaManual, detectHandOff(jobB))
		is.NoErr(err)
		is.True(run.Ran)
		row, found, err := s.GetFirstSeen(ctx, jobB)
		is.NoErr(err)
		is.True(found)                     // the first sight is recorded
		is.Equal(row.Via, store.ViaManual) // by the caller
		is.Equal(row.LogID, int64(7))
		is.True(row.Completed())
	})

	t.Run("a rolled-back run leaves nothing", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		boom := errors.New("boom")
		err := s.InTx(ctx, func(tx store.Store) error {
			if _, err := tx.ProcessNewPrimeJob(ctx, jobA, 0, store.ViaEmail, detectHandOff(jobA)); err != nil {
				return err
			}
			return boom
		})
		is.True(errors.Is(err, boom))
		_, found, err := s.GetFirstSeen(ctx, jobA)
		is.NoErr(err)
		is.True(!found) // no claim
		items, err := s.ListSyncQueue(ctx, store.SyncQueueFilter{JobID: jobA})
		is.NoErr(err)
		is.Equal(len(items), 0) // no queue rows
		run, err := s.ProcessNewPrimeJob(ctx, jobA, 0, store.ViaEmail, detectHandOff(jobA))
		is.NoErr(err)
		is.True(run.Ran) // it runs when it commits
	})

	t.Run("concurrent runs: one runs", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		const n = 6
		var wg sync.WaitGroup
		ran := make([]bool, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				var run store.NewJobRun
				run, errs[i] = s.ProcessNewPrimeJob(ctx, jobC, 0, store.ViaBackstop, detectHandOff(jobC))
				ran[i] = run.Ran
			})
		}
		wg.Wait()
		runs := 0
		for i := range n {
			is.NoErr(errs[i])
			if ran[i] {
				runs++
			}
		}
		is.Equal(runs, 1) // the pipeline runs once a job
	})
}

func testEmailReceipts(t *testing.T, open Opener) {
	ctx := context.Background()
	const msg = "<CAB1234@notifications.primeeco.tech>"
	received := time.Date(2026, 10, 5, 22, 30, 15, 0, time.UTC)

	t.Run("one receipt a message, and what became of it", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		_, found, err := s.GetEmailReceipt(ctx, msg)
		is.NoErr(err)
		is.True(!found) // none yet

		r, inserted, err := s.RegisterEmail(ctx, store.EmailReceipt{InternetMessageID: msg, Subject: "New Job J014370",
			ReceivedUTC: received, From: "noreply@primeeco.tech", BodyPreview: `{ "JobID": '2262480' }`})
		is.NoErr(err)
		is.True(inserted) // the first sight of the message
		is.True(r.ID > 0)
		is.Equal(r.Outcome, store.EmailPending)
		is.Equal(r.Attempts, 0)
		is.Equal(r.Subject, "New Job J014370")
		is.True(r.ReceivedUTC.Equal(received))
		is.Equal(r.BodyPreview, `{ "JobID": '2262480' }`)

		again, inserted, err := s.RegisterEmail(ctx, store.EmailReceipt{InternetMessageID: msg, Subject: "changed"})
		is.NoErr(err)
		is.True(!inserted)                 // seen twice, recorded once
		is.Equal(again.ID, r.ID)           // the same receipt
		is.Equal(again.Subject, r.Subject) // as first recorded

		moved := time.Date(2026, 10, 5, 22, 31, 0, 0, time.UTC)
		r.JobID, r.JobIDKind, r.NumericReference, r.JobNumber = "2262480", "numeric", 2262480, "J014370"
		r.PrimeJobID, r.Outcome, r.Attempts = strings.ToUpper(jobA), store.EmailProcessed, 1
		r.LastError = strings.Repeat("é", store.MaxEmailErrorLen+5)
		r.MovedUTC, r.MovedTo = moved, store.EmailProcessed
		is.NoErr(s.UpdateEmailReceipt(ctx, r))
		got, found, err := s.GetEmailReceipt(ctx, msg)
		is.NoErr(err)
		is.True(found)
		is.Equal(got.JobID, "2262480") // what Extract JobID found
		is.Equal(got.JobIDKind, "numeric")
		is.Equal(got.NumericReference, int64(2262480))
		is.Equal(got.JobNumber, "J014370")
		is.Equal(got.PrimeJobID, jobA) // lower-case
		is.Equal(got.Outcome, store.EmailProcessed)
		is.Equal(got.Attempts, 1)
		is.Equal(got.LastError, strings.Repeat("é", store.MaxEmailErrorLen)) // cut, never split
		is.True(got.MovedUTC.Equal(moved))
		is.Equal(got.MovedTo, store.EmailProcessed)

		got.Outcome, got.Attempts, got.LastError, got.MovedUTC, got.MovedTo = store.EmailPending, 0, "", time.Time{}, ""
		is.NoErr(s.UpdateEmailReceipt(ctx, got))
		got, _, err = s.GetEmailReceipt(ctx, msg)
		is.NoErr(err)
		is.Equal(got.Outcome, store.EmailPending) // reopened
		is.True(got.MovedUTC.IsZero())
		is.Equal(got.LastError, "")

		err = s.UpdateEmailReceipt(ctx, store.EmailReceipt{InternetMessageID: "<other@x>", Outcome: store.EmailFailed})
		is.True(errors.Is(err, store.ErrNotFound)) // never registered
	})

	t.Run("concurrent registrations: one receipt", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		const n = 6
		var wg sync.WaitGroup
		ins := make([]bool, n)
		ids := make([]int64, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				var r store.EmailReceipt
				r, ins[i], errs[i] = s.RegisterEmail(ctx, store.EmailReceipt{InternetMessageID: msg, BodyPreview: "x"})
				ids[i] = r.ID
			})
		}
		wg.Wait()
		inserted := 0
		for i := range n {
			is.NoErr(errs[i])
			is.Equal(ids[i], ids[0]) // the same row for every caller
			if ins[i] {
				inserted++
			}
		}
		is.Equal(inserted, 1)
	})
}

func testCoverage(t *testing.T, open Opener) {
	ctx := context.Background()
	// The window ends now: a job without createdAt counts from its first
	// sight, which the claim stamps with the clock.
	since := time.Now().UTC().Add(-48 * time.Hour).Truncate(time.Second)
	at := func(h int) time.Time { return since.Add(time.Duration(h) * time.Hour) }

	t.Run("when each path first saw each job", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		job := func(id string, created time.Time) {
			j := sampleJob(id, statusNew, 1)
			j.CreatedAt = created
			_, err := s.UpsertJob(ctx, j)
			is.NoErr(err)
		}
		job(jobA, at(1))                 // seen by every path
		job(jobB, at(2))                 // by the email only
		job(jobC, since.Add(-time.Hour)) // created before the window: left out
		const noCreated = "1f2e3d4c-5b6a-4798-8a7b-6c5d4e3f2a1b"
		job(noCreated, time.Time{}) // no createdAt: counted from its first sight

		log := func(action, jobID string, received time.Time) int64 {
			id, err := s.InsertWebhookLog(ctx, store.NewWebhookLogRow{ReceivedUTC: received, EventAction: action, JobID: jobID, Payload: "{}"})
			is.NoErr(err)
			return id
		}
		first := log("create-appointment", jobA, at(3))
		log("change-job-status", jobA, at(5))
		log("change-job-status", "", at(6))
		_, err := s.ClaimFirstSeen(ctx, jobA, first, store.ViaWebhook)
		is.NoErr(err)
		_, err = s.ClaimFirstSeen(ctx, jobB, 0, store.ViaEmail)
		is.NoErr(err)
		_, err = s.ClaimFirstSeen(ctx, noCreated, 0, store.ViaBackstop)
		is.NoErr(err)

		email := func(msg, jobID string, received time.Time) {
			r, _, err := s.RegisterEmail(ctx, store.EmailReceipt{InternetMessageID: msg, ReceivedUTC: received, BodyPreview: "x"})
			is.NoErr(err)
			r.PrimeJobID, r.Outcome = jobID, store.EmailProcessed
			is.NoErr(s.UpdateEmailReceipt(ctx, r))
		}
		email("<1@x>", jobA, at(4))
		email("<2@x>", jobA, at(7)) // a second email for the job: the first counts
		email("<3@x>", jobB, at(8))
		n, err := s.RecordBackstopSeen(ctx, []string{jobA, strings.ToUpper(noCreated)}, at(9))
		is.NoErr(err)
		is.Equal(n, 2) // both new
		n, err = s.RecordBackstopSeen(ctx, []string{jobA}, at(10))
		is.NoErr(err)
		is.Equal(n, 0) // seen before: the first sight stays

		rows, err := s.ListJobCoverage(ctx, since)
		is.NoErr(err)
		byJob := map[string]store.JobCoverage{}
		for _, r := range rows {
			byJob[r.JobID] = r
		}
		is.Equal(len(rows), 3) // the jobs of the window
		_, old := byJob[jobC]
		is.True(!old) // not one created before it

		a := byJob[jobA]
		is.Equal(a.JobNumber, "J012345")
		is.True(a.CreatedAt.Equal(at(1)))
		is.Equal(a.Via, store.ViaWebhook)             // the path that claimed it
		is.Equal(a.FirstAction, "create-appointment") // with the claiming row's action
		is.True(a.Webhook.Equal(at(3)))               // the first log row of the job
		is.Equal(a.WebhookAction, "create-appointment")
		is.True(a.Email.Equal(at(4))) // the first email
		is.True(a.Backstop.Equal(at(9)))

		b := byJob[jobB]
		is.Equal(b.Via, store.ViaEmail)
		is.True(b.Webhook.IsZero()) // the webhook never saw it
		is.True(b.Email.Equal(at(8)))
		is.True(b.Backstop.IsZero())

		c := byJob[noCreated]
		is.True(c.CreatedAt.IsZero())
		is.Equal(c.Via, store.ViaBackstop)
		is.True(c.Backstop.Equal(at(9)))
		is.Equal(rows[len(rows)-1].JobID, noCreated) // counted from its first sight, now: the latest

		actions, err := s.WebhookActionCoverage(ctx, at(4))
		is.NoErr(err)
		is.Equal(len(actions), 1) // only what arrived since
		is.Equal(actions[0], store.ActionCoverage{Action: "change-job-status", Events: 2, FirstSeen: at(5), LastSeen: at(6)})
		all, err := s.WebhookActionCoverage(ctx, time.Time{})
		is.NoErr(err)
		is.Equal(len(all), 2)                        // the whole log
		is.Equal(all[0].Action, "change-job-status") // the latest first
		is.Equal(all[1], store.ActionCoverage{Action: "create-appointment", Events: 1, FirstSeen: at(3), LastSeen: at(3)})
	})

	t.Run("emails by outcome", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		for i, e := range []struct {
			outcome  string
			received time.Time
		}{
			{store.EmailProcessed, at(1)}, {store.EmailProcessed, at(2)}, {store.EmailProcessed, since.Add(-time.Hour)}, // one before the window
			{store.EmailFailed, at(3)}, {store.EmailRejected, at(4)}, {store.EmailRejected, at(5)},
			{store.EmailPending, time.Time{}}, // no receivedDateTime: counted from its receipt, now
		} {
			r, _, err := s.RegisterEmail(ctx, store.EmailReceipt{InternetMessageID: fmt.Sprintf("<%d@x>", i), ReceivedUTC: e.received})
			is.NoErr(err)
			r.Outcome = e.outcome
			is.NoErr(s.UpdateEmailReceipt(ctx, r))
		}
		got, err := s.CountEmailReceipts(ctx, since)
		is.NoErr(err)
		is.Equal(got, map[string]int{store.EmailProcessed: 2, store.EmailFailed: 1, store.EmailRejected: 2, store.EmailPending: 1}) // the window's, by outcome
		none, err := s.CountEmailReceipts(ctx, time.Now().Add(time.Hour))
		is.NoErr(err)
		is.Equal(len(none), 0) // none received since a time to come
	})

	t.Run("sweep watermark", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		_, found, err := s.GetSweepWatermark(ctx, "jobs-by-date")
		is.NoErr(err)
		is.True(!found) // before the first sweep
		is.NoErr(s.SetSweepWatermark(ctx, "jobs-by-date", at(1)))
		is.NoErr(s.SetSweepWatermark(ctx, "other", at(5)))
		is.NoErr(s.SetSweepWatermark(ctx, "jobs-by-date", at(2)))
		w, found, err := s.GetSweepWatermark(ctx, "jobs-by-date")
		is.NoErr(err)
		is.True(found)
		is.True(w.Equal(at(2))) // the last one set, by name
	})
}
