package optimoplan_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/lock"
	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
	"github.com/ethosbuilding/primeflow/pkg/optimosim"
	"github.com/ethosbuilding/primeflow/pkg/store"
	optimoplan "github.com/ethosbuilding/primeflow/services/optimo-plan"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go/jetstream"
)

// A run plans every NotPlanned date, reads the routes back into the orders,
// releases the lock and asks for the SMS queue to be sent.
func TestPlanRun(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, false)
	e.order("A-1", dayOne)
	e.order("A-2", dayOne)
	e.order("B-1", dayTwo)
	p := e.planner(testConfig())
	sms := smsRequests(t, e)

	res, err := p.Plan(e.ctx)
	is.NoErr(err)
	is.Equal(res.Started, []string{dayOne, dayTwo})                // every NotPlanned date, earliest first
	is.Equal(res.Finished[dayOne], store.PlanPlanningCompleted)    // the plans completed
	is.Equal(res.Routed, []string{dayOne, dayTwo})                 // and their routes were read
	is.Equal(e.plan(dayOne).PlanStatus, store.PlanRoutesCompleted) // the dates are done
	is.Equal(e.plan(dayTwo).PlanStatus, store.PlanRoutesCompleted)
	is.True(e.plan(dayOne).PlanningID != 0) // with their planning ids

	for _, no := range []string{"A-1", "A-2", "B-1"} {
		o, _, err := e.store.GetOrder(e.ctx, no)
		is.NoErr(err)
		is.True(!o.ScheduledUTC.IsZero()) // each order has its scheduled time
		is.True(o.DriverSerial != "")     // and driver
	}
	a1, _, _ := e.store.GetOrder(e.ctx, "A-1")
	// The simulator's first stop is 08:15 local; Melbourne is UTC+11 in March.
	is.Equal(a1.ScheduledUTC, time.Date(2026, 3, 9, 21, 15, 0, 0, time.UTC))

	_, held := e.lockEntry()
	is.True(!held)                   // the lock is released
	is.Equal(len(sms.wait(t, 1)), 1) // one SMS-send request
	is.Equal(p.runs("ok"), 1)

	res, err = p.Plan(e.ctx)
	is.NoErr(err)
	is.Equal(len(res.Started), 0) // nothing is left to plan
	is.Equal(e.starts(dayOne), 1) // and nothing is planned twice
	info, err := p.js.Stream(e.ctx, events.StreamSMS)
	is.NoErr(err)
	si, err := info.Info(e.ctx, jetstream.WithSubjectFilter(events.SubjectSMSSend))
	is.NoErr(err)
	is.Equal(si.State.Subjects[events.SubjectSMSSend], uint64(1)) // the empty run asked for no SMS drain
}

// The §8.4 race, step by step: an order created for D while D is Planning
// sets it back to NotPlanned; the run's result does not overwrite that, and
// the next run plans D again with the new order.
func TestReQueueRace(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, true)
	e.order("A-1", dayOne)
	p := e.planner(testConfig())

	first := goPlan(e.ctx, p)
	e.planning(dayOne)     // 1. the run moves D to Planning and starts its plan
	e.order("A-2", dayOne) // 2. an order is created for D: NotPlanned again
	is.Equal(e.plan(dayOne).PlanStatus, store.PlanNotPlanned)
	e.finishPlans() // 3. the plan finishes
	r := e.await(first)
	is.NoErr(r.err)
	is.Equal(r.res.Finished[dayOne], "")                      // the run's PlanningCompleted was not written
	is.Equal(e.plan(dayOne).PlanStatus, store.PlanNotPlanned) // D is still queued
	a2, _, _ := e.store.GetOrder(e.ctx, "A-2")
	is.True(a2.ScheduledUTC.IsZero()) // and the new order is not yet on a route

	second := goPlan(e.ctx, p)
	e.planning(dayOne)
	e.finishPlans()
	r = e.await(second)
	is.NoErr(r.err)
	is.Equal(r.res.Started, []string{dayOne})                      // the next run plans D
	is.Equal(e.starts(dayOne), 2)                                  // a second time
	is.Equal(e.plan(dayOne).PlanStatus, store.PlanRoutesCompleted) // to the end
	a2, _, _ = e.store.GetOrder(e.ctx, "A-2")
	is.True(!a2.ScheduledUTC.IsZero()) // with the new order on a route
}

