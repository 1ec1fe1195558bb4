// Package primebudget is the Prime budget of a whole deployment, shared by
// every process that calls Prime: one key in the JetStream KV bucket
// prime_budget (streams/KV_prime_budget.json), changed only by
// compare-and-set. A *Budget is a prime.Budget: give it to the process's
// client with prime.WithBudget and run it (Run).
//
// Across all the processes:
//   - no more than PRIME_RATE_PER_MINUTE calls go out in any window of a
//     minute and PRIME_BUDGET_MARGIN (the margin covers the time between a
//     call's turn and its arrival at Prime), each counted as late as Prime
//     may have counted it (as now while in flight, then as when its answer
//     came back), at an even pace that makes up for turns taken late with
//     up to three calls back to back (more when PRIME_RATE_BURST allows
//     bursts);
//   - no more than PRIME_MAX_CONCURRENT are in flight. Each process holds a
//     lease on its calls in flight, renewed every third of
//     PRIME_BUDGET_LEASE; a process that dies (kill -9) gives its calls back
//     when its lease ends;
//   - a hold one process meets (a 429's Retry-After) holds every process,
//     and a minute Prime says is spent (x-ratelimit-minute-remaining 0)
//     keeps every process's calls back until its reset;
//   - make-safe work spends PRIME_MINUTE_RESERVE calls of every window the
//     other classes leave unspent, at once, beside the pace: a burst of it
//     never queues behind itself at one call a second, and the window still
//     holds every minute to PRIME_RATE_PER_MINUTE;
//   - the day's budget is tracked from x-ratelimit-day-remaining where Prime
//     sends it: sweeps and drains stop with 2 × PRIME_DAY_RESERVE left,
//     events with PRIME_DAY_RESERVE left, and only make-safe work spends the
//     reserve;
//   - the first waiting call of each process is published with its class,
//     and a process lets another's call of a higher class go first (then
//     the one that has waited longest).
//
// When NATS cannot be reached, a process spends a local share of the budget
// until it is back (PRIME_RATE_PER_MINUTE and PRIME_MAX_CONCURRENT divided
// by the most processes seen at once lately), says so in its log, and shows
// it in prime_budget_shared.
package primebudget

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"
	_ "time/tzdata" // PRIME_DAY_ZONE resolves without the host's zoneinfo

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// dayStale is how long a day's remaining budget Prime sent is believed:
// past it, calls go out again, and the next answer tells the day anew.
const dayStale = time.Hour

// dayRecheck is how long a call kept back by the day's reserve waits before
// it asks again.
const dayRecheck = time.Minute

// catchUp is how many calls the pace lets out back to back when it has
// fallen behind: a turn taken late (the process woke late, a write took
// its time) is made up for instead of lost, while the window still holds
// every minute and margin to PRIME_RATE_PER_MINUTE.
const catchUp = 3

// peakFor is how long the most processes seen at once is remembered for the
// local share: a process that has gone stays counted that long.
const peakFor = 10 * time.Minute

// Config is the shared budget's own configuration; the budget itself is
// prime.Config's (PRIME_RATE_PER_MINUTE, PRIME_RATE_BURST,
// PRIME_MAX_CONCURRENT), now for the whole deployment.
type Config struct {
	// Lease is how long a process's hold on its calls in flight lasts
	// unless renewed (every Lease/3): a process killed with -9 gives its
	// slots back within it.
	Lease time.Duration `env:"PRIME_BUDGET_LEASE" envDefault:"6s"`
	// Margin widens the minute of PRIME_RATE_PER_MINUTE: a call's turn
	// comes a little before Prime counts it (more on a loaded host), and
	// hosts' clocks differ.
	Margin time.Duration `env:"PRIME_BUDGET_MARGIN" envDefault:"2s"`
	// DayReserve is the day's calls kept for make-safe work (events keep
	// off it, sweeps and drains off twice it).
	DayReserve int `env:"PRIME_DAY_RESERVE" envDefault:"250"`
	// PerDay is the account's calls a day (Prime's 5,000; 0 takes it),
	// for the forecast while Prime has not said how many are left.
	PerDay int `env:"PRIME_RATE_PER_DAY" envDefault:"5000"`
	// DayZone is the zone whose midnight ends Prime's day, for the
	// forecast (assumed: Prime's timestamps are UTC, and it never says when
	// its day ends).
	DayZone string `env:"PRIME_DAY_ZONE" envDefault:"UTC"`
	// MinuteReserve is the calls of every window (a minute and the margin)
	// kept for make-safe work: the other classes leave them unspent, and
	// make-safe calls take them at once, beside the pace, within
	// PRIME_RATE_PER_MINUTE and PRIME_MAX_CONCURRENT. The others' pace is
	// the rest of the minute.
	MinuteReserve int `env:"PRIME_MINUTE_RESERVE" envDefault:"3"`
	// Timeout bounds each request to NATS; a process that gets no answer
	// spends its local share until NATS answers again.
	Timeout time.Duration `env:"PRIME_BUDGET_TIMEOUT" envDefault:"5s"`
}

