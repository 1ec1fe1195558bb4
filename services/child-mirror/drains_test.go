package childmirror_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/store"
	childmirror "github.com/ethosbuilding/primeflow/services/child-mirror"
	newjobpipeline "github.com/ethosbuilding/primeflow/services/newjob-pipeline"
	"github.com/matryer/is"
	"github.com/prometheus/client_golang/prometheus"
)

// drainConfig is child-mirror with drains quick enough for a test, and
// backstop passes that do not come round during one unless asked for.
func drainConfig(edit ...func(*childmirror.DrainConfig)) func(*childmirror.Config) {
	return func(c *childmirror.Config) {
		c.Drain.EmptyWait = 100 * time.Millisecond
		c.Drain.EveryStatusHistories, c.Drain.EveryContacts = time.Hour, time.Hour
		c.Drain.EveryAllocations, c.Drain.EveryContactRelationships = time.Hour, time.Hour
		for _, e := range edit {
			e(&c.Drain)
		}
	}
}

// startPipeline runs the new-job pipeline beside the env's services: it
// queues a new job's objects and hands them to the drains.
func (e *env) startPipeline() {
	e.T.Helper()
	cfg := newjobpipeline.DefaultConfig()
	cfg.Backoff = retry.Backoff{50 * time.Millisecond}
	p, err := newjobpipeline.New(cfg, e.deps)
	if err != nil {
		e.T.Fatal(err)
	}
	e.Run("newjob-pipeline", p)
}

// queued is what ethSyncQueue holds for a job.
func (e *env) queued(jobID string) []store.SyncQueueItem {
	e.T.Helper()
	items, err := e.Env.Store.ListSyncQueue(context.Background(), store.SyncQueueFilter{JobID: jobID})
	if err != nil {
		e.T.Fatal(err)
	}
	return items
}

func (e *env) drained(object, outcome string) float64 {
	return flowtest.Counter(e.T, e.Deps.Metrics, "primeflow_syncqueue_drained_total", map[string]string{"object": object, "outcome": outcome})
}

// waitDrained waits for the count of object's items drained with outcome
// to reach want: it is counted just after the commit a test waits for.
func (e *env) waitDrained(object, outcome string, want float64) {
	e.T.Helper()
	flowtest.Eventually(e.T, object+" "+outcome, func() bool { return e.drained(object, outcome) >= want })
	if got := e.drained(object, outcome); got != want {
		e.T.Errorf("%s %s: %v, want %v", object, outcome, got, want)
	}
}

// count counts the writes recorded as what.
func (s *shared) count(what string) int {
	n := 0
	for _, w := range s.writes() {
		if w == what {
			n++
		}
	}
	return n
}

