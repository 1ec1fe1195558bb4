package primebudget_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primebudget"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/matryer/is"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// Records of primesim's default fixture.
const fixtureJob = "0f8e3c1a-5b7d-4e2f-9a6c-1d3e5f7a9b01"

// helperEnv makes the test binary a process that holds a slot of the
// budget at NATS_URL and waits to be killed (TestAKilledHoldersSlotComesBack).
const helperEnv = "PRIMEBUDGET_TEST_HOLD_A_SLOT"

func TestMain(m *testing.M) {
	if url := os.Getenv(helperEnv); url != "" {
		holdASlot(url)
		return
	}
	os.Exit(m.Run())
}

func holdASlot(url string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		fail(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	b, err := primebudget.New(ctx, js, prime.Config{MaxConcurrent: 1}, config(), slog.New(slog.DiscardHandler))
	if err != nil {
		fail(err)
	}
	go b.Run(ctx)
	if _, _, err := b.Admit(ctx, prime.Turn{Since: time.Now()}); err != nil {
		fail(err)
	}
	fmt.Println("held")
	select {} // until killed
}

// config is the shared budget's configuration in these tests: a short lease.
func config() primebudget.Config {
	return primebudget.Config{Lease: 2 * time.Second, Margin: 0, DayReserve: 5, Timeout: time.Second}
}

// process is one process's budget, on its own connection to srv, running
// until the test ends. logs has what it logged.
type process struct {
	*primebudget.Budget
	logs *flowtest.Buffer
	js   jetstream.JetStream
}

func newProcess(t *testing.T, srv *server.Server, pc prime.Config, window time.Duration) process {
	t.Helper()
	return newProcessWith(t, srv, pc, config(), window)
}

// newProcessWith is newProcess with a budget configuration of its own.
func newProcessWith(t *testing.T, srv *server.Server, pc prime.Config, cfg primebudget.Config, window time.Duration) process {
	t.Helper()
	_, js := natstest.Connect(t, srv) // its own connection, the streams applied
	logs := &flowtest.Buffer{}
	b, err := primebudget.New(context.Background(), js, pc, cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if window > 0 {
		primebudget.SetWindow(b, window)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); b.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return process{Budget: b, logs: logs, js: js}
}

// ledger records, across processes, when the budget let each call out and
// how many were out at once, as the budget itself saw them.
type ledger struct {
	mu       sync.Mutex
	grants   []time.Time
	out, max int
}

// recorded is a process's budget that writes every call in the ledger.
type recorded struct {
	*primebudget.Budget
	l *ledger
}

func (r recorded) Admit(ctx context.Context, t prime.Turn) (prime.Permit, prime.Wait, error) {
	p, w, err := r.Budget.Admit(ctx, t)
	if p == nil {
		return p, w, err
	}
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	r.l.grants = append(r.l.grants, primebudget.GrantedAt(r.Budget, p))
	r.l.out++
	r.l.max = max(r.l.max, r.l.out)
	return recordedPermit{p, r.l}, w, nil
}

type recordedPermit struct {
	prime.Permit
	l *ledger
}

func (p recordedPermit) Done(status int, h http.Header) time.Duration {
	p.l.mu.Lock()
	p.l.out--
	p.l.mu.Unlock()
	return p.Permit.Done(status, h)
}

func simulator(t *testing.T, rl primesim.RateLimit, wrap func(http.Handler) http.Handler) (*primesim.Sim, string) {
	t.Helper()
	f, err := primesim.DefaultFixture()
	if err != nil {
		t.Fatal(err)
	}
	sim, err := primesim.New(primesim.Options{Fixture: f, RateLimit: rl})
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = sim
	if wrap != nil {
		h = wrap(sim)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return sim, srv.URL
}

func client(t *testing.T, sim *primesim.Sim, url string, b prime.Budget) *prime.Client {
	t.Helper()
	c, err := prime.New(sim.ClientConfig(url), prime.WithBudget(b))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestWindowAndConcurrencyHoldUnderContention(t *testing.T) {
	is := is.New(t)
	const (
		perWindow = 20
		window    = time.Second
		most      = 3
	)
	srv := natstest.Server(t)
	sim, url := simulator(t, primesim.RateLimit{MaxConcurrent: most}, nil)
	sim.SetFaults(primesim.Faults{Latency: 60 * time.Millisecond})
	// Bursts of 10 test the concurrency; the window holds them to 20 a second.
	pc := prime.Config{RatePerMinute: perWindow, RateBurst: 10, MaxConcurrent: most}
	l := &ledger{}
	var clients []*prime.Client
	for range 3 {
		p := newProcess(t, srv, pc, window)
		clients = append(clients, client(t, sim, url, recorded{p.Budget, l}))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for _, c := range clients {
		for range 4 {
			wg.Go(func() {
				for range 5 {
					_, err := c.GetJob(context.Background(), fixtureJob)
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		is.NoErr(err) // every call goes out in the end
	}
	is.Equal(len(l.grants), 3+60)                                    // the three tokens and the calls, each let out once
	is.True(flowtest.MostInAnyWindow(l.grants, window) <= perWindow) // never more than the rate in any window, across the processes
	is.Equal(l.max, most)                                            // never more in flight than allowed, and the processes did overlap
	st := sim.Stats()
	is.True(st.MaxInFlight <= most)          // as Prime saw it
	is.Equal(st.RateLimited, int64(0))       // which never had to refuse one
	is.Equal(st.Calls, int64(len(l.grants))) // one request a grant
}

func TestAKilledHoldersSlotComesBack(t *testing.T) {
	is := is.New(t)
	srv := natstest.Server(t)
	natstest.Connect(t, srv) // the streams, the budget's bucket among them

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+srv.ClientURL())
	out, err := cmd.StdoutPipe()
	is.NoErr(err)
	cmd.Stderr = os.Stderr
	is.NoErr(cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	is.NoErr(err)
	is.Equal(line, "held\n") // the other process holds the only slot

	p := newProcess(t, srv, prime.Config{MaxConcurrent: 1}, 0)
	turn := prime.Turn{Since: time.Now()}
	permit, wait, err := p.Admit(context.Background(), turn)
	is.NoErr(err)
	is.True(permit == nil)                          // the slot is taken
	is.Equal(wait.Reason, prime.WaitConcurrency)    // by a call in flight
	is.True(wait.D > 0 && wait.D <= config().Lease) // asking again when its holder's lease would end

	is.NoErr(cmd.Process.Kill()) // kill -9: it gives nothing back itself
	cmd.Wait()
	flowtest.Eventually(t, "the killed process's slot back", func() bool {
		permit, _, err = p.Admit(context.Background(), turn)
		return err == nil && permit != nil
	})
	permit.Done(http.StatusOK, nil)
	is.Equal(gauge(t, p, "prime_budget_processes", ""), 1.0) // the dead process is gone from the budget
}

func TestA429InOneProcessHoldsTheOthers(t *testing.T) {
	is := is.New(t)
	srv := natstest.Server(t)
	pc := prime.Config{RatePerMinute: 6000, RateBurst: 100}
	a := newProcess(t, srv, pc, 0)
	b := newProcess(t, srv, pc, 0)
	sim, url := simulator(t, primesim.RateLimit{}, nil)
	cb := client(t, sim, url, b)
	_, err := cb.GetJob(context.Background(), fixtureJob)
	is.NoErr(err) // b calls Prime as usual

	permit, _, err := a.Admit(context.Background(), prime.Turn{Since: time.Now()})
	is.NoErr(err)
	h := http.Header{}
	h.Set("Retry-After", "30")
	is.Equal(permit.Done(http.StatusTooManyRequests, h), 30*time.Second) // a meets a 429

	flowtest.Eventually(t, "b sees the hold", func() bool { return b.Held() > 25*time.Second })
	calls := sim.Stats().Calls
	short, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = cb.GetJob(short, fixtureJob)
	is.True(errors.Is(err, prime.ErrRateLimited)) // b's call cannot wait 30s: it fails at once
	var limited *prime.RateLimitedError
	is.True(errors.As(err, &limited) && limited.Wait > 25*time.Second) // saying how long
	is.Equal(sim.Stats().Calls, calls)                                 // and Prime was not asked
	_, wait, err := b.Admit(context.Background(), prime.Turn{Since: time.Now()})
	is.NoErr(err)
	is.Equal(wait.Reason, prime.WaitHold) // a call that can wait, waits for the hold
	_, _, err = b.Admit(context.Background(), prime.Turn{Since: time.Now(), FailOnHold: true})
	is.True(errors.Is(err, prime.ErrRateLimited))              // and one that must not, fails
	is.True(gauge(t, b, "prime_budget_hold_seconds", "") > 25) // shown in the metrics
}

// Prime saying the minute is spent, to one process, keeps every process's
// calls back until its reset, without refusing those that must not wait
// out a hold (a sweep's).
func TestAMinuteSpentInOneProcessKeepsTheOthersBack(t *testing.T) {
	is := is.New(t)
	srv := natstest.Server(t)
	pc := prime.Config{RatePerMinute: 6000, RateBurst: 100}
	a := newProcess(t, srv, pc, 0)
	b := newProcess(t, srv, pc, 0)
	permit, _, err := a.Admit(context.Background(), prime.Turn{Since: time.Now()})
	is.NoErr(err)
	h := http.Header{}
	h.Set("X-Ratelimit-Minute-Remaining", "0")
	h.Set("X-Ratelimit-Minute-Reset", "30")
	is.Equal(permit.Done(http.StatusOK, h), time.Duration(0)) // no hold: Prime refused nothing
	flowtest.Eventually(t, "b keeps back", func() bool {
		_, wait, err := b.Admit(context.Background(), prime.Turn{Since: time.Now(), FailOnHold: true})
		return err == nil && wait.Reason == prime.WaitRate && wait.D > 25*time.Second // until the reset, FailOnHold or not
	})
	is.Equal(b.Held(), time.Duration(0)) // and it is no hold
}

// gate holds every request at the simulator until the test lets one pass,
// and records them in the order they arrived.
type gate struct {
	mu    sync.Mutex
	pass  chan struct{}
	stop  chan struct{} // closed when the test ends: every request goes
	order []string
}

func (g *gate) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.order = append(g.order, r.URL.Path)
		g.mu.Unlock()
		select {
		case <-g.pass:
		case <-g.stop:
		}
		h.ServeHTTP(w, r)
	})
}

func (g *gate) arrived() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.order)
}

// budgetState is the budget's key as `nats kv get prime_budget account`
// shows it.
type budgetState struct {
	Grants []int64
	Procs  map[string]struct {
		Waiting *struct{ Priority string }
	}
}

func stateOf(t *testing.T, js jetstream.JetStream) budgetState {
	t.Helper()
	kv, err := js.KeyValue(context.Background(), events.BucketPrimeBudget)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(context.Background(), events.PrimeBudgetKey)
	if err != nil {
		t.Fatal(err)
	}
	var st budgetState
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// claims are the classes of the first waiting calls the processes publish,
// in order.
func claims(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	st := stateOf(t, js)
	var out []string
	for _, p := range st.Procs {
		if p.Waiting != nil {
			out = append(out, p.Waiting.Priority)
		}
	}
	slices.Sort(out)
	return out
}

func TestPriorityOrderHoldsAcrossProcesses(t *testing.T) {
	is := is.New(t)
	srv := natstest.Server(t)
	_, js := natstest.Connect(t, srv)
	g := &gate{pass: make(chan struct{}), stop: make(chan struct{})}
	sim, url := simulator(t, primesim.RateLimit{}, g.wrap)
	t.Cleanup(func() { close(g.stop) }) // before the simulator's server closes
	pc := prime.Config{RatePerMinute: 6000, RateBurst: 100, MaxConcurrent: 1}
	holder := client(t, sim, url, newProcess(t, srv, pc, 0))
	ca := client(t, sim, url, newProcess(t, srv, pc, 0))
	cb := client(t, sim, url, newProcess(t, srv, pc, 0))
	ctx := context.Background()
	get := func(c *prime.Client, p prime.Priority, id string) {
		go c.GetJob(prime.WithPriority(ctx, p), id)
	}
	let := func(n int) { // let the next request through once n have arrived
		t.Helper()
		flowtest.Eventually(t, fmt.Sprintf("request %d at the gate", n), func() bool { return len(g.arrived()) == n })
		g.pass <- struct{}{}
	}
	// Every client's token first, one at a time.
	for i, c := range []*prime.Client{holder, ca, cb} {
		get(c, prime.PriorityEvent, "warm-up")
		let(2*i + 1) // the token
		let(2*i + 2) // the call
	}
	get(holder, prime.PriorityEvent, "holder") // takes the only slot and keeps it at the gate
	flowtest.Eventually(t, "the holder at the gate", func() bool { return len(g.arrived()) == 7 })
	get(ca, prime.PrioritySweep, "a-sweep-1")
	flowtest.Eventually(t, "a's first sweep waiting", func() bool { return ca.Stats().Waiting[prime.PrioritySweep] == 1 })
	get(ca, prime.PrioritySweep, "a-sweep-2")
	flowtest.Eventually(t, "a's sweeps waiting", func() bool { return ca.Stats().Waiting[prime.PrioritySweep] == 2 })
	flowtest.Eventually(t, "a's turn published", func() bool { return slices.Equal(claims(t, js), []string{"sweep"}) })
	get(cb, prime.PriorityEvent, "b-event")
	flowtest.Eventually(t, "b's event waiting", func() bool { return cb.Stats().Waiting[prime.PriorityEvent] == 1 })
	get(cb, prime.PriorityMakesafe, "b-makesafe")
	flowtest.Eventually(t, "b's make-safe waiting", func() bool { return cb.Stats().Waiting[prime.PriorityMakesafe] == 1 })
	flowtest.Eventually(t, "b's turn published", func() bool { return slices.Equal(claims(t, js), []string{"makesafe", "sweep"}) })

	let(7) // the holder ends: b's make-safe call, though a's sweeps waited longer
	flowtest.Eventually(t, "b's event next in line", func() bool { return slices.Equal(claims(t, js), []string{"event", "sweep"}) })
	let(8) // then b's event
	flowtest.Eventually(t, "b idle", func() bool { return slices.Equal(claims(t, js), []string{"sweep"}) })
	let(9)  // then the sweeps
	let(10) // in their order
	let(11)
	got := g.arrived()[7:]
	for i, p := range got {
		got[i] = strings.TrimPrefix(p, "/jobs/")
	}
	is.Equal(got, []string{"b-makesafe", "b-event", "a-sweep-1", "a-sweep-2"}) // make-safe, event, sweeps, across the processes
}

// TestAProcessLetsAnothersHigherClassGoFirst is the rule the order above
// rests on, step by step: a process whose first call is a sweep does not
// take a free slot while another process's make-safe call waits for it.
func TestAProcessLetsAnothersHigherClassGoFirst(t *testing.T) {
	is := is.New(t)
	srv := natstest.Server(t)
	pc := prime.Config{RatePerMinute: 6000, RateBurst: 100, MaxConcurrent: 1}
	holder, a, b := newProcess(t, srv, pc, 0), newProcess(t, srv, pc, 0), newProcess(t, srv, pc, 0)
	ctx := context.Background()
	sweep := prime.Turn{Priority: prime.PrioritySweep, Since: time.Now().Add(-time.Minute)} // waiting longest
	makesafe := prime.Turn{Priority: prime.PriorityMakesafe, Since: time.Now()}

	held, _, err := holder.Admit(ctx, prime.Turn{Since: time.Now()})
	is.NoErr(err)
	is.True(held != nil) // the only slot
	for _, w := range []struct {
		p    process
		turn prime.Turn
	}{{a, sweep}, {b, makesafe}} {
		permit, wait, err := w.p.Admit(ctx, w.turn)
		is.NoErr(err)
		is.True(permit == nil)                       // both wait...
		is.Equal(wait.Reason, prime.WaitConcurrency) // for the slot, and say so in the budget
	}
	held.Done(http.StatusOK, nil)
	flowtest.Eventually(t, "a and b see the slot free", func() bool {
		return gauge(t, a, "prime_budget_in_flight", "") == 0 && gauge(t, b, "prime_budget_in_flight", "") == 0
	})

	permit, wait, err := a.Admit(ctx, sweep)
	is.NoErr(err)
	is.True(permit == nil)                    // a's sweep leaves the free slot...
	is.Equal(wait.Reason, prime.WaitPriority) // to b's make-safe call
	permit, _, err = b.Admit(ctx, makesafe)
	is.NoErr(err)
	is.True(permit != nil) // which takes it
	permit.Done(http.StatusOK, nil)
	flowtest.Eventually(t, "a's sweep goes next", func() bool {
		permit, _, err = a.Admit(ctx, sweep)
		return err == nil && permit != nil
	})
	permit.Done(http.StatusOK, nil)
}

func TestTheDayReserveIsKeptForMakesafeWork(t *testing.T) {
	is := is.New(t)
	srv := natstest.Server(t)
	p := newProcess(t, srv, prime.Config{RatePerMinute: 6000, RateBurst: 100}, 0)
	ctx := context.Background()
	admit := admitter(t, p)
	permit, _ := admit(prime.PriorityEvent)
	h := http.Header{}
	h.Set("X-Ratelimit-Day-Remaining", "10") // config's reserve is 5
	permit.Done(http.StatusOK, h)
	flowtest.Eventually(t, "the day's budget known", func() bool { return gauge(t, p, "prime_budget_remaining", "day") == 10 })

	permit, wait := admit(prime.PrioritySweep)
	is.True(permit == nil)               // 10 left: a sweep keeps off twice the reserve...
	is.Equal(wait.Reason, prime.WaitDay) // and waits, saying why
	for range 5 {                        // 10 down to 5
		permit, _ = admit(prime.PriorityEvent)
		is.True(permit != nil) // events spend down to the reserve
		permit.Done(0, nil)
	}
	permit, wait = admit(prime.PriorityEvent)
	is.True(permit == nil)               // but not into it
	is.Equal(wait.Reason, prime.WaitDay) // ...
	for range 5 {
		permit, _ = admit(prime.PriorityMakesafe)
		is.True(permit != nil) // make-safe work spends the reserve
		permit.Done(0, nil)
	}
	permit, _ = admit(prime.PriorityMakesafe)
	is.True(permit == nil) // and stops when the day is spent
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	deadline, _ := short.Deadline()
	_, _, err := p.Admit(short, prime.Turn{Priority: prime.PriorityEvent, Since: time.Now(), Deadline: deadline})
	is.True(errors.Is(err, prime.ErrRateLimited)) // a call that cannot wait for the day fails as rate-limited
}

// admitter asks p for a turn of a class, waiting since now, as the
// limiter asks for its first waiting call.
func admitter(t *testing.T, p process) func(prime.Priority) (prime.Permit, prime.Wait) {
	return func(prio prime.Priority) (prime.Permit, prime.Wait) {
		t.Helper()
		permit, wait, err := p.Admit(context.Background(), prime.Turn{Priority: prio, Since: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return permit, wait
	}
}

// reserving is a process alone on a server of its own, keeping a minute's
// reserve of 3 for make-safe work.
func reserving(t *testing.T, pc prime.Config) process {
	cfg := config()
	cfg.MinuteReserve = 3
	return newProcessWith(t, natstest.Server(t), pc, cfg, 0)
}

// The other classes leave PRIME_MINUTE_RESERVE calls of the window
// unspent, and make-safe work takes them at once, beside the pace, within
// the window: a burst of make-safe calls does not queue behind the events
// that spent the rest.
func TestMakesafeWorkSpendsTheMinutesReserveAtOnce(t *testing.T) {
	is := is.New(t)
	// Ten calls a window, none of them paced apart (a burst of ten): only
	// the window and the reserve hold them.
	p := reserving(t, prime.Config{RatePerMinute: 10, RateBurst: 10, MaxConcurrent: 20})
	admit := admitter(t, p)
	for range 7 {
		permit, _ := admit(prime.PriorityEvent)
		is.True(permit != nil) // the events spend the window but the reserve
		permit.Done(http.StatusOK, nil)
	}
	permit, wait := admit(prime.PriorityEvent)
	is.True(permit == nil)                // the eighth event waits...
	is.Equal(wait.Reason, prime.WaitRate) // for the window
	permit, wait = admit(prime.PrioritySweep)
	is.True(permit == nil) // and so does a sweep
	is.Equal(wait.Reason, prime.WaitRate)
	for range 3 {
		permit, _ = admit(prime.PriorityMakesafe)
		is.True(permit != nil) // make-safe work takes the reserve at once
		permit.Done(http.StatusOK, nil)
	}
	permit, wait = admit(prime.PriorityMakesafe)
	is.True(permit == nil)                // but never more than the window holds
	is.Equal(wait.Reason, prime.WaitRate) // ...
	is.Equal(len(stateOf(t, p.js).Grants), 10)
}

// Make-safe calls go beside the pace the others keep: they neither wait
// for it nor move it.
func TestMakesafeWorkGoesBesideThePace(t *testing.T) {
	is := is.New(t)
	p := reserving(t, prime.Config{RatePerMinute: 60, RateBurst: 1, MaxConcurrent: 20})
	admit := admitter(t, p)
	for range 3 {
		permit, _ := admit(prime.PriorityEvent)
		is.True(permit != nil) // three back to back: the pace's catch-up
		permit.Done(http.StatusOK, nil)
	}
	_, behind := admit(prime.PriorityEvent)
	is.Equal(behind.Reason, prime.WaitRate) // then the pace: a call a second or so
	for range 5 {
		permit, _ := admit(prime.PriorityMakesafe)
		is.True(permit != nil) // make-safe calls do not wait for it
		permit.Done(http.StatusOK, nil)
	}
	_, after := admit(prime.PriorityEvent)
	is.Equal(after.Reason, prime.WaitRate)
	is.True(after.D <= behind.D) // nor move it: the next event's turn is no later for them
}

// A call counts in the window as late as Prime may have counted it: while
// it is in flight, as now; once its answer is back, as then. A call that
// reaches Prime late (its process stalled between its turn and the
// request) never lets a window of Prime's hold more than the budget's.
func TestACallInFlightHoldsItsPlaceInTheWindow(t *testing.T) {
	is := is.New(t)
	srv := natstest.Server(t)
	const window = 300 * time.Millisecond
	p := newProcess(t, srv, prime.Config{RatePerMinute: 1, MaxConcurrent: 5}, window) // one call a window
	admit := admitter(t, p)
	slow, _ := admit(prime.PriorityEvent)
	is.True(slow != nil) // a call goes out, and is slow to come back
	time.Sleep(2 * window)
	permit, wait := admit(prime.PriorityEvent)
	is.True(permit == nil)                // its window has passed, but it is still in flight: it counts as now...
	is.Equal(wait.Reason, prime.WaitRate) // and the next call waits
	back := time.Now().UnixMilli()
	slow.Done(http.StatusOK, nil)
	flowtest.Eventually(t, "the slow call counted as when it came back", func() bool {
		return slices.ContainsFunc(stateOf(t, p.js).Grants, func(g int64) bool { return g >= back })
	})
	flowtest.Eventually(t, "the next call let out, a window after that", func() bool {
		permit, _ = admit(prime.PriorityEvent)
		return permit != nil
	})
	permit.Done(http.StatusOK, nil)
}

func TestNATSLossFallsBackToALocalShare(t *testing.T) {
	is := is.New(t)
	dir, addr := t.TempDir(), flowtest.FreeAddr(t)
	srv := natstest.ServerAt(t, addr, dir)
	pc := prime.Config{RatePerMinute: 60, MaxConcurrent: 4}
	p := newProcess(t, srv, pc, 0)
	newProcess(t, srv, pc, 0) // a second process: the share is half
	flowtest.Eventually(t, "two processes", func() bool { return gauge(t, p, "prime_budget_processes", "") == 2 })
	is.Equal(gauge(t, p, "prime_budget_shared", ""), 1.0) // the shared budget

	natstest.Stop(srv)
	ctx := context.Background()
	turn := prime.Turn{Since: time.Now()}
	first, _, err := p.Admit(ctx, turn)
	is.NoErr(err)
	is.True(first != nil)                                         // calls still go out without NATS...
	is.Equal(gauge(t, p, "prime_budget_shared", ""), 0.0)         // on a local share, shown
	is.True(strings.Contains(p.logs.String(), "out of reach"))    // and said
	is.True(strings.Contains(p.logs.String(), "perMinute=30"))    // half the rate
	is.True(strings.Contains(p.logs.String(), "maxConcurrent=2")) // half the calls in flight
	second, wait, err := p.Admit(ctx, turn)
	is.NoErr(err)
	is.True(second == nil)                // at that share's pace, one call every 2s
	is.Equal(wait.Reason, prime.WaitRate) // ...
	at := primebudget.GrantedAt(p.Budget, first)
	first.Done(http.StatusOK, nil)

	srv = natstest.ServerAt(t, addr, dir)
	flowtest.Eventually(t, "back on the shared budget", func() bool { return gauge(t, p, "prime_budget_shared", "") == 1 })
	is.True(strings.Contains(p.logs.String(), "back: spending it again")) // said
	_, js := natstest.Connect(t, srv)
	flowtest.Eventually(t, "the local share's call written into the window", func() bool {
		return slices.Contains(stateOf(t, js).Grants, at.UnixMilli())
	})
}

// gauge reads one of b's metrics; window selects prime_budget_remaining's.
func gauge(t *testing.T, b prometheus.Collector, name, window string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := reg.Register(b); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if window != "" && (len(m.GetLabel()) == 0 || m.GetLabel()[0].GetValue() != window) {
				continue
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return -1
}

// An operator reads the deployment's budget from its bucket without
// spending it: nothing before a process has written it, then its calls in
// the minute and in flight, its processes and the day Prime told.
func TestReadShowsTheBudgetWithoutSpendingIt(t *testing.T) {
	is := is.New(t)
	srv := natstest.Server(t)
	_, js := natstest.Connect(t, srv)
	_, err := primebudget.Read(context.Background(), js)
	is.True(errors.Is(err, primebudget.ErrNotSpent)) // no process has spent it yet

	p := newProcess(t, srv, prime.Config{RatePerMinute: 60, RateBurst: 5}, 0)
	first, _, err := p.Admit(context.Background(), prime.Turn{Since: time.Now()})
	is.NoErr(err)
	second, _, err := p.Admit(context.Background(), prime.Turn{Since: time.Now()})
	is.NoErr(err)
	is.True(first != nil && second != nil) // two calls out, in the burst
	h := http.Header{}
	h.Set("X-Ratelimit-Day-Remaining", "4210")
	first.Done(http.StatusOK, h)
	flowtest.Eventually(t, "the day written", func() bool {
		s, err := primebudget.Read(context.Background(), js)
		return err == nil && s.DayLeft != nil
	})
	s, err := primebudget.Read(context.Background(), js)
	is.NoErr(err)
	is.Equal(s.MinuteLeft, 58) // two of the minute's 60 spent
	is.Equal(s.InFlight, 1)    // the second still out
	is.Equal(s.Processes, 1)   // one process spending it
	is.Equal(*s.DayLeft, 4209) // Prime's count, less the call it had not counted yet
	is.Equal(s.Hold, time.Duration(0))
	is.True(s.Forecast != nil)           // the day's forecast
	is.Equal(s.Forecast.Calls, 2)        // the deployment's calls today
	is.Equal(s.Forecast.Left, 4209)      // what Prime says is left
	is.True(s.Forecast.ReserveAt != nil) // at the pace of two calls, the reserve is reached some day...
	is.True(!s.Forecast.Short)           // but not today
	second.Done(http.StatusOK, nil)
	is.Equal(gauge(t, p, "prime_budget_remaining", "minute"), 58.0)                                     // the metrics say the same
	is.Equal(gauge(t, p, "prime_budget_day_calls", ""), 2.0)                                            // the day's calls
	is.Equal(gauge(t, p, "prime_budget_day_end_timestamp_seconds", ""), float64(s.Forecast.End.Unix())) // when it ends
	is.True(gauge(t, p, "prime_budget_day_reserve_reached_timestamp_seconds", "") > float64(s.Forecast.End.Unix()))
}

// A process that starts while the cluster has no quorum waits for it to
// bind the bucket and register, instead of exiting on "context deadline
// exceeded", then spends the budget as usual.
func TestNewRidesOutALostQuorum(t *testing.T) {
	is := is.New(t)
	c := natstest.NewCluster(t, 3)
	_, js := c.Connect(t)
	keep := c.Follower(js, events.StreamPrimeBudget) // the one left cannot answer for the bucket
	var stopped []int
	for i := range c.Nodes {
		if i != keep {
			c.Stop(i)
			stopped = append(stopped, i)
		}
	}
	logs := &flowtest.Buffer{}
	type started struct {
		b   *primebudget.Budget
		err error
	}
	got := make(chan started, 1)
	go func() {
		// A connection made now, as a process starting would.
		nc, err := nats.Connect(c.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
		if err != nil {
			got <- started{nil, err}
			return
		}
		t.Cleanup(nc.Close)
		fresh, err := jetstream.New(nc)
		if err != nil {
			got <- started{nil, err}
			return
		}
		b, err := primebudget.New(context.Background(), fresh, prime.Config{}, config(), slog.New(slog.NewTextHandler(logs, nil)))
		got <- started{b, err}
	}()
	flowtest.Eventually(t, "the wait logged", func() bool { return strings.Contains(logs.String(), "JetStream did not answer while") })
	c.Restart(stopped[0])

	res := <-got
	is.NoErr(res.err) // started once the cluster answers
	p, _, err := res.b.Admit(context.Background(), prime.Turn{Since: time.Now()})
	is.NoErr(err)
	is.True(p != nil) // and it spends the budget
	p.Done(http.StatusOK, nil)
}

// TestAnAnswerReflectedOntoTheKeyLetsOutNoMoreThanTheWindow is the
// review's attack on the budget (issue 27): a user that may publish to any
// stream (the portals', on optimo.plan.requested) set the budget's key as
// its publish's reply subject, which nats-server checks against no
// permission, and JetStream stored its pub-ack there. Every process read
// {"stream":"OPTIMO","seq":…} as a budget no one had spent: the window's
// grants and any 429's hold were gone, and the processes went over
// PRIME_RATE_PER_MINUTE. A value no process wrote holds every call for a
// window, and is written over.
func TestAnAnswerReflectedOntoTheKeyLetsOutNoMoreThanTheWindow(t *testing.T) {
	is := is.New(t)
	srv := natstest.Server(t)
	const perMinute = 5
	pc := prime.Config{RatePerMinute: perMinute, RateBurst: perMinute, MaxConcurrent: perMinute}
	a := newProcess(t, srv, pc, 0)
	granted := 0
	admit := func(p process) {
		permit, _, err := p.Admit(context.Background(), prime.Turn{Since: time.Now()})
		is.NoErr(err)
		if permit != nil {
			granted++
			permit.Done(http.StatusOK, nil)
		}
	}
	for range perMinute {
		admit(a)
	}
	is.Equal(granted, perMinute) // the window spent

	nc, js := natstest.Connect(t, srv)
	kv, err := js.KeyValue(context.Background(), events.BucketPrimeBudget)
	is.NoErr(err)
	is.NoErr(nc.PublishMsg(&nats.Msg{Subject: events.SubjectOptimoPlan, Reply: "$KV." + events.BucketPrimeBudget + "." + events.PrimeBudgetKey, Data: []byte(`{}`)}))
	flowtest.Eventually(t, "the pub-ack stored on the budget's key", func() bool {
		e, err := kv.Get(context.Background(), events.PrimeBudgetKey)
		return err == nil && strings.Contains(string(e.Value()), `"stream"`)
	})
	b := newProcess(t, srv, pc, 0) // a process that starts now reads it fresh
	for range 3 {
		admit(a)
		admit(b)
	}
	is.Equal(granted, perMinute) // no call beyond the window
	flowtest.Eventually(t, "the key written over by a process", func() bool {
		e, err := kv.Get(context.Background(), events.PrimeBudgetKey)
		var st struct {
			PerMinute  int   `json:"perMinute"`
			SpentUntil int64 `json:"spentUntil"`
		}
		return err == nil && json.Unmarshal(e.Value(), &st) == nil && st.PerMinute == perMinute && st.SpentUntil > time.Now().UnixMilli()
	})
	is.True(strings.Contains(a.logs.String(), "holds something no process wrote")) // and said so
}