// Every outcome of a plan is written only while the date is still Planning,
// and RoutesCompleted only while it is PlanningCompleted.
func TestGuardedOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mode    optimosim.PlanningMode
		status  string // what get_planning_status answers, when not the simulator's
		cancel  bool   // stop the plan in OptimoRoute while it runs
		requeue bool   // write an order for the date while it is planned
		want    string
	}{
		{name: "finished", mode: optimosim.PlanningFinishes, want: store.PlanRoutesCompleted},
		{name: "error", mode: optimosim.PlanningFails, want: store.PlanErrorOccurred},
		{name: "cancelled", mode: optimosim.PlanningNeverCompletes, cancel: true, want: store.PlanCancelled},
		{name: "unknown status", status: "Q", want: store.PlanUnknownError},
		{name: "finished after a re-queue", mode: optimosim.PlanningFinishes, requeue: true, want: store.PlanNotPlanned},
		{name: "error after a re-queue", mode: optimosim.PlanningFails, requeue: true, want: store.PlanNotPlanned},
		{name: "cancelled after a re-queue", mode: optimosim.PlanningNeverCompletes, cancel: true, requeue: true, want: store.PlanNotPlanned},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, true)
			override := &statusOverride{sim: e.sim, status: tc.status}
			if tc.status != "" {
				e.serve(override)
			}
			e.sim.SetPlanningMode(tc.mode)
			e.order("A-1", dayOne)
			p := e.planner(testConfig())
			run := goPlan(e.ctx, p)
			id := e.planning(dayOne)
			override.armed.Store(true)
			if tc.requeue {
				e.order("A-2", dayOne)
			}
			if tc.cancel {
				is.NoErr(e.client.StopPlanning(e.ctx, id))
			}
			e.finishPlans()
			r := e.await(run)
			is.NoErr(r.err)
			got := e.plan(dayOne)
			is.Equal(got.PlanStatus, tc.want) // the status after the run
			if tc.want != store.PlanRoutesCompleted && tc.want != store.PlanNotPlanned {
				is.True(got.ErrorText != "") // a failed plan says why
			}
		})
	}
}

// statusOverride, once armed, answers get_planning_status with a status
// OptimoRoute does not document; everything else, and every status before
// it is armed (so the test sees the date planning first), the simulator
// answers.
type statusOverride struct {
	sim    http.Handler
	status string
	armed  atomic.Bool
}

func (o *statusOverride) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if o.armed.Load() && strings.HasSuffix(r.URL.Path, "/"+optimoroute.OpGetPlanningStatus) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"success": true, "status": o.status, "percentageComplete": 50})
		return
	}
	o.sim.ServeHTTP(w, r)
}