// A new job's four objects are queued by the new-job pipeline, handed on
// through the outbox, and each drain mirrors its object and removes its
// item: the queue is empty within seconds, no backstop pass needed.
func TestEachDrainMirrorsItsObjectAndEmptiesTheQueue(t *testing.T) {
	is := is.New(t)
	e := start(t, options{cfg: drainConfig()})
	e.startPipeline()
	j := e.Sim.NewJob()
	primary, _ := e.Sim.NewContact(j.ID)
	other, _ := e.Sim.NewContact(j.ID)
	e.Sim.NewStatusHistory(j.ID, j.StatusID)
	e.Sim.NewStatusHistory(j.ID, "7c9e6679-7425-40de-944b-e07fc1f90ae7")
	ms := e.Sim.NewMakeSafeAllocation(j.ID)
	plumbing := e.Sim.NewAllocation(j.ID, "Plumbing")

	e.WaitProcessed(e.Fire("change-job-status", j.ID)) // first sight: the pipeline queues the four objects
	flowtest.Eventually(t, "the job's items drained", func() bool {
		fs, found, err := e.Env.Store.GetFirstSeen(context.Background(), j.ID)
		return err == nil && found && fs.Completed() && len(e.queued(j.ID)) == 0
	})
	ctx := context.Background()
	hs, err := e.Env.Store.ListJobStatusHistory(ctx, j.ID)
	is.NoErr(err)
	is.Equal(len(hs), 2) // the status histories
	for _, c := range []prime.Contact{primary, other} {
		_, found, err := e.Env.Store.GetContact(ctx, c.ID)
		is.NoErr(err)
		is.True(found) // every contact of the job
	}
	allocs, err := e.Env.Store.ListJobAllocations(ctx, j.ID)
	is.NoErr(err)
	is.Equal(len(allocs), 2) // the allocations
	rels, err := e.Env.Store.ListJobContactRelationships(ctx, j.ID)
	is.NoErr(err)
	is.Equal(len(rels), 2) // the contact relationships
	for _, o := range store.MissingObjects() {
		e.waitDrained(o, "mirrored", 1) // each drain drained its item once
	}
	is.Equal(e.store.count("allocation:"+ms.ID), 1) // and mirrored each allocation once
	is.Equal(e.store.count("allocation:"+plumbing.ID), 1)
	e.waitPublished()
	var fromDrain int
	for _, d := range e.makesafeDetects(j.ID) {
		if d.Source == "syncqueue" {
			fromDrain++
			is.True(!d.QueueChecks) // as the allocation's own event would (§5.5)
		}
	}
	is.Equal(fromDrain, 1) // the Make Safe found by the drain goes to detection
}

// waitPublished waits until every hand-off in the outbox is published.
func (e *env) waitPublished() {
	e.T.Helper()
	flowtest.Eventually(e.T, "the outbox published", func() bool {
		msgs, err := e.Env.Store.GetOutboxUnpublished(context.Background(), 0, time.Now().Add(time.Hour), 10)
		return err == nil && len(msgs) == 0
	})
}

// §7, §9: straight after first sight Prime may not have the allocation yet.
// An empty answer then keeps the item; a later pass mirrors the allocation
// once Prime has it. Past the grace, an empty answer counts as done.
func TestAnEarlyEmptyAnswerKeepsTheItemForALaterPass(t *testing.T) {
	is := is.New(t)
	e := start(t, options{cfg: drainConfig()})
	e.startPipeline()
	j := e.Sim.NewJob()
	e.Sim.NewContact(j.ID)
	e.Sim.NewStatusHistory(j.ID, j.StatusID)

	e.WaitProcessed(e.Fire("change-job-status", j.ID))
	flowtest.Eventually(t, "an empty answer for the allocations, the rest drained", func() bool {
		return e.drained(store.TableAllocations, "kept") >= 1 && len(e.queued(j.ID)) == 1
	})
	is.Equal(e.queued(j.ID)[0].Object, store.TableAllocations) // the allocations' item is kept
	a := e.Sim.NewMakeSafeAllocation(j.ID)                     // Prime has it now
	flowtest.Eventually(t, "the allocation mirrored by a later pass", func() bool {
		_, found, err := e.Env.Store.GetAllocation(context.Background(), a.ID)
		return err == nil && found && len(e.queued(j.ID)) == 0
	})
	e.waitDrained(store.TableAllocations, "mirrored", 1)      // by the later pass
	is.Equal(e.drained(store.TableAllocations, "empty"), 0.0) // never dropped as done
}

