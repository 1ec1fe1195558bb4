package childmirror_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/outbox"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/pkg/store"
	childmirror "github.com/ethosbuilding/primeflow/services/child-mirror"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go"
)

// before reports whether a was written before b (both must be there).
func before(writes []string, a, b string) bool {
	i, j := slices.Index(writes, a), slices.Index(writes, b)
	return i >= 0 && j >= 0 && i < j
}

// capped waits for a row to fail its last attempt.
func (e *env) capped(id int64) store.WebhookLogRow {
	e.T.Helper()
	return e.WaitRow(id, "capped", store.WebhookLogRow.Capped)
}

// failedOnce waits for a row to have a failed attempt recorded.
func (e *env) failedOnce(id int64) store.WebhookLogRow {
	e.T.Helper()
	return e.WaitRow(id, "a failed attempt", func(r store.WebhookLogRow) bool { return r.ProcessAttempts > 0 })
}

func (e *env) appointment(id string) store.Appointment {
	e.T.Helper()
	a, found, err := e.Env.Store.GetAppointment(context.Background(), id)
	if err != nil || !found {
		e.T.Fatalf("appointment %s: found %v, %v", id, found, err)
	}
	return a
}

func (e *env) mirrored(jobID string) bool {
	e.T.Helper()
	_, found, err := e.Env.Store.GetJob(context.Background(), jobID)
	if err != nil {
		e.T.Fatal(err)
	}
	return found
}

// logged is what the services logged about one log row: the lines that
// carry its logId, so a subtest sees its own event's logs only.
func (e *env) logged(id int64) string {
	tok := fmt.Sprintf("logId=%d", id)
	var b strings.Builder
	for line := range strings.Lines(e.Logs.String()) {
		if slices.Contains(strings.Fields(line), tok) {
			b.WriteString(line)
		}
	}
	return b.String()
}

func body(action string, ref int64, props ...string) string {
	b := fmt.Sprintf(`{"eventAction":%q`, action)
	if ref != 0 {
		b += fmt.Sprintf(`,"jobId":%d`, ref)
	}
	for i := 0; i+1 < len(props); i += 2 {
		b += fmt.Sprintf(`,%q:%q`, props[i], props[i+1])
	}
	return b + "}"
}

// A child event is often the first we hear of a job (§4.3): the job is
// mirrored before the child row, and the new-job pipeline is handed the job
// once, however many of its child events come.
func TestChildEventsOfANewJob(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	job := e.Sim.NewJob()
	appt := e.Sim.NewAppointment(job.ID)
	alloc := e.Sim.NewMakeSafeAllocation(job.ID)
	form := e.Sim.NewSiteForm(job.ID)
	est := e.Sim.NewEstimate(job.ID)
	is.True(!e.mirrored(job.ID)) // never seen

	ids := []int64{
		e.Fire(events.ActionCreateAppointment, appt.ID),
		e.Fire(events.ActionCreateAllocation, alloc.ID),
		e.Fire(events.ActionChangeCustomFormStatus, form.ID),
		e.Fire(events.ActionCreateEstimate, est.ID),
	}
	for _, id := range ids {
		row := e.WaitProcessed(id)
		is.Equal(row.ProcessStatus, "Processed") // each child event processed
		is.Equal(row.ProcessAttempts, 0)         // at the first attempt
		is.Equal(row.JobID, job.ID)              // with its job backfilled
	}

	w := e.store.writes()
	for _, child := range []string{"appointment:" + appt.ID, "allocation:" + alloc.ID, "siteforms:" + job.ID, "estimates:" + job.ID} {
		if !before(w, "job:"+job.ID, child) {
			t.Logf("writes: %v", w)
		}
		is.True(before(w, "job:"+job.ID, child)) // the job row is written before the child row
	}
	seen, found, err := e.Env.Store.GetFirstSeen(context.Background(), job.ID)
	is.NoErr(err)
	is.True(found)                   // the first sight is recorded
	is.Equal(seen.LogID, ids[0])     // by the event that saw the job first
	is.Equal(e.firstSeen(job.ID), 1) // and the new-job pipeline is handed the job once
	ref, mapped, err := e.Env.Store.GetJobIDByReference(context.Background(), job.Ref)
	is.NoErr(err)
	is.True(mapped)       // the numeric reference is mapped
	is.Equal(ref, job.ID) // to the job
}

