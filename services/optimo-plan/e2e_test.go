package optimoplan_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/lock"
	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
	"github.com/ethosbuilding/primeflow/pkg/optimosim"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/services/child-mirror/pipelinetest"
	jobmirror "github.com/ethosbuilding/primeflow/services/job-mirror"
	optimocreate "github.com/ethosbuilding/primeflow/services/optimo-create"
	optimoplan "github.com/ethosbuilding/primeflow/services/optimo-plan"
	"github.com/matryer/is"
)

// pipeline is the appointment path for real: ingest over HTTP, the
// resolver, job-mirror, child-mirror, optimo-create and optimo-plan on
// embedded NATS, SQLite, the Prime simulator and the OptimoRoute simulator
// over HTTP.
type pipeline struct {
	*flowtest.Env
	ingestURL string
	optimo    *optimosim.Sim
}

const webhookKey = "3f1c2b4a-5d6e-4f70-8a9b-0c1d2e3f4a5b"

// startPipeline starts the path. The plan run's polls are 250 ms apart and
// the simulator plans a date in 200 ms, so runs end quickly between samples;
// neither is on the path to start_planning.
func startPipeline(tb testing.TB) *pipeline {
	tb.Helper()
	env := flowtest.New(tb, flowtest.Options{})
	d := env.Deps
	p := &pipeline{Env: env}
	p.ingestURL = pipelinetest.StartFront(env, webhookKey)

	p.optimo = optimosim.New(optimosim.Options{PlanningDuration: 200 * time.Millisecond})
	osrv := httptest.NewServer(p.optimo)
	tb.Cleanup(osrv.Close)
	oc, err := optimoroute.New(p.optimo.ClientConfig(osrv.URL))
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	locks := lock.Config{TTL: 12 * time.Minute, Wait: 6 * time.Minute}
	// Runs on request only, and on a clock outside the M–F 15:00–16:59
	// sweep band (§8.1), so the figures do not depend on the time of day.
	createCfg := optimocreate.DefaultConfig()
	createCfg.Lock, createCfg.Every, createCfg.OnStart = locks, optimocreate.OnRequest, false
	create, err := optimocreate.New(ctx, createCfg, d, oc,
		optimocreate.WithClock(func() time.Time {
			now := time.Now()
			if optimocreate.InSweepBand(now, melbourne(tb)) {
				return now.Add(-3 * time.Hour) // the same day, before the band
			}
			return now
		}))
	if err != nil {
		tb.Fatal(err)
	}
	env.Run("optimo-create", create)
	planCfg := optimoplan.DefaultConfig()
	planCfg.Lock, planCfg.PollInterval, planCfg.Every, planCfg.OnStart = locks, 250*time.Millisecond, 0, false
	plan, err := optimoplan.New(ctx, planCfg, d, oc)
	if err != nil {
		tb.Fatal(err)
	}
	env.Run("optimo-plan", plan)
	flowtest.Eventually(tb, "job-mirror's ensure-job micro service", func() bool {
		_, err := env.NC.Request("$SRV.PING."+jobmirror.ServiceName, nil, time.Second)
		return err == nil
	})
	return p
}

// post sends Prime's webhook for action about record id to ingest over
// HTTP, as Prime does, and returns once ingest answered.
func (p *pipeline) post(action, id string) {
	p.T.Helper()
	w, err := p.Sim.Webhook(action, id)
	if err != nil {
		p.T.Fatal(err)
	}
	if err := p.Sim.FireWebhook(context.Background(), p.ingestURL, webhookKey, w); err != nil {
		p.T.Fatal(err)
	}
}

// jobSeen makes a job in Prime and lets the pipeline mirror it through
// change-job-status.
func (p *pipeline) jobSeen() prime.Job {
	p.T.Helper()
	j := p.Sim.NewJob()
	p.post("change-job-status", j.ID)
	flowtest.Eventually(p.T, "the job is mirrored", func() bool {
		_, found, err := p.Store.GetJob(context.Background(), strings.ToLower(j.ID))
		return err == nil && found
	})
	return j.Job
}

// idle waits until the date's plan run is over: routes read back and the
// optimo-plan lock free.
func (p *pipeline) idle(date string) {
	p.T.Helper()
	flowtest.Eventually(p.T, "the plan run to finish", func() bool {
		pl, found, err := p.Store.GetPlan(context.Background(), date)
		if err != nil || !found || pl.PlanStatus != store.PlanRoutesCompleted {
			return false
		}
		return !strings.Contains(lockHolders(p), lock.KeyOptimoPlan)
	})
}

// lockHolders lists the keys held in the locks bucket.
func lockHolders(p *pipeline) string {
	kv, err := p.JS.KeyValue(context.Background(), events.BucketLocks)
	if err != nil {
		return ""
	}
	keys, err := kv.Keys(context.Background())
	if err != nil {
		return ""
	}
	return strings.Join(keys, ",")
}

