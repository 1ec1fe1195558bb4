package childmirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/consume"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/nats-io/nats.go/jetstream"
)

// The sync-queue drains (§6, §7, §9, §11): one a kind of object the
// new-job pipeline queues in ethSyncQueue — status histories, contacts,
// allocations, contact relationships — each the n8n flow "Prime Sync Queued
// <object>" of the spec. A drain claims an item (the item stays the
// drain's for SYNC_DRAIN_LEASE), fetches the job's object from Prime, and
// in one transaction writes the mirror and removes the item while it is as
// the claim found it. Items come to the drains two ways:
//
//   - pushed: whoever queues items hands them on through the outbox in the
//     same transaction (events.SyncQueued on prime.job.syncqueued: the
//     new-job pipeline's first sight, a triage invite whose contact is not
//     mirrored, the jobs-by-date backstop for a known job that changed), so
//     they are drained within seconds, in the class the hand-off names
//     (the drains', or the sweeps' for the jobs-by-date backstop's);
//   - the backstop: each drain goes through its whole queue at an interval
//     of its own (SYNC_DRAIN_EVERY_*, 31, 37, 41 and 47 minutes, primes, so
//     no two passes fall together again for hours), for items queued by
//     callers outside primeflow (the email flow, §7) and any a push missed,
//     each item once a pass.
//
// The race of §7 and §9: straight after a job's first sight Prime may not
// have its allocation yet, and "Prime Sync Queued Allocations" treats an
// empty answer as done. Here an empty answer for an item queued less than
// SYNC_DRAIN_EMPTY_GRACE ago keeps the item for a later pass — after as
// long again as it has waited and SYNC_DRAIN_EMPTY_WAIT more (30s, 1m, 2m,
// 4m, 8m …), or after the next rung of the job's make-safe ladder, which
// asks Prime for the allocations itself (§6) — and only an empty answer
// past the grace counts as done: the item is removed (spEthSyncQueueDelete)
// and the mirror keeps what it holds, as n8n's drains did; the make-safe
// ladder still covers a make-safe job (§6).
//
// Every Prime call counts (5,000 a day), so a drain asks Prime only for
// what no other path has brought:
//   - an answer Prime gave to a call sent after the item was queued (or
//     after Prime last answered nothing for it) is as new as the drain's
//     would be, and serves it (pkg/prime's coalescing): an event's contact
//     sync, a rung's allocations;
//   - the contacts and the relationships drains share one fetch of the
//     job's contact relationships: the contacts drain writes those it
//     fetched, and either drain takes the relationships as the mirror
//     holds them when they were written since its item was queued;
//   - once Prime has answered nothing for an item, the item is done without
//     asking again when another path (the job's own events: a
//     create-allocation) has mirrored the object since (drainBrought).

// DrainConfig configures the sync-queue drains.
type DrainConfig struct {
	// Workers is how many pushed hand-offs are drained at once (one at a
	// time for a job).
	Workers int `env:"SYNC_DRAIN_WORKERS" envDefault:"4"`
	// Lease is how long a claim holds an item: a drain that dies holding
	// one leaves it to another drain once this has passed. A pass works an
	// item only in the first half of its claim.
	Lease time.Duration `env:"SYNC_DRAIN_LEASE" envDefault:"5m"`
	// Batch is how many items a backstop pass claims at a time.
	Batch int `env:"SYNC_DRAIN_BATCH" envDefault:"10"`
	// EmptyGrace is how long after an item was queued an empty answer from
	// Prime keeps it for a later pass (§7, §9).
	EmptyGrace time.Duration `env:"SYNC_DRAIN_EMPTY_GRACE" envDefault:"15m"`
	// EmptyWait is the least wait before the later pass of an item kept.
	EmptyWait time.Duration `env:"SYNC_DRAIN_EMPTY_WAIT" envDefault:"30s"`
	// The backstop passes, one an object, at intervals that share no
	// factor (§11's "*/47" fired at minutes 0 and 47 of every hour).
	EveryStatusHistories      time.Duration `env:"SYNC_DRAIN_EVERY_STATUS_HISTORIES" envDefault:"41m"`
	EveryContacts             time.Duration `env:"SYNC_DRAIN_EVERY_CONTACTS" envDefault:"31m"`
	EveryAllocations          time.Duration `env:"SYNC_DRAIN_EVERY_ALLOCATIONS" envDefault:"47m"`
	EveryContactRelationships time.Duration `env:"SYNC_DRAIN_EVERY_CONTACT_RELATIONSHIPS" envDefault:"37m"`
}