// §5.2: the appointment mirrored job first, refreshed when already held,
// its contacts synced (primaryContactId from a fresh job fetch), then
// optimo.create.requested.
func TestAppointment(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	job := e.Sim.NewJob()
	contact, rel := e.Sim.NewContact(job.ID)
	appt := e.Sim.NewAppointment(job.ID)

	id := e.Fire(events.ActionCreateAppointment, appt.ID)
	e.WaitProcessed(id)
	got := e.appointment(appt.ID)
	is.Equal(got.JobID, job.ID)                       // mirrored under its job
	is.Equal(got.Status, "Scheduled")                 // as Prime has it
	is.Equal(got.Version, int64(1))                   // with Prime's version
	is.True(got.StartDate.Equal(appt.StartDate.Time)) // and its times
	// Step 4 follows the commit of steps 2 and 3.
	flowtest.Eventually(t, "the job's contact synced", func() bool {
		_, found, err := e.Env.Store.GetContact(context.Background(), contact.ID)
		return err == nil && found
	})
	is.True(before(e.store.writes(), "appointment:"+appt.ID, "contact:"+contact.ID)) // after the appointment
	c, _, err := e.Env.Store.GetContact(context.Background(), contact.ID)
	is.NoErr(err)
	is.Equal(c.Mobile, contact.Mobile) // with its details
	rels, err := e.Env.Store.ListJobContactRelationships(context.Background(), job.ID)
	is.NoErr(err)
	is.Equal(len(rels), 1)                          // and its relationship
	is.Equal(rels[0].ContactRelationshipID, rel.ID) // the one Prime has
	flowtest.Eventually(t, "optimo.create.requested", func() bool { return e.createRequests() == 1 })

	// Prime completes the appointment and names a new primary contact with
	// no relationship: only a fresh fetch of the job shows it.
	owner := prime.Contact{ID: "0d6f3c1e-7a2b-4c5d-8e9f-a0b1c2d3e4f5", Name: "Property Owner", Mobile: "0400 000 001"}
	is.NoErr(e.Sim.PutContact(owner))
	_, err = e.Sim.UpdateJob(job.ID, func(j *prime.Job) { j.PrimaryContactID = owner.ID })
	is.NoErr(err)
	_, err = e.Sim.UpdateAppointment(appt.ID, func(a *prime.Appointment) { a.Status = "Completed" })
	is.NoErr(err)
	calls := e.Sim.Stats().ByEndpoint["GET /appointments/{id}"]
	id = e.Fire(events.ActionCompleteAppointment, appt.ID)
	e.WaitProcessed(id)
	got = e.appointment(appt.ID)
	is.Equal(got.Status, "Completed")                                            // refreshed from Prime
	is.Equal(got.Version, int64(2))                                              // to its new version
	is.Equal(e.Sim.Stats().ByEndpoint["GET /appointments/{id}"]-calls, int64(1)) // fetched again, once
	flowtest.Eventually(t, "the new primary contact, read off the fresh job", func() bool {
		_, found, err := e.Env.Store.GetContact(context.Background(), owner.ID)
		return err == nil && found
	})
	j, _, err := e.Env.Store.GetJob(context.Background(), job.ID)
	is.NoErr(err)
	is.Equal(j.PrimaryContactID, owner.ID) // and the fresh job saved
	flowtest.Eventually(t, "a second optimo.create.requested", func() bool { return e.createRequests() == 2 })
}

// §5.2 step 3: an appointment Prime reports without a job is mirrored
// under the job of the numeric reference, which is made sure of first.
func TestAppointmentWithoutAJobFallsBackToTheReference(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	job := e.Sim.NewJob()
	appt := e.Sim.NewAppointment("", func(a *prime.Appointment) { a.JobID = "" })
	id := e.Publish(events.ActionCreateAppointment, body(events.ActionCreateAppointment, job.Ref, "appointmentTypeId", appt.ID))
	row := e.WaitProcessed(id)
	is.Equal(row.JobID, job.ID)                                              // the job of the reference
	is.Equal(e.appointment(appt.ID).JobID, job.ID)                           // the appointment mirrored under it
	is.True(before(e.store.writes(), "job:"+job.ID, "appointment:"+appt.ID)) // job first
	is.Equal(e.firstSeen(job.ID), 1)                                         // first sight, once
}

// §5.2 step 4: a failed contact sync is logged and swallowed; the
// appointment is mirrored and handed on all the same.
func TestContactSyncFailureIsSwallowed(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	job := e.Sim.NewJob()
	e.Sim.NewContact(job.ID)
	appt := e.Sim.NewAppointment(job.ID)
	e.Sim.SetFaults(primesim.Faults{Path: "/contact-relationships", FailNext: 100, FailStatus: 503})
	id := e.Fire(events.ActionCreateAppointment, appt.ID)
	row := e.WaitProcessed(id)
	is.Equal(row.ProcessAttempts, 0)               // the failure did not fail the event
	is.Equal(e.appointment(appt.ID).JobID, job.ID) // the appointment is mirrored
	flowtest.Eventually(t, "the contact sync's failure counted", func() bool {
		return flowtest.Counter(t, e.Deps.Metrics, "primeflow_childmirror_swallowed_failures_total", map[string]string{"step": "contact_sync"}) == 1
	})
	rels, err := e.Env.Store.ListJobContactRelationships(context.Background(), job.ID)
	is.NoErr(err)
	is.Equal(len(rels), 0)                                            // no contacts this time
	is.True(strings.Contains(e.Logs.String(), "contact sync failed")) // and logged
	flowtest.Eventually(t, "optimo.create.requested", func() bool { return e.createRequests() == 1 })
}