// Past the grace an empty answer counts as done, as n8n's drains took it:
// the item is removed, and the mirror keeps what it holds. A Prime hiccup
// that answers a job's status histories or relationships with an empty
// list erases nothing.
func TestAnEmptyAnswerPastTheGraceIsDoneAndErasesNothing(t *testing.T) {
	is := is.New(t)
	e := start(t, options{cfg: drainConfig(func(c *childmirror.DrainConfig) { c.EmptyGrace = 0 })})
	ctx := context.Background()
	j := e.Sim.NewJob() // Prime lists no status history, relationship or allocation for it
	e.mirrorJobOf(j.ID)
	const history, relationship = "5a1e2b3c-0000-4000-8000-000000000001", "5a1e2b3c-0000-4000-8000-000000000002"
	is.NoErr(e.Env.Store.ReplaceJobStatusHistory(ctx, j.ID, []store.JobStatusHistory{{StatusHistoryID: history, StatusID: j.StatusID, CreatedAt: time.Now()}}))
	is.NoErr(e.Env.Store.ReplaceJobContactRelationships(ctx, j.ID, []store.ContactRelationship{{ContactRelationshipID: relationship, ContactID: j.PrimaryContactID}}))
	_, err := e.Env.Store.QueueMissingObjectsByJob(ctx, j.ID)
	is.NoErr(err)
	emptied := []string{store.TableAllocations, store.TableJobStatusHistory, store.TableContactRelationships}
	e.publishSyncQueued(j.ID, emptied...)
	for _, o := range emptied {
		e.waitDrained(o, "empty", 1)
	}
	for _, it := range e.queued(j.ID) {
		is.True(!slices.Contains(emptied, it.Object)) // an empty answer past the grace counts as done (§7): the items removed
	}
	hs, err := e.Env.Store.ListJobStatusHistory(ctx, j.ID)
	is.NoErr(err)
	is.Equal(len(hs), 1) // the mirrored status history is kept
	is.Equal(hs[0].StatusHistoryID, history)
	rels, err := e.Env.Store.ListJobContactRelationships(ctx, j.ID)
	is.NoErr(err)
	is.Equal(len(rels), 1) // and the mirrored relationship
	is.Equal(rels[0].ContactRelationshipID, relationship)
}

// A backstop pass works each item once, however many it leaves in the
// queue: SYNC_DRAIN_BATCH items whose call fails and as many that Prime
// answers empty soon after they were queued (kept for a later pass) are
// each asked of Prime once, and the pass ends; it claimed them again and
// again before, the oldest first, for as long as it ran.
func TestABackstopPassWorksEachItemOnce(t *testing.T) {
	is := is.New(t)
	const batch = 3
	e := start(t, options{cfg: drainConfig()})
	e.waitFirstPasses()
	ctx := context.Background()
	for range 2 * batch {
		j := e.Sim.NewJob() // no allocation: Prime answers empty
		e.mirrorJobOf(j.ID)
		is.NoErr(e.Env.Store.UpsertSyncQueue(ctx, store.TableAllocations, j.ID)) // queued outside primeflow: no hand-off
	}
	// The oldest batch's calls fail with a 400: Prime answers, so the
	// failures are the items' own, not an outage (which stops a pass:
	// TestAPrimeOutageStopsABackstopPass).
	e.Sim.SetFaults(primesim.Faults{Path: "/allocations", FailNext: batch, FailStatus: http.StatusBadRequest})
	calls := func() int64 { return e.Sim.Stats().ByEndpoint["GET /allocations"] }
	before := calls()

	cfg := childmirror.DefaultConfig()
	drainConfig(func(c *childmirror.DrainConfig) { c.Batch = batch })(&cfg)
	cm, err := childmirror.New(cfg, e.deps, e.Prime)
	is.NoErr(err)
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second) // ends a pass that does not
	defer cancel()
	worked, err := cm.Pass(pctx, store.TableAllocations)
	is.Equal(calls()-before, int64(2*batch)) // each item asked of Prime once
	is.Equal(worked, 2*batch)                // and worked once
	is.NoErr(err)                            // the pass ended on its own
	is.Equal(e.drained(store.TableAllocations, "failed"), float64(batch))
	is.Equal(e.drained(store.TableAllocations, "kept"), float64(batch))
	items, err := e.Env.Store.ListSyncQueue(ctx, store.SyncQueueFilter{Object: store.TableAllocations})
	is.NoErr(err)
	is.Equal(len(items), 2*batch) // all of them left for a later pass
	for _, it := range items {
		is.True(it.ClaimedUTC.IsZero()) // and given back when the pass ended
	}
}