// Validate refuses the settings the drains cannot work with, each naming
// its variable (config.Refusal).
func (c DrainConfig) Validate() error {
	errs := []error{
		config.Positive("SYNC_DRAIN_WORKERS", c.Workers),
		config.Positive("SYNC_DRAIN_LEASE", c.Lease),
		config.Positive("SYNC_DRAIN_BATCH", c.Batch),
		config.NotNegative("SYNC_DRAIN_EMPTY_GRACE", c.EmptyGrace),
		config.Positive("SYNC_DRAIN_EMPTY_WAIT", c.EmptyWait),
	}
	// The backstop is what drains items queued outside primeflow.
	for _, e := range []struct {
		name  string
		every time.Duration
	}{
		{"SYNC_DRAIN_EVERY_STATUS_HISTORIES", c.EveryStatusHistories}, {"SYNC_DRAIN_EVERY_CONTACTS", c.EveryContacts},
		{"SYNC_DRAIN_EVERY_ALLOCATIONS", c.EveryAllocations}, {"SYNC_DRAIN_EVERY_CONTACT_RELATIONSHIPS", c.EveryContactRelationships},
	} {
		errs = append(errs, config.Positive(e.name, e.every))
	}
	return errors.Join(errs...)
}

// drain is one object's drain: how often its backstop passes, how its
// object is fetched from Prime and written, and whether another path has
// brought it.
type drain struct {
	object string
	every  time.Duration
	fetch  func(ctx context.Context, job store.Job, it store.SyncQueueItem) (synced, error)
	// brought reports whether the mirror holds the job's object as another
	// path wrote it since the item was queued (an object written whole:
	// the relationships), or since Prime answered nothing for the item at
	// empty (zero: Prime has not, in this process): then the item is done,
	// and Prime is not asked. Nil: only the drain's own answer will do.
	brought func(ctx context.Context, job store.Job, it store.SyncQueueItem, empty time.Time) (bool, error)
}

// synced is an object fetched from Prime for a job: what to write, with
// the item's removal, and what to hand on.
type synced struct {
	// empty: Prime answered with nothing for the job.
	empty   bool
	write   func(ctx context.Context, tx store.Store) error
	handOff []store.OutboxMessage
}

// Outcomes of draining an item, as counted.
const (
	drainMirrored = "mirrored" // written, and the item removed
	drainEmpty    = "empty"    // Prime had nothing and the item was past its grace: removed, the mirror left as it was
	drainKept     = "kept"     // Prime had nothing soon after the item was queued: kept for a later pass
	drainRequeued = "requeued" // written, but the item was queued again meanwhile: kept for the next pass
	drainNoJob    = "no_job"   // Prime has no such job: removed
	drainBrought  = "brought"  // another path (the job's events) mirrored the object since Prime had nothing for it: removed, Prime not asked again
	drainWaited   = "waited"   // Prime's rate limit, or job-mirror not answering: given back to wait
	drainFailed   = "failed"   // any other failure: given back for a later pass

	// drainHeld is not counted: another drain holds the item, and the
	// result waits for that claim to lapse.
	drainHeld = "held"
)

func drainOutcomes() []string {
	return []string{drainMirrored, drainEmpty, drainKept, drainRequeued, drainNoJob, drainBrought, drainWaited, drainFailed}
}