// §5.2 step 5: the OptimoRoute hand-off failing is logged, not thrown; the
// outbox publishes it once NATS takes it again.
func TestOptimoHandOffFailureIsNotThrown(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	job := e.Sim.NewJob()
	appt := e.Sim.NewAppointment(job.ID)
	s, err := e.JS.Stream(context.Background(), events.StreamOptimo)
	is.NoErr(err)
	cfg := s.CachedInfo().Config
	is.NoErr(e.JS.DeleteStream(context.Background(), events.StreamOptimo)) // nothing takes optimo.create.requested
	id := e.Fire(events.ActionCreateAppointment, appt.ID)
	row := e.WaitProcessed(id)
	is.Equal(row.ProcessAttempts, 0) // the event is processed regardless
	pending, err := e.Env.Store.GetOutboxUnpublished(context.Background(), 0, time.Now().Add(time.Minute), 10)
	is.NoErr(err)
	is.Equal(len(pending), 1)                                // the hand-off waits in the outbox
	is.Equal(pending[0].Subject, events.SubjectOptimoCreate) // it is the create request

	_, err = e.JS.CreateStream(context.Background(), cfg)
	is.NoErr(err)
	is.NoErr((&outbox.Publisher{JS: e.JS, Store: e.Env.Store, Log: e.Deps.Log}).Sweep(context.Background(), 0))
	is.Equal(e.createRequests(), 1) // published by the sweeper
}

// §4.3: a rate-limited ensure-job makes the event wait without burning an
// attempt; it completes once Prime lets us in.
func TestEnsureJobRateLimitedWaits(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	job := e.Sim.NewJob()
	appt := e.Sim.NewAppointment(job.ID)
	e.Sim.SetFaults(primesim.Faults{Path: "/jobs", RateLimitNext: 1, RetryAfter: time.Second})
	id := e.Fire(events.ActionCreateAppointment, appt.ID)
	row := e.WaitProcessed(id)
	is.Equal(row.ProcessAttempts, 0)               // no attempt counted
	is.True(e.Sim.Stats().ByStatus[429] >= 1)      // though Prime did answer 429
	is.True(e.mirrored(job.ID))                    // the job is mirrored
	is.Equal(e.appointment(appt.ID).JobID, job.ID) // and then the appointment
	is.Equal(e.firstSeen(job.ID), 1)               // first sight, once
}

// A Prime 503 while refetching an appointment, with nothing else answered,
// is Prime's outage: the event waits, no attempt (pkg/prime). A 500 for
// the appointment alone while Prime answers other calls is the record's:
// it counts attempts, and the retry succeeds once Prime serves it.
func TestPrimeFailureCountsAnAttemptOnlyWhenItIsTheRecords(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	job := e.Sim.NewJob()
	appt := e.Sim.NewAppointment(job.ID)
	e.WaitProcessed(e.Fire(events.ActionCreateAppointment, appt.ID))
	e.Sim.SetFaults(primesim.Faults{Path: "/appointments", FailNext: 2, FailStatus: 503})
	row := e.WaitProcessed(e.Fire(events.ActionCompleteAppointment, appt.ID))
	is.Equal(row.ProcessAttempts, 0) // Prime down: waited out, no attempt

	e.Sim.SetFaults(primesim.Faults{Path: "/appointments/" + appt.ID, FailNext: 1 << 20, FailStatus: 500})
	stop := make(chan struct{})
	var others sync.WaitGroup
	others.Go(func() { // Prime answers other calls meanwhile
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			_, _ = e.Prime.GetJob(context.Background(), job.ID)
		}
	})
	id := e.Fire(events.ActionCompleteAppointment, appt.ID)
	e.WaitRow(id, "an attempt counted", func(r store.WebhookLogRow) bool { return r.ProcessAttempts >= 1 })
	close(stop)
	others.Wait()
	e.Sim.SetFaults(primesim.Faults{})
	row = e.WaitProcessed(id)
	is.True(row.ProcessAttempts >= 1) // the record's failure counted
}

// A payload with the appointment's GUID under a renamed property still
// works: the resolver warns that the payload shape has changed (§4.2).
func TestRenamedPropertyStillWorks(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	job := e.Sim.NewJob()
	appt := e.Sim.NewAppointment(job.ID)
	alloc := e.Sim.NewMakeSafeAllocation(job.ID)
	a := e.Publish(events.ActionCreateAppointment, body(events.ActionCreateAppointment, job.Ref, "appointmentUUID", appt.ID))
	b := e.Publish(events.ActionCreateAllocation, body(events.ActionCreateAllocation, job.Ref, "allocationUUID", alloc.ID))
	is.Equal(e.WaitProcessed(a).ProcessAttempts, 0) // processed
	is.Equal(e.WaitProcessed(b).ProcessAttempts, 0) // processed
	is.Equal(e.appointment(appt.ID).JobID, job.ID)  // the appointment mirrored
	_, found, err := e.Env.Store.GetAllocation(context.Background(), alloc.ID)
	is.NoErr(err)
	is.True(found)                                                          // the allocation mirrored
	is.True(strings.Contains(e.Logs.String(), "payload shape has changed")) // with the warning
}