// Prime not answering stops a backstop pass at once: the items wait for the
// next pass, given back, none failed, and the pass asks Prime no more than
// it takes to see Prime down.
func TestAPrimeOutageStopsABackstopPass(t *testing.T) {
	is := is.New(t)
	e := start(t, options{cfg: drainConfig()})
	e.waitFirstPasses()
	ctx := context.Background()
	for range 4 {
		j := e.Sim.NewJob()
		e.mirrorJobOf(j.ID)
		is.NoErr(e.Env.Store.UpsertSyncQueue(ctx, store.TableAllocations, j.ID))
	}
	e.Sim.SetFaults(primesim.Faults{Path: "/allocations", FailNext: 1 << 20, FailStatus: http.StatusServiceUnavailable})
	calls := func() int64 { return e.Sim.Stats().ByEndpoint["GET /allocations"] }
	before := calls()
	cfg := childmirror.DefaultConfig()
	drainConfig()(&cfg)
	cm, err := childmirror.New(cfg, e.deps, e.Prime)
	is.NoErr(err)
	worked, err := cm.Pass(ctx, store.TableAllocations)
	is.True(errors.Is(err, prime.ErrUnavailable)) // stopped by Prime's outage
	is.Equal(worked, 2)                           // after the second failure in a row
	is.Equal(calls()-before, int64(2))            // and asked Prime no more
	is.Equal(e.drained(store.TableAllocations, "failed"), 0.0)
	is.Equal(e.drained(store.TableAllocations, "waited"), 2.0)
	items, err := e.Env.Store.ListSyncQueue(ctx, store.SyncQueueFilter{Object: store.TableAllocations})
	is.NoErr(err)
	is.Equal(len(items), 4) // every item left for the next pass
	for _, it := range items {
		is.True(it.ClaimedUTC.IsZero()) // given back
	}
}

// publishSyncQueued hands items to the drains as the pipeline does.
func (e *env) publishSyncQueued(jobID string, objects ...string) {
	e.T.Helper()
	b, err := json.Marshal(events.SyncQueued{JobID: jobID, Objects: objects, Source: "test"})
	if err != nil {
		e.T.Fatal(err)
	}
	if _, err := e.JS.Publish(context.Background(), events.SubjectSyncQueued, b); err != nil {
		e.T.Fatal(err)
	}
}

// killingPrime is the Prime client of a drain that is killed: after its
// n-th allocation list it cancels the drain's context.
type killingPrime struct {
	childmirror.PrimeAPI
	calls atomic.Int32
	after int32
	kill  context.CancelFunc
}

func (k *killingPrime) ListJobAllocations(ctx context.Context, jobID string) ([]prime.Allocation, error) {
	as, err := k.PrimeAPI.ListJobAllocations(ctx, jobID)
	if k.calls.Add(1) == k.after {
		k.kill()
	}
	return as, err
}

// noRelease is the store of a drain that dies without a word: it gives no
// claim back.
type noRelease struct{ store.Store }

func (noRelease) ReleaseSyncQueue(context.Context, store.SyncQueueItem) (bool, error) {
	return false, errors.New("the process is gone")
}