// A request OptimoRoute refuses for good parks the date with E:<code>
// (§8.4 table) and the run goes on with the other dates; an order written
// for a parked date queues it again. ERR_OPT_RUNNING (a plan for the date is
// already running) parks nothing: the date stays queued for the next run.
func TestRefusedStart(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, true)
	e.order("A-1", dayOne)
	e.order("B-1", dayTwo)
	e.order("C-1", "2026-03-12")
	// Someone else is planning D in OptimoRoute.
	_, err := e.client.StartPlanning(e.ctx, optimoroute.StartPlanningRequest{Date: dayOne})
	is.NoErr(err)
	e.sim.InjectFault(optimosim.Fault{Operation: optimoroute.OpStartPlanning, After: 1, Code: string(optimoroute.ErrInvalidParamFormat)})
	p := e.planner(testConfig())

	run := goPlan(e.ctx, p)
	e.planning("2026-03-12")
	e.finishPlans()
	r := e.await(run)
	is.NoErr(r.err)
	is.Equal(r.res.Deferred, []string{dayOne})                             // the running plan defers the date
	is.Equal(e.plan(dayOne).PlanStatus, store.PlanNotPlanned)              // still queued
	is.True(strings.Contains(e.plan(dayOne).ErrorText, "ERR_OPT_RUNNING")) // with the reason
	is.Equal(r.res.Failed[dayTwo], "E:ERR_INVALID_PARAM_FORMAT")           // a refusal parks its date
	is.Equal(e.plan(dayTwo).PlanStatus, "E:ERR_INVALID_PARAM_FORMAT")      // recorded
	is.Equal(e.plan("2026-03-12").PlanStatus, store.PlanRoutesCompleted)   // the other dates are planned

	run = goPlan(e.ctx, p)
	e.planning(dayOne)
	e.finishPlans()
	r = e.await(run)
	is.NoErr(r.err)
	is.Equal(r.res.Started, []string{dayOne})                      // the parked date is not retried
	is.Equal(e.plan(dayOne).PlanStatus, store.PlanRoutesCompleted) // the deferred one is planned

	e.order("B-2", dayTwo) // a new order queues the parked date again
	run = goPlan(e.ctx, p)
	e.planning(dayTwo)
	e.finishPlans()
	r = e.await(run)
	is.NoErr(r.err)
	is.Equal(e.plan(dayTwo).PlanStatus, store.PlanRoutesCompleted) // and the next run plans it
}

// A start_planning failure that is not a refusal of the date — OptimoRoute's
// own trouble, a proxy's error page, the API key — parks nothing: the date
// goes back in the queue, the run ends with the error, and the next run
// plans it (§9: dates stay NotPlanned for the next run).
func TestStartFailureParksNothing(t *testing.T) {
	for _, f := range []optimosim.Fault{
		{Code: string(optimoroute.ErrInternal)},
		{Code: string(optimoroute.ErrTooManyConnections)},
		{Code: string(optimoroute.ErrAuthKeyUnknown), HTTPStatus: http.StatusUnauthorized},
		{HTTPStatus: http.StatusBadGateway}, // no code: a proxy's page
		{HTTPStatus: http.StatusServiceUnavailable},
	} {
		t.Run(fmt.Sprintf("%s %d", f.Code, f.HTTPStatus), func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, false)
			e.order("A-1", dayOne)
			e.order("B-1", dayTwo)
			f.Operation = optimoroute.OpStartPlanning
			e.sim.InjectFault(f)
			p := e.planner(testConfig())
			res, err := p.Plan(e.ctx)
			is.True(err != nil)                                       // the run fails
			is.Equal(len(res.Failed), 0)                              // parking nothing
			is.Equal(e.plan(dayOne).PlanStatus, store.PlanNotPlanned) // the date is queued again
			is.True(e.plan(dayOne).ErrorText != "")                   // with the reason
			is.Equal(e.plan(dayTwo).PlanStatus, store.PlanNotPlanned) // and so is the one after it
			_, held := e.lockEntry()
			is.True(!held) // the lock is released

			_, err = p.Plan(e.ctx)
			is.NoErr(err)
			is.Equal(e.plan(dayOne).PlanStatus, store.PlanRoutesCompleted) // the next run plans both
			is.Equal(e.plan(dayTwo).PlanStatus, store.PlanRoutesCompleted)
		})
	}
}