// A site form's event for a job the mirror lacks, by a reference not
// mapped yet, costs Prime one job call: job-mirror asks Prime itself (it
// takes no caller's copy of a job, issue 27 §2), by the reference as the
// resolver did, and the resolver's answer serves it (PRIME_COALESCE_WINDOW,
// on by default; the harness's client has it off).
func TestFormEventOfANewJobAsksForTheJobOnce(t *testing.T) {
	is := is.New(t)
	e := start(t, options{prime: func(c *prime.Config) { c.CoalesceWindow, c.CoalesceKeep = 2*time.Second, 5*time.Minute }}) // the defaults
	job := e.Sim.NewJob()
	form := e.Sim.NewSiteForm(job.ID)
	before := e.Sim.Stats().ByEndpoint["GET /jobs/{id}"]
	row := e.WaitProcessed(e.Fire(events.ActionChangeCustomFormStatus, form.ID))
	is.Equal(row.ProcessStatus, "Processed")
	is.True(e.mirrored(job.ID))                                           // the job mirrored
	is.Equal(e.firstSeen(job.ID), 1)                                      // seen first, once
	is.Equal(e.Sim.Stats().ByEndpoint["GET /jobs/{id}"]-before, int64(1)) // with one call for it
}

// §5.3: the job's site forms mirrored, the form confirmed, the job's AI
// summary due now, and the generator nudged with the job.
func TestCustomFormStatus(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	job := e.Sim.NewJob()
	form := e.Sim.NewSiteForm(job.ID)
	other := e.Sim.NewSiteForm(job.ID, func(f *prime.SiteForm) { f.Name = "Scope of Works"; f.Status = "Draft" })
	before := time.Now().Add(-time.Second)
	id := e.Fire(events.ActionChangeCustomFormStatus, form.ID)
	row := e.WaitProcessed(id)
	is.Equal(row.JobID, job.ID) // the job of the numeric reference
	forms, err := e.Env.Store.ListJobSiteForms(context.Background(), job.ID)
	is.NoErr(err)
	is.Equal(len(forms), 2) // every Job form of the job
	f, found, err := e.Env.Store.GetSiteForm(context.Background(), other.ID)
	is.NoErr(err)
	is.True(found)                // the other form too
	is.Equal(f.Status, "Draft")   // as Prime has it
	is.Equal(f.ObjectType, "Job") // hanging off the job
	q, found, err := e.Env.Store.GetJobSummaryQueue(context.Background(), job.ID)
	is.NoErr(err)
	is.True(found)                     // the AI summary queued
	is.True(q.QueuedFor.After(before)) // due now
	flowtest.Eventually(t, "the AI summary nudge", func() bool { jobs, _ := e.nudges.received(); return len(jobs) == 1 })
	jobs, keys := e.nudges.received()
	is.Equal(jobs[0], job.ID)                                       // nudged with ?jobId=
	is.Equal(keys[0], "s3cret-nudge-key")                           // keeping the URL's own query
	is.True(!strings.Contains(e.Logs.String(), "s3cret-nudge-key")) // which is never logged

	// A form Prime no longer lists is removed by the next event's sync.
	is.True(e.Sim.Delete(primesim.KindSiteForms, other.ID))
	e.WaitProcessed(e.Fire(events.ActionChangeCustomFormStatus, form.ID))
	_, found, err = e.Env.Store.GetSiteForm(context.Background(), other.ID)
	is.NoErr(err)
	is.True(!found) // gone from the mirror
}