// A backstop pass stopped in the middle of its batch — shut down, or dead
// without giving its claims back — loses no item and mirrors none twice: a
// later drain takes what it did not finish, once the claims it kept lapse.
func TestADrainKilledMidBatchLosesNothingAndMirrorsNothingTwice(t *testing.T) {
	for _, tc := range []struct {
		name string
		dies bool
	}{{"shut down", false}, {"dies holding its claims", true}} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			e := start(t, options{cfg: drainConfig()})
			ctx := context.Background()
			var allocs []prime.Allocation
			for range 6 {
				j := e.Sim.NewJob()
				allocs = append(allocs, e.Sim.NewAllocation(j.ID, "Plumbing"))
				e.mirrorJobOf(j.ID)
				is.NoErr(e.Env.Store.UpsertSyncQueue(ctx, store.TableAllocations, j.ID)) // queued outside primeflow: no hand-off
			}

			killCtx, kill := context.WithCancel(ctx)
			cfg := childmirror.DefaultConfig()
			drainConfig(func(c *childmirror.DrainConfig) { c.Batch, c.Lease = 6, 2*time.Second })(&cfg)
			d := e.deps
			if tc.dies {
				d.Store = noRelease{e.deps.Store}
			}
			dying, err := childmirror.New(cfg, d, &killingPrime{PrimeAPI: e.Prime, after: 2, kill: kill})
			is.NoErr(err)
			worked, _ := dying.Pass(killCtx, store.TableAllocations)
			is.True(worked < len(allocs)) // stopped in the middle of its batch

			later, err := childmirror.New(cfg, e.deps, e.Prime)
			is.NoErr(err)
			flowtest.Eventually(t, "the rest drained by a later pass", func() bool {
				_, err := later.Pass(ctx, store.TableAllocations)
				items, lerr := e.Env.Store.ListSyncQueue(ctx, store.SyncQueueFilter{Object: store.TableAllocations})
				return err == nil && lerr == nil && len(items) == 0
			})
			for _, a := range allocs {
				is.Equal(e.store.count("allocation:"+a.ID), 1) // every allocation mirrored, once
			}
		})
	}
}

// mirrorJobOf writes a Prime job into the mirror, as job-mirror would.
func (e *env) mirrorJobOf(jobID string) {
	e.T.Helper()
	j, ok := e.Sim.Job(jobID)
	if !ok {
		e.T.Fatalf("no job %s in the simulator", jobID)
	}
	if _, err := e.Env.Store.UpsertJob(context.Background(), store.Job{JobID: j.ID, JobNumber: j.JobNumber, StatusID: j.StatusID,
		PrimaryContactID: j.PrimaryContactID, CreatedAt: j.CreatedAt.Time}); err != nil {
		e.T.Fatal(err)
	}
}

