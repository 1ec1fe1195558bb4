package jobmirror_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/pkg/store"
	jobmirror "github.com/ethosbuilding/primeflow/services/job-mirror"
	"github.com/matryer/is"
)

// sweepJobs asks job-mirror's jobs-sweep endpoint, as an operator does with
// `nats req primeflow.jobmirror.sweepjobs '{}'`, and returns its reply (a
// failure's body is the reply too).
func (e *env) sweepJobs() events.JobsSweepReply {
	e.T.Helper()
	msg, err := e.NC.Request(events.SubjectSweepJobs, []byte(`{"source":"test"}`), 30*time.Second)
	if err != nil {
		e.T.Fatalf("jobs sweep request: %v", err)
	}
	var reply events.JobsSweepReply
	if err := json.Unmarshal(msg.Data, &reply); err != nil {
		e.T.Fatalf("jobs sweep reply %q: %v", msg.Data, err)
	}
	return reply
}

// A sweep asked for without a source — `nats req … '{}'`, or no body — is
// an operator's request, and its log says so.
func TestBackstopSweepAskedUnnamedIsARequest(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	for _, body := range []string{`{}`, ``} {
		msg, err := e.NC.Request(events.SubjectSweepJobs, []byte(body), 30*time.Second)
		is.NoErr(err)
		var reply events.JobsSweepReply
		is.NoErr(json.Unmarshal(msg.Data, &reply))
		is.Equal(reply.Error, "") // swept
	}
	logs := e.Logs.String()
	is.Equal(strings.Count(logs, "sweep=jobs-by-date source=request"), 2) // each sweep's log names it a request
	is.True(!strings.Contains(logs, `source=""`))                         // never an empty source
}

// listCalls is how many pages of jobs Prime was asked for.
func (e *env) listCalls() int64 { return e.Sim.Stats().ByEndpoint["GET /jobs"] }

func smallPages(c *prime.Config) { c.PageSize = 2 }

// The backstop ("Prime Sync Jobs by Date") finds a job neither the webhook
// nor the email brought: first sight, via backstop, handed to the pipeline.
// A job mirrored at its version costs nothing beyond its page; one mirrored
// at an older version is written again.
func TestBackstopFindsAJobNeitherPathSaw(t *testing.T) {
	is := is.New(t)
	e := start(t, options{prime: smallPages, config: func(c *jobmirror.Config) { c.JobsSweepOverlap = 10 * time.Minute }})
	seen := e.Sim.NewJob()
	e.WaitProcessed(e.Fire("change-job-status", seen.ID)) // the webhook brought this one
	changed := e.Sim.NewJob()
	e.WaitProcessed(e.Fire("change-job-status", changed.ID))
	_, err := e.Sim.UpdateJob(changed.ID, func(j *prime.Job) { j.Description = "changed since" })
	is.NoErr(err)
	missed := e.Sim.NewJob() // nobody told us about this one
	gets, lists := e.jobCalls(), e.listCalls()
	swept := e.Prime.Stats().ByPriority[prime.PrioritySweep]

	reply := e.sweepJobs()
	is.Equal(reply.Error, "")
	is.Equal(reply.Listed, 3)
	is.Equal(reply.Pages, 2)                                                  // two a page
	is.Equal(e.listCalls()-lists, int64(2))                                   // one call a page
	is.Equal(e.Prime.Stats().ByPriority[prime.PrioritySweep]-swept, int64(2)) // in the sweeps' class: what the others leave
	is.Equal(e.jobCalls(), gets)                                              // and no call for a job: the list has it
	is.Equal(reply.FirstSight, 1)                                             // the missed one
	is.Equal(reply.Updated, 1)                                                // the changed one
	is.Equal(reply.Unchanged, 1)                                              // the one mirrored at its version
	fs, found := e.firstSeen(missed.ID)
	is.True(found)                      // first sight
	is.Equal(fs.Via, store.ViaBackstop) // by the backstop
	flowtest.Eventually(t, "the first-sight hand-off", func() bool { return e.handoffs(missed.ID) == 1 })
	is.Equal(e.job(changed.ID).Description, "changed since")
	is.Equal(e.job(missed.ID).JobNumber, missed.JobNumber)

	rows, err := e.Store.ListJobCoverage(context.Background(), time.Now().Add(-time.Hour))
	is.NoErr(err)
	for _, r := range rows {
		if r.JobID == missed.ID {
			is.True(!r.Backstop.IsZero())                   // coverage: the backstop saw it
			is.True(r.Webhook.IsZero() && r.Email.IsZero()) // and no other path
		}
	}

	again := e.sweepJobs()
	is.Equal(again.FirstSight, 0)           // once a job
	is.Equal(again.Unchanged, again.Listed) // everything at its version now
	is.Equal(e.handoffs(missed.ID), 1)
	is.True(again.FromUTC.Equal(reply.WatermarkUTC.Add(-10 * time.Minute))) // from the watermark, less the overlap
}