// §5.3 and §5.4: the throw and warn rules of the confirmation, and no job
// reference at all. No property name is trusted (§4.2, §10.2): every GUID
// of the payload is probed, and the event's own job does not count.
func TestConfirmRules(t *testing.T) {
	e := start(t, options{})
	job := e.Sim.NewJob()
	form := e.Sim.NewSiteForm(job.ID)
	est := e.Sim.NewEstimate(job.ID)
	appt := e.Sim.NewAppointment(job.ID)
	e.WaitProcessed(e.Fire(events.ActionCreateAppointment, appt.ID)) // the appointment and the job are in the mirror
	const (
		absent   = "7f3e2d1c-0b9a-4876-8543-210fedcba987"
		notFound = "not in the mirror after the sync" // the warning of §5.3/§5.4 step 3
		shape    = "payload shape has changed"        // the warning of §4.2 step 2
	)
	for _, tc := range []struct {
		name, action string
		props        []string // the payload's GUID properties, name then value
		processed    bool
		status       string
		warns        bool // the not-found warning is logged for the row
		shapeChanged bool // the shape warning is logged for the row
	}{
		{"site form found", events.ActionChangeCustomFormStatus, []string{"customFormStatusId", form.ID}, true, "", false, false},
		{"site form absent only warns", events.ActionChangeCustomFormStatus, []string{"customFormStatusId", absent}, true, "", true, false},
		{"site form of the wrong type throws", events.ActionChangeCustomFormStatus, []string{"customFormStatusId", appt.ID}, false, "WrongEntityType", false, false},
		{"estimate found", events.ActionCreateEstimate, []string{"estimateId", est.ID}, true, "", false, false},
		{"estimate absent only warns", events.ActionCreateEstimate, []string{"estimateId", absent}, true, "", true, false},
		{"estimate of the wrong type throws", events.ActionCreateEstimate, []string{"estimateId", appt.ID}, false, "WrongEntityType", false, false},
		// Prime renames the id and sends the job's GUID under a name that sorts first.
		{"renamed site form id beside the job's GUID", events.ActionChangeCustomFormStatus,
			[]string{"jobUuid", job.ID, "siteFormUuid", form.ID}, true, "", false, true},
		{"renamed estimate id beside the job's GUID", events.ActionCreateEstimate,
			[]string{"jobUuid", job.ID, "quoteUuid", est.ID}, true, "", false, true},
		{"the job's GUID alone only warns", events.ActionCreateEstimate,
			[]string{"jobUuid", job.ID}, true, "", false, false},
		// Another record's GUID under another name is not the id: only the
		// expected name of the wrong type throws (§5.3/§5.4 step 3).
		{"another record's GUID under an unexpected name only warns", events.ActionChangeCustomFormStatus,
			[]string{"jobUuid", job.ID, "siteFormUuid", appt.ID}, true, "", true, false},
		{"an absent id beside another record's GUID only warns", events.ActionCreateEstimate,
			[]string{"estimateId", absent, "appointmentUuid", appt.ID}, true, "", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			id := e.Publish(tc.action, body(tc.action, job.Ref, tc.props...))
			if tc.processed {
				row := e.WaitProcessed(id)
				is.Equal(row.ProcessAttempts, 0) // processed at once
				// The warnings are logged inside the transaction that marks
				// the row processed, so they are there by now if ever.
				is.Equal(strings.Contains(e.logged(id), notFound), tc.warns)     // warned only when the id is not in the mirror
				is.Equal(strings.Contains(e.logged(id), shape), tc.shapeChanged) // warned only when the id came under an unexpected name
				return
			}
			row := e.capped(id)
			is.True(!row.Processed())                                // never processed
			is.True(strings.Contains(row.ProcessStatus, tc.status))  // the payload fault is the recorded error
			is.True(!strings.Contains(e.logged(id), notFound))       // thrown, not warned
			is.True(strings.Contains(e.logged(id), "payload fault")) // logged as a payload fault
		})
	}

	t.Run("no job reference throws MissingIdentifier", func(t *testing.T) {
		is := is.New(t)
		for _, action := range []string{events.ActionChangeCustomFormStatus, events.ActionCreateEstimate} {
			row := e.capped(e.Publish(action, body(action, 0, "customFormStatusId", form.ID, "estimateId", est.ID)))
			is.True(strings.Contains(row.ProcessStatus, "MissingIdentifier")) // thrown, attempts to the cap
		}
	})
}

// A resolved event an older resolver left in the stream carries the one id
// to confirm in confirmId: it is still confirmed, and still throws when it
// is of the wrong type.
func TestConfirmOfAnOlderResolversMessage(t *testing.T) {
	e := start(t, options{})
	job := e.Sim.NewJob()
	est := e.Sim.NewEstimate(job.ID)
	appt := e.Sim.NewAppointment(job.ID)
	e.WaitProcessed(e.Fire(events.ActionCreateAppointment, appt.ID)) // the appointment and the job are in the mirror
	for _, tc := range []struct {
		name, confirmID string
		fault           string // the payload fault recorded, or none
	}{
		{"the estimate is confirmed", est.ID, ""},
		{"an id of the wrong type throws", appt.ID, "WrongEntityType"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			action := events.ActionCreateEstimate
			payload := body(action, job.Ref, "estimateId", tc.confirmID)
			// The row is in the log but not on the webhook stream: only the
			// resolved event below reaches a stage.
			id, err := e.Env.Store.InsertWebhookLog(ctx, store.NewWebhookLogRow{
				ReceivedUTC: time.Now().UTC(), EventAction: action, Payload: payload, IsAuthenticated: true})
			is.NoErr(err)
			m := nats.NewMsg(events.ResolvedSubject(action))
			m.Data = fmt.Appendf(nil, `{"logId":%d,"action":%q,"numericRef":%d,"jobId":%q,"confirmId":%q}`,
				id, action, job.Ref, job.ID, tc.confirmID)
			m.Header.Set(events.HeaderLogID, fmt.Sprint(id))
			_, err = e.JS.PublishMsg(ctx, m)
			is.NoErr(err)
			if tc.fault == "" {
				e.WaitProcessed(id)
				is.True(!strings.Contains(e.logged(id), "after the sync")) // confirmed, no warning
				return
			}
			row := e.failedOnce(id)
			is.True(!row.Processed())                              // not processed
			is.True(strings.Contains(row.ProcessStatus, tc.fault)) // the payload fault is the recorded error
		})
	}
}

