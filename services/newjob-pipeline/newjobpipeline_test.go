package newjobpipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/metrics"
	"github.com/ethosbuilding/primeflow/pkg/outbox"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/ethosbuilding/primeflow/pkg/store"
	jobmirror "github.com/ethosbuilding/primeflow/services/job-mirror"
	newjobpipeline "github.com/ethosbuilding/primeflow/services/newjob-pipeline"
	"github.com/ethosbuilding/primeflow/services/resolver"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

const (
	jobA = "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"
	jobB = "7d3f8e21-9c4b-4d1e-8f6a-5b2c9e0a1d34"
)

// runPipeline starts the pipeline on d and returns its stop.
func runPipeline(t *testing.T, e *flowtest.Env, d service.Deps) (stop func()) {
	t.Helper()
	cfg := newjobpipeline.DefaultConfig()
	cfg.Workers, cfg.Backoff = 4, retry.Backoff{20 * time.Millisecond}
	p, err := newjobpipeline.New(cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	return e.Run("newjob-pipeline", p)
}

// process is the Deps of a new process on e's NATS and database: its own
// metrics registry, as a restarted process has.
func process(e *flowtest.Env) service.Deps {
	d := e.Deps
	d.Metrics = metrics.NewRegistry()
	return d
}

// runMirror starts the resolver and job-mirror on d and returns their stop.
func runMirror(t *testing.T, e *flowtest.Env, d service.Deps) (stop func()) {
	t.Helper()
	rc := resolver.DefaultConfig()
	rc.Lanes, rc.LaneWait, rc.Backoff = 8, 20*time.Second, retry.Backoff{10 * time.Millisecond}
	r, err := resolver.New(rc, d, e.Prime)
	if err != nil {
		t.Fatal(err)
	}
	stopR := e.Run("resolver", r)
	mc := jobmirror.DefaultConfig()
	mc.Workers, mc.EnsureTimeout = 8, 5*time.Second
	mc.JobsSweepEvery = jobmirror.SweepOff // no jobs-by-date sweep behind the test's back
	m, err := jobmirror.New(mc, d, e.Prime, jobmirror.LogInvites{Log: d.Log})
	if err != nil {
		t.Fatal(err)
	}
	stopM := e.Run("job-mirror", m)
	return func() { stopR(); stopM() }
}

// claim records a first sight and hands it off, as job-mirror does.
func claim(t *testing.T, e *flowtest.Env, jobID string, logID int64, msgID string) {
	t.Helper()
	ctx := context.Background()
	if _, err := e.Store.ClaimFirstSeen(ctx, jobID, logID, store.ViaWebhook); err != nil {
		t.Fatal(err)
	}
	publishFirstSeen(t, e, jobID, logID, msgID)
}

func publishFirstSeen(t *testing.T, e *flowtest.Env, jobID string, logID int64, msgID string) {
	t.Helper()
	body, _ := json.Marshal(events.JobFirstSeen{JobID: jobID, LogID: logID})
	m := nats.NewMsg(events.SubjectJobFirstSeen)
	m.Data = body
	m.Header.Set(nats.MsgIdHdr, msgID)
	if _, err := e.JS.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

// detections returns the make-safe hand-offs on MAKESAFE_DETECT, by job.
func detections(t *testing.T, e *flowtest.Env) map[string][]events.MakesafeDetect {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := e.JS.OrderedConsumer(ctx, events.StreamMakesafeDetect, jetstream.OrderedConsumerConfig{FilterSubjects: []string{events.SubjectMakesafeDetect}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]events.MakesafeDetect{}
	for range info.NumPending {
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var d events.MakesafeDetect
		if err := json.Unmarshal(msg.Data(), &d); err != nil {
			t.Fatal(err)
		}
		out[d.JobID] = append(out[d.JobID], d)
	}
	return out
}

func runs(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "primeflow_newjob_pipeline_runs_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func completed(e *flowtest.Env, jobID string) func() bool {
	return func() bool {
		f, found, err := e.Store.GetFirstSeen(context.Background(), jobID)
		return err == nil && found && f.Completed()
	}
}

func queuedObjects(t *testing.T, e *flowtest.Env, jobID string) []string {
	t.Helper()
	items, err := e.Store.ListSyncQueue(context.Background(), store.SyncQueueFilter{JobID: jobID})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, it := range items {
		out = append(out, it.Object)
	}
	return out
}

func TestPipelineQueuesMissingObjectsAndHandsOffMakeSafe(t *testing.T) {
	is := is.New(t)
	e := flowtest.New(t, flowtest.Options{})
	runPipeline(t, e, e.Deps)
	claim(t, e, jobA, 41, events.FirstSeenMsgID(jobA))

	flowtest.Eventually(t, "the pipeline completes", completed(e, jobA))
	f, _, err := e.Store.GetFirstSeen(context.Background(), jobA)
	is.NoErr(err)
	is.True(strings.HasPrefix(f.PipelineStatus, "Completed: 4 missing objects queued")) // the outcome recorded
	is.Equal(f.PipelineAttempts, 0)
	is.Equal(len(queuedObjects(t, e, jobA)), 4) // §6 step 1: status histories, contacts, allocations, relationships
	flowtest.Eventually(t, "the make-safe hand-off", func() bool { return len(detections(t, e)[jobA]) == 1 })
	d := detections(t, e)[jobA][0]
	is.True(d.QueueChecks)                     // §6 step 2: @QueueMakeAllocationChecks = 1
	is.Equal(d.Source, events.SourceFirstSeen) // asked by the first sight
	flowtest.Eventually(t, "the run counted", func() bool { return runs(t, e.Deps.Metrics, "completed") == 1 })
}

func TestPipelineRunsOncePerJob(t *testing.T) {
	is := is.New(t)
	e := flowtest.New(t, flowtest.Options{})
	is.NoErr(e.Store.UpsertSyncQueue(context.Background(), store.TableAllocations, jobB))
	runPipeline(t, e, e.Deps)
	claim(t, e, jobB, 1, "first")
	flowtest.Eventually(t, "the pipeline completes", completed(e, jobB))
	is.Equal(len(queuedObjects(t, e, jobB)), 4) // the allocations already queued were skipped, not doubled

	publishFirstSeen(t, e, jobB, 2, "a hand-off replayed by hand") // a new message id: not deduplicated
	flowtest.Eventually(t, "the replay is skipped", func() bool { return runs(t, e.Deps.Metrics, "skipped") == 1 })
	is.Equal(runs(t, e.Deps.Metrics, "completed"), 1.0) // the pipeline ran once
	is.Equal(len(detections(t, e)[jobB]), 1)            // one make-safe hand-off
	f, _, err := e.Store.GetFirstSeen(context.Background(), jobB)
	is.NoErr(err)
	is.Equal(f.LogID, int64(1)) // the first sight is unchanged
}

func TestUnclaimedHandOffIsRecorded(t *testing.T) {
	is := is.New(t)
	e := flowtest.New(t, flowtest.Options{})
	runPipeline(t, e, e.Deps)
	publishFirstSeen(t, e, strings.ToUpper(jobA), 9, "by hand") // e.g. `nats pub prime.job.firstseen …`
	flowtest.Eventually(t, "the pipeline completes", completed(e, jobA))
	f, _, err := e.Store.GetFirstSeen(context.Background(), jobA)
	is.NoErr(err)
	is.Equal(f.LogID, int64(9))      // claimed on the way
	is.Equal(f.Via, store.ViaManual) // as published by hand
}

// failingStore fails a run's transaction after ProcessNewPrimeJob has
// written everything in it (the queued objects, the outbox hand-off, the
// completed stamp) while fail is above zero, or blocks it there until the
// context ends when block is set.
type failingStore struct {
	store.Store
	fail    atomic.Int32
	block   atomic.Bool
	blocked atomic.Int32 // runs hanging in it now
}

func (f *failingStore) InTx(ctx context.Context, fn func(store.Store) error) error {
	return f.Store.InTx(ctx, func(tx store.Store) error { return fn(&failingTx{Store: tx, f: f}) })
}

type failingTx struct {
	store.Store
	f *failingStore
}

func (t *failingTx) InTx(ctx context.Context, fn func(store.Store) error) error { return fn(t) }

func (t *failingTx) ProcessNewPrimeJob(ctx context.Context, jobID string, logID int64, via string, handOff store.OutboxMessage) (store.NewJobRun, error) {
	run, err := t.Store.ProcessNewPrimeJob(ctx, jobID, logID, via, handOff)
	if err != nil {
		return run, err
	}
	if t.f.block.Load() {
		t.f.blocked.Add(1)
		defer t.f.blocked.Add(-1)
		<-ctx.Done()
		return store.NewJobRun{}, ctx.Err()
	}
	if t.f.fail.Add(-1) >= 0 {
		return store.NewJobRun{}, errors.New("primeflowJobFirstSeen is locked")
	}
	return run, nil
}

// handOffsWaiting returns the subjects of the outbox messages not yet
// published.
func handOffsWaiting(t *testing.T, e *flowtest.Env) []string {
	t.Helper()
	msgs, err := e.Store.GetOutboxUnpublished(context.Background(), 0, time.Now().Add(time.Hour), 100)
	if err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for _, m := range msgs {
		subjects = append(subjects, m.Subject)
	}
	return subjects
}

func TestFailuresAreRecordedAndRetried(t *testing.T) {
	is := is.New(t)
	e := flowtest.New(t, flowtest.Options{})
	f := &failingStore{Store: e.Store}
	f.fail.Store(3)
	d := e.Deps
	d.Store = f
	runPipeline(t, e, d)
	claim(t, e, jobA, 5, "x")

	flowtest.Eventually(t, "the pipeline completes after its failures", completed(e, jobA))
	row, _, err := e.Store.GetFirstSeen(context.Background(), jobA)
	is.NoErr(err)
	is.Equal(row.PipelineAttempts, 3) // each failure recorded on the first-sight row
	flowtest.Eventually(t, "the completed run counted", func() bool { return runs(t, e.Deps.Metrics, "completed") == 1 })
	is.Equal(runs(t, e.Deps.Metrics, "failed"), 3.0)    // each failure counted
	is.Equal(runs(t, e.Deps.Metrics, "completed"), 1.0) // then it completed once
	is.Equal(len(queuedObjects(t, e, jobA)), 4)
	flowtest.Eventually(t, "one make-safe hand-off", func() bool { return len(detections(t, e)[jobA]) == 1 })
}

func TestFailingJobShowsAsFailed(t *testing.T) {
	is := is.New(t)
	e := flowtest.New(t, flowtest.Options{})
	f := &failingStore{Store: e.Store}
	f.fail.Store(1 << 30)
	d := e.Deps
	d.Store = f
	runPipeline(t, e, d)
	claim(t, e, jobA, 5, "x")
	var failed []store.FirstSeen
	flowtest.Eventually(t, "the job listed as failed", func() bool {
		var err error
		failed, err = e.Store.ListFirstSeen(context.Background(), store.FirstSeenFailed, 0)
		return err == nil && len(failed) == 1
	})
	is.Equal(failed[0].JobID, jobA)                                                        // what primectl firstseen --failed shows
	is.True(strings.Contains(failed[0].PipelineStatus, "primeflowJobFirstSeen is locked")) // with its last error
	is.Equal(len(queuedObjects(t, e, jobA)), 0)                                            // nothing half done: no object queued
	is.Equal(len(handOffsWaiting(t, e)), 0)                                                // no make-safe hand-off in the outbox
	is.Equal(len(detections(t, e)), 0)                                                     // nor published
}

// TestBackoffIsByRecordedAttempts: the wait before a run is tried again goes
// by the attempts recorded on the first-sight row, not by how often
// JetStream delivered the hand-off: a delivery handed back by a shutdown
// was no attempt, and does not lengthen the wait.
func TestBackoffIsByRecordedAttempts(t *testing.T) {
	is := is.New(t)
	e := flowtest.New(t, flowtest.Options{})
	f := &failingStore{Store: e.Store}
	f.block.Store(true)
	d := process(e)
	d.Store = f
	stop := runPipeline(t, e, d)
	claim(t, e, jobA, 5, "x")
	flowtest.Eventually(t, "the first run hanging", func() bool { return f.blocked.Load() > 0 })
	stop() // delivery 1, handed back: no attempt

	f.block.Store(false)
	f.fail.Store(1) // delivery 2 fails: attempt 1
	d = process(e)
	d.Store = f
	cfg := newjobpipeline.DefaultConfig()
	cfg.Workers, cfg.Backoff = 4, retry.Backoff{20 * time.Millisecond, time.Hour}
	p, err := newjobpipeline.New(cfg, d)
	is.NoErr(err)
	e.Run("newjob-pipeline", p)
	flowtest.Eventually(t, "the run after attempt 1's wait, not delivery 2's", completed(e, jobA))
	row, _, err := e.Store.GetFirstSeen(context.Background(), jobA)
	is.NoErr(err)
	is.Equal(row.PipelineAttempts, 1) // one failure recorded
}

// TestKilledBetweenStages stops the pipeline's processes at the seams and
// starts them again on the same NATS and database: every event completes and
// no job's pipeline runs twice.
func TestKilledBetweenStages(t *testing.T) {
	is := is.New(t)
	e := flowtest.New(t, flowtest.Options{})
	ctx := context.Background()

	// 1. job-mirror commits first sights while no pipeline runs, then the
	// process dies.
	first := process(e)
	stopMirror := runMirror(t, e, first)
	var jobs []string
	var rows []int64
	for range 4 {
		j := e.Sim.NewJob()
		jobs = append(jobs, j.ID)
		rows = append(rows, e.Fire("change-job-status", j.ID))
	}
	for _, id := range rows {
		e.WaitProcessed(id)
	}
	stopMirror()
	for _, j := range jobs {
		f, found, err := e.Store.GetFirstSeen(ctx, j)
		is.NoErr(err)
		is.True(found && !f.Completed()) // seen, pipeline pending
	}

	// 2. A crash between job-mirror's commit and its publish leaves the
	// hand-off only in the outbox.
	orphan := e.Sim.NewJob()
	jobs = append(jobs, orphan.ID)
	is.NoErr(e.Store.InTx(ctx, func(tx store.Store) error {
		if _, err := tx.ClaimFirstSeen(ctx, orphan.ID, 0, store.ViaWebhook); err != nil {
			return err
		}
		body, _ := json.Marshal(events.JobFirstSeen{JobID: orphan.ID})
		_, err := tx.InsertOutbox(ctx, []store.OutboxMessage{outbox.Message(events.SubjectJobFirstSeen, events.FirstSeenMsgID(orphan.ID), body)})
		return err
	}))

	// 3. The pipeline starts and dies mid-way through its transaction.
	blocking := &failingStore{Store: e.Store}
	blocking.block.Store(true)
	killed := process(e)
	killed.Store = blocking
	stopBlocked := runPipeline(t, e, killed)
	flowtest.Eventually(t, "the pipeline hanging mid-run", func() bool { return blocking.blocked.Load() > 0 })
	stopBlocked()
	for _, j := range jobs {
		is.Equal(len(queuedObjects(t, e, j)), 0) // the killed run left nothing behind: no object queued
	}
	is.Equal(handOffsWaiting(t, e), []string{events.SubjectJobFirstSeen}) // and no make-safe hand-off: only the orphan's first sight waits
	is.Equal(len(detections(t, e)), 0)                                    // none published

	// 4. Everything restarts: the mirror, the pipeline and the outbox sweeper.
	restarted := process(e)
	runMirror(t, e, restarted)
	runPipeline(t, e, restarted)
	sweeper := &outbox.Publisher{JS: e.JS, Store: e.Store, Log: e.Deps.Log, Grace: time.Millisecond}
	e.Run("outbox sweeper", runnerFunc(func(ctx context.Context) error { return sweeper.Run(ctx, 50*time.Millisecond) }))
	for _, j := range jobs {
		flowtest.Eventually(t, "pipeline of "+j, completed(e, j))
	}
	flowtest.Eventually(t, "one make-safe hand-off a job", func() bool { return len(detections(t, e)) == len(jobs) })
	for _, ds := range detections(t, e) {
		is.Equal(len(ds), 1) // one hand-off for each job
		is.True(ds[0].QueueChecks)
	}
	flowtest.Eventually(t, "the runs counted", func() bool { return runs(t, restarted.Metrics, "completed") == float64(len(jobs)) })
	is.Equal(runs(t, killed.Metrics, "completed"), 0.0)                   // the killed run completed nothing
	is.Equal(runs(t, restarted.Metrics, "completed"), float64(len(jobs))) // each job's pipeline ran once
	for _, j := range jobs {
		is.Equal(len(queuedObjects(t, e, j)), 4) // and queued its objects once
	}

	// 5. Replaying the events changes nothing.
	for _, id := range rows {
		row := e.Row(id)
		_, err := e.Store.ResetWebhookLog(ctx, store.LogFilter{IDs: []int64{id}})
		is.NoErr(err)
		reset := e.Row(id)
		_, err = e.JS.PublishMsg(ctx, events.NewWebhookMsg(id, reset.ReplayCount, reset.EventAction, reset.Payload))
		is.NoErr(err)
		e.WaitRow(id, "replayed", func(r store.WebhookLogRow) bool { return r.Processed() && r.ProcessedUTC.After(row.ProcessedUTC) })
	}
	time.Sleep(100 * time.Millisecond)                                    // give a wrong second run the chance to show
	is.Equal(runs(t, restarted.Metrics, "completed"), float64(len(jobs))) // no pipeline ran again
	is.Equal(runs(t, restarted.Metrics, "skipped"), 0.0)                  // nor was one even handed off
}

type runnerFunc func(ctx context.Context) error

func (f runnerFunc) Run(ctx context.Context) error { return f(ctx) }

// The pipeline over the real resolver and job-mirror, for a burst of events
// of new jobs, two of each at once.
func TestEndToEndNewJobs(t *testing.T) {
	is := is.New(t)
	e := flowtest.New(t, flowtest.Options{StoreDir: t.TempDir()})
	runMirror(t, e, e.Deps)
	runPipeline(t, e, e.Deps)
	var ids []int64
	var jobs []string
	for range 10 {
		j := e.Sim.NewJob()
		jobs = append(jobs, j.ID)
		ids = append(ids, e.Fire("change-job-status", j.ID),
			e.Publish("change-job-status", fmt.Sprintf(`{"eventAction":"change-job-status","jobId":%d}`, j.Ref)))
	}
	for _, id := range ids {
		is.Equal(e.WaitProcessed(id).ProcessAttempts, 0) // every event completed first time
	}
	for _, j := range jobs {
		flowtest.Eventually(t, "pipeline of "+j, completed(e, j))
	}
	flowtest.Eventually(t, "the make-safe hand-offs", func() bool { return len(detections(t, e)) == len(jobs) })
	flowtest.Eventually(t, "the runs counted", func() bool { return runs(t, e.Deps.Metrics, "completed") == float64(len(jobs)) })
	time.Sleep(100 * time.Millisecond)                                 // give a wrong second run the chance to show
	is.Equal(runs(t, e.Deps.Metrics, "completed"), float64(len(jobs))) // once per job
}