// Items queued by a caller outside primeflow (the email flow, §7) come with
// no hand-off: the backstop passes drain them.
func TestTheBackstopDrainsWhatNobodyHandedOn(t *testing.T) {
	e := start(t, options{cfg: drainConfig(func(c *childmirror.DrainConfig) {
		c.EveryStatusHistories, c.EveryContacts = 200*time.Millisecond, 300*time.Millisecond
		c.EveryAllocations, c.EveryContactRelationships = 500*time.Millisecond, 700*time.Millisecond
	})})
	j := e.Sim.NewJob()
	e.Sim.NewContact(j.ID)
	e.Sim.NewStatusHistory(j.ID, j.StatusID)
	e.Sim.NewAllocation(j.ID, "Plumbing")
	e.mirrorJobOf(j.ID)
	_, err := e.Env.Store.QueueMissingObjectsByJob(context.Background(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	flowtest.Eventually(t, "the queue drained by the backstop", func() bool { return len(e.queued(j.ID)) == 0 })
	for _, o := range store.MissingObjects() {
		e.waitDrained(o, "mirrored", 1)
	}
}

// The queue's depth and the age of its oldest item are served by object,
// every object from the start.
func TestTheQueueIsMeasuredByObject(t *testing.T) {
	is := is.New(t)
	e := start(t, options{cfg: drainConfig(func(c *childmirror.DrainConfig) { c.EmptyGrace = time.Hour })})
	for _, o := range store.MissingObjects() {
		is.True(e.served("primeflow_syncqueue_items", o, ""))              // served from the start
		is.True(e.served("primeflow_syncqueue_oldest_age_seconds", o, "")) // both
		for _, outcome := range []string{"mirrored", "kept", "failed"} {
			is.True(e.served("primeflow_syncqueue_drained_total", o, outcome)) // and the outcomes
		}
		is.Equal(flowtest.Counter(t, e.Deps.Metrics, "primeflow_syncqueue_items", map[string]string{"object": o}), 0.0) // at 0
	}
	j := e.Sim.NewJob()
	is.NoErr(e.Env.Store.UpsertSyncQueue(context.Background(), store.TableAllocations, j.ID))
	is.Equal(flowtest.Counter(t, e.Deps.Metrics, "primeflow_syncqueue_items", map[string]string{"object": store.TableAllocations}), 1.0) // one waits
	flowtest.Eventually(t, "the oldest item's age", func() bool {
		return flowtest.Counter(t, e.Deps.Metrics, "primeflow_syncqueue_oldest_age_seconds", map[string]string{"object": store.TableAllocations}) > 0
	})
}

// served reports whether the registry has a series of name for object (and
// outcome, when given).
func (e *env) served(name, object, outcome string) bool {
	e.T.Helper()
	mfs, err := e.Deps.Metrics.Gather()
	if err != nil {
		e.T.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			if have["object"] == object && (outcome == "" || have["outcome"] == outcome) {
				return true
			}
		}
	}
	return false
}

// §11's "*/47" fired at minutes 0 and 47; the backstops' intervals share no
// factor, so no two passes fall together again for a long while.
func TestTheBackstopIntervalsAreCoprime(t *testing.T) {
	c := childmirror.DefaultConfig().Drain
	every := []time.Duration{c.EveryStatusHistories, c.EveryContacts, c.EveryAllocations, c.EveryContactRelationships}
	for i, a := range every {
		for _, b := range every[i+1:] {
			x, y := big.NewInt(int64(a/time.Minute)), big.NewInt(int64(b/time.Minute))
			if g := new(big.Int).GCD(nil, nil, x, y); g.Int64() != 1 || a%time.Minute != 0 {
				t.Errorf("%s and %s share the factor %s", a, b, g)
			}
		}
	}
}

// The drains' Prime calls are in the drains' class, after the events' and
// before the sweeps', the ensure-job a drain asks of job-mirror for a job
// the mirror lacks included, and are counted as the drains'.
func TestTheDrainsCallPrimeInTheirClass(t *testing.T) {
	is := is.New(t)
	e := start(t, options{cfg: drainConfig()})
	j := e.Sim.NewJob() // not in the mirror: the drain has it ensured first
	e.Sim.NewContact(j.ID)
	e.Sim.NewStatusHistory(j.ID, j.StatusID)
	e.Sim.NewAllocation(j.ID, "Plumbing")
	_, err := e.Env.Store.QueueMissingObjectsByJob(context.Background(), j.ID)
	is.NoErr(err)

	before := e.Prime.Stats()
	e.publishSyncQueued(j.ID, store.MissingObjects()...)
	for _, o := range store.MissingObjects() {
		e.waitDrained(o, "mirrored", 1)
	}
	after := e.Prime.Stats()
	is.True(after.ByEndpoint["jobs.get"] > before.ByEndpoint["jobs.get"]) // the job ensured through job-mirror
	drained := after.ByPriority[prime.PriorityDrain] - before.ByPriority[prime.PriorityDrain]
	is.True(drained > 0)
	is.Equal(drained, after.Requests-before.Requests) // every call in the drains' class, job-mirror's ensure too

	reg := prometheus.NewRegistry()
	is.NoErr(reg.Register(e.Prime))
	is.True(flowtest.Counter(t, reg, "prime_client_calls_total", map[string]string{"caller": childmirror.ServiceName, "purpose": "sync-drain", "priority": "drain"}) > 0) // named as the drains'
}

// The jobs-by-date backstop keeps a known job's children current, as n8n's
// copy of the pipeline did (§7): a job that moved on in Prime since its
// first sight, its webhook lost, is listed by the sweep, its objects are
// queued again and drained, its new status history mirrored, and every
// call for it — the list and the drains' — goes in the sweeps' class.
func TestTheBackstopKeepsAKnownJobsChildrenCurrent(t *testing.T) {
	is := is.New(t)
	e := start(t, options{cfg: drainConfig()})
	e.startPipeline()
	ctx := context.Background()
	j := e.Sim.NewJob()
	e.Sim.NewContact(j.ID)
	e.Sim.NewStatusHistory(j.ID, j.StatusID)
	e.Sim.NewAllocation(j.ID, "Plumbing")
	e.WaitProcessed(e.Fire("change-job-status", j.ID))
	flowtest.Eventually(t, "the first sight's items drained", func() bool {
		fs, found, err := e.Env.Store.GetFirstSeen(ctx, j.ID)
		return err == nil && found && fs.Completed() && len(e.queued(j.ID)) == 0
	})

	const moved = "3f2a1b0c-9d8e-4f7a-8b6c-5d4e3f2a1b0c"
	e.Sim.NewStatusHistory(j.ID, moved)
	_, err := e.Sim.UpdateJob(j.ID, func(pj *prime.Job) { pj.StatusID = moved }) // no webhook comes
	is.NoErr(err)
	before := e.Prime.Stats()
	msg, err := e.NC.Request(events.SubjectSweepJobs, []byte(`{"source":"test"}`), 30*time.Second)
	is.NoErr(err)
	var reply events.JobsSweepReply
	is.NoErr(json.Unmarshal(msg.Data, &reply))
	is.Equal(reply.Error, "")
	is.Equal(reply.Updated, 1) // the job that moved on
	flowtest.Eventually(t, "the job's objects drained again", func() bool {
		hs, err := e.Env.Store.ListJobStatusHistory(ctx, j.ID)
		return err == nil && len(hs) == 2 && len(e.queued(j.ID)) == 0
	})
	for _, o := range store.MissingObjects() {
		e.waitDrained(o, "mirrored", 2) // each drain's item, at first sight and again
	}
	after := e.Prime.Stats()
	swept := after.ByPriority[prime.PrioritySweep] - before.ByPriority[prime.PrioritySweep]
	is.True(swept > 1)                              // the list, and the drains' calls
	is.Equal(swept, after.Requests-before.Requests) // every one in the sweeps' class
}

// passer is a child-mirror of the env's own, for a test to run its
// backstop passes by hand (ChildMirror.Pass).
func (e *env) passer() *childmirror.ChildMirror {
	e.T.Helper()
	cfg := childmirror.DefaultConfig()
	drainConfig()(&cfg)
	cm, err := childmirror.New(cfg, e.deps, e.Prime)
	if err != nil {
		e.T.Fatal(err)
	}
	return cm
}

// coalescing is a Prime client whose window is too short to join two
// calls a test makes one after the other: only what the code under test
// shares spares a call.
func coalescing(c *prime.Config) { c.CoalesceWindow, c.CoalesceKeep = time.Millisecond, 5*time.Minute }

// noCoalescing is a Prime client that reuses no answer.
func noCoalescing(c *prime.Config) { c.CoalesceWindow, c.CoalesceKeep = 0, 0 }

// The contacts drain and the relationships drain share one fetch of the
// job's contact relationships, whichever drains first: handed on together,
// and in backstop passes that run the relationships first. The Prime
// client coalesces nothing (its answers, newer than the item, would serve
// the second drain): only the drains' sharing spares the second fetch.
func TestTheContactsAndRelationshipsDrainsShareOneFetch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		drain func(e *env, cm *childmirror.ChildMirror, jobID string)
	}{{
		name: "handed on together",
		drain: func(e *env, _ *childmirror.ChildMirror, jobID string) {
			e.publishSyncQueued(jobID, store.TableContacts, store.TableContactRelationships)
			e.waitDrained(store.TableContacts, "mirrored", 1)
			e.waitDrained(store.TableContactRelationships, "mirrored", 1)
		},
	}, {
		name: "backstop passes, the relationships first",
		drain: func(e *env, cm *childmirror.ChildMirror, _ string) {
			for _, o := range []string{store.TableContactRelationships, store.TableContacts} {
				if _, err := cm.Pass(context.Background(), o); err != nil {
					e.T.Fatal(err)
				}
				e.waitDrained(o, "mirrored", 1)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			e := start(t, options{cfg: drainConfig(), prime: noCoalescing})
			e.waitFirstPasses()
			ctx := context.Background()
			j := e.Sim.NewJob()
			contact, _ := e.Sim.NewContact(j.ID)
			e.mirrorJobOf(j.ID)
			_, err := e.Env.Store.QueueMissingObjectsByJob(ctx, j.ID)
			is.NoErr(err)
			cm := e.passer()
			fetches := func() int64 { return e.Sim.Stats().ByEndpoint["GET /contact-relationships"] }
			before := fetches()

			tc.drain(e, cm, j.ID)
			is.Equal(fetches()-before, int64(1)) // one fetch of the relationships served both drains
			_, found, err := e.Env.Store.GetContact(ctx, contact.ID)
			is.NoErr(err)
			is.True(found) // the contact mirrored
			rels, err := e.Env.Store.ListJobContactRelationships(ctx, j.ID)
			is.NoErr(err)
			is.Equal(len(rels), 1) // and its relationship
			for _, it := range e.queued(j.ID) {
				is.True(it.Object != store.TableContacts && it.Object != store.TableContactRelationships) // both items done
			}
		})
	}
}