// Validate refuses the settings the budget cannot work with, each naming
// its variable (config.Refusal). New calls it.
func (c Config) Validate() error {
	var errs []error
	if c.Lease < time.Second {
		errs = append(errs, config.Refuse("PRIME_BUDGET_LEASE", "must be at least 1s"))
	}
	if c.Margin < 0 || c.Margin >= time.Minute {
		errs = append(errs, config.Refuse("PRIME_BUDGET_MARGIN", "must be from 0 to under a minute"))
	}
	if c.PerDay != 0 && c.PerDay <= c.DayReserve {
		errs = append(errs, config.Refuse("PRIME_RATE_PER_DAY", "must be above PRIME_DAY_RESERVE (%d)", c.DayReserve))
	}
	if _, err := time.LoadLocation(c.DayZone); err != nil {
		errs = append(errs, config.Refuse("PRIME_DAY_ZONE", "is not a time zone (%v)", err))
	}
	return errors.Join(append(errs, config.NotNegative("PRIME_DAY_RESERVE", c.DayReserve), config.NotNegative("PRIME_MINUTE_RESERVE", c.MinuteReserve),
		config.NotNegative("PRIME_RATE_PER_DAY", c.PerDay), config.Positive("PRIME_BUDGET_TIMEOUT", c.Timeout))...)
}

// Budget is the deployment's Prime budget as one process sees and spends
// it. It is safe for concurrent use; make one a process.
type Budget struct {
	kv   jetstream.KeyValue
	nc   *nats.Conn
	cfg  Config
	log  *slog.Logger
	id   string
	host string
	pid  int

	perMinute, burst, most int
	window                 time.Duration  // a minute and the margin
	zone                   *time.Location // PRIME_DAY_ZONE's
	changed                chan struct{}
	kick                   chan struct{}

	mu   sync.Mutex
	raw  []byte // the key's value as last seen, at rev
	rev  uint64
	view state // raw, decoded, never changed: what Held reads
	mine map[uint64]int64
	// ended are this process's calls that have ended, by slot, whose grant
	// the window does not yet hold at the time they ended.
	ended   map[uint64]ended
	seq     uint64
	waiting *turn // this process's first waiting call, to publish
	// pendingHold, pendingSpent and pendingDay are what this process's
	// calls learnt of Prime's budget and has not written yet.
	pendingHold  int64
	pendingSpent int64
	pendingDay   *day
	fallback     *fallback
	counts       counts
	dayLogged    map[prime.Priority]int64 // when a class kept back by the day's reserve was last logged
	// peak is the most processes seen spending the budget at once in the
	// last peakFor (since peakAt): the local share divides by it.
	peak   int
	peakAt int64
}

// ended is a call that has ended: granted at At, its answer back at Done.
type ended struct{ at, done int64 }

// fallback is the local share a process spends while NATS cannot be
// reached.
type fallback struct {
	budget    prime.Budget
	since     time.Time
	perMinute int
	most      int
	// grants are the calls it let out, written into the window once NATS
	// is back.
	grants []int64
}

// counts are the budget's counters, for the metrics.
type counts struct {
	fallbacks, conflicts int64
}