// An order written for the date while one of the run's calls is under way
// survives whatever the run writes when the call answers (§8.4, §10.8):
// the planning id after start_planning, RoutesCompleted after get_routes, or
// the park when get_routes is refused. Each write is guarded on the status
// the run set; without the guard the order's NotPlanned is overwritten.
func TestAnOrderDuringACallIsNotOverwritten(t *testing.T) {
	for _, tc := range []struct {
		name, op string
		refuse   bool // answer the call with a refusal of the date
	}{
		{"start_planning succeeds", optimoroute.OpStartPlanning, false},
		{"get_routes succeeds", optimoroute.OpGetRoutes, false},
		{"get_routes refused", optimoroute.OpGetRoutes, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, false)
			e.order("A-1", dayOne)
			var once atomic.Bool
			e.serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !strings.HasSuffix(r.URL.Path, "/"+tc.op) || !once.CompareAndSwap(false, true) {
					e.sim.ServeHTTP(w, r)
					return
				}
				if tc.refuse {
					e.order("A-2", dayOne) // a booking lands during the call
					w.Header().Set("Content-Type", "application/json")
					w.Write([]byte(`{"success":false,"code":"ERR_INVALID_PARAM_FORMAT","message":"refused"}`))
					return
				}
				e.sim.ServeHTTP(w, r)  // OptimoRoute answers for A-1 only
				e.order("A-2", dayOne) // and a booking lands before the answer reaches the run
			}))
			_, err := e.planner(testConfig()).Plan(e.ctx)
			is.NoErr(err)
			is.Equal(e.plan(dayOne).PlanStatus, store.PlanNotPlanned) // still queued for A-2
		})
	}
}

// A refusal that arrives after an order queued the date again during the
// call leaves it NotPlanned (§8.4): the refusal was of the request before
// the order, and the next run plans the date with it.
func TestRefusalAfterRequeue(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, false)
	e.order("A-1", dayOne)
	var refused atomic.Bool
	e.serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/"+optimoroute.OpStartPlanning) && refused.CompareAndSwap(false, true) {
			e.order("A-2", dayOne) // a booking lands while start_planning is under way
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"success": false, "code": optimoroute.ErrInvalidParamFormat, "message": "refused"})
			return
		}
		e.sim.ServeHTTP(w, r)
	}))
	p := e.planner(testConfig())
	res, err := p.Plan(e.ctx)
	is.NoErr(err)
	is.Equal(len(res.Failed), 0)                              // nothing parked
	is.Equal(res.Deferred, []string{dayOne})                  // the date is left
	is.Equal(e.plan(dayOne).PlanStatus, store.PlanNotPlanned) // queued, for the order

	_, err = p.Plan(e.ctx)
	is.NoErr(err)
	is.Equal(e.plan(dayOne).PlanStatus, store.PlanRoutesCompleted) // the next run plans it
}

// A plan this service lost track of (a status poll failed, then a booking
// queued the date again, which forgets the planning id) makes the next
// start_planning fail with ERR_OPT_RUNNING while it runs: the date waits,
// and the run after the old plan ends plans it with the new order.
func TestLostPlanThenBooking(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, true)
	e.order("A-1", dayOne)
	e.sim.InjectFault(optimosim.Fault{Operation: optimoroute.OpGetPlanningStatus, Code: string(optimoroute.ErrInternal)})
	p := e.planner(testConfig())
	_, err := p.Plan(e.ctx)
	is.True(errors.Is(err, optimoroute.ErrInternal)) // the poll fails: the run ends, the plan runs on
	e.order("A-2", dayOne)                           // a booking queues the date again

	res, err := p.Plan(e.ctx)
	is.NoErr(err)
	is.Equal(res.Deferred, []string{dayOne})                  // OptimoRoute is still planning it
	is.Equal(e.plan(dayOne).PlanStatus, store.PlanNotPlanned) // so it waits

	e.finishPlans() // the old plan ends
	run := goPlan(e.ctx, p)
	e.planning(dayOne)
	e.finishPlans()
	r := e.await(run)
	is.NoErr(r.err)
	is.Equal(r.res.Started, []string{dayOne})
	is.Equal(e.plan(dayOne).PlanStatus, store.PlanRoutesCompleted) // planned, the new order with it
}