// The watermark moves only when a sweep went through the whole list: a
// sweep that fails starts again from the same place.
func TestBackstopWatermarkResumes(t *testing.T) {
	is := is.New(t)
	e := start(t, options{prime: smallPages, config: func(c *jobmirror.Config) { c.JobsSweepOverlap = time.Minute }})
	var newest time.Time
	for i := range 3 {
		at := time.Now().UTC().Add(-time.Duration(10-i) * time.Minute).Truncate(time.Second)
		e.Sim.NewJob(func(j *prime.Job) { j.UpdatedAt = prime.Time{Time: at} })
		newest = at
	}
	first := e.sweepJobs()
	is.Equal(first.Error, "")
	is.True(first.WatermarkUTC.Equal(newest)) // the newest updatedAt listed
	w, found, err := e.Store.GetSweepWatermark(context.Background(), jobmirror.WatermarkJobsByDate)
	is.NoErr(err)
	is.True(found && w.Equal(newest)) // persisted

	late := e.Sim.NewJob() // updated now
	e.Sim.SetFaults(primesim.Faults{Path: "/jobs", FailNext: 1, FailStatus: 502})
	failed := e.sweepJobs()
	is.True(failed.Error != "")                             // stopped
	is.True(failed.FromUTC.Equal(newest.Add(-time.Minute))) // from the watermark, less the overlap
	w, _, err = e.Store.GetSweepWatermark(context.Background(), jobmirror.WatermarkJobsByDate)
	is.NoErr(err)
	is.True(w.Equal(newest)) // left where it was

	next := e.sweepJobs()
	is.Equal(next.Error, "")
	is.True(next.FromUTC.Equal(failed.FromUTC)) // the same place
	is.Equal(next.FirstSight, 1)                // the late job, which the failed sweep missed
	is.True(next.WatermarkUTC.Equal(late.UpdatedAt.Time))
}

// A 429 storm from Prime during a sweep: the sweep stops at once and keeps
// its watermark, the webhook events wait the storm out without an attempt
// counted and go first, and the next sweep finishes the job.
func TestBackstopStopsInA429StormAndWebhooksGoFirst(t *testing.T) {
	is := is.New(t)
	e := start(t, options{prime: smallPages})
	for range 6 {
		e.Sim.NewJob()
	}
	e.Sim.SetFaults(primesim.Faults{Path: "/jobs", Latency: 200 * time.Millisecond}) // slow pages, so the storm comes mid-sweep
	var reply events.JobsSweepReply
	var wg sync.WaitGroup
	wg.Go(func() { reply = e.sweepJobs() })
	flowtest.Eventually(t, "the sweep's first page", func() bool { return e.listCalls() >= 1 })
	e.Sim.SetFaults(primesim.Faults{RateLimitFor: 2 * time.Second, RetryAfter: time.Second}) // every call: 429
	var jobs []primesim.Job
	var rows []int64
	for range 3 {
		j := e.Sim.NewJob()
		jobs = append(jobs, j)
		rows = append(rows, e.Fire("change-job-status", j.ID))
	}
	wg.Wait()
	is.True(reply.RetryAfterMS > 0) // the sweep stopped on the rate limit
	_, found, err := e.Store.GetSweepWatermark(context.Background(), jobmirror.WatermarkJobsByDate)
	is.NoErr(err)
	is.True(!found) // and kept its watermark (none yet)
	lists := e.listCalls()

	for i, id := range rows {
		row := e.WaitProcessed(id)
		is.Equal(row.ProcessAttempts, 0) // the storm burned no attempt
		is.Equal(row.JobID, jobs[i].ID)
	}
	is.Equal(e.listCalls(), lists) // the webhook events went first: the sweep asked nothing more meanwhile

	e.Sim.SetFaults(primesim.Faults{})
	next := e.sweepJobs()
	is.Equal(next.Error, "")
	if reply.Pages > 0 {
		is.Equal(next.FromPage, reply.Pages+1) // on from the stopped sweep's checkpoint
	}
	is.Equal(next.Listed, 9-2*reply.Pages)                // the jobs updated since, less the pages gone through
	is.Equal(reply.FirstSight+next.FirstSight, 6)         // those no webhook brought, between the two sweeps
	is.Equal(next.Unchanged, next.Listed-next.FirstSight) // the rest at their version
}