// New binds the budget's bucket (streams/KV_prime_budget.json, applied by
// events.Apply, the operators' step) and registers this process in it. pc gives the
// deployment's budget: RatePerMinute, RateBurst and MaxConcurrent (zero
// takes prime's defaults).
func New(ctx context.Context, js jetstream.JetStream, pc prime.Config, cfg Config, log *slog.Logger) (*Budget, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.PerDay = orDefault(cfg.PerDay, 5000)
	zone, err := time.LoadLocation(cfg.DayZone) // "" is UTC; Validate has refused one that is no zone
	if err != nil {
		return nil, err
	}
	perMinute := orDefault(pc.RatePerMinute, 60)
	if cfg.MinuteReserve >= perMinute {
		return nil, config.Refuse("PRIME_MINUTE_RESERVE", "must be below PRIME_RATE_PER_MINUTE (%d): the other classes need a share of the minute", perMinute)
	}
	kv, err := bind(ctx, js, events.BucketPrimeBudget, log)
	if err != nil {
		return nil, err
	}
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	b := &Budget{
		kv: kv, nc: js.Conn(), cfg: cfg, log: log,
		id: rand.Text()[:12], host: host, pid: os.Getpid(), zone: zone,
		perMinute: perMinute, burst: orDefault(pc.RateBurst, 1), most: orDefault(pc.MaxConcurrent, 5),
		window:    time.Minute + cfg.Margin,
		changed:   make(chan struct{}, 1),
		kick:      make(chan struct{}, 1),
		mine:      make(map[uint64]int64),
		ended:     make(map[uint64]ended),
		dayLogged: make(map[prime.Priority]int64),
	}
	if err := untilAnswered(ctx, log, "registering in the prime budget bucket "+events.BucketPrimeBudget, b.heartbeat); err != nil {
		return nil, fmt.Errorf("prime budget: register in %s: %w", events.BucketPrimeBudget, err)
	}
	log.Info("spending the deployment's Prime budget", "process", b.id, "perMinute", b.perMinute, "maxConcurrent", b.most,
		"lease", cfg.Lease, "dayReserve", cfg.DayReserve, "minuteReserve", cfg.MinuteReserve)
	return b, nil
}

// bind binds bucket, waiting while JetStream does not answer
// (untilAnswered), or says the bucket does not exist: the service has just
// applied it, and a node without a leader may say so of a stream it holds.
func bind(ctx context.Context, js jetstream.JetStream, bucket string, log *slog.Logger) (jetstream.KeyValue, error) {
	var kv jetstream.KeyValue
	err := untilAnswered(ctx, log, "binding the bucket "+bucket, func(ctx context.Context) error {
		var err error
		kv, err = js.KeyValue(ctx, bucket)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("prime budget: bucket %s: %w", bucket, err)
	}
	return kv, nil
}

// untilAnswered runs f (what it does named by what) until it succeeds,
// waiting while JetStream does not answer (events.UntilAnswered), each
// attempt bounded to 10s.
func untilAnswered(ctx context.Context, log *slog.Logger, what string, f func(context.Context) error) error {
	return events.UntilAnswered(ctx, log, "JetStream did not answer while "+what+"; trying again", 10*time.Second, f)
}

func orDefault(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

// Run keeps the process's lease and watches the budget for changes until
// ctx ends; then it gives back what the process holds. A budget whose Run
// is not running loses its calls in flight when its lease ends.
func (b *Budget) Run(ctx context.Context) error {
	tick := time.NewTicker(b.cfg.Lease / 3)
	defer tick.Stop()
	var w *events.KeyWatch
	defer func() {
		if w != nil {
			w.Stop()
		}
	}()
	for {
		if w == nil {
			w = b.watch()
		}
		var changed <-chan struct{}
		if w != nil {
			changed = w.C()
		}
		select {
		case <-ctx.Done():
			b.leave()
			return nil
		case <-changed:
			if b.reread(ctx) {
				b.signal()
			} else {
				w.Unchanged()
			}
		case <-tick.C:
			b.beat(ctx)
		case <-b.kick:
			b.beat(ctx)
		}
	}
}

// watch watches the key (events.WatchKey: a subscription to its subject,
// no consumer), or returns nil when the connection is closed.
func (b *Budget) watch() *events.KeyWatch {
	w, err := events.WatchKey(b.nc, events.BucketPrimeBudget, events.PrimeBudgetKey)
	if err != nil {
		return nil
	}
	return w
}

// reread reads the key after a write to it was seen, and reports whether
// it holds a revision newer than the one known (the write may not be
// stored yet, or may have been refused). A heartbeat's write that
// conflicts reads it too, so what a missed write changed is learnt within
// a third of the lease.
func (b *Budget) reread(ctx context.Context) bool {
	if !b.nc.IsConnected() {
		return false
	}
	ctx, cancel := b.opContext(ctx)
	defer cancel()
	e, err := b.kv.Get(ctx, events.PrimeBudgetKey)
	b.mu.Lock()
	known := b.rev
	b.mu.Unlock()
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound) && known > 0:
		b.know(nil, 0, false) // deleted or purged: the budget starts afresh
		return true
	case err != nil || e.Revision() <= known:
		return false
	}
	b.remember(e.Value(), e.Revision(), true)
	return true
}

