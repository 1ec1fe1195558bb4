package chaos

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
	"github.com/ethosbuilding/primeflow/pkg/optimosim"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/pkg/proctest"

	_ "modernc.org/sqlite" // the harness locks and reads the services' SQLite file
)

// natsKind is the kind of every NATS node.
const natsKind = "nats"

// faults deals the fault phase.
type faults struct {
	st   *stack
	ext  *externals
	mail *mailWorkload
	rng  *rand.Rand
	logf func(string, ...any)

	mu      sync.Mutex
	kills   int
	byKind  map[string]int
	down    map[*proctest.Proc]bool // killed, not yet back
	spared  map[string]bool         // kinds not to kill for now
	backing sync.WaitGroup          // restarts under way
}

// run deals sc's kills every KillEvery, and its other faults at fixed
// points of the phase: OptimoRoute's errors at 25% and 45% (while
// appointments still arrive: a run that fails on OptimoRoute's own trouble
// leaves its work to the next run, docs/operations.md), the database lock a third of
// the way through, Prime's 5xx storm at half way and its 429 storm at 65%.
// It returns once the last killed process is back.
func (f *faults) run(ctx context.Context, sc Scenario, phase time.Duration) {
	f.down, f.spared = map[*proctest.Proc]bool{}, map[string]bool{}
	var others sync.WaitGroup
	at := func(frac float64, fault func(context.Context)) {
		others.Go(func() {
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(frac * float64(phase))):
				fault(ctx)
			}
		})
	}
	if sc.DBLock > 0 {
		at(1.0/3, func(ctx context.Context) { f.lockDatabase(ctx, sc.DBLock) })
	}
	if sc.Mail {
		f.mailOutages(at)
	}
	if sc.PrimeOutage > 0 {
		at(0.1, func(ctx context.Context) { f.primeOutage(ctx, sc.PrimeOutage) })
	}
	if sc.Storms {
		at(0.25, f.optimoErrors)
		at(0.5, func(ctx context.Context) {
			f.primeStorm(ctx, "5xx", primesim.Faults{Latency: primeLatency, ErrorRate: 0.5, FailStatus: 503}, 8*time.Second)
		})
		at(0.45, f.optimoErrors)
		at(0.65, func(ctx context.Context) {
			f.primeStorm(ctx, "429", primesim.Faults{Latency: primeLatency, RateLimitFor: 10 * time.Second, RetryAfter: 2 * time.Second}, 10*time.Second)
		})
	}
	for f.killed() < sc.Kills && ctx.Err() == nil {
		pause := sc.KillEvery[0] + time.Duration(f.rng.Int64N(int64(sc.KillEvery[1]-sc.KillEvery[0])+1))
		select {
		case <-ctx.Done():
		case <-time.After(pause):
			if p, kind := f.pick(); p != nil {
				f.kill(ctx, p, kind, f.restartDelay(kind))
			}
		}
	}
	others.Wait()
	f.backing.Wait()
}

func (f *faults) killed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.kills
}

// pick chooses a kind at random, then a process of it that is up. A NATS
// node of a cluster is killed only while the other nodes are up: the
// cluster keeps its quorum, and the services see failovers, not an outage.
func (f *faults) pick() (*proctest.Proc, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	kinds := append([]string{natsKind}, f.st.names...)
	for range 20 {
		kind := kinds[f.rng.IntN(len(kinds))]
		if kind != natsKind {
			if p := f.st.services[kind]; !f.down[p] && !f.spared[kind] {
				return p, kind
			}
			continue
		}
		if slices.ContainsFunc(f.st.nats, func(p *proctest.Proc) bool { return f.down[p] }) {
			continue
		}
		return f.st.nats[f.rng.IntN(len(f.st.nats))], kind
	}
	return nil, ""
}