// A sweep stopped by Prime not answering (an outage: pkg/prime/outage.go)
// is counted and logged as that, not as Prime's rate limit.
func TestBackstopStoppedByAnOutageIsNotARateLimit(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	e.Sim.NewJob()
	e.Sim.SetFaults(primesim.Faults{Path: "/jobs", Down: true})
	reply := e.sweepJobs()
	is.True(reply.RetryAfterMS > 0) // it waits for Prime, as for a 429
	sweeps := func(result string) float64 {
		return flowtest.Counter(t, e.Deps.Metrics, "primeflow_jobmirror_jobs_sweeps_total", map[string]string{"result": result})
	}
	is.Equal(sweeps("prime_unavailable"), 1.0) // counted as Prime not answering
	is.Equal(sweeps("rate_limited"), 0.0)      // not as its rate limit
	is.True(strings.Contains(e.Logs.String(), "jobs sweep stopped: Prime is not answering"))
	is.True(!strings.Contains(e.Logs.String(), "jobs sweep stopped by Prime's rate limit"))
}

// JOBS_SWEEP_EVERY sweeps on its own, at start and then on schedule; off
// never does (a sweep by hand still runs).
func TestBackstopSchedule(t *testing.T) {
	t.Run("every", func(t *testing.T) {
		is := is.New(t)
		e := start(t, options{config: func(c *jobmirror.Config) { c.JobsSweepEvery = jobmirror.Every(50 * time.Millisecond) }})
		flowtest.Eventually(t, "the sweep at start", func() bool { return e.listCalls() >= 1 })
		j := e.Sim.NewJob()
		flowtest.Eventually(t, "a scheduled sweep finding the job", func() bool {
			fs, found := e.firstSeen(j.ID)
			return found && fs.Via == store.ViaBackstop
		})
		flowtest.Eventually(t, "the first sight counted", func() bool {
			return flowtest.Counter(t, e.Deps.Metrics, "primeflow_jobmirror_jobs_swept_total", map[string]string{"outcome": "first_sight"}) == 1
		})
		is.True(flowtest.Counter(t, e.Deps.Metrics, "primeflow_jobmirror_jobs_sweeps_total", map[string]string{"result": "ok"}) >= 1) // sweeps counted
	})
	t.Run("off", func(t *testing.T) {
		is := is.New(t)
		e := start(t, options{config: func(c *jobmirror.Config) { c.JobsSweepEvery = jobmirror.SweepOff }})
		e.Sim.NewJob()
		e.WaitProcessed(e.Fire("change-job-status", e.Sim.NewJob().ID)) // job-mirror is up and working
		is.Equal(e.listCalls(), int64(0))                               // and has swept nothing
		is.Equal(e.sweepJobs().Listed, 2)                               // but sweeps when asked
	})
}

// syncHandOffs are the sync-queue hand-offs of a job on PRIME_JOB, once
// there are want of them (the outbox publishes them just after the commit
// a test waits for).
func (e *env) syncHandOffs(jobID string, want int) []events.SyncQueued {
	e.T.Helper()
	var out []events.SyncQueued
	flowtest.Eventually(e.T, "the sync hand-offs", func() bool {
		out = nil
		for _, body := range e.Published(events.StreamJob, events.SubjectSyncQueued) {
			var sq events.SyncQueued
			if json.Unmarshal(body, &sq) == nil && sq.JobID == jobID {
				out = append(out, sq)
			}
		}
		return len(out) >= want
	})
	return out
}

// objectsQueued is the objects ethSyncQueue holds for a job.
func (e *env) objectsQueued(jobID string) []string {
	e.T.Helper()
	items, err := e.Store.ListSyncQueue(context.Background(), store.SyncQueueFilter{JobID: jobID})
	if err != nil {
		e.T.Fatal(err)
	}
	var out []string
	for _, it := range items {
		out = append(out, it.Object)
	}
	slices.Sort(out)
	return out
}