// beat writes the process's lease and what it owes the budget, and moves
// between the shared budget and the local share as NATS answers or not.
func (b *Budget) beat(ctx context.Context) {
	if err := b.heartbeat(ctx); err != nil {
		b.fallBack(err)
		return
	}
	b.rejoin()
}

func (b *Budget) now() int64 { return time.Now().UnixMilli() }

// errUnreachable is the error of a NATS connection that is down.
var errUnreachable = errors.New("not connected to NATS")

// load returns the state and its revision: the last one seen, or, fresh,
// read from the bucket.
func (b *Budget) load(ctx context.Context, fresh bool) (state, uint64, error) {
	b.mu.Lock()
	raw, rev, have := b.raw, b.rev, b.rev > 0 || b.raw != nil
	b.mu.Unlock()
	if !fresh && have {
		return b.decode(raw), rev, nil
	}
	if !b.nc.IsConnected() {
		return state{}, 0, errUnreachable
	}
	ctx, cancel := b.opContext(ctx)
	defer cancel()
	e, err := b.kv.Get(ctx, events.PrimeBudgetKey)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return state{}, 0, nil
	case err != nil:
		return state{}, 0, err
	}
	return b.know(e.Value(), e.Revision(), true), e.Revision(), nil
}

// decode reads raw, the key's value as this process saw it. A value no
// process wrote is never taken for a budget no one has spent, which would
// give back every grant of the window and lift a 429's hold: a pub-ack or
// another JetStream answer, published onto the key by a role's user that
// set the key as its request's reply subject (nats-server checks no reply
// subject against permissions; issue 27's review), did just that. It is
// the last state this process knew with the whole window spent from now
// (no call goes for a window, as if the calls Prime allows had just gone
// out), which the process's next write puts over it.
func (b *Budget) decode(raw []byte) state {
	st, err := decode(raw)
	if err == nil {
		return st
	}
	b.log.Warn("prime budget: the key holds something no process wrote; holding every call for a window, then writing it anew",
		"bucket", events.BucketPrimeBudget, "key", events.PrimeBudgetKey, "err", err)
	b.mu.Lock()
	defer b.mu.Unlock()
	st = b.view.clone()
	st.SpentUntil = max(st.SpentUntil, b.now()+b.window.Milliseconds())
	return st
}

// store writes st over rev (0: the key is new). A write that is not
// cut short by the caller's context: one abandoned mid-flight could land
// without our knowing.
func (b *Budget) store(ctx context.Context, st state, rev uint64) error {
	if !b.nc.IsConnected() {
		return errUnreachable
	}
	raw, err := json.Marshal(st)
	if err != nil {
		return err
	}
	ctx, cancel := b.opContext(ctx)
	defer cancel()
	var next uint64
	if rev == 0 {
		next, err = b.kv.Create(ctx, events.PrimeBudgetKey, raw)
	} else {
		next, err = b.kv.Update(ctx, events.PrimeBudgetKey, raw, rev)
	}
	if err != nil {
		if events.IsKVConflict(err) {
			b.mu.Lock()
			b.counts.conflicts++
			b.mu.Unlock()
		}
		return err
	}
	b.know(raw, next, true)
	return nil
}