// A request that gets no answer puts the date back in the queue and ends the
// run with an error, lock released.
func TestStartWithoutAnswer(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, false)
	e.order("A-1", dayOne)
	e.serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hj, _ := w.(http.Hijacker)
		conn, _, _ := hj.Hijack()
		conn.Close() // the connection drops: no answer at all
	}))
	p := e.planner(testConfig())
	_, err := p.Plan(e.ctx)
	is.True(err != nil)                                       // the run fails
	is.Equal(e.plan(dayOne).PlanStatus, store.PlanNotPlanned) // the date is queued again
	_, held := e.lockEntry()
	is.True(!held) // and the lock is released
	is.Equal(p.runs("error"), 1)
}

// A plan still running at the poll limit ends the run with the error and
// the lock released, and its date stays Planning with the error noted; the
// next run polls the same plan again (§9 "Plan never completes … Recovery:
// Next run") rather than stopping a slow plan and starting it over.
func TestPollLimit(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, true) // the plan does not move until the test says
	e.order("A-1", dayOne)
	cfg := testConfig()
	cfg.MaxPolls = 5
	p := e.planner(cfg)

	_, err := p.Plan(e.ctx)
	is.True(errors.Is(err, optimoplan.ErrPollLimit)) // the run ends at the limit
	got := e.plan(dayOne)
	is.Equal(got.PlanStatus, store.PlanPlanning)                            // the date waits for the next run
	is.True(got.PlanningID != 0)                                            // with its plan
	is.True(strings.Contains(got.ErrorText, "still running after 5 polls")) // and the reason
	polls := 0
	for _, ev := range e.sim.Events() {
		is.True(ev.Operation != optimoroute.OpStopPlanning) // the plan is left running
		if ev.Operation == optimoroute.OpGetPlanningStatus {
			polls++
		}
	}
	is.Equal(polls, 5) // bounded polling
	_, held := e.lockEntry()
	is.True(!held) // the lock is released
	is.Equal(p.runs("poll_limit"), 1)

	e.finishPlans() // the plan ends after all
	res, err := p.Plan(e.ctx)
	is.NoErr(err)
	is.Equal(res.Finished[dayOne], store.PlanPlanningCompleted)    // the next run polls it
	is.Equal(e.plan(dayOne).PlanStatus, store.PlanRoutesCompleted) // to the end
	is.Equal(e.starts(dayOne), 1)                                  // without starting another
}

// Two runners contend: the second waits by watching the lock, then runs
// with what was queued meanwhile.
func TestRunnersTakeTurns(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, true)
	e.order("A-1", dayOne)
	a := e.planner(testConfig())
	b := e.planner(testConfig())

	ra := goPlan(e.ctx, a)
	e.planning(dayOne) // a holds the lock, its plan running
	e.order("B-1", dayTwo)
	rb := goPlan(e.ctx, b)
	e.waitFor("b to wait", func() bool { return strings.Contains(e.logs.String(), "waiting for lock") })
	is.Equal(e.starts(dayTwo), 0) // b does nothing while it waits

	e.finishPlans()
	got := e.await(ra)
	is.NoErr(got.err)
	is.Equal(got.res.Started, []string{dayOne}) // a planned what it found
	e.planning(dayTwo)                          // b takes the lock and plans what came after
	e.finishPlans()
	got = e.await(rb)
	is.NoErr(got.err)
	is.Equal(got.res.Started, []string{dayTwo})
	is.Equal(e.plan(dayTwo).PlanStatus, store.PlanRoutesCompleted)
}

// A runner that gives up waiting says so, counts it, and leaves the lock
// exactly as the holder has it.
func TestGiveUpLeavesTheLock(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, true)
	e.order("A-1", dayOne)
	a := e.planner(testConfig())
	cfg := testConfig()
	cfg.Lock.Wait = time.Second
	b := e.planner(cfg)

	ra := goPlan(e.ctx, a)
	e.planning(dayOne)
	before, held := e.lockEntry()
	is.True(held) // a holds the lock

	_, err := b.Plan(e.ctx)
	is.True(errors.Is(err, lock.ErrBusy)) // b gives up
	is.Equal(b.runs("lock_busy"), 1)      // visibly
	after, held := e.lockEntry()
	is.True(held)                                           // the lock is still there
	is.Equal(after.Value(), before.Value())                 // naming a
	is.True(after.Revision() >= before.Revision())          // as a left it (a may have renewed it)
	is.Equal(e.plan(dayOne).PlanStatus, store.PlanPlanning) // b touched no date

	e.finishPlans()
	got := e.await(ra)
	is.NoErr(got.err) // a finishes and releases normally
	_, held = e.lockEntry()
	is.True(!held)
}