// startPlanning waits for a start_planning of date after event seq and
// returns it.
func (p *pipeline) startPlanning(date string, after int) optimosim.Event {
	p.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ev, err := p.optimo.WaitEvent(ctx, func(ev optimosim.Event) bool {
		return ev.Seq > after && ev.Operation == optimoroute.OpStartPlanning && ev.Date == date
	})
	if err != nil {
		p.T.Fatalf("start_planning for %s: %v", date, err)
	}
	return ev
}

func lastSeq(sim *optimosim.Sim) int {
	evs := sim.Events()
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].Seq
}

// An appointment webhook goes all the way: mirrored, made an order, its
// date planned, and the order's place on a route read back.
func TestAppointmentWebhookToRoutes(t *testing.T) {
	is := is.New(t)
	p := startPipeline(t)
	j := p.jobSeen()
	a := p.Sim.NewAppointment(j.ID)
	date := a.StartDate.In(melbourne(t)).Format(store.DateLayout)

	p.post("create-appointment", a.ID)
	p.startPlanning(date, 0)
	p.idle(date)
	o, found, err := p.Store.GetOrder(context.Background(), strings.ToLower(a.ID))
	is.NoErr(err)
	is.True(found)                       // the appointment is an order
	is.Equal(o.OrderDate, date)          // on its local date
	is.True(!o.ScheduledUTC.IsZero())    // scheduled on a route
	is.True(o.DriverSerial != "")        // with a driver
	is.Equal(p.optimo.Stats().Orders, 1) // OptimoRoute holds it
	is.Equal(p.optimo.Stats().Calls[optimoroute.OpStartPlanning], 1)
}

func melbourne(tb testing.TB) *time.Location {
	tb.Helper()
	l, err := time.LoadLocation("Australia/Melbourne")
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

// BenchmarkAppointmentWebhookToStartPlanning measures, end to end, the time
// from Prime posting create-appointment to OptimoRoute receiving
// start_planning for the appointment's date: ingest (stored, 200), the
// resolver (§4), child-mirror (appointment mirrored, optimo.create.requested
// from the outbox), optimo-create (lock, queue, create_or_update_orders,
// date marked, lock released, optimo.plan.requested), optimo-plan (lock,
// queue, date marked Planning, start_planning). One appointment at a time on
// an idle pipeline; the job was seen before. The baseline, in the same run,
// is ingest's answer alone (the webhook's 200 after its commit). It also
// reports OptimoRoute calls per appointment, one at a time and for a burst
// of appointments that coalesce into shared runs.
func BenchmarkAppointmentWebhookToStartPlanning(b *testing.B) {
	p := startPipeline(b)
	mel := melbourne(b)
	const samples = 20
	var toStart, toAnswer []time.Duration
	before := p.optimo.Stats().Calls
	for range samples {
		j := p.jobSeen()
		a := p.Sim.NewAppointment(j.ID)
		date := a.StartDate.In(mel).Format(store.DateLayout)
		seq := lastSeq(p.optimo)
		start := time.Now()
		p.post("create-appointment", a.ID)
		toAnswer = append(toAnswer, time.Since(start))
		p.startPlanning(date, seq)
		toStart = append(toStart, time.Since(start))
		p.idle(date)
	}
	flowtest.ReportLatencies(b, "webhook-to-start-planning", toStart)
	flowtest.ReportLatencies(b, "baseline-webhook-200", toAnswer)
	b.ReportMetric(float64(flowtest.Quantile(toStart, 0.5))/float64(flowtest.Quantile(toAnswer, 0.5)), "p50-vs-baseline")
	b.ReportMetric(float64(calls(p.optimo.Stats().Calls, before))/samples, "optimo-calls/appt")

	// A burst: the appointments of several jobs arrive together.
	const burst = 20
	var jobs []prime.Job
	for range burst {
		jobs = append(jobs, p.jobSeen())
	}
	before = p.optimo.Stats().Calls
	var date string
	for _, j := range jobs {
		a := p.Sim.NewAppointment(j.ID)
		date = a.StartDate.In(mel).Format(store.DateLayout)
		p.post("create-appointment", a.ID)
	}
	flowtest.Eventually(b, "every appointment of the burst is on a route", func() bool {
		n := 0
		for _, no := range p.optimo.OrderNos(date) {
			o, found, err := p.Store.GetOrder(context.Background(), no)
			if err == nil && found && !o.ScheduledUTC.IsZero() {
				n++
			}
		}
		return n == samples+burst
	})
	p.idle(date)
	b.ReportMetric(float64(calls(p.optimo.Stats().Calls, before))/burst, "optimo-calls/appt-burst")
}

// calls is how many OptimoRoute calls were made since before.
func calls(now, before map[string]int) int {
	n := 0
	for op, c := range now {
		n += c - before[op]
	}
	return n
}