func (b *Budget) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), b.cfg.Timeout)
}

// remember keeps a value of the key the watcher saw, unless a newer one
// is known: the watcher may deliver one late.
func (b *Budget) remember(raw []byte, rev uint64, put bool) { b.keep(raw, rev, put, false) }

// know keeps the value of the key the server has just read or written,
// whatever was known before: after a restart that lost the last writes,
// or a bucket made anew, revisions go back. It returns the state read.
func (b *Budget) know(raw []byte, rev uint64, put bool) state { return b.keep(raw, rev, put, true) }

// keep decodes raw once and keeps it as the known state, and returns it.
func (b *Budget) keep(raw []byte, rev uint64, put, current bool) state {
	if !put {
		raw = nil // deleted or purged: the budget starts afresh
	}
	st := b.decode(raw)
	now := b.now()
	live := 0
	for _, p := range st.Procs {
		if p.live(now) {
			live++
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if live >= b.peak || now-b.peakAt > peakFor.Milliseconds() {
		b.peak, b.peakAt = live, now
	}
	if !current && rev < b.rev {
		return st
	}
	b.raw, b.rev, b.view = raw, rev, st
	return st
}

func (b *Budget) signal() {
	select {
	case b.changed <- struct{}{}:
	default:
	}
}

func (b *Budget) kickBeat() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// Changed implements prime.Budget: it receives when the budget changed,
// here or in another process.
func (b *Budget) Changed() <-chan struct{} { return b.changed }

// Held implements prime.Budget: the hold any process started, or this
// process while NATS is out of reach.
func (b *Budget) Held() time.Duration {
	now := b.now()
	b.mu.Lock()
	until := max(b.view.HoldUntil, b.pendingHold)
	fb := b.fallback
	b.mu.Unlock()
	held := max(0, time.Duration(until-now)*time.Millisecond)
	if fb != nil {
		held = max(held, fb.budget.Held())
	}
	return held
}

// Idle implements prime.Budget: the process stops claiming a turn.
func (b *Budget) Idle() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.waiting != nil {
		b.waiting = nil
		b.kickBeat()
	}
}

// Admit implements prime.Budget for the process's first waiting call.
func (b *Budget) Admit(ctx context.Context, t prime.Turn) (prime.Permit, prime.Wait, error) {
	if fb := b.falling(); fb != nil {
		return b.admitLocal(ctx, fb, t)
	}
	for attempt := 0; ; attempt++ {
		st, rev, err := b.load(ctx, attempt > 0)
		if err != nil {
			return b.admitLocal(ctx, b.fallBack(err), t)
		}
		b.mu.Lock()
		d := b.decide(&st, b.now(), t)
		if d.claim != nil {
			b.waiting = d.claim
		}
		if d.granted {
			// Ours from now, so that a heartbeat meanwhile keeps the slot.
			b.mine[d.id] = d.at
		}
		b.mu.Unlock()
		if !d.write {
			return nil, d.wait, d.err
		}
		err = b.store(ctx, st, rev)
		if err != nil && d.granted {
			b.mu.Lock()
			delete(b.mine, d.id) // the next heartbeat takes it out if it was written after all
			b.mu.Unlock()
		}
		switch {
		case events.IsKVConflict(err):
			continue // another process moved first: look again
		case err != nil:
			return b.admitLocal(ctx, b.fallBack(err), t)
		}
		if d.granted {
			b.mu.Lock()
			b.waiting = nil
			b.mu.Unlock()
			return &permit{b: b, id: d.id}, prime.Wait{}, nil
		}
		return nil, d.wait, d.err
	}
}

// decision is what decide made of a turn.
type decision struct {
	write   bool // st changed: write it
	granted bool
	id      uint64 // the slot granted
	at      int64
	claim   *turn // the turn published for the process
	wait    prime.Wait
	err     error
}

// decide is the budget's rule for a turn at now, applied to st: it grants
// the call (and records it), or says how long to wait, publishing the
// process's turn when it has changed. b.mu is held.
func (b *Budget) decide(st *state, now int64, t prime.Turn) decision {
	lease := b.cfg.Lease.Milliseconds()
	st.prune(now, b.window.Milliseconds())
	me := b.enrol(st, now)
	claim := &turn{Priority: t.Priority.String(), Since: t.Since.UnixMilli(), At: now}
	wait := func(w prime.Wait) decision {
		d := decision{wait: w, claim: claim}
		if old := me.Waiting; old == nil || old.Priority != claim.Priority || old.Since != claim.Since || old.At < now-lease/2 {
			me.Waiting, d.write = claim, true
		}
		return d
	}
	// await is a wait the call's deadline (or FailOnHold) may cut short.
	await := func(d time.Duration, reason string) decision {
		w, err := t.Await(d, reason)
		if err != nil {
			return decision{err: err}
		}
		return wait(w)
	}
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	if hold := ms(st.HoldUntil - now); hold > 0 {
		return await(hold, prime.WaitHold)
	}
	if spent := ms(st.SpentUntil - now); spent > 0 {
		return await(spent, prime.WaitRate)
	}
	if left, ok := st.dayLeft(now, dayStale.Milliseconds()); ok && left <= b.dayFloor(t.Priority) {
		b.dayReserve(t.Priority, left)
		return await(dayRecheck, prime.WaitDay)
	}
	if other, id := st.firstOther(b.id, now, lease); other != nil && goesBefore(other, id, claim, b.id) {
		// Look again when that turn would lapse, if nothing changes first.
		until := min(other.At+lease, st.Procs[id].Until)
		return wait(prime.Wait{D: ms(max(until-now, 1)), Reason: prime.WaitPriority})
	}
	if len(st.Slots) >= b.most {
		// A call that ends wakes the waiters; a holder that died gives its
		// slot back when its lease ends.
		until := int64(0)
		for _, s := range st.Slots {
			if u := st.Procs[s.Proc].Until; until == 0 || u < until {
				until = u
			}
		}
		return wait(prime.Wait{D: ms(max(until-now, 1)), Reason: prime.WaitConcurrency})
	}
	// The window holds PRIME_RATE_PER_MINUTE calls; the other classes
	// leave the minute's reserve of it to make-safe work, at an even pace
	// over the rest, and a make-safe call takes what the window has left
	// at once: it neither waits for nor moves the pace.
	makesafe := t.Priority == prime.PriorityMakesafe
	window, share := b.window.Milliseconds(), b.perMinute-b.cfg.MinuteReserve
	interval := window / int64(share)
	limit := share
	if makesafe {
		limit = b.perMinute
	}
	free := int64(0) // when the next call may go
	if eff := st.counted(now); len(eff) >= limit {
		free = eff[len(eff)-limit] + window
	}
	if !makesafe {
		free = max(free, st.Pace-int64(max(b.burst, catchUp)-1)*interval)
	}
	if d := ms(free - now); d > 0 {
		return await(d, prime.WaitRate)
	}
	b.seq++
	id := b.seq
	st.Grants = append(st.Grants, now)
	if n := len(st.Grants); n > b.perMinute {
		st.Grants = st.Grants[n-b.perMinute:]
	}
	if !makesafe {
		st.Pace = max(st.Pace, now) + interval
	}
	st.Slots = append(st.Slots, slot{Proc: b.id, ID: id, At: now})
	if st.Day != nil {
		st.Day.Remaining--
	}
	b.countDay(st, now, 1)
	me.Waiting = nil
	return decision{write: true, granted: true, id: id, at: now}
}

// countDay counts n calls let out at now into the day's forecast. b.mu is
// held, or st is the process's own.
func (b *Budget) countDay(st *state, now int64, n int) {
	st.count(now, n, b.zone, b.cfg.PerDay, b.cfg.DayReserve)
}

// enrol makes sure st holds this process, with a lease that runs. b.mu is
// held.
func (b *Budget) enrol(st *state, now int64) *proc {
	if st.Procs == nil {
		st.Procs = make(map[string]*proc)
	}
	me := st.Procs[b.id]
	if me == nil {
		me = &proc{Host: b.host, PID: b.pid}
		st.Procs[b.id] = me
	}
	me.Until = max(me.Until, now+b.cfg.Lease.Milliseconds())
	st.PerMinute = b.perMinute
	return me
}

// dayFloor is how much of the day's budget a class leaves: make-safe work
// spends it all, events keep off the reserve, sweeps and drains off twice
// it.
func (b *Budget) dayFloor(p prime.Priority) int {
	switch p {
	case prime.PriorityMakesafe:
		return 0
	case prime.PriorityEvent:
		return b.cfg.DayReserve
	}
	return 2 * b.cfg.DayReserve
}

// dayReserve logs a call kept back by the day's reserve, once an hour at
// most per class. b.mu is held.
func (b *Budget) dayReserve(p prime.Priority, left int) {
	now := b.now()
	if now-b.dayLogged[p] < time.Hour.Milliseconds() {
		return
	}
	b.dayLogged[p] = now
	b.log.Warn("the day's Prime budget is down to the reserve: this class waits, make-safe work goes on",
		"priority", p.String(), "dayRemaining", left, "reserve", b.cfg.DayReserve)
}

// heartbeat writes the process's lease, its turn, its calls in flight (so
// that one ended is given back, and one granted while NATS was away is
// counted) and what its calls learnt of Prime's budget.
func (b *Budget) heartbeat(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		st, rev, err := b.load(ctx, attempt > 0)
		if err != nil {
			return err
		}
		now := b.now()
		b.mu.Lock()
		st.prune(now, b.window.Milliseconds())
		me := b.enrol(&st, now)
		me.Until = now + b.cfg.Lease.Milliseconds()
		me.Waiting = nil
		if b.waiting != nil {
			w := *b.waiting // still waiting, said now
			w.At = now
			me.Waiting = &w
		}
		st.Slots = slices.DeleteFunc(st.Slots, func(s slot) bool { _, ok := b.mine[s.ID]; return s.Proc == b.id && !ok })
		ends := maps.Clone(b.ended)
		for _, e := range ends {
			st.ended(e) // again, if another heartbeat wrote it meanwhile: then nothing changes
		}
		for id, at := range b.mine {
			if !slices.ContainsFunc(st.Slots, func(s slot) bool { return s.Proc == b.id && s.ID == id }) {
				st.Slots = append(st.Slots, slot{Proc: b.id, ID: id, At: at})
			}
		}
		hold, spent, dy := b.pendingHold, b.pendingSpent, b.pendingDay
		st.HoldUntil = max(st.HoldUntil, hold)
		st.SpentUntil = max(st.SpentUntil, spent)
		if dy != nil && (st.Day == nil || dy.At >= st.Day.At) {
			// Prime's count takes in its own answers; the calls still in
			// flight may not be in it yet.
			st.Day = &day{Remaining: max(0, dy.Remaining-len(st.Slots)), At: dy.At}
		}
		var grants []int64
		if b.fallback != nil {
			grants = b.fallback.grants
			st.Grants = merged(st.Grants, grants, b.perMinute)
			for _, g := range grants {
				b.countDay(&st, g, 1)
			}
		}
		b.mu.Unlock()
		err = b.store(ctx, st, rev)
		if events.IsKVConflict(err) {
			continue
		}
		if err != nil {
			return err
		}
		b.mu.Lock()
		if b.pendingHold == hold {
			b.pendingHold = 0
		}
		if b.pendingSpent == spent {
			b.pendingSpent = 0
		}
		if b.pendingDay == dy {
			b.pendingDay = nil
		}
		for id := range ends {
			delete(b.ended, id)
		}
		if b.fallback != nil {
			b.fallback.grants = b.fallback.grants[len(grants):]
		}
		b.mu.Unlock()
		return nil
	}
}