// A holder that crashes never releases: its lock expires by its TTL, and
// the next run proceeds, polling the plan the crashed run left.
func TestCrashedHolderExpires(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, true)
	e.order("A-1", dayOne)
	cfg := testConfig()
	cfg.Lock = lock.Config{TTL: time.Second, Wait: 30 * time.Second}
	a := e.planner(cfg)
	b := e.planner(cfg)

	actx, crash := context.WithCancel(e.ctx)
	ra := goPlan(actx, a)
	id := e.planning(dayOne)
	a.nc.Close() // a's process dies: no renewals, no release
	crash()
	e.await(ra)
	_, held := e.lockEntry()
	is.True(held) // the crashed run's lock is still there

	rb := goPlan(e.ctx, b)
	e.waitFor("b to take the expired lock", func() bool { return strings.Contains(e.logs.String(), "took lock after waiting") })
	e.finishPlans()
	got := e.await(rb)
	is.NoErr(got.err)
	is.Equal(got.res.Finished[dayOne], store.PlanPlanningCompleted) // b polled the plan a left
	is.Equal(e.plan(dayOne).PlanningID, id)                         // the same plan
	is.Equal(e.plan(dayOne).PlanStatus, store.PlanRoutesCompleted)  // to the end
	is.Equal(e.starts(dayOne), 1)                                   // without starting it again
}

// Plan requests coalesce: 100 requests that arrive while a run is in
// progress cause one more run, not a hundred.
func TestBurstCoalesces(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, true)
	e.order("A-1", dayOne)
	p := e.planner(testConfig())
	ctx, stop := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	publish := func(n int) {
		for i := range n {
			data, _ := json.Marshal(events.PlanRequested{Source: "AdminPortal", Reason: "booking " + string(rune('a'+i%26))})
			if _, err := p.js.PublishAsync(events.SubjectOptimoPlan, data); err != nil {
				t.Fatalf("publish: %v", err)
			}
		}
		select {
		case <-p.js.PublishAsyncComplete():
		case <-e.ctx.Done():
			t.Fatal("publishes not acknowledged")
		}
	}
	publish(1)
	e.planning(dayOne) // the first request's run is planning
	publish(99)        // the rest of the burst arrives during it
	e.waitFor("every request to be received", func() bool { return p.requests() == 100 })
	e.finishPlans()
	e.waitFor("the follow-up run", func() bool { return p.runs("ok") == 2 })
	is.Equal(e.starts(dayOne), 1) // the follow-up found nothing more to plan

	e.order("B-1", dayTwo) // a later booking
	publish(1)
	e.planning(dayTwo)
	e.finishPlans()
	e.waitFor("its run", func() bool { return p.runs("ok") == 3 })
	stop()
	is.NoErr(<-done)
	is.Equal(p.runs("ok"), 3) // 1 run + 1 follow-up for the burst, 1 for the later request
	is.Equal(e.plan(dayTwo).PlanStatus, store.PlanRoutesCompleted)
}

