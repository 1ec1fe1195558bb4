package jobmirror_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/ethosbuilding/primeflow/pkg/store"
	jobmirror "github.com/ethosbuilding/primeflow/services/job-mirror"
	"github.com/ethosbuilding/primeflow/services/resolver"
	"github.com/matryer/is"
)

// statusICM is the Initial-Contact-Made status the tests configure (§5.1 step 6).
const statusICM = "7c9e6679-7425-40de-944b-e07fc1f90ae7"

// env is the resolver and job-mirror over real NATS, SQLite and the Prime
// simulator.
type env struct {
	*flowtest.Env
	faults *faultyStore
	deps   service.Deps
	// stopMirror stops the job-mirror start started.
	stopMirror func()
}

type options struct {
	faults *faultyStore
	sim    primesim.Options
	prime  func(*prime.Config)
	// config adjusts job-mirror's configuration.
	config func(*jobmirror.Config)
	// invites sends the triage invites (default: logged).
	invites jobmirror.InviteSender
}

func start(t *testing.T, o options) *env {
	t.Helper()
	e := &env{Env: flowtest.New(t, flowtest.Options{Sim: o.sim, PrimeConfig: o.prime}), faults: o.faults}
	rc := resolver.DefaultConfig()
	rc.Lanes, rc.LaneWait, rc.Backoff = 8, 20*time.Second, retry.Backoff{10 * time.Millisecond}
	r, err := resolver.New(rc, e.Deps, e.Prime)
	if err != nil {
		t.Fatal(err)
	}
	e.Run("resolver", r)
	d := e.Deps
	if o.faults != nil {
		o.faults.Store = e.Store
		d.Store = o.faults
	}
	e.deps = d
	invites := o.invites
	if invites == nil {
		invites = jobmirror.LogInvites{Log: d.Log}
	}
	e.stopMirror = e.Run("job-mirror", e.newMirror(invites, o.config))
	e.waitForEnsureService()
	return e
}

// newMirror builds a job-mirror on the env's store, sending invites with
// invites; cfg, when set, adjusts its configuration.
func (e *env) newMirror(invites jobmirror.InviteSender, cfg func(*jobmirror.Config)) *jobmirror.Mirror {
	e.T.Helper()
	mc := jobmirror.DefaultConfig()
	mc.TriageInitialContactMadeStatusID, mc.Workers, mc.EnsureTimeout = statusICM, 8, 5*time.Second
	mc.JobsSweepEvery = jobmirror.SweepOff // the backstop's tests turn it on
	if cfg != nil {
		cfg(&mc)
	}
	m, err := jobmirror.New(mc, e.deps, e.Prime, invites)
	if err != nil {
		e.T.Fatal(err)
	}
	return m
}

// waitForEnsureService waits until the micro service answers, so a test
// never races its start.
func (e *env) waitForEnsureService() {
	e.T.Helper()
	flowtest.Eventually(e.T, "job-mirror's micro service", func() bool {
		_, err := e.NC.Request("$SRV.PING."+jobmirror.ServiceName, nil, time.Second)
		return err == nil
	})
}

// faultyStore fails the steps a test tells it to, inside transactions too.
type faultyStore struct {
	store.Store
	failWIP atomic.Bool
	// doomWIP makes a Client WIP write fail as SQL Server fails a deadlock
	// victim's, or any error under XACT_ABORT: the write fails, and the
	// transaction it ran in is rolled back whatever the caller does next.
	doomWIP    atomic.Bool
	failTriage atomic.Int32 // fail the next n triage invites
}

// errDoomed is the commit of a transaction a statement doomed.
var errDoomed = errors.New("the transaction was rolled back: a statement in it was chosen as the deadlock victim")

func (f *faultyStore) InTx(ctx context.Context, fn func(store.Store) error) error {
	return f.Store.InTx(ctx, func(tx store.Store) error {
		ftx := &faultyTx{Store: tx, f: f}
		if err := fn(ftx); err != nil {
			return err
		}
		if ftx.doomed {
			return errDoomed // rolled back: nothing it wrote commits
		}
		return nil
	})
}