// merged is the window's grants with more of them, the newest n.
func merged(grants, more []int64, n int) []int64 {
	out := slices.Concat(grants, more)
	slices.Sort(out)
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

// leave gives back, at shutdown, what the process holds, so that the
// others need not wait for its lease to end.
func (b *Budget) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Timeout)
	defer cancel()
	for attempt := 0; attempt < 10; attempt++ {
		st, rev, err := b.load(ctx, attempt > 0)
		if err != nil {
			return
		}
		delete(st.Procs, b.id)
		st.Slots = slices.DeleteFunc(st.Slots, func(s slot) bool { return s.Proc == b.id })
		if err := b.store(ctx, st, rev); !events.IsKVConflict(err) {
			return
		}
	}
}

// falling is the local share while NATS is out of reach, nil otherwise.
func (b *Budget) falling() *fallback {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.fallback
}

// fallBack starts spending the local share: the budget divided by the most
// processes seen at once in the last peakFor, so that processes cut off
// together stay within it.
func (b *Budget) fallBack(cause error) *fallback {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fallback != nil {
		return b.fallback
	}
	n := max(1, b.peak) // not the state as last seen: the leases in it may have lapsed since
	fb := &fallback{since: time.Now(), perMinute: max(1, b.perMinute/n), most: max(1, b.most/n)}
	fb.budget = prime.NewLocalBudget(fb.perMinute, 1, fb.most, nil)
	b.fallback = fb
	b.counts.fallbacks++
	b.log.Warn("the deployment's Prime budget in NATS is out of reach: spending a local share until it is back",
		"perMinute", fb.perMinute, "maxConcurrent", fb.most, "processesSeen", n, "err", cause)
	b.kickBeat()
	return fb
}