// Once Prime has answered that a new job has no allocation yet (§7, §9),
// the grace's next ask is not made when the job's own create-allocation
// event has mirrored the allocation since: the item is done, Prime not
// asked again.
func TestAGraceReaskIsNotMadeOnceTheEventBroughtTheRecord(t *testing.T) {
	is := is.New(t)
	e := start(t, options{cfg: drainConfig()})
	e.waitFirstPasses()
	ctx := context.Background()
	j := e.Sim.NewJob() // no allocation yet
	e.mirrorJobOf(j.ID)
	is.NoErr(e.Env.Store.UpsertSyncQueue(ctx, store.TableAllocations, j.ID))
	cm := e.passer()
	lists := func() int64 { return e.Sim.Stats().ByEndpoint["GET /allocations"] }
	before := lists()

	_, err := cm.Pass(ctx, store.TableAllocations)
	is.NoErr(err)
	is.Equal(e.drained(store.TableAllocations, "kept"), 1.0) // Prime had nothing: kept for the grace
	is.Equal(lists()-before, int64(1))

	a := e.Sim.NewAllocation(j.ID, "Builder")
	e.WaitProcessed(e.Fire("create-allocation", a.ID)) // its event brings it
	_, err = cm.Pass(ctx, store.TableAllocations)
	is.NoErr(err)
	is.Equal(e.drained(store.TableAllocations, "brought"), 1.0) // the item is done
	is.Equal(lists()-before, int64(1))                          // without asking Prime again
	is.Equal(len(e.queued(j.ID)), 0)
	_, found, err := e.Env.Store.GetAllocation(ctx, a.ID)
	is.NoErr(err)
	is.True(found) // the allocation its event mirrored
}