func (f *faultyStore) QueueClientWIPStatusChange(ctx context.Context, jobID, source string) (bool, error) {
	if f.failWIP.Load() || f.doomWIP.Load() {
		return false, errors.New("client wip queue is down")
	}
	return f.Store.QueueClientWIPStatusChange(ctx, jobID, source)
}

type faultyTx struct {
	store.Store
	f      *faultyStore
	doomed bool
}

func (t *faultyTx) InTx(ctx context.Context, fn func(store.Store) error) error { return fn(t) }

func (t *faultyTx) QueueClientWIPStatusChange(ctx context.Context, jobID, source string) (bool, error) {
	switch {
	case t.f.doomWIP.Load():
		t.doomed = true
		return false, errDoomed
	case t.f.failWIP.Load():
		return false, errors.New("client wip queue is down")
	}
	return t.Store.QueueClientWIPStatusChange(ctx, jobID, source)
}

func (t *faultyTx) QueueTriageInvite(ctx context.Context, jobID, status string) (bool, error) {
	if t.f.failTriage.Add(-1) >= 0 {
		return false, errors.New("triage queue is down")
	}
	return t.Store.QueueTriageInvite(ctx, jobID, status)
}

// firstSights is job-mirror's count of first-sight hand-offs once it has
// reached want, or what it is after a few seconds: the count goes up just
// after the commit that a test waits for.
func (e *env) firstSights(want float64) float64 {
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := flowtest.Counter(e.T, e.Deps.Metrics, "primeflow_jobs_first_seen_total", nil)
		if got >= want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// handoffs counts the first-sight messages of a job on PRIME_JOB.
func (e *env) handoffs(jobID string) int {
	n := 0
	for _, body := range e.Published(events.StreamJob, events.SubjectJobFirstSeen) {
		if strings.Contains(string(body), jobID) {
			n++
		}
	}
	return n
}

// job reads a mirrored job.
func (e *env) job(id string) store.Job {
	e.T.Helper()
	j, found, err := e.Store.GetJob(context.Background(), id)
	if err != nil || !found {
		e.T.Fatalf("job %s: found %v, err %v", id, found, err)
	}
	return j
}

func (e *env) firstSeen(id string) (store.FirstSeen, bool) {
	e.T.Helper()
	f, found, err := e.Store.GetFirstSeen(context.Background(), id)
	if err != nil {
		e.T.Fatal(err)
	}
	return f, found
}

// wipTriggers is a job's Client WIP triggers once there are want of them,
// or what there are after a few seconds: step 5 follows the commit a test
// waits for.
func (e *env) wipTriggers(id string, want int) []store.ClientWIPTrigger {
	e.T.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := e.Store.ListClientWIPTriggers(context.Background(), id)
		if err != nil {
			e.T.Fatal(err)
		}
		if len(got) >= want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *env) invites(id string) []store.TriageInvite {
	e.T.Helper()
	got, err := e.Store.ListTriageInvites(context.Background(), id)
	if err != nil {
		e.T.Fatal(err)
	}
	return got
}

func (e *env) jobCalls() int64 { return e.Sim.Stats().ByEndpoint["GET /jobs/{id}"] }

func TestFirstSightOnTheGUIDPath(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	j := e.Sim.NewJob()

	id := e.Fire("change-job-status", j.ID) // {"jobId": <ref>, "jobStatusId": "<job guid>"}
	row := e.WaitProcessed(id)
	is.Equal(row.ProcessStatus, "Processed") // finished by job-mirror
	is.Equal(row.JobID, j.ID)                // jobId backfilled
	is.Equal(row.ProcessAttempts, 0)

	stored, _ := e.Sim.Job(j.ID)
	got := e.job(j.ID)
	is.Equal(got.JobNumber, j.JobNumber)         // the job's columns
	is.Equal(got.StatusID, j.StatusID)           // its status
	is.Equal(got.Suburb, j.Address.Suburb)       // its address
	is.Equal(got.Version, j.Version)             // its version
	is.Equal(got.Attributes, string(stored.Raw)) // and Prime's raw attributes
	is.True(got.CreatedAt.Equal(j.CreatedAt.Time))
	mapped, found, err := e.Store.GetJobIDByReference(context.Background(), j.Ref)
	is.NoErr(err)
	is.True(found)         // step 3: the numeric reference is mapped
	is.Equal(mapped, j.ID) // to the job

	fs, found := e.firstSeen(j.ID)
	is.True(found)                    // step 4: first sight recorded
	is.Equal(fs.LogID, id)            // by this event
	is.Equal(e.firstSights(1.0), 1.0) // and handed to the new-job pipeline once
	flowtest.Eventually(t, "the first-sight hand-off", func() bool { return e.handoffs(j.ID) == 1 })
	is.Equal(e.jobCalls(), int64(1)) // one GetJob: the resolver's probe, reused by job-mirror

	wip := e.wipTriggers(j.ID, 1)
	is.Equal(len(wip), 1)                                     // step 5: a Client WIP trigger
	is.Equal(wip[0].TriggerType, store.ClientWIPStatusChange) // StatusChange
	is.Equal(wip[0].Source, fmt.Sprintf("ethPrimeWebhookLog:%d", id))
	is.Equal(len(e.invites(j.ID)), 0) // not in Initial Contact Made: no invite
}

func TestFirstSightOnTheNumericPath(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	j := e.Sim.NewJob()
	body := fmt.Sprintf(`{"eventAction":"change-job-status","jobId":%d}`, j.Ref) // no GUID at all

	first := e.Publish("change-job-status", body)
	row := e.WaitProcessed(first)
	is.Equal(row.JobID, j.ID) // resolved through the numeric reference
	is.Equal(e.job(j.ID).StatusID, j.StatusID)
	fs, found := e.firstSeen(j.ID)
	is.True(found) // the reference was not mapped: first sight
	is.Equal(fs.LogID, first)
	mapped, _, err := e.Store.GetJobIDByReference(context.Background(), j.Ref)
	is.NoErr(err)
	is.Equal(mapped, j.ID) // and now it is

	_, err = e.Sim.UpdateJob(j.ID, func(pj *prime.Job) { pj.StatusID = statusICM })
	is.NoErr(err)
	before := e.jobCalls()
	second := e.Publish("change-job-status", body)
	e.WaitProcessed(second)
	is.Equal(e.job(j.ID).StatusID, statusICM) // forceSync: fetched again, the new status mirrored
	is.Equal(e.jobCalls()-before, int64(1))   // with one GetJob
	is.Equal(e.firstSights(1.0), 1.0)         // the mapped reference is no first sight
	fs, _ = e.firstSeen(j.ID)
	is.Equal(fs.LogID, first)         // the first sight is still the first event's
	is.Equal(len(e.invites(j.ID)), 1) // Initial Contact Made: an invite
}

// §5.1 step 2: on the numeric path first sight is the reference missing
// from ethPrimeJobReference before the fetch. A job the email flow (§7)
// mirrored and mapped, but for which no event ever claimed a first sight,
// is therefore not new: nothing may claim it now.
func TestNumericPathOfAJobTheEmailFlowMappedIsNoFirstSight(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	ctx := context.Background()
	j := e.Sim.NewJob()
	stored, _ := e.Sim.Job(j.ID)
	_, err := e.Store.UpsertJob(ctx, store.Job{JobID: j.ID, StatusID: j.StatusID, Version: j.Version, Attributes: string(stored.Raw)})
	is.NoErr(err) // mirrored by the email flow
	_, err = e.Store.SaveJobReference(ctx, j.Ref, j.ID)
	is.NoErr(err) // and its reference mapped
	_, found := e.firstSeen(j.ID)
	is.True(!found) // the email flow claims no first sight

	_, err = e.Sim.UpdateJob(j.ID, func(pj *prime.Job) { pj.StatusID = statusICM })
	is.NoErr(err)
	id := e.Publish("change-job-status", fmt.Sprintf(`{"eventAction":"change-job-status","jobId":%d}`, j.Ref))
	row := e.WaitProcessed(id)
	is.Equal(row.ProcessStatus, "Processed")  // finished by job-mirror
	is.Equal(row.JobID, j.ID)                 // resolved through the numeric reference
	is.Equal(e.job(j.ID).StatusID, statusICM) // forceSync: the new status mirrored
	// The first-seen row and the hand-off's outbox row are written in the
	// transaction that marks the row processed.
	_, found = e.firstSeen(j.ID)
	is.True(!found) // no first-seen row
	// The hand-off is published after the commit: give it time to show.
	is.Equal(e.firstSights(1.0), 0.0) // no first sight counted
	is.Equal(e.handoffs(j.ID), 0)     // and nothing on prime.job.firstseen
}

func TestAlreadyMirroredJobIsFetchedAgainWithoutAPipeline(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	j := e.Sim.NewJob()
	e.WaitProcessed(e.Fire("change-job-status", j.ID))
	is.Equal(e.firstSights(1.0), 1.0)

	_, err := e.Sim.UpdateJob(j.ID, func(pj *prime.Job) { pj.StatusID = statusICM })
	is.NoErr(err)
	before := e.jobCalls()
	second := e.Fire("change-job-status", j.ID)
	row := e.WaitProcessed(second)
	is.Equal(row.ProcessStatus, "Processed")
	got := e.job(j.ID)
	is.Equal(got.StatusID, statusICM)        // §5.1 step 1: GetJob again for the new status
	is.Equal(got.Version, j.Version+1)       // the version Prime has now
	is.Equal(e.jobCalls()-before, int64(1))  // one Prime call for a known job
	is.Equal(e.firstSights(1.0), 1.0)        // no second first sight
	is.Equal(len(e.wipTriggers(j.ID, 2)), 2) // a trigger for each event
	invites := e.invites(j.ID)
	is.Equal(len(invites), 1)                // the status arrived: an invite
	is.Equal(invites[0].StatusID, statusICM) // read from the mirror
}

func TestTheJobGUIDUnderAnyProperty(t *testing.T) {
	for _, prop := range []string{"jobStatusId", "jobId", "statusGuid"} {
		t.Run(prop, func(t *testing.T) {
			is := is.New(t)
			e := start(t, options{})
			j := e.Sim.NewJob()
			body := fmt.Sprintf(`{"eventAction":"change-job-status","%s":"%s"}`, prop, j.ID)
			if prop != "jobId" {
				body = fmt.Sprintf(`{"eventAction":"change-job-status","jobId":%d,"%s":"%s"}`, j.Ref, prop, j.ID)
			}
			row := e.WaitProcessed(e.Publish("change-job-status", body))
			is.Equal(row.JobID, j.ID)                    // the GUID identified the job, whatever its label (§4.2)
			is.Equal(e.job(j.ID).JobNumber, j.JobNumber) // and it is mirrored
			is.Equal(e.firstSights(1.0), 1.0)            // first sight
		})
	}
}

func TestUnknownJobIsAPayloadFaultUpToTheCap(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"unknown GUID and reference", `{"eventAction":"change-job-status","jobId":987654321,"jobStatusId":"0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"}`},
		{"unknown GUID only", `{"eventAction":"change-job-status","jobStatusId":"0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"}`},
		{"unknown reference only", `{"eventAction":"change-job-status","jobId":987654321}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			e := start(t, options{})
			id := e.Publish("change-job-status", tc.body)
			row := e.WaitRow(id, "capped", store.WebhookLogRow.Capped)
			is.Equal(row.ProcessAttempts, store.MaxAttempts)                  // five attempts, then it stays
			is.True(!row.Processed())                                         // unprocessed
			is.True(strings.Contains(row.ProcessStatus, "UnknownIdentifier")) // with the fault as its status
			is.True(strings.Contains(e.Logs.String(), "payload fault"))       // logged apart, with the payload
			is.Equal(e.firstSights(0.0), 0.0)
		})
	}
}

// §5.1 step 5: a Client WIP write that fails only logs, whether it fails
// on its own or dooms the transaction it runs in (SQL Server rolls back the
// whole transaction of a deadlock victim, swallowed error or not).
func TestClientWIPFailureIsSwallowed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(*faultyStore)
	}{
		{"the write fails", func(f *faultyStore) { f.failWIP.Store(true) }},
		{"the write dooms its transaction", func(f *faultyStore) { f.doomWIP.Store(true) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			f := &faultyStore{}
			tc.fault(f)
			e := start(t, options{faults: f})
			j := e.Sim.NewJob(func(pj *prime.Job) { pj.StatusID = statusICM })

			row := e.WaitProcessed(e.Fire("change-job-status", j.ID))
			is.Equal(row.ProcessAttempts, 0)                                                                        // the event did not fail
			is.Equal(e.job(j.ID).StatusID, statusICM)                                                               // the job is mirrored
			is.Equal(len(e.invites(j.ID)), 1)                                                                       // the other steps ran
			is.Equal(e.firstSights(1.0), 1.0)                                                                       // and the pipeline was handed off
			is.Equal(len(e.wipTriggers(j.ID, 0)), 0)                                                                // the trigger was lost
			is.Equal(flowtest.Counter(t, e.Deps.Metrics, "primeflow_jobmirror_clientwip_failures_total", nil), 1.0) // counted
			is.True(strings.Contains(e.Logs.String(), "Client WIP trigger not queued"))                             // and logged
		})
	}
}

func TestTriageFailureFailsTheEvent(t *testing.T) {
	is := is.New(t)
	f := &faultyStore{}
	f.failTriage.Store(2)
	e := start(t, options{faults: f})
	j := e.Sim.NewJob(func(pj *prime.Job) { pj.StatusID = statusICM })

	row := e.WaitProcessed(e.Fire("change-job-status", j.ID))
	is.Equal(row.ProcessAttempts, 2)         // two failed attempts, then success
	is.Equal(len(e.invites(j.ID)), 1)        // the invite is queued in the end
	is.Equal(len(e.wipTriggers(j.ID, 1)), 1) // the retries queued one trigger
	is.Equal(e.firstSights(1.0), 1.0)        // and handed the pipeline off once
	fs, _ := e.firstSeen(j.ID)
	is.Equal(fs.LogID, row.ID)
}

func TestReplayOfAProcessedRowChangesNothing(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	j := e.Sim.NewJob(func(pj *prime.Job) { pj.StatusID = statusICM })
	id := e.Fire("change-job-status", j.ID)
	first := e.WaitProcessed(id)
	jobBefore := e.job(j.ID)

	ctx := context.Background()
	n, err := e.Store.ResetWebhookLog(ctx, store.LogFilter{IDs: []int64{id}})
	is.NoErr(err)
	is.Equal(n, 1) // reset for replay
	reset := e.Row(id)
	_, err = e.JS.PublishMsg(ctx, events.NewWebhookMsg(id, reset.ReplayCount, reset.EventAction, reset.Payload))
	is.NoErr(err)
	again := e.WaitRow(id, "processed again", func(r store.WebhookLogRow) bool {
		return r.Processed() && r.ProcessedUTC.After(first.ProcessedUTC)
	})
	is.Equal(again.ProcessAttempts, 0)

	jobAfter := e.job(j.ID)
	jobAfter.SyncedUTC = jobBefore.SyncedUTC
	is.Equal(jobAfter, jobBefore)            // the mirror is the same
	is.Equal(len(e.wipTriggers(j.ID, 2)), 1) // no second Client WIP trigger
	is.Equal(len(e.invites(j.ID)), 1)        // no second invite
	is.Equal(e.firstSights(1.0), 1.0)        // no second pipeline
	is.Equal(e.handoffs(j.ID), 1)
}

func TestTwoEventsOfANewJobTogetherRunThePipelineOnce(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	j := e.Sim.NewJob()
	a := e.Fire("change-job-status", j.ID)
	b := e.Publish("change-job-status", fmt.Sprintf(`{"eventAction":"change-job-status","jobId":%d}`, j.Ref))
	c := e.Fire("change-job-status", j.ID)
	for _, id := range []int64{a, b, c} {
		is.Equal(e.WaitProcessed(id).JobID, j.ID) // every event finished
	}
	is.Equal(e.firstSights(1.0), 1.0) // one first sight
	fs, _ := e.firstSeen(j.ID)
	is.Equal(fs.LogID, a) // the first event's
	flowtest.Eventually(t, "the first-sight hand-off", func() bool { return e.handoffs(j.ID) == 1 })
}

func TestRateLimitStormWaitsWithoutBurningAttempts(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	var jobs []primesim.Job
	var ids []int64
	known := e.Sim.NewJob()
	e.WaitProcessed(e.Fire("change-job-status", known.ID))
	jobs = append(jobs, known)
	for range 5 {
		jobs = append(jobs, e.Sim.NewJob())
	}
	e.Sim.SetFaults(primesim.Faults{Path: "/jobs", RateLimitFor: 2 * time.Second, RetryAfter: time.Second})
	for _, j := range jobs {
		ids = append(ids, e.Fire("change-job-status", j.ID))
	}
	for i, id := range ids {
		row := e.WaitProcessed(id)
		is.Equal(row.ProcessAttempts, 0) // the storm counted no attempt
		is.Equal(row.JobID, jobs[i].ID)  // and every event completed
	}
	is.True(e.Sim.Stats().RateLimited > 0) // Prime did answer 429
	is.Equal(e.firstSights(6.0), 6.0)      // each new job seen once
}

func TestNoIdentifierAtAllIsProcessed(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	row := e.WaitProcessed(e.Publish("change-job-status", `{"eventAction":"change-job-status"}`))
	is.Equal(row.ProcessAttempts, 0)                                               // not a failure: it will never gain one (§5.1)
	is.True(strings.Contains(strings.ToLower(row.ProcessStatus), "no identifier")) // said so
	is.Equal(e.firstSights(0), 0.0)
}

// Two events of one job that reach the stream out of log order (ingest
// publishes each row from its own request after a shared commit; the relay
// republishes a failed publish later) are handled one at a time in the
// order the stream holds them, and the outcome is the same either way:
// each mirrors Prime's current state (§3), first sight is claimed once, by
// the event handled first, and the one-off effects happen once.
func TestEventsOfOneJobOutOfLogOrder(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	j := e.Sim.NewJob()
	current, err := e.Sim.UpdateJob(j.ID, func(pj *prime.Job) { pj.StatusID = statusICM })
	is.NoErr(err)
	w, err := e.Sim.Webhook("change-job-status", j.ID)
	is.NoErr(err)
	body, err := w.Body()
	is.NoErr(err)

	ctx := context.Background()
	var ids [2]int64
	for i := range ids {
		ids[i], err = e.Store.InsertWebhookLog(ctx, store.NewWebhookLogRow{
			ReceivedUTC: time.Now().UTC(), EventAction: "change-job-status", Payload: string(body), IsAuthenticated: true})
		is.NoErr(err)
	}
	for _, id := range []int64{ids[1], ids[0]} { // the later row reaches the stream first
		_, err := e.JS.PublishMsg(ctx, events.NewWebhookMsg(id, 0, "change-job-status", string(body)))
		is.NoErr(err)
	}
	older, newer := e.WaitProcessed(ids[0]), e.WaitProcessed(ids[1])
	is.True(!newer.ProcessedUTC.After(older.ProcessedUTC)) // handled in stream order, the later row first
	fs, _ := e.firstSeen(j.ID)
	is.Equal(fs.LogID, ids[1])        // first sight is the event handled first
	is.Equal(e.firstSights(1.0), 1.0) // claimed once
	got := e.job(j.ID)
	is.Equal(got.StatusID, statusICM)        // the mirror holds Prime's current status
	is.Equal(got.Version, current.Version)   // at its current version
	is.Equal(len(e.invites(j.ID)), 1)        // one invite
	is.Equal(len(e.wipTriggers(j.ID, 2)), 2) // a Client WIP trigger for each event
	flowtest.Eventually(t, "the first-sight hand-off", func() bool { return e.handoffs(j.ID) == 1 })
}
