package mssql

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

// fitsNullable is fits, and a NULL for any parameter that has a default or
// takes NULL (the adapter sends sql.Null* for a zero value).
func fitsNullable(p procParam, v any) bool {
	switch v := v.(type) {
	case sql.NullInt64:
		return !v.Valid
	case sql.NullString:
		return !v.Valid
	}
	return fits(p, v)
}

// Every method of the job mirror's areas calls a procedure of its scripts
// with parameters that exist, with values of fitting types, leaving out no
// required one; and every procedure of those scripts is called.
func TestJobAreaCallsMatchTheProcedures(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, rec := recording(t)

	const job = "0B6A3C52-3E0F-4A57-9A39-2F1D7C1E4B10"
	const status = "8e7d6c5b-4a39-4281-9f0e-d1c2b3a4f5e6"
	full := store.Job{JobID: job, JobNumber: "J012345", StatusID: status, ClientID: status, AssignedID: status,
		EstimatorID: status, CaseManagerID: status, SupervisorID: status, DivisionID: status, Region: "Metro",
		Description: "roof", IncidentDate: time.Now(), CreatedAt: time.Now(), UpdatedAt: time.Now(), Version: 3,
		PrimeURL: "https://x", AuthorisedTotalIncludingTax: "700.80", AddressLine1: "1 St", AddressLine2: "u2",
		Suburb: "Carlton", State: "VIC", Postcode: "3053", PrimaryContactID: status, Attributes: "{}"}
	var errs []error
	try := func(err error) { errs = append(errs, err) }
	_, err := s.UpsertJob(ctx, full)
	try(err)
	_, err = s.UpsertJob(ctx, store.Job{JobID: job, StatusID: "not-a-guid"})
	try(err)
	_, _, err = s.GetJob(ctx, job)
	try(err)
	_, err = s.ClaimFirstSeen(ctx, job, 42, store.ViaWebhook)
	try(err)
	_, err = s.ClaimFirstSeen(ctx, job, 0, "")
	try(err)
	_, _, err = s.GetFirstSeen(ctx, job)
	try(err)
	try(s.CompleteFirstSeen(ctx, job, "Queued 4"))
	_, err = s.FailFirstSeen(ctx, job, "boom")
	try(err)
	_, err = s.ListFirstSeen(ctx, store.FirstSeenFailed, 0)
	try(err)
	_, err = s.QueueClientWIPStatusChange(ctx, job, store.ClientWIPSource(42))
	try(err)
	_, err = s.ListClientWIPTriggers(ctx, job)
	try(err)
	_, err = s.QueueTriageInvite(ctx, job, status)
	try(err)
	_, err = s.ListTriageInvites(ctx, job)
	try(err)
	_, err = s.QueueMissingObjectsByJob(ctx, job)
	try(err)
	try(s.UpsertSyncQueue(ctx, store.TableAllocations, job))
	_, err = s.DeleteSyncQueue(ctx, store.TableAllocations, job)
	try(err)
	_, err = s.ListSyncQueue(ctx, store.SyncQueueFilter{})
	try(err)
	_, err = s.ListSyncQueue(ctx, store.SyncQueueFilter{Object: store.TableContacts, JobID: job, Limit: 5})
	try(err)
	_, err = s.ClaimSyncQueue(ctx, store.SyncQueueFilter{Object: store.TableAllocations}, time.Now())
	try(err)
	_, err = s.ProcessNewPrimeJob(ctx, job, 42, store.ViaWebhook, store.OutboxMessage{Subject: "makesafe.detect", MsgID: "m", Data: []byte("{}")})
	try(err)
	_, err = s.ProcessNewPrimeJob(ctx, job, 0, "", store.OutboxMessage{Subject: "makesafe.detect", MsgID: "m", Data: []byte("{}")})
	try(err)
	_, err = s.RecordBackstopSeen(ctx, []string{job, "not-a-guid"}, time.Now())
	try(err)
	_, _, err = s.GetSweepWatermark(ctx, "jobs-by-date")
	try(err)
	try(s.SetSweepWatermark(ctx, "jobs-by-date", time.Now()))
	_, err = s.ListJobCoverage(ctx, time.Now().Add(-time.Hour))
	try(err)
	_, err = s.WebhookActionCoverage(ctx, time.Now().Add(-time.Hour))
	try(err)
	_, err = s.WebhookActionCoverage(ctx, time.Time{})
	try(err)
	_, err = s.CountEmailReceipts(ctx, time.Now().Add(-time.Hour))
	try(err)
	item := store.SyncQueueItem{ID: 7, Object: store.TableAllocations, JobID: job, QueuedUTC: time.Now(), ClaimedUTC: time.Now()}
	_, err = s.ReleaseSyncQueue(ctx, item)
	try(err)
	_, err = s.DeleteClaimedSyncQueue(ctx, item)
	try(err)
	_, err = s.SyncQueueStats(ctx)
	try(err)
	_, _, err = s.GetJobObjectsQueued(ctx, job)
	try(err)
	try(s.SetJobObjectsQueued(ctx, job, store.JobVersion{Version: 3, UpdatedAt: time.Now()}))
	try(s.ReplaceJobStatusHistory(ctx, job, []store.JobStatusHistory{{StatusHistoryID: status, StatusID: status, CreatedAt: time.Now(), Attributes: "{}"}}))
	_, err = s.ListJobStatusHistory(ctx, job)
	try(err)
	_, err = s.ListTriageInviteQueue(ctx, store.InvitesFailed, 0)
	try(err)
	_, err = s.ClaimTriageInvites(ctx, time.Now(), time.Minute, 5, 4)
	try(err)
	try(s.SetTriageInviteSent(ctx, 3, 1, time.Now()))
	try(s.SetTriageInviteFailed(ctx, 3, 1, "HTTP 503", time.Now(), time.Now()))
	try(s.SetTriageInviteFailed(ctx, 3, 1, "HTTP 400", time.Time{}, time.Now()))
	try(s.ReleaseTriageInvite(ctx, 3, 1, time.Now()))
	try(s.DeferTriageInvite(ctx, 3, 1, "the primary contact is not mirrored yet", time.Now().Add(time.Minute), time.Now()))
	try(s.SetTriageInvitePayload(ctx, 3, 1, `{"id":3}`))
	_, err = s.GetTriageInvite(ctx, 3)
	try(err)
	_, _, err = s.NextTriageInviteDue(ctx)
	try(err)
	_, err = s.CountTriageInvites(ctx)
	try(err)
	_, _, err = s.OldestTriageInviteWaiting(ctx)
	try(err)
	for _, err := range errs {
		is.True(errors.Is(err, errRecorded)) // every method reached the database
	}

	// 051 redefines the first-sight procedures of 010 (a later CREATE OR
	// ALTER wins) and brings the new-job path's own.
	checkCalls(t, rec, scriptModules(t, "010_jobs.sql", "011_job_triggers.sql", "012_sync_queue.sql", "051_new_job_path.sql",
		"060_sync_drains.sql", "061_triage_invites.sql", "062_job_objects_queued.sql"), fitsNullable, nil)
}