// §5.3 step 4: a failure to queue the AI summary fails the event, and
// takes the site form sync with it; the retry completes it.
func TestAISummaryQueueFailureFailsTheEvent(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	job := e.Sim.NewJob()
	form := e.Sim.NewSiteForm(job.ID)
	e.store.failSummary.Store(true)
	id := e.Fire(events.ActionChangeCustomFormStatus, form.ID)
	row := e.failedOnce(id)
	is.True(strings.Contains(row.ProcessStatus, "AI summary queue")) // the queue's error recorded
	_, found, err := e.Env.Store.GetSiteForm(context.Background(), form.ID)
	is.NoErr(err)
	is.True(!found) // the event's writes rolled back with it
	jobs, _ := e.nudges.received()
	is.Equal(len(jobs), 0) // and no nudge for a failed event

	e.store.failSummary.Store(false)
	row = e.WaitProcessed(id)
	is.True(row.ProcessAttempts >= 1) // processed on a retry
	_, found, err = e.Env.Store.GetJobSummaryQueue(context.Background(), job.ID)
	is.NoErr(err)
	is.True(found) // queued
}

// §5.3 step 4: the nudge is best effort; its failure, or its absence,
// never fails the event.
func TestAISummaryNudgeIsBestEffort(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    options
	}{
		{"generator answers 500", options{nudgeStatus: 500}},
		{"generator unreachable", options{cfg: func(c *childmirror.Config) { c.AISummaryNudgeURL = "http://127.0.0.1:1/hook?key=s3cret-nudge-key" }}},
		{"no nudge configured", options{noNudge: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			e := start(t, tc.o)
			job := e.Sim.NewJob()
			form := e.Sim.NewSiteForm(job.ID)
			row := e.WaitProcessed(e.Fire(events.ActionChangeCustomFormStatus, form.ID))
			is.Equal(row.ProcessAttempts, 0) // processed at once
			_, found, err := e.Env.Store.GetJobSummaryQueue(context.Background(), job.ID)
			is.NoErr(err)
			is.True(found)                                                  // the queue row is what counts
			is.True(!strings.Contains(e.Logs.String(), "s3cret-nudge-key")) // the URL's key is never logged
			failures := func() float64 {
				return flowtest.Counter(t, e.Deps.Metrics, "primeflow_childmirror_swallowed_failures_total", map[string]string{"step": "ai_summary_nudge"})
			}
			if !tc.o.noNudge {
				// The nudge runs after the commit: wait for its failure to be counted.
				flowtest.Eventually(t, "the failed nudge counted", func() bool { return failures() == 1 })
			}
			is.Equal(failures() == 1, !tc.o.noNudge) // a failed nudge is counted, an absent one is not
		})
	}
}

// The nudge's URL may carry a key: it goes over https only (http to a
// loopback address alone), as a send queue's posts do (secureurl.Check),
// and child-mirror refuses to start otherwise, naming the variable.
func TestAISummaryNudgeURLMustBeHTTPS(t *testing.T) {
	for url, ok := range map[string]bool{
		"https://n8n.example/webhook/ai-summary?key=k3y": true,
		"http://127.0.0.1:5678/webhook/ai-summary":       true,
		"http://localhost:5678/webhook/ai-summary":       true,
		"http://[::1]:5678/webhook/ai-summary":           true,
		"http://n8n.example/webhook/ai-summary?key=k3y":  false,
		"http://10.0.0.7:5678/webhook/ai-summary":        false,
		"ftp://n8n.example/webhook/ai-summary":           false,
		childmirror.NudgeOff:                             true,
	} {
		t.Run(url, func(t *testing.T) {
			cfg := childmirror.DefaultConfig()
			cfg.AISummaryNudgeURL = url
			err := cfg.Validate()
			if ok {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "AI_SUMMARY_NUDGE_URL") {
				t.Errorf("got %v, want a refusal naming AI_SUMMARY_NUDGE_URL", err)
			}
			if strings.Contains(fmt.Sprint(err), "k3y") {
				t.Errorf("the refusal repeats the URL's key: %v", err)
			}
		})
	}
}

