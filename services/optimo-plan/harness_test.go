package optimoplan_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/lock"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
	"github.com/ethosbuilding/primeflow/pkg/optimosim"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
	optimoplan "github.com/ethosbuilding/primeflow/services/optimo-plan"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// The dates the tests plan.
const (
	dayOne = "2026-03-10"
	dayTwo = "2026-03-11"
)

// env is one test's world: a real nats-server, SQLite, and the OptimoRoute
// simulator over HTTP.
type env struct {
	t      *testing.T
	ctx    context.Context
	srv    *server.Server
	store  store.Store
	sim    *optimosim.Sim
	clock  *optimosim.Clock // nil when the simulator runs on real time
	url    string
	client *optimoroute.Client
	log    *slog.Logger
	logs   *flowtest.Buffer // what the services logged, for tests that wait for a line
}

// newEnv starts a world. With manual set, planning in the simulator moves
// only when the test advances the clock by planningTime; otherwise plans
// finish almost at once on real time.
func newEnv(t *testing.T, manual bool) *env {
	t.Helper()
	logs := &flowtest.Buffer{}
	e := &env{t: t, logs: logs, log: slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), logs), &slog.HandlerOptions{Level: slog.LevelDebug}))}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	e.ctx = ctx
	e.srv = natstest.Server(t)
	natstest.Connect(t, e.srv) // applies the streams
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "primeflow.db"))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	e.store = st
	opts := optimosim.Options{PlanningDuration: time.Millisecond}
	if manual {
		e.clock = optimosim.NewClock(time.Date(2026, 3, 9, 0, 0, 0, 0, time.UTC))
		opts = optimosim.Options{PlanningDuration: planningTime, Now: e.clock.Now}
	}
	e.sim = optimosim.New(opts)
	e.serve(e.sim)
	return e
}

// planningTime is how long a plan takes on the manual clock.
const planningTime = time.Minute

// serve puts h in front of the client: the simulator, or a wrapper of it.
func (e *env) serve(h http.Handler) {
	hs := httptest.NewServer(h)
	e.t.Cleanup(hs.Close)
	e.url = hs.URL
	c, err := optimoroute.New(e.sim.ClientConfig(hs.URL))
	if err != nil {
		e.t.Fatalf("optimoroute client: %v", err)
	}
	e.client = c
}

// testConfig is a test's Planner configuration: fast polls, no schedule.
func testConfig() optimoplan.Config {
	cfg := optimoplan.DefaultConfig()
	cfg.Lock = lock.Config{TTL: 12 * time.Minute, Wait: time.Minute}
	cfg.PollInterval, cfg.MaxPolls = time.Millisecond, 100000
	cfg.Every, cfg.OnStart = 0, false // runs only on request
	cfg.Debounce = 0                  // at once: the tests that coalesce say so
	return cfg
}

// planner is one optimo-plan instance with its own NATS connection and
// metrics, as a process of its own would have.
type planner struct {
	*optimoplan.Planner
	t   *testing.T
	nc  *nats.Conn
	js  jetstream.JetStream
	reg *prometheus.Registry
}

func (e *env) planner(cfg optimoplan.Config) *planner {
	e.t.Helper()
	nc, js := natstest.Connect(e.t, e.srv)
	reg := prometheus.NewRegistry()
	d := service.Deps{Log: e.log, NC: nc, JS: js, Store: e.store, Metrics: reg}
	p, err := optimoplan.New(e.ctx, cfg, d, e.client)
	if err != nil {
		e.t.Fatalf("new planner: %v", err)
	}
	return &planner{Planner: p, t: e.t, nc: nc, js: js, reg: reg}
}

// runs is how many plan runs ended with result.
func (p *planner) runs(result string) int {
	return int(flowtest.Counter(p.t, p.reg, "primeflow_optimoplan_runs_total", map[string]string{"result": result}))
}

// requests is how many plan requests the planner received.
func (p *planner) requests() int {
	return int(flowtest.Counter(p.t, p.reg, "primeflow_optimoplan_requests_total", nil))
}

// order writes an order to OptimoRoute and records it, as a portal's
// booking does: the write marks its date NotPlanned (§8).
func (e *env) order(no, date string) {
	e.t.Helper()
	res, err := e.client.CreateOrUpdateOrders(e.ctx, []optimoroute.Order{{OrderNo: no, Type: "T", Date: date, Duration: 30,
		Location: &optimoroute.Location{Address: "1 Test St, Carlton VIC 3053"}}})
	if err != nil || res[0].Err != nil {
		e.t.Fatalf("write order %s: %v %v", no, err, res)
	}
	if err := e.store.UpsertOrder(e.ctx, store.OptimoOrder{OrderNo: no, Version: 1, OrderDate: date, Duration: 30,
		State: store.OrderActive, OptimoID: res[0].ID}); err != nil {
		e.t.Fatalf("record order %s: %v", no, err)
	}
}

// plan reads a date's row.
func (e *env) plan(date string) store.OptimoPlan {
	e.t.Helper()
	p, found, err := e.store.GetPlan(e.ctx, date)
	if err != nil || !found {
		e.t.Fatalf("plan %s: found %v, %v", date, found, err)
	}
	return p
}

// waitFor polls cond until it holds, failing the test at the deadline.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	flowtest.Poll(e.t, 30*time.Second, 2*time.Millisecond, what, cond)
}

// planning waits until a run has started planning date and recorded its
// planning id.
func (e *env) planning(date string) int64 {
	e.t.Helper()
	var id int64
	e.waitFor(date+" to be planning", func() bool {
		p, found, err := e.store.GetPlan(e.ctx, date)
		if err != nil {
			e.t.Fatalf("plan %s: %v", date, err)
		}
		id = p.PlanningID
		return found && p.PlanStatus == store.PlanPlanning && id != 0
	})
	return id
}

// starts counts the start_planning calls the simulator answered for date.
func (e *env) starts(date string) int {
	n := 0
	for _, ev := range e.sim.Events() {
		if ev.Operation == optimoroute.OpStartPlanning && ev.Date == date {
			n++
		}
	}
	return n
}

// finishPlans moves the manual clock past every plan's end.
func (e *env) finishPlans() { e.clock.Advance(planningTime) }

// result is what a Plan call running in the background returns.
type result struct {
	res optimoplan.Result
	err error
}

// goPlan runs p.Plan in the background.
func goPlan(ctx context.Context, p *planner) <-chan result {
	ch := make(chan result, 1)
	go func() {
		res, err := p.Plan(ctx)
		ch <- result{res, err}
	}()
	return ch
}

// await takes a background Plan's result.
func (e *env) await(ch <-chan result) result {
	e.t.Helper()
	select {
	case r := <-ch:
		return r
	case <-e.ctx.Done():
		e.t.Fatal("the plan run never returned")
		return result{}
	}
}

// lockEntry reads the optimo-plan lock's key; found is false when free.
func (e *env) lockEntry() (jetstream.KeyValueEntry, bool) {
	e.t.Helper()
	_, js := natstest.Connect(e.t, e.srv)
	kv, err := js.KeyValue(e.ctx, events.BucketLocks)
	if err != nil {
		e.t.Fatalf("locks bucket: %v", err)
	}
	entry, err := kv.Get(e.ctx, lock.KeyOptimoPlan)
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, false
		}
		e.t.Fatalf("read the lock: %v", err)
	}
	return entry, true
}