// drains are child-mirror's drains, one an object of store.MissingObjects.
func (c *ChildMirror) drains() map[string]drain {
	cfg := c.cfg.Drain
	return map[string]drain{
		store.TableJobStatusHistory:     {store.TableJobStatusHistory, cfg.EveryStatusHistories, c.syncStatusHistory, nil},
		store.TableContacts:             {store.TableContacts, cfg.EveryContacts, c.syncContactsOf, c.contactsBrought},
		store.TableAllocations:          {store.TableAllocations, cfg.EveryAllocations, c.syncAllocations, c.allocationsBrought},
		store.TableContactRelationships: {store.TableContactRelationships, cfg.EveryContactRelationships, c.syncRelationships, c.relationshipsBrought},
	}
}

// drainResult is how draining one item went: its outcome, and for an item
// left for later, how long to wait before it is tried again.
type drainResult struct {
	outcome string
	wait    time.Duration
	err     error
}

// left reports whether the item is still in the queue, and still claimed
// by the drain that drained it: kept for a later pass, waiting for Prime,
// or failed.
func (r drainResult) left() bool {
	return r.outcome == drainKept || r.outcome == drainWaited || r.outcome == drainFailed
}

// drainItem drains one claimed item, its Prime calls in the class prio. An
// item it leaves in the queue (res.left) is still claimed: the caller gives
// it back.
func (c *ChildMirror) drainItem(ctx context.Context, d drain, it store.SyncQueueItem, prio prime.Priority) drainResult {
	log := c.log.With("object", it.Object, "jobId", it.JobID, "item", it.ID)
	res := c.drainClaimed(ctx, log, d, it, prio)
	if ctx.Err() != nil && res.outcome == drainFailed {
		log.Debug("sync queue item given back: the drain is stopping", "err", res.err)
		return res // not the item's failure: it is drained after the restart
	}
	c.metrics.drained.WithLabelValues(it.Object, res.outcome).Inc()
	switch res.outcome {
	case drainFailed:
		log.Warn("sync queue item not drained; tried again later", "err", res.err)
	case drainKept:
		log.Info("Prime has nothing yet for a job queued moments ago: the item is kept for a later pass (§7, §9)",
			"queuedUTC", it.QueuedUTC, "retryIn", res.wait)
	default:
		log.Debug("sync queue item", "outcome", res.outcome)
	}
	return res
}

// purposeSyncDrain is the purpose of the drains' Prime calls.
const purposeSyncDrain = "sync-drain"

func (c *ChildMirror) drainClaimed(ctx context.Context, log *slog.Logger, d drain, it store.SyncQueueItem, prio prime.Priority) drainResult {
	// The drain's calls, and the ensure-job it asks of job-mirror, go in
	// prio's class: the drains' (after the events', before the sweeps'),
	// handed on or found by a backstop pass, or the sweeps' for the items
	// the jobs-by-date backstop handed on.
	ctx = prime.WithCaller(prime.WithPriority(ctx, prio), ServiceName, purposeSyncDrain)
	job, err := c.drainJob(ctx, it.JobID)
	if errors.Is(err, prime.ErrNotFound) {
		return c.remove(ctx, log, it, synced{}, drainNoJob)
	}
	if err != nil {
		return failure(err)
	}
	empty := c.empties.answered(it)
	if d.brought != nil {
		brought, err := d.brought(ctx, job, it, empty)
		if err != nil {
			return failure(err)
		}
		switch {
		case brought && empty.IsZero():
			// The relationships as the contacts drain fetched them for
			// the item's job, since it was queued: its answer was this one.
			return c.remove(ctx, log, it, synced{}, drainMirrored)
		case brought:
			return c.remove(ctx, log, it, synced{}, drainBrought)
		}
	}
	// Any answer to a call sent since the item was queued, or since Prime
	// last had nothing for it, is as new as this one would be.
	s, err := d.fetch(prime.WithEventTime(ctx, maxTime(it.QueuedUTC, empty)), job, it)
	if err != nil {
		return failure(err)
	}
	if s.empty {
		if age := time.Since(it.QueuedUTC); age < c.cfg.Drain.EmptyGrace {
			c.empties.note(it, time.Now(), c.cfg.Drain.EmptyGrace)
			wait, err := c.reaskIn(ctx, d, job, age)
			if err != nil {
				return failure(err)
			}
			return drainResult{outcome: drainKept, wait: wait}
		}
		// Done, as n8n's drains took it: the item is removed and the
		// mirror keeps what it holds. An empty answer may be a Prime
		// hiccup; replacing the job's status histories or relationships
		// with it would erase them.
		return c.remove(ctx, log, it, synced{}, drainEmpty)
	}
	return c.remove(ctx, log, it, s, drainMirrored)
}