// A redirect is the nudge's answer, not followed: it would take the URL's
// key to wherever it points. It counts as a failed nudge.
func TestAISummaryNudgeFollowsNoRedirect(t *testing.T) {
	is := is.New(t)
	elsewhere := &nudgeServer{}
	target := httptest.NewServer(elsewhere)
	t.Cleanup(target.Close)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/stolen?"+r.URL.RawQuery, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)
	e := start(t, options{cfg: func(c *childmirror.Config) { c.AISummaryNudgeURL = redirect.URL + "/hook?key=s3cret-nudge-key" }})
	job := e.Sim.NewJob()
	form := e.Sim.NewSiteForm(job.ID)
	row := e.WaitProcessed(e.Fire(events.ActionChangeCustomFormStatus, form.ID))
	is.Equal(row.ProcessAttempts, 0) // processed at once
	flowtest.Eventually(t, "the redirected nudge counted as failed", func() bool {
		return flowtest.Counter(t, e.Deps.Metrics, "primeflow_childmirror_swallowed_failures_total", map[string]string{"step": "ai_summary_nudge"}) == 1
	})
	jobs, _ := elsewhere.received()
	is.Equal(len(jobs), 0) // the redirect's target never saw the key
}

// §5.4: the job's estimates with categories and items, swept: an estimate
// Prime no longer has is removed.
func TestEstimateSweep(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	job := e.Sim.NewJob()
	keep := e.Sim.NewEstimate(job.ID)
	gone := e.Sim.NewEstimate(job.ID, func(es *prime.Estimate) { es.Status = "Superseded" })
	e.WaitProcessed(e.Fire(events.ActionCreateEstimate, keep.ID))
	list, err := e.Env.Store.ListJobEstimates(context.Background(), job.ID)
	is.NoErr(err)
	is.Equal(len(list), 2) // both of the job's estimates
	for _, es := range list {
		is.Equal(len(es.Categories), 2)          // with their categories
		is.Equal(len(es.Categories[1].Items), 2) // and line items
		is.Equal(es.Categories[1].Items[0].Description, "Replace water-damaged ceiling sheet")
		is.True(strings.Contains(es.Categories[1].Items[0].Attributes, "unitPrice")) // each item's JSON kept
		is.True(!strings.Contains(es.Categories[1].Attributes, "items"))             // a category's JSON without its items
	}

	is.True(e.Sim.Delete(primesim.KindEstimates, gone.ID)) // Prime deletes one
	_, err = e.Sim.Patch(primesim.KindEstimates, keep.ID, []byte(`{"status":"Approved"}`))
	is.NoErr(err)
	e.WaitProcessed(e.Fire(events.ActionCreateEstimate, keep.ID))
	list, err = e.Env.Store.ListJobEstimates(context.Background(), job.ID)
	is.NoErr(err)
	is.Equal(len(list), 1)                // the deleted estimate is swept away
	is.Equal(list[0].EstimateID, keep.ID) // the other stays
	is.Equal(list[0].Status, "Approved")  // as Prime has it now
	is.Equal(len(list[0].Categories), 2)  // with its categories, once
}

// §5.5: the allocation mirrored job first, then make-safe detection handed
// on with queue-checks off.
func TestAllocation(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	job := e.Sim.NewJob()
	alloc := e.Sim.NewMakeSafeAllocation(job.ID)
	other := e.Sim.NewAllocation(job.ID, "Builder")
	id := e.Fire(events.ActionCreateAllocation, alloc.ID)
	e.WaitProcessed(id)
	e.WaitProcessed(e.Fire(events.ActionCreateAllocation, other.ID))

	got, found, err := e.Env.Store.GetAllocation(context.Background(), alloc.ID)
	is.NoErr(err)
	is.True(found)                            // mirrored
	is.Equal(got.JobID, job.ID)               // under its job
	is.True(got.IsMakeSafe)                   // a Make Safe, derived from its type
	is.Equal(got.AllocationType, "Make Safe") // its type kept
	b, _, err := e.Env.Store.GetAllocation(context.Background(), other.ID)
	is.NoErr(err)
	is.True(!b.IsMakeSafe) // the builder is not
	has, err := e.Env.Store.HasMakeSafeAllocation(context.Background(), job.ID)
	is.NoErr(err)
	is.True(has)                                                             // the job has its Make Safe
	is.True(before(e.store.writes(), "job:"+job.ID, "allocation:"+alloc.ID)) // job first
	var detects []events.MakesafeDetect
	flowtest.Eventually(t, "two detection requests", func() bool { detects = e.makesafeDetects(job.ID); return len(detects) == 2 })
	is.True(!detects[0].QueueChecks)                                      // queue-checks off (§5.5)
	is.Equal(detects[0].Source, fmt.Sprintf("ethPrimeWebhookLog:%d", id)) // from the event
	st := e.Prime.Stats()
	is.True(st.Requests > 0)                                     // Prime was asked: the allocations, the new job
	is.Equal(st.ByPriority[prime.PriorityMakesafe], st.Requests) // all of it make-safe work: the resolver's probes and job-mirror's ensure
}