// The email path's receipt: every method calls a procedure of 050 that
// fits, and every procedure there is called.
func TestEmailReceiptCallsMatchTheProcedures(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, rec := recording(t)
	const msg = "<a1b2@notifications.primeeco.tech>"
	var errs []error
	try := func(err error) { errs = append(errs, err) }
	_, _, err := s.RegisterEmail(ctx, store.EmailReceipt{InternetMessageID: msg, Subject: "New job", ReceivedUTC: time.Now(), From: "x@y", BodyPreview: "p"})
	try(err)
	_, _, err = s.RegisterEmail(ctx, store.EmailReceipt{InternetMessageID: msg})
	try(err)
	try(s.UpdateEmailReceipt(ctx, store.EmailReceipt{InternetMessageID: msg, JobID: "2262480", JobIDKind: "numeric", NumericReference: 2262480,
		JobNumber: "J014370", PrimeJobID: "0B6A3C52-3E0F-4A57-9A39-2F1D7C1E4B10", Outcome: store.EmailProcessed, Attempts: 1,
		MovedUTC: time.Now(), MovedTo: store.EmailProcessed}))
	try(s.UpdateEmailReceipt(ctx, store.EmailReceipt{InternetMessageID: msg, Outcome: store.EmailPending}))
	_, _, err = s.GetEmailReceipt(ctx, msg)
	try(err)
	for _, err := range errs {
		is.True(errors.Is(err, errRecorded)) // every method reached the database
	}
	checkCalls(t, rec, scriptModules(t, "050_email_intake.sql"), fitsNullable, nil)
}

// The spec's names: spPrimeEmailJobRegisteredInsert takes the flow's one
// argument first (§7 "SQL Log Request"), spEthProcessNewPrimeJob @JobId
// (§7.1), and what primeflow adds after them can be left out.
func TestNewJobPathSpecProcedures(t *testing.T) {
	mods := modules(t, loaded(t))
	for proc, first := range map[string]string{"spPrimeEmailJobRegisteredInsert": "BodyPreview", "spEthProcessNewPrimeJob": "JobId"} {
		t.Run(proc, func(t *testing.T) {
			is := is.New(t)
			m, ok := mods[proc]
			is.True(ok) // spelled as the spec spells it
			is.Equal(m.params[0].name, first)
			for _, p := range m.params[1:] {
				is.True(p.optional()) // the spec's call still runs
			}
		})
	}
}

// The spec's procedure names, with the parameter §6 gives.
func TestSyncQueueSpecProcedures(t *testing.T) {
	is := is.New(t)
	mods := modules(t, loaded(t))
	m, ok := mods["spEthSyncQueueMissingObjectsByJobID"]
	is.True(ok) // §6 step 1's procedure, spelled as the spec spells it
	is.Equal(len(m.params), 1)
	is.Equal(m.params[0].name, "JobId") // @JobId
	for _, name := range []string{"spEthSyncQueueUpsert", "spEthSyncQueueDelete"} {
		_, ok := mods[name]
		is.True(ok) // §6 and §9 name it
	}
}

// Lookups by a value that is not a GUID answer "none" without a call.
func TestJobAreaNoCallForImpossibleArguments(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, rec := recording(t)

	_, found, err := s.GetJob(ctx, "259047")
	is.NoErr(err)
	is.True(!found) // no job has a numeric id
	_, found, err = s.GetFirstSeen(ctx, "259047")
	is.NoErr(err)
	is.True(!found)
	_, err = s.UpsertJob(ctx, store.Job{JobID: "259047"})
	is.True(err != nil && !errors.Is(err, errRecorded)) // a job id must be a GUID
	_, err = s.ClaimFirstSeen(ctx, "259047", 1, store.ViaWebhook)
	is.True(err != nil && !errors.Is(err, errRecorded)) // so must a claimed one
	queued, err := s.QueueTriageInvite(ctx, "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10", "")
	is.NoErr(err)
	is.True(!queued) // no Initial-Contact-Made status configured
	items, err := s.ListSyncQueue(ctx, store.SyncQueueFilter{JobID: "259047"})
	is.NoErr(err)
	is.Equal(len(items), 0)
	deleted, err := s.DeleteSyncQueue(ctx, store.TableAllocations, "259047")
	is.NoErr(err)
	is.True(!deleted)
	is.Equal(len(rec.take()), 0) // none of this reached the database
}