// spare keeps a service from being killed until the returned release is
// called, once it is up (it waits for that); ok is false when ctx ended
// first.
func (f *faults) spare(ctx context.Context, kind string) (release func(), ok bool) {
	for {
		f.mu.Lock()
		if p := f.st.services[kind]; !f.down[p] {
			f.spared[kind] = true
			f.mu.Unlock()
			return func() {
				f.mu.Lock()
				delete(f.spared, kind)
				f.mu.Unlock()
			}, true
		}
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (f *faults) restartDelay(kind string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if kind == natsKind {
		return time.Second + time.Duration(f.rng.IntN(3000))*time.Millisecond
	}
	return 200*time.Millisecond + time.Duration(f.rng.IntN(1800))*time.Millisecond
}

// kill deals kill -9 to p and starts it again after delay, in the
// background.
func (f *faults) kill(ctx context.Context, p *proctest.Proc, kind string, delay time.Duration) {
	f.mu.Lock()
	f.down[p] = true
	f.kills++
	f.byKind[kind]++
	n := f.kills
	f.mu.Unlock()
	pid := p.PID()
	if err := p.Kill(); err != nil {
		f.logf("kill %s: %v", p.Name(), err)
	}
	f.logf("kill %d: %s (pid %d), back in %s", n, p.Name(), pid, delay.Round(time.Millisecond))
	f.backing.Go(func() {
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		f.st.restart(ctx, p, f.logf)
		f.mu.Lock()
		delete(f.down, p)
		f.mu.Unlock()
	})
}

// lockDatabase holds SQLite's write lock for d, as a long transaction of
// another program (a migration, a backup) would; job-mirror and
// optimo-create are killed while it is held, so that they start into it.
func (f *faults) lockDatabase(ctx context.Context, d time.Duration) {
	db, err := sql.Open("sqlite", "file:"+f.st.db+"?_pragma=busy_timeout(60000)&_txlock=immediate")
	if err != nil {
		f.logf("lock the database: %v", err)
		return
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		f.logf("lock the database: %v", err)
		return
	}
	defer tx.Rollback()
	f.logf("database locked for %s", d)
	for _, name := range []string{"job-mirror", "optimo-create"} {
		f.mu.Lock()
		p, busy := f.st.services[name], f.down[f.st.services[name]]
		f.mu.Unlock()
		if !busy {
			f.kill(ctx, p, name, 500*time.Millisecond)
		}
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	f.logf("database unlocked")
}

// primeStorm answers Prime's calls with fs for d.
func (f *faults) primeStorm(ctx context.Context, what string, fs primesim.Faults, d time.Duration) {
	f.storm(ctx, "Prime "+what+" storm", d, func() { f.ext.prime.SetFaults(fs) },
		func() { f.ext.prime.SetFaults(primesim.Faults{Latency: primeLatency}) })
}

// primeOutage takes Prime down for d answering 503 to every call, the
// token endpoint's too (Path "/"), then for d more answering none: the
// connection dropped, as for a Prime out of reach.
func (f *faults) primeOutage(ctx context.Context, d time.Duration) {
	f.primeStorm(ctx, "outage: 503 to every call", primesim.Faults{Path: "/", Latency: primeLatency, FailNext: 1 << 30, FailStatus: 503}, d)
	f.primeStorm(ctx, "outage: no answer", primesim.Faults{Path: "/", Down: true}, d)
}

// storm puts a fault on for d, or until ctx ends, and takes it off; its
// start and its end are logged.
func (f *faults) storm(ctx context.Context, what string, d time.Duration, on, off func()) {
	f.logf("%s for %s", what, d)
	on()
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	off()
	f.logf("%s over", what)
}

// optimoErrors makes OptimoRoute fail some calls: its own trouble
// (ERR_INTERNAL), a proxy's error page and too many connections.
func (f *faults) optimoErrors(context.Context) {
	f.logf("OptimoRoute errors")
	f.ext.optimo.InjectFault(optimosim.Fault{Code: string(optimoroute.ErrInternal), Count: 3})
	f.ext.optimo.InjectFault(optimosim.Fault{Count: 2})
	f.ext.optimo.InjectFault(optimosim.Fault{Operation: optimoroute.OpStartPlanning, Code: string(optimoroute.ErrTooManyConnections)})
}