// §5.5 step 3: a failure of the durable hand-off fails the event, with its
// allocation; the retry completes both.
func TestMakesafeHandOffFailureFailsTheEvent(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	job := e.Sim.NewJob()
	alloc := e.Sim.NewMakeSafeAllocation(job.ID)
	e.store.failMakesafe.Store(true)
	id := e.Fire(events.ActionCreateAllocation, alloc.ID)
	row := e.failedOnce(id)
	is.True(strings.Contains(row.ProcessStatus, "outbox")) // the hand-off's error recorded
	_, found, err := e.Env.Store.GetAllocation(context.Background(), alloc.ID)
	is.NoErr(err)
	is.True(!found) // the allocation rolled back with it

	e.store.failMakesafe.Store(false)
	e.WaitProcessed(id)
	_, found, err = e.Env.Store.GetAllocation(context.Background(), alloc.ID)
	is.NoErr(err)
	is.True(found) // mirrored on the retry
	flowtest.Eventually(t, "the detection request", func() bool { return len(e.makesafeDetects(job.ID)) == 1 })
}

// §10.4: replaying any child event changes nothing — no mirror row, no
// first sight, no second hand-off.
func TestReplayChangesNothing(t *testing.T) {
	e := start(t, options{})
	job := e.Sim.NewJob()
	e.Sim.NewContact(job.ID)
	appt := e.Sim.NewAppointment(job.ID)
	alloc := e.Sim.NewMakeSafeAllocation(job.ID)
	form := e.Sim.NewSiteForm(job.ID)
	est := e.Sim.NewEstimate(job.ID)
	ids := map[string]int64{
		events.ActionCreateAppointment:      e.Fire(events.ActionCreateAppointment, appt.ID),
		events.ActionCompleteAppointment:    e.Fire(events.ActionCompleteAppointment, appt.ID),
		events.ActionCreateAllocation:       e.Fire(events.ActionCreateAllocation, alloc.ID),
		events.ActionChangeCustomFormStatus: e.Fire(events.ActionChangeCustomFormStatus, form.ID),
		events.ActionCreateEstimate:         e.Fire(events.ActionCreateEstimate, est.ID),
	}
	for _, id := range ids {
		e.WaitProcessed(id)
	}
	flowtest.Eventually(t, "the hand-offs", func() bool {
		return e.createRequests() == 1 && len(e.makesafeDetects(job.ID)) == 1
	})
	want := e.snapshot(job, appt.ID)
	for _, action := range childmirror.Actions() {
		t.Run(action, func(t *testing.T) {
			is := is.New(t)
			row := e.replay(ids[action])
			is.Equal(row.ProcessStatus, "Processed") // processed again
			is.Equal(row.ReplayCount, 1)             // as a replay
			is.Equal(e.snapshot(job, appt.ID), want) // and nothing changed
		})
	}
}

// state is what a job's child events leave behind, without the times the
// writes stamp.
type state struct {
	Appointment   store.Appointment
	Allocations   []store.Allocation
	SiteForms     []store.SiteForm
	Estimates     []store.Estimate
	Relationships []store.ContactRelationship
	SummaryQueued bool
	FirstSeen     int
	Creates       int
	Detects       int
	Reference     string
}

func (e *env) snapshot(job primesim.Job, appointmentID string) state {
	e.T.Helper()
	var s state
	jobID := job.ID
	st := e.Env.Store
	s.Appointment = e.appointment(appointmentID)
	s.Appointment.SyncedUTC = time.Time{}
	ref, _, err := st.GetJobIDByReference(context.Background(), job.Ref)
	if err != nil {
		e.T.Fatal(err)
	}
	s.Reference = ref
	allocs, err := st.ListJobAllocations(context.Background(), jobID)
	if err != nil {
		e.T.Fatal(err)
	}
	for _, a := range allocs {
		a.SyncedUTC = time.Time{}
		s.Allocations = append(s.Allocations, a)
	}
	forms, err := st.ListJobSiteForms(context.Background(), jobID)
	if err != nil {
		e.T.Fatal(err)
	}
	for _, f := range forms {
		f.SyncedUTC = time.Time{}
		s.SiteForms = append(s.SiteForms, f)
	}
	ests, err := st.ListJobEstimates(context.Background(), jobID)
	if err != nil {
		e.T.Fatal(err)
	}
	for _, es := range ests {
		es.SyncedUTC = time.Time{}
		for i := range es.Categories {
			es.Categories[i].SyncedUTC = time.Time{}
			for j := range es.Categories[i].Items {
				es.Categories[i].Items[j].SyncedUTC = time.Time{}
			}
		}
		s.Estimates = append(s.Estimates, es)
	}
	rels, err := st.ListJobContactRelationships(context.Background(), jobID)
	if err != nil {
		e.T.Fatal(err)
	}
	for _, r := range rels {
		r.SyncedUTC = time.Time{}
		s.Relationships = append(s.Relationships, r)
	}
	_, s.SummaryQueued, err = st.GetJobSummaryQueue(context.Background(), jobID)
	if err != nil {
		e.T.Fatal(err)
	}
	s.FirstSeen = e.firstSeen(jobID)
	s.Creates = e.createRequests()
	s.Detects = len(e.makesafeDetects(jobID))
	return s
}