// An answer another path got from Prime since the item was queued serves
// the drain: an appointment's contact sync (§5.2 step 4) has fetched the
// job's relationships and its contact, and the contacts drain then asks
// Prime nothing.
func TestAnAnswerAnotherPathGotServesTheDrain(t *testing.T) {
	is := is.New(t)
	e := start(t, options{cfg: drainConfig(), prime: coalescing})
	e.waitFirstPasses()
	ctx := context.Background()
	j := e.Sim.NewJob()
	contact, _ := e.Sim.NewContact(j.ID)
	e.mirrorJobOf(j.ID)
	is.NoErr(e.Env.Store.UpsertSyncQueue(ctx, store.TableContacts, j.ID)) // queued; then its appointment's event
	appt := e.Sim.NewAppointment(j.ID)
	e.WaitProcessed(e.Fire("create-appointment", appt.ID))
	flowtest.Eventually(t, "the appointment's contact sync", func() bool {
		_, found, err := e.Env.Store.GetContact(ctx, contact.ID)
		return err == nil && found
	})
	cm := e.passer()
	calls := e.Sim.Stats().Calls

	_, err := cm.Pass(ctx, store.TableContacts)
	is.NoErr(err)
	e.waitDrained(store.TableContacts, "mirrored", 1)
	is.Equal(e.Sim.Stats().Calls, calls) // Prime asked nothing: the event's answers served
}