// n8n's "Prime Sync Jobs by Date" ran its copy of the pipeline for every
// job it listed, so the children of known jobs stayed current. A job the
// mirror knows whose version moved since its objects were last queued —
// changed in Prime with no webhook, or mirrored by its webhook since — gets
// them queued again (§6 step 1, skipping those queued already) and handed
// to the drains in the sweeps' class; a job at that version costs nothing.
func TestBackstopQueuesTheObjectsOfAKnownJobThatChanged(t *testing.T) {
	is := is.New(t)
	e := start(t, options{prime: smallPages})
	ctx := context.Background()
	var quiet, webhooked, silent primesim.Job
	for _, j := range []*primesim.Job{&quiet, &webhooked, &silent} {
		*j = e.Sim.NewJob()
		e.WaitProcessed(e.Fire("change-job-status", j.ID)) // first sight: the pipeline queues its objects for this version
	}
	first := e.sweepJobs()
	is.Equal(first.Error, "")
	is.Equal(first.Unchanged, 3) // each at the version its objects were queued for
	for _, j := range []primesim.Job{quiet, webhooked, silent} {
		is.Equal(len(e.objectsQueued(j.ID)), 0) // nothing queued again (the pipeline, which queues first sights, does not run here)
	}

	_, err := e.Sim.UpdateJob(webhooked.ID, func(j *prime.Job) { j.Description = "changed, and its webhook came" })
	is.NoErr(err)
	e.WaitProcessed(e.Fire("change-job-status", webhooked.ID)) // the mirror holds the new version
	_, err = e.Sim.UpdateJob(silent.ID, func(j *prime.Job) { j.Description = "changed, no webhook" })
	is.NoErr(err)
	is.NoErr(e.Store.UpsertSyncQueue(ctx, store.TableAllocations, silent.ID)) // one of its objects queued already
	gets := e.jobCalls()

	second := e.sweepJobs()
	is.Equal(second.Error, "")
	is.Equal(second.Updated, 2)   // the two that changed
	is.Equal(second.Unchanged, 1) // the quiet one costs nothing
	is.Equal(e.jobCalls(), gets)  // and no job is fetched: the list has them
	want := slices.Sorted(slices.Values(store.MissingObjects()))
	is.Equal(e.objectsQueued(webhooked.ID), want) // status histories, contacts, allocations, relationships
	is.Equal(e.objectsQueued(silent.ID), want)    // each once
	is.Equal(len(e.objectsQueued(quiet.ID)), 0)
	is.Equal(e.job(silent.ID).Description, "changed, no webhook") // and the job written
	for _, j := range []primesim.Job{webhooked, silent} {
		hs := e.syncHandOffs(j.ID, 1)
		is.Equal(len(hs), 1)                                   // handed to the drains
		is.Equal(hs[0].Objects, store.MissingObjects())        // every object
		is.Equal(hs[0].Priority, prime.PrioritySweep.String()) // in the sweeps' class
		is.Equal(hs[0].Source, store.ViaBackstop)
	}

	third := e.sweepJobs()
	is.Equal(third.Updated, 0)   // nothing moved since
	is.Equal(third.Unchanged, 3) // at their versions, their objects queued for them
	is.Equal(len(e.syncHandOffs(silent.ID, 1)), 1)
}