// rejoin goes back to the shared budget once a heartbeat has written the
// calls the local share let out.
func (b *Budget) rejoin() {
	b.mu.Lock()
	fb := b.fallback
	b.fallback = nil
	b.mu.Unlock()
	if fb != nil {
		b.log.Info("the deployment's Prime budget in NATS is back: spending it again", "after", time.Since(fb.since).Round(time.Millisecond))
		b.signal()
	}
}

// admitLocal admits t from the local share, within the day's reserve as
// last known.
func (b *Budget) admitLocal(ctx context.Context, fb *fallback, t prime.Turn) (prime.Permit, prime.Wait, error) {
	now := b.now()
	b.mu.Lock()
	left, known := b.view.dayLeft(now, dayStale.Milliseconds())
	b.mu.Unlock()
	if known && left <= b.dayFloor(t.Priority) {
		w, err := t.Await(dayRecheck, prime.WaitDay)
		return nil, w, err
	}
	p, w, err := fb.budget.Admit(ctx, t)
	if p == nil {
		if w.D <= 0 || w.D > time.Second {
			w.D = time.Second // look again soon: NATS may be back
		}
		return nil, w, err
	}
	b.mu.Lock()
	b.seq++
	id := b.seq
	b.mine[id] = now
	fb.grants = append(fb.grants, now)
	b.mu.Unlock()
	return &permit{b: b, id: id, local: p}, prime.Wait{}, nil
}