// reaskIn is how long after an empty answer an item that has waited age
// since it was queued is asked of Prime again: as long again as it has
// waited and SYNC_DRAIN_EMPTY_WAIT more, so that asks go 30s, 1m, 2m, 4m,
// 8m … apart, back by the end of its grace. A job's allocations are left
// to the next rung of its make-safe ladder while one is to come that asks
// Prime for them (a job created out of hours; §6: the rung upserts the
// item, syncs the allocations and deletes it): the drain looks again
// SYNC_DRAIN_EMPTY_WAIT after that rung's time.
func (c *ChildMirror) reaskIn(ctx context.Context, d drain, job store.Job, age time.Duration) (time.Duration, error) {
	cfg := c.cfg.Drain
	wait := min(age+cfg.EmptyWait, cfg.EmptyGrace-age+time.Second)
	if d.object != store.TableAllocations || !store.RungAsksPrime(job.CreatedAt) {
		return wait, nil
	}
	rungs, err := c.store.ListMakesafeChecks(ctx, job.JobID)
	if err != nil {
		return 0, err
	}
	now := time.Now()
	for _, r := range rungs {
		if r.FiredUTC.IsZero() && r.DueUTC.After(now) {
			return min(max(wait, r.DueUTC.Sub(now)+cfg.EmptyWait), cfg.EmptyGrace-age+time.Second), nil
		}
	}
	return wait, nil
}

// maxTime is the later of a and b.
func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// failure is the result of a fetch or write that failed: a wait (Prime's
// rate limit, job-mirror not answering) or a failure.
func failure(err error) drainResult {
	if d := retry.Delay(err); d > 0 {
		return drainResult{outcome: drainWaited, wait: d, err: err}
	}
	return drainResult{outcome: drainFailed, err: err}
}

// remove writes what was synced and removes the item in one transaction,
// handing on what the sync hands on once it commits. An item queued again
// since its claim is kept (the data may predate what queued it again).
func (c *ChildMirror) remove(ctx context.Context, log *slog.Logger, it store.SyncQueueItem, s synced, outcome string) drainResult {
	var removed bool
	_, err := c.stage.Outbox.With("object", it.Object, "jobId", it.JobID).InTx(ctx, c.store, "sync hand-off", func(tx store.Store) error {
		if s.write != nil {
			if err := s.write(ctx, tx); err != nil {
				return err
			}
		}
		if len(s.handOff) > 0 {
			if _, err := tx.InsertOutbox(ctx, s.handOff); err != nil {
				return err
			}
		}
		var err error
		removed, err = tx.DeleteClaimedSyncQueue(ctx, it)
		return err
	})
	if err != nil {
		return failure(fmt.Errorf("write the mirror and remove the item: %w", err))
	}
	if !removed {
		log.Info("sync queue item queued again while it was drained: kept for the next pass")
		return drainResult{outcome: drainRequeued}
	}
	c.empties.forget(it)
	return drainResult{outcome: outcome}
}

// drainJob is the item's job from the mirror, made sure of first when the
// mirror lacks it (§4.3: an item queued outside primeflow may name a job
// primeflow has not seen).
func (c *ChildMirror) drainJob(ctx context.Context, jobID string) (store.Job, error) {
	job, found, err := c.store.GetJob(ctx, jobID)
	if err != nil || found {
		return job, err
	}
	if _, err := c.ensureJob(ctx, events.SubjectEnsureJobDrain, events.EnsureJobRequest{JobID: jobID}); err != nil {
		return store.Job{}, err
	}
	job, found, err = c.store.GetJob(ctx, jobID)
	if err == nil && !found {
		err = fmt.Errorf("job %s is not in the mirror after job-mirror ensured it", jobID)
	}
	return job, err
}