// A burst of plan requests with nothing queued — 20 in a fraction of a
// second, each run quicker than the gap between two of them — is one run
// over OPTIMO_PLAN_DEBOUNCE, not twenty (nor twenty SMS drains).
func TestBurstOverTheDebounceIsOneRun(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, false)
	cfg := testConfig()
	cfg.Debounce = 5 * time.Second // far longer than the burst takes to publish
	p := e.planner(cfg)
	ctx, stop := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	for i := range 20 {
		data, _ := json.Marshal(events.PlanRequested{Source: "AdminPortal", Reason: fmt.Sprint("booking ", i)})
		if _, err := p.js.Publish(e.ctx, events.SubjectOptimoPlan, data); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	e.waitFor("every request received", func() bool { return p.requests() == 20 })
	e.waitFor("the run", func() bool { return p.runs("ok") >= 1 })
	stop()
	is.NoErr(<-done)
	is.Equal(p.runs("ok"), 1) // one run for the burst
	var started []string
	for line := range strings.Lines(e.logs.String()) {
		if strings.Contains(line, "optimo-plan run started") {
			started = append(started, line)
		}
	}
	is.Equal(len(started), 1)                            // started once
	is.True(strings.Contains(started[0], "requests=20")) // for all twenty requests
}

// smsSub collects sms.send.requested messages.
type smsSub struct {
	cons jetstream.Consumer
}

func smsRequests(t *testing.T, e *env) *smsSub {
	t.Helper()
	p := e.planner(testConfig())
	cons, err := p.js.CreateConsumer(e.ctx, events.StreamSMS, jetstream.ConsumerConfig{FilterSubject: events.SubjectSMSSend})
	if err != nil {
		t.Fatalf("sms consumer: %v", err)
	}
	return &smsSub{cons: cons}
}

// wait fetches n requests.
func (s *smsSub) wait(t *testing.T, n int) []events.SMSSendRequested {
	t.Helper()
	batch, err := s.cons.Fetch(n, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatalf("fetch sms requests: %v", err)
	}
	var out []events.SMSSendRequested
	for m := range batch.Messages() {
		var r events.SMSSendRequested
		if err := json.Unmarshal(m.Data(), &r); err != nil {
			t.Fatalf("sms request: %v", err)
		}
		if r.Source != optimoplan.Source {
			t.Fatalf("sms request from %q", r.Source)
		}
		out = append(out, r)
	}
	return out
}

// A status poll OptimoRoute cannot answer for a while fails the run and
// leaves the date Planning for the next run's poll; one it will never answer
// (a plan it does not know) parks the date with the code instead of failing
// every run.
func TestPollErrors(t *testing.T) {
	t.Run("transient", func(t *testing.T) {
		is := is.New(t)
		e := newEnv(t, false)
		e.order("A-1", dayOne)
		e.sim.InjectFault(optimosim.Fault{Operation: optimoroute.OpGetPlanningStatus, Code: string(optimoroute.ErrInternal)})
		p := e.planner(testConfig())
		_, err := p.Plan(e.ctx)
		is.True(errors.Is(err, optimoroute.ErrInternal))        // the run fails
		is.Equal(e.plan(dayOne).PlanStatus, store.PlanPlanning) // the date waits, its plan recorded
		_, held := e.lockEntry()
		is.True(!held) // the lock is released
		res, err := p.Plan(e.ctx)
		is.NoErr(err)
		is.Equal(res.Finished[dayOne], store.PlanPlanningCompleted)    // the next run polls the same plan
		is.Equal(e.plan(dayOne).PlanStatus, store.PlanRoutesCompleted) // to the end
		is.Equal(e.starts(dayOne), 1)                                  // without starting another
	})
	t.Run("a plan OptimoRoute does not know", func(t *testing.T) {
		is := is.New(t)
		e := newEnv(t, false)
		_, err := e.store.SetPlanStatus(e.ctx, store.PlanStatusWrite{PlanDate: dayOne, Status: store.PlanPlanning, PlanningID: 4242})
		is.NoErr(err) // a run that died left this
		e.order("B-1", dayTwo)
		p := e.planner(testConfig())
		res, err := p.Plan(e.ctx)
		is.NoErr(err)
		is.Equal(res.Finished[dayOne], "E:ERR_INVALID_PARAM_FORMAT")   // parked with the code
		is.Equal(e.plan(dayTwo).PlanStatus, store.PlanRoutesCompleted) // and the run goes on
	})
}