// A sweep cut short keeps what it finished: each page all of whose jobs
// went through is a checkpoint, and the next sweep goes on from there. So
// sweeps that are all cut short — here every second call to list the jobs
// fails — still get to the end of the list and move the watermark; each
// page is listed once it has gone through.
func TestBackstopSweepCutShortGoesOnFromItsCheckpoint(t *testing.T) {
	is := is.New(t)
	e := start(t, options{prime: smallPages})
	var newest time.Time
	for i := range 6 {
		at := time.Now().UTC().Add(-time.Duration(10-i) * time.Minute).Truncate(time.Second)
		e.Sim.NewJob(func(j *prime.Job) { j.UpdatedAt = prime.Time{Time: at} })
		newest = at
	}
	e.Sim.SetFaults(primesim.Faults{Path: "/jobs", ErrorRate: 0.5, FailStatus: 502}) // calls 2, 4, 6 …
	lists := e.listCalls()

	var replies []events.JobsSweepReply
	for range 3 {
		replies = append(replies, e.sweepJobs())
	}
	w, found, err := e.Store.GetSweepWatermark(context.Background(), jobmirror.WatermarkJobsByDate)
	is.NoErr(err)
	is.True(found)                                            // the third reached the end of the list
	is.True(w.Equal(newest))                                  // and moved the watermark to the newest listed
	is.True(replies[0].Error != "" && replies[1].Error != "") // the first two cut short
	is.Equal(replies[2].Error, "")
	is.Equal(replies[0].FirstSight, 2)                    // each after the page it got through
	is.Equal(replies[1].FromPage, 2)                      // the next on from there
	is.True(replies[1].FromUTC.Equal(replies[0].FromUTC)) // over the same list
	is.Equal(replies[1].FirstSight, 2)
	is.Equal(replies[2].FromPage, 3)
	is.Equal(replies[2].FirstSight, 2)             // every job found, once
	is.True(replies[2].WatermarkUTC.Equal(newest)) // as the reply says
	is.Equal(e.listCalls()-lists, int64(5))        // three pages, and the two failures

	e.Sim.SetFaults(primesim.Faults{})
	next := e.sweepJobs()
	is.Equal(next.FromPage, 0) // a finished sweep leaves no checkpoint
	is.True(next.FromUTC.Equal(newest.Add(-jobmirror.DefaultConfig().JobsSweepOverlap)))
}

// A checkpoint counts pages of a size: pages Prime cuts to another size
// (PRIME_PAGE_SIZE changed between two sweeps) start the list again, from
// the same place, rather than skip the jobs between the two sizes' pages.
func TestBackstopCheckpointOfAnotherPageSizeStartsTheListAgain(t *testing.T) {
	is := is.New(t)
	e := start(t, options{prime: smallPages})
	for i := range 6 {
		at := time.Now().UTC().Add(-time.Duration(10-i) * time.Minute).Truncate(time.Second)
		e.Sim.NewJob(func(j *prime.Job) { j.UpdatedAt = prime.Time{Time: at} })
	}
	e.Sim.SetFaults(primesim.Faults{Path: "/jobs", ErrorRate: 0.5, FailStatus: 502})
	cut := e.sweepJobs()
	is.True(cut.Error != "")    // cut short
	is.Equal(cut.FirstSight, 2) // after its first page of two
	e.Sim.SetFaults(primesim.Faults{})

	e.stopMirror()
	cfg := e.Sim.ClientConfig(e.SimURL)
	cfg.PageSize = 4
	pc, err := prime.New(cfg)
	is.NoErr(err)
	m, err := jobmirror.New(func() jobmirror.Config {
		c := jobmirror.DefaultConfig()
		c.TriageInitialContactMadeStatusID, c.JobsSweepEvery = statusICM, jobmirror.SweepOff
		return c
	}(), e.deps, pc, jobmirror.LogInvites{Log: e.deps.Log})
	is.NoErr(err)
	e.Run("job-mirror, pages of four", m)
	e.waitForEnsureService()

	next := e.sweepJobs()
	is.Equal(next.Error, "")
	is.Equal(next.Listed, 6)     // the whole list again, in pages of four
	is.Equal(next.Pages, 2)      // (the page that told the size read again)
	is.Equal(next.FirstSight, 4) // the four the cut sweep had not reached
	is.Equal(next.Unchanged, 2)  // those it had
}

// Before a sweep has listed a job there is no watermark, and the gauge
// serves none: a dashboard shows no data, not year 1 (−6.2e13 s).
func TestBackstopWatermarkGaugeWaitsForAWatermark(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	const gauge = "primeflow_jobmirror_jobs_sweep_watermark_seconds"
	served := func() (float64, bool) {
		mfs, err := e.Deps.Metrics.Gather()
		is.NoErr(err)
		for _, mf := range mfs {
			if mf.GetName() == gauge && len(mf.GetMetric()) > 0 {
				return mf.GetMetric()[0].GetGauge().GetValue(), true
			}
		}
		return 0, false
	}
	empty := e.sweepJobs()
	is.Equal(empty.Error, "")
	is.Equal(empty.Listed, 0)
	_, ok := served()
	is.True(!ok) // no watermark, none served

	j := e.Sim.NewJob()
	is.Equal(e.sweepJobs().FirstSight, 1)
	v, ok := served()
	is.True(ok)                            // served once a sweep listed a job
	is.Equal(int64(v), j.UpdatedAt.Unix()) // at its updatedAt
}