// drainPushed handles one events.SyncQueued: each object's item of the
// job is drained now. An item left for later (kept, held by another drain,
// waiting for Prime) brings the message back when it is due.
func (c *ChildMirror) drainPushed(ctx context.Context, msg jetstream.Msg) error {
	var sq events.SyncQueued
	if err := json.Unmarshal(msg.Data(), &sq); err != nil || !events.IsGUID(sq.JobID) {
		return consume.Drop(fmt.Errorf("%s: not a sync hand-off of a job: %v", msg.Subject(), err))
	}
	jobID := strings.ToLower(sq.JobID)
	prio := prime.PriorityDrain
	if sq.Priority != "" {
		var err error
		if prio, err = prime.ParsePriority(sq.Priority); err != nil {
			c.log.Warn("sync hand-off names an unknown class: drained in the drains'", "jobId", jobID, "source", sq.Source, "err", err)
			prio = prime.PriorityDrain
		}
	}
	drains := c.drains()
	var later time.Duration
	var cause, failed error
	for _, object := range sq.Objects {
		d, ok := drains[object]
		if !ok {
			c.log.Warn("sync hand-off names an object no drain syncs: left to whoever queued it", "object", object, "jobId", jobID, "source", sq.Source)
			continue
		}
		res, err := c.drainOne(ctx, d, jobID, prio)
		if err != nil {
			return err // the database: redelivered with the consumer's backoff
		}
		switch {
		case res.outcome == drainFailed:
			failed = res.err
		case res.wait > 0 && (later == 0 || res.wait < later):
			later, cause = res.wait, res.err
		}
	}
	switch {
	case later > 0:
		if cause == nil {
			cause = errors.New("an item is kept for a later pass, or held by another drain")
		}
		return consume.Retry(cause, later)
	case failed != nil:
		// Redelivered with the consumer's backoff a few times; then the
		// item is the backstop's, which tries it at every pass.
		if md, err := msg.Metadata(); err == nil && md.NumDelivered >= maxPushDeliveries {
			c.log.Warn("sync hand-off failed again: its items are left to the backstop pass", "jobId", jobID, "delivered", md.NumDelivered, "err", failed)
			return nil
		}
		return failed
	}
	return nil
}

// maxPushDeliveries is how many times a pushed hand-off whose drain fails is
// delivered before its items are left to the backstop.
const maxPushDeliveries = 5

// drainOne claims and drains a job's item of d's object, its calls in the
// class prio; an item it leaves in the queue is given back, so that the message's redelivery, or a pass,
// takes it at once. No item to claim is no work, unless another drain
// holds it: then the result waits for that claim to lapse, in case its
// drain died.
func (c *ChildMirror) drainOne(ctx context.Context, d drain, jobID string, prio prime.Priority) (drainResult, error) {
	f := store.SyncQueueFilter{Object: d.object, JobID: jobID, Limit: 1}
	items, err := c.store.ClaimSyncQueue(ctx, f, time.Now().Add(-c.cfg.Drain.Lease))
	if err != nil {
		return drainResult{}, err
	}
	if len(items) == 1 {
		res := c.drainItem(ctx, d, items[0], prio)
		if res.left() {
			c.giveBack(ctx, items)
		}
		return res, nil
	}
	held, err := c.store.ListSyncQueue(ctx, f)
	if err != nil || len(held) == 0 || held[0].ClaimedUTC.IsZero() {
		return drainResult{}, err
	}
	return drainResult{outcome: drainHeld, wait: max(time.Until(held[0].ClaimedUTC.Add(c.cfg.Drain.Lease)), retry.MinWait)}, nil
}

// backstop is d's scheduled pass, every d.every from the start until ctx
// ends.
func (c *ChildMirror) backstop(ctx context.Context, d drain) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		n, err := c.Pass(ctx, d.object)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			c.log.Warn("sync queue backstop pass stopped; the next pass goes on", "object", d.object, "drained", n, "err", err)
		case n > 0:
			c.log.Info("sync queue backstop pass", "object", d.object, "items", n)
		}
		timer.Reset(d.every)
	}
}

