package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

func testArchive(t *testing.T, open Opener) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)

	t.Run("webhook log: finished rows out and back under their ids", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		add := func(action string, received time.Time, processed bool, fails int) int64 {
			r := newRow(action)
			r.ReceivedUTC, r.JobID = received, jobA
			id, err := s.InsertWebhookLog(ctx, r)
			is.NoErr(err)
			for range fails {
				_, err := s.IncrementWebhookLogAttempt(ctx, id, "", "prime: 503")
				is.NoErr(err)
			}
			if processed {
				is.NoErr(s.SetWebhookLogProcessed(ctx, id, "", "Processed"))
				is.NoErr(s.SetWebhookLogPublished(ctx, []int64{id}, received))
			}
			return id
		}
		old1 := add("change-job-status", now.Add(-48*time.Hour), true, 1)
		queued := add("change-job-status", now.Add(-47*time.Hour), false, 0)
		old2 := add("create-appointment", now.Add(-46*time.Hour), true, 0)
		capped := add("create-estimate", now.Add(-45*time.Hour), false, store.MaxAttempts)
		old3 := add("create-allocation", now.Add(-44*time.Hour), true, 0)
		fresh := add("change-job-status", now.Add(time.Hour), true, 0) // received after T
		before := now.Add(time.Minute)                                 // after every row's processing

		n, err := s.CountArchivable(ctx, before)
		is.NoErr(err)
		is.Equal(n[store.ArchiveWebhookLog], 3) // the processed rows received before T
		n, err = s.CountArchivable(ctx, now.Add(-time.Hour))
		is.NoErr(err)
		is.Equal(n[store.ArchiveWebhookLog], 0) // received before, but processed after: not finished before T

		var got []store.WebhookLogRow
		for after := int64(0); ; {
			page, err := s.ListArchivableWebhookLog(ctx, before, after, 2)
			is.NoErr(err)
			is.True(len(page) <= 2) // at most a page
			if len(page) == 0 {
				break
			}
			got = append(got, page...)
			after = page[len(page)-1].ID
		}
		var ids []int64
		for _, r := range got {
			ids = append(ids, r.ID)
		}
		is.Equal(ids, []int64{old1, old2, old3}) // oldest first, nothing else
		is.Equal(got[0].ProcessAttempts, 1)      // each row whole
		is.Equal(got[0].JobID, jobA)
		is.Equal(got[0].Payload, newRow("change-job-status").Payload)
		is.True(got[0].Processed())

		// A row reset for replay since it was listed is not deleted.
		reset, err := s.ResetWebhookLog(ctx, store.LogFilter{IDs: []int64{old2}})
		is.NoErr(err)
		is.Equal(reset, 1)
		deleted, err := s.DeleteArchived(ctx, store.ArchiveWebhookLog, before, append(ids, queued, capped, fresh))
		is.NoErr(err)
		is.Equal(deleted, 2) // the two still finished
		for _, id := range []int64{old1, old3} {
			_, err := s.GetWebhookLog(ctx, id)
			is.True(errors.Is(err, store.ErrNotFound)) // gone
		}
		for _, id := range []int64{old2, queued, capped, fresh} {
			_, err := s.GetWebhookLog(ctx, id)
			is.NoErr(err) // kept
		}
		_, err = s.DeleteArchived(ctx, "primeJobs", before, ids)
		is.True(err != nil) // a table the archive does not hold

		// Back, queued for replay under their own ids; the one the log
		// holds is left as it is.
		restored, err := s.RestoreWebhookLog(ctx, got)
		is.NoErr(err)
		is.Equal(restored, []int64{old1, old3})
		back, err := s.GetWebhookLog(ctx, old1)
		is.NoErr(err)
		is.Equal(back.Payload, got[0].Payload) // as it was received
		is.Equal(back.Headers, got[0].Headers)
		is.Equal(back.RemoteIP, got[0].RemoteIP)
		is.Equal(back.JobID, jobA)
		is.True(back.ReceivedUTC.Equal(got[0].ReceivedUTC))
		is.True(back.IsAuthenticated)
		is.True(!back.Processed())                       // queued for replay
		is.Equal(back.ProcessAttempts, 0)                // with no attempts
		is.True(back.PublishedUTC.IsZero())              // for the relay to publish
		is.Equal(back.ReplayCount, got[0].ReplayCount+1) // under a new message id
		is.Equal(back.ProcessStatus, "Queued for replay")
		held, err := s.GetWebhookLog(ctx, old2)
		is.NoErr(err)
		is.Equal(held.ReplayCount, 1) // reset once, by the replay above, not again
		again, err := s.RestoreWebhookLog(ctx, got)
		is.NoErr(err)
		is.Equal(len(again), 0) // all of them are in the log now

		next, err := s.InsertWebhookLog(ctx, newRow("change-job-status"))
		is.NoErr(err)
		is.True(next > fresh) // the log's next id is past every one it ever gave
	})

	t.Run("a filter selects the same rows in the database and in an archive", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		base := now.Add(-10 * time.Hour)
		for i, r := range []struct {
			action, job string
			processed   bool
			fails       int
		}{
			{"change-job-status", jobA, true, 0}, {"change-job-status", jobB, false, 2}, {"create-appointment", jobA, false, store.MaxAttempts},
			{"create-estimate", "", true, 1}, {"create-appointment", jobB, true, 0}, {"change-job-status", jobA, false, 0},
		} {
			nr := newRow(r.action)
			nr.ReceivedUTC, nr.JobID = base.Add(time.Duration(i)*time.Hour+time.Duration(i)*time.Millisecond), r.job
			id, err := s.InsertWebhookLog(ctx, nr)
			is.NoErr(err)
			for range r.fails {
				_, err := s.IncrementWebhookLogAttempt(ctx, id, "", "x")
				is.NoErr(err)
			}
			if r.processed {
				is.NoErr(s.SetWebhookLogProcessed(ctx, id, "", "Processed"))
			}
			if i%2 == 0 {
				is.NoErr(s.SetWebhookLogPublished(ctx, []int64{id}, now))
			}
		}
		all, err := s.ListWebhookLog(ctx, store.LogFilter{Limit: 100})
		is.NoErr(err)
		is.Equal(len(all), 6)
		for _, f := range []store.LogFilter{
			{}, {IDs: []int64{all[1].ID, all[4].ID}}, {Action: "change-job-status"}, {JobID: jobB},
			{From: all[2].ReceivedUTC}, {To: all[2].ReceivedUTC}, {From: all[1].ReceivedUTC.Add(time.Microsecond), To: all[4].ReceivedUTC},
			{State: store.Unprocessed}, {State: store.Capped}, {State: store.Processed}, {Unpublished: true},
			{Action: "create-appointment", State: store.Processed, JobID: jobB},
		} {
			f.Limit = 100
			listed, err := s.ListWebhookLog(ctx, f)
			is.NoErr(err)
			var want, got []int64
			for _, r := range listed {
				want = append(want, r.ID)
			}
			for _, r := range all {
				if f.Matches(r) {
					got = append(got, r.ID)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("filter %+v: Matches picks %v, the database %v", f, got, want)
			}
		}
	})

	t.Run("an archived message's dedupe key still queues nothing", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		t0 := now.Add(-30 * 24 * time.Hour)
		before := now.Add(-24 * time.Hour)
		key := store.MakesafeSMSKey(jobA)
		sent, queued, err := s.QueueSMS(ctx, store.NewSMS{Recipient: onCall, Body: "make safe", Source: store.MakesafeSMSSource, DedupeKey: key, Now: t0})
		is.NoErr(err)
		is.True(queued)
		keyless, _, err := s.QueueSMS(ctx, store.NewSMS{Recipient: onCall, Body: "no key", Source: "test", Now: t0})
		is.NoErr(err)
		for range 2 {
			claimed, err := s.ClaimSMS(ctx, t0.Add(time.Second), time.Minute, 1, 1)
			is.NoErr(err)
			is.Equal(len(claimed), 1)
			is.NoErr(s.SetSMSSent(ctx, claimed[0].ID, claimed[0].Attempts, t0.Add(time.Minute)))
		}
		deleted, err := s.DeleteArchived(ctx, store.ArchiveSMS, before, []int64{sent, keyless})
		is.NoErr(err)
		is.Equal(deleted, 2) // both archived
		_, err = s.GetSMS(ctx, sent)
		is.True(errors.Is(err, store.ErrNotFound)) // gone from smsQueue

		// sql/README.md: a message with a dedupe key is queued once, archived or not.
		id, queued, err := s.QueueSMS(ctx, store.NewSMS{Recipient: onCall, Body: "make safe again", Source: store.MakesafeSMSSource, DedupeKey: key})
		is.NoErr(err)
		is.True(!queued)   // not queued again
		is.Equal(id, sent) // the archived message's id
		counts, err := s.CountSMS(ctx)
		is.NoErr(err)
		is.Equal(counts[store.SendQueued], 0) // nothing to send
		again, err := s.DeleteArchived(ctx, store.ArchiveSMS, before, []int64{sent, keyless})
		is.NoErr(err)
		is.Equal(again, 0) // a delete run again changes nothing
		id, queued, err = s.QueueSMS(ctx, store.NewSMS{Recipient: onCall, Body: "another", Source: "test", DedupeKey: "other-key"})
		is.NoErr(err)
		is.True(queued && id > keyless) // another key is queued as ever
	})

	t.Run("queues: only what is done, and done before T", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		t0 := now.Add(-30 * 24 * time.Hour)
		before := now.Add(-24 * time.Hour)

		// SMS: sent, logged and dismissed long ago go; failed, sent lately,
		// queued and dismissed lately stay.
		var sms []int64
		outcomes := []store.SendState{store.SendSent, store.SendLogged, store.SendFailed, store.SendSent, store.SendDismissed, store.SendDismissed, store.SendQueued}
		for i, outcome := range outcomes {
			id, _, err := s.QueueSMS(ctx, store.NewSMS{Recipient: onCall, Body: "make safe", Source: "test", Now: t0})
			is.NoErr(err)
			sms = append(sms, id)
			claimed, err := s.ClaimSMS(ctx, t0.Add(time.Second), time.Minute, 1, 1)
			is.NoErr(err)
			is.Equal(len(claimed), 1)
			at := t0.Add(time.Duration(i+1) * time.Minute)
			if i == 3 {
				at = now // sent lately
			}
			switch outcome {
			case store.SendSent:
				is.NoErr(s.SetSMSSent(ctx, id, claimed[0].Attempts, at))
			case store.SendLogged:
				is.NoErr(s.SetSMSLogged(ctx, id, claimed[0].Attempts, at))
			case store.SendFailed:
				is.NoErr(s.SetSMSFailed(ctx, id, claimed[0].Attempts, "400", time.Time{}, at))
			case store.SendDismissed:
				is.NoErr(s.SetSMSFailed(ctx, id, claimed[0].Attempts, "400", time.Time{}, at))
				dismissed := t0.Add(time.Hour)
				if i == 5 {
					dismissed = now // dismissed lately
				}
				_, err := s.Resolve(ctx, store.Resolution{Table: store.ResolvableSMS, RowID: id, Action: store.ResolveDismiss,
					By: "alice", Reason: "phoned the on-call", ResolvedUTC: dismissed})
				is.NoErr(err)
			case store.SendQueued:
				is.NoErr(s.ReleaseSMS(ctx, id, claimed[0].Attempts, at))
			}
		}

		// Triage invites: one sent long ago whose job has left the status
		// goes, and so does one dismissed long ago whose job has; one
		// Failed stays, and so does one sent whose job is still in the
		// status (it is what keeps a replayed event from inviting the
		// customer twice).
		const jobD = "3c2b1a09-8f7e-4d6c-9b5a-4e3d2c1b0a9f"
		var invites []int64
		for i, job := range []string{jobA, jobB, jobC, jobD} {
			_, err := s.UpsertJob(ctx, sampleJob(job, statusICM, 1))
			is.NoErr(err)
			queued, err := s.QueueTriageInvite(ctx, job, statusICM)
			is.NoErr(err)
			is.True(queued)
			claimed, err := s.ClaimTriageInvites(ctx, time.Now().Add(time.Second), time.Minute, 1, 1)
			is.NoErr(err)
			is.Equal(len(claimed), 1)
			invites = append(invites, claimed[0].ID)
			switch i {
			case 1:
				is.NoErr(s.SetTriageInviteFailed(ctx, claimed[0].ID, claimed[0].Attempts, "400", time.Time{}, t0))
				continue
			case 3:
				is.NoErr(s.SetTriageInviteFailed(ctx, claimed[0].ID, claimed[0].Attempts, "400", time.Time{}, t0))
				_, err := s.Resolve(ctx, store.Resolution{Table: store.ResolvableTriageInvite, RowID: claimed[0].ID, Action: store.ResolveDismiss,
					By: "alice", Reason: "invited by phone", ResolvedUTC: t0.Add(time.Hour)})
				is.NoErr(err)
			default:
				is.NoErr(s.SetTriageInviteSent(ctx, claimed[0].ID, claimed[0].Attempts, t0))
			}
			if i != 2 {
				_, err := s.UpsertJob(ctx, sampleJob(job, statusNew, 2)) // the job moves on
				is.NoErr(err)
				queued, err := s.QueueTriageInvite(ctx, job, statusICM)
				is.NoErr(err)
				is.True(!queued) // and its invite's change is over
			}
		}

		// Email receipts: processed and moved long ago goes, and so do
		// mail refused unread (Rejected, filed in the failed folder) and a
		// failed email a person dismissed, long ago; failed, processed but
		// still in the folder, and dismissed lately, stay.
		var receipts []int64
		for i, e := range []struct {
			id, outcome, movedTo string
			dismissedAt          time.Time
		}{{"<a@p>", store.EmailProcessed, store.EmailProcessed, time.Time{}}, {"<b@p>", store.EmailFailed, store.EmailFailed, time.Time{}},
			{"<c@p>", store.EmailProcessed, "", time.Time{}}, {"<d@p>", store.EmailRejected, store.EmailFailed, time.Time{}},
			{"<e@p>", store.EmailFailed, store.EmailFailed, t0.Add(time.Hour)}, {"<f@p>", store.EmailFailed, store.EmailFailed, now}} {
			r, _, err := s.RegisterEmail(ctx, store.EmailReceipt{InternetMessageID: e.id, Subject: "New Job", ReceivedUTC: t0})
			is.NoErr(err)
			receipts = append(receipts, r.ID)
			r.Outcome, r.MovedTo = e.outcome, e.movedTo
			if e.movedTo != "" {
				r.MovedUTC = t0.Add(time.Duration(i) * time.Minute)
			}
			is.NoErr(s.UpdateEmailReceipt(ctx, r))
			if !e.dismissedAt.IsZero() {
				_, err := s.Resolve(ctx, store.Resolution{Table: store.ResolvableEmailReceipt, RowID: r.ID, Action: store.ResolveDismiss,
					By: "alice", Reason: "a supplier's newsletter", ResolvedUTC: e.dismissedAt})
				is.NoErr(err)
			}
		}

		n, err := s.CountArchivable(ctx, before)
		is.NoErr(err)
		is.Equal(n, map[store.ArchiveTable]int{store.ArchiveWebhookLog: 0, store.ArchiveSMS: 3, store.ArchiveTriageInvites: 2, store.ArchiveEmailReceipts: 3})
		gotSMS, err := s.ListArchivableSMS(ctx, before, 0, 10)
		is.NoErr(err)
		is.Equal(len(gotSMS), 3)
		is.Equal([]int64{gotSMS[0].ID, gotSMS[1].ID, gotSMS[2].ID}, []int64{sms[0], sms[1], sms[4]}) // sent, logged, dismissed
		is.Equal(gotSMS[0].Body, "make safe")                                                        // whole
		is.Equal(gotSMS[1].State, store.SendLogged)
		gotInvites, err := s.ListArchivableTriageInvites(ctx, before, 0, 10)
		is.NoErr(err)
		is.Equal(len(gotInvites), 2)
		is.Equal([]int64{gotInvites[0].ID, gotInvites[1].ID}, []int64{invites[0], invites[3]}) // sent, dismissed
		is.Equal(gotInvites[0].JobID, jobA)
		gotReceipts, err := s.ListArchivableEmailReceipts(ctx, before, 0, 10)
		is.NoErr(err)
		var gone []string
		for _, r := range gotReceipts {
			gone = append(gone, r.InternetMessageID+" "+r.Outcome)
		}
		is.Equal(gone, []string{"<a@p> " + store.EmailProcessed, "<d@p> " + store.EmailRejected, "<e@p> " + store.EmailDismissed})
		later, err := s.ListArchivableSMS(ctx, before, sms[0], 10)
		is.NoErr(err)
		is.Equal(len(later), 2) // after an id

		for table, ids := range map[store.ArchiveTable][]int64{store.ArchiveSMS: sms, store.ArchiveTriageInvites: invites, store.ArchiveEmailReceipts: receipts} {
			deleted, err := s.DeleteArchived(ctx, table, before, ids)
			is.NoErr(err)
			is.Equal(deleted, n[table]) // only the finished ones, table
		}
		n, err = s.CountArchivable(ctx, before)
		is.NoErr(err)
		is.Equal(n[store.ArchiveSMS]+n[store.ArchiveTriageInvites]+n[store.ArchiveEmailReceipts], 0) // none left
		_, err = s.GetSMS(ctx, sms[2])
		is.NoErr(err) // the Failed message stays for its person
		_, err = s.GetSMS(ctx, sms[5])
		is.NoErr(err) // and the one dismissed lately
		counts, err := s.CountTriageInvites(ctx)
		is.NoErr(err)
		is.Equal(counts[store.SendFailed], 1)    // and the Failed invite
		is.Equal(counts[store.SendSent], 1)      // and the one still open
		is.Equal(counts[store.SendDismissed], 0) // the dismissed one gone
		_, found, err := s.GetEmailReceipt(ctx, "<b@p>")
		is.NoErr(err)
		is.True(found) // and the Failed email
		_, found, err = s.GetEmailReceipt(ctx, "<c@p>")
		is.NoErr(err)
		is.True(found) // and the one still in the folder
		_, found, err = s.GetEmailReceipt(ctx, "<f@p>")
		is.NoErr(err)
		is.True(found) // and the one dismissed lately
	})
}