// permit is a call let out by the budget, or by the local share (local).
type permit struct {
	b     *Budget
	id    uint64
	local prime.Permit
	once  sync.Once
}

// Done implements prime.Permit: the call's slot is given back, and what
// Prime's answer says of the budget is written for every process.
func (p *permit) Done(status int, h http.Header) time.Duration {
	var limits prime.Limits
	p.once.Do(func() {
		b := p.b
		if p.local != nil {
			p.local.Done(status, h)
		}
		now := b.now()
		limits = prime.ReadLimits(status, h, time.UnixMilli(now))
		b.mu.Lock()
		if at, ok := b.mine[p.id]; ok && p.local == nil {
			b.ended[p.id] = ended{at: at, done: now}
		}
		delete(b.mine, p.id)
		if limits.Hold > 0 {
			b.pendingHold = max(b.pendingHold, now+limits.Hold.Milliseconds())
		}
		if limits.Spent > 0 {
			b.pendingSpent = max(b.pendingSpent, now+limits.Spent.Milliseconds())
		}
		if limits.DayRemaining >= 0 {
			b.pendingDay = &day{Remaining: limits.DayRemaining, At: now}
		}
		shared := b.fallback == nil
		b.mu.Unlock()
		if shared {
			b.beat(context.Background())
		}
		b.signal()
	})
	return limits.Hold
}