// Pass is one backstop pass of object's drain: it claims the items no
// drain holds, SYNC_DRAIN_BATCH at a time, oldest first, and drains each,
// until a claim comes back short, Prime asks it to wait, or ctx ends. It
// works each item at most once: an item it leaves in the queue (kept,
// failed) stays claimed by the pass until the pass ends, and the pass's
// later claims take a lapsed claim only if it was made before the pass's
// first, so that no claim of the pass takes back an item it has worked,
// however long it runs. The claims it holds are given back when it
// returns, those it has not worked at once. It returns how many items it
// worked.
func (c *ChildMirror) Pass(ctx context.Context, object string) (int, error) {
	d, ok := c.drains()[object]
	if !ok {
		return 0, fmt.Errorf("no drain syncs %s", object)
	}
	var left []store.SyncQueueItem // worked, still queued and claimed: given back at the end
	defer func() { c.giveBack(ctx, left) }()
	var first time.Time // the stamp of the pass's first claim
	worked := 0
	for ctx.Err() == nil {
		claimed := time.Now()
		staleBefore := claimed.Add(-c.cfg.Drain.Lease)
		if !first.IsZero() && first.Before(staleBefore) {
			staleBefore = first
		}
		items, err := c.store.ClaimSyncQueue(ctx, store.SyncQueueFilter{Object: object, Limit: c.cfg.Drain.Batch}, staleBefore)
		if err != nil {
			return worked, err
		}
		for _, it := range items {
			if first.IsZero() || it.ClaimedUTC.Before(first) {
				first = it.ClaimedUTC
			}
		}
		var stop error
		for i, it := range items {
			// An item is worked only in the first half of its claim: past
			// it, another drain may soon take it too.
			if stop != nil || ctx.Err() != nil || time.Since(claimed) > c.cfg.Drain.Lease/2 {
				c.giveBack(ctx, items[i:])
				break
			}
			res := c.drainItem(ctx, d, it, prime.PriorityDrain)
			worked++
			if res.left() {
				left = append(left, it)
			}
			if res.outcome == drainWaited && holdsEveryCall(res.err) {
				stop = res.err // Prime's budget is spent, or Prime is down, for now: the rest waits for the next pass
			}
		}
		if stop != nil {
			return worked, stop
		}
		if len(items) < c.cfg.Drain.Batch {
			return worked, nil
		}
	}
	return worked, nil
}

// holdsEveryCall reports whether a wait holds up the other items' calls
// too: Prime's rate limit, job-mirror not answering, Prime not answering
// (an outage, pkg/prime). A call's first failure while Prime answers the
// rest waits for its own item alone.
func holdsEveryCall(err error) bool {
	var u *prime.UnavailableError
	return !errors.As(err, &u) || !u.Since.IsZero()
}

// giveBack releases claims no drain will work now, after ctx ends too: a
// claim left held waits out its lease.
func (c *ChildMirror) giveBack(ctx context.Context, items []store.SyncQueueItem) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), afterTimeout)
	defer cancel()
	for _, it := range items {
		if _, err := c.store.ReleaseSyncQueue(rctx, it); err != nil {
			c.log.Warn("sync queue item not given back: it is drained once its claim lapses", "object", it.Object, "jobId", it.JobID, "item", it.ID, "err", err)
		}
	}
}

// afterTimeout bounds a write that a shutdown does not cut short.
const afterTimeout = 10 * time.Second

// runDrains consumes the pushed hand-offs and runs the backstop passes
// until ctx ends.
func (c *ChildMirror) runDrains(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, d := range c.drains() {
		wg.Go(func() { c.backstop(ctx, d) })
	}
	defer wg.Wait()
	return consume.Run(ctx, c.js, consume.Spec{
		Consumer: events.ConsumerSyncDrain,
		Workers:  c.cfg.Drain.Workers,
		Key: func(m jetstream.Msg) string {
			var sq events.SyncQueued
			_ = json.Unmarshal(m.Data(), &sq) // a bad body gets the "" lane and is dropped there
			return strings.ToLower(sq.JobID)
		},
	}, c.log, c.reg, c.drainPushed)
}
