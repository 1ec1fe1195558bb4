package optimorun_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/dryrun"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/lock"
	"github.com/ethosbuilding/primeflow/pkg/metrics"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
	"github.com/ethosbuilding/primeflow/pkg/optimorun"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

func testMetrics() optimorun.Metrics {
	return optimorun.Metrics{
		Requests: prometheus.NewCounter(prometheus.CounterOpts{Name: "test_requests_total", Help: "h"}),
		Runs:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "test_runs_total", Help: "h"}, []string{"result"}),
		Seconds:  prometheus.NewHistogram(prometheus.HistogramOpts{Name: "test_run_seconds", Help: "h"}),
	}
}

// A service built twice in one process counts in the collectors registered
// the first time.
func TestRegisterReusesTheFirst(t *testing.T) {
	is := is.New(t)
	reg := prometheus.NewRegistry()
	first, err := testMetrics().Register(reg)
	is.NoErr(err)
	second, err := testMetrics().Register(reg)
	is.NoErr(err)
	is.Equal(second.Runs, first.Runs)         // the first collector, not a new one
	is.Equal(second.Requests, first.Requests) // for each of them
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_requests_total", Help: "h"})
	is.True(metrics.Register(reg, &g) != nil) // a different collector under a taken name is refused
}

// A request on the subject runs the job; the run's part under the lock is
// counted by its result, and what the run asks for is published.
func TestRequestRunsTheJob(t *testing.T) {
	is := is.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := natstest.Server(t)
	nc, js := natstest.Connect(t, srv)
	reg := prometheus.NewRegistry()
	m, err := testMetrics().Register(reg)
	is.NoErr(err)
	d := service.Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), NC: nc, JS: js, Metrics: reg}
	fail := errors.New("boom")
	runs := make(chan error, 2)
	var r *optimorun.Runner
	r, err = optimorun.New(ctx, optimorun.Spec{Name: "test", Consumer: testConsumer(t, js),
		LockKey: lock.KeyOptimoCreate, Lock: lock.Config{TTL: time.Minute, Wait: time.Second}, Metrics: m,
		Result: func(err error) string {
			if errors.Is(err, fail) {
				return "failed"
			}
			return optimorun.DefaultResult(err)
		}}, d, func(ctx context.Context) error {
		err := r.Locked(ctx, func(context.Context) error {
			return r.Ask(ctx, events.SubjectOptimoPlan, events.PlanRequested{Source: "test"})
		})
		runs <- err
		runs <- r.Locked(ctx, func(context.Context) error { return fail })
		return nil
	})
	is.NoErr(err)
	done := make(chan error, 1)
	rctx, stop := context.WithCancel(ctx)
	go func() { done <- r.Run(rctx) }()

	data, err := json.Marshal(events.CreateRequested{Source: "test"})
	is.NoErr(err)
	_, err = js.Publish(ctx, events.SubjectOptimoCreate, data)
	is.NoErr(err)
	is.NoErr(<-runs)                 // the first part ran and asked
	is.True(errors.Is(<-runs, fail)) // the second failed as the job said
	stop()
	is.NoErr(<-done)                                                    // Run ends with its context
	is.Equal(testutil.ToFloat64(m.Requests), 1.0)                       // one request
	is.Equal(testutil.ToFloat64(m.Runs.WithLabelValues("ok")), 1.0)     // one run ok
	is.Equal(testutil.ToFloat64(m.Runs.WithLabelValues("failed")), 1.0) // one named by Result
	var h dto.Metric
	is.NoErr(m.Seconds.Write(&h))
	is.Equal(h.GetHistogram().GetSampleCount(), uint64(2)) // both timed
	stream, err := js.Stream(ctx, events.StreamOptimo)
	is.NoErr(err)
	msg, err := stream.GetLastMsgForSubject(ctx, events.SubjectOptimoPlan)
	is.NoErr(err)
	is.Equal(string(msg.Data), `{"source":"test"}`) // Ask published the request as JSON
}

// A dry run's client needs no API key and answers in the process; without a
// dry run the key is required as before.
func TestNewClient(t *testing.T) {
	is := is.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := optimoroute.Config{APIURL: "https://api.optimoroute.com/v1"}
	_, err := optimorun.NewClient(cfg, dryrun.Config{}, log)
	is.True(err != nil) // OPTIMOROUTE_API_KEY is required
	dir := t.TempDir()
	oc, err := optimorun.NewClient(cfg, dryrun.Config{OptimoRoute: true, Dir: dir}, log)
	is.NoErr(err) // not with a dry run
	res, err := oc.CreateOrUpdateOrders(context.Background(), []optimoroute.Order{{OrderNo: "o-1", Type: "T", Date: "2026-10-05",
		Duration: 30, Location: &optimoroute.Location{Address: "1 Test St"}}})
	is.NoErr(err)
	is.NoErr(res[0].Err) // answered inside the process
	recs, err := dryrun.Read(dryrun.Config{Dir: dir}.Path(dryrun.KindOptimoRoute))
	is.NoErr(err)
	is.Equal(len(recs), 1) // and recorded
}

// TestAskRidesOutALostQuorum: the cluster loses its quorum as optimo-create
// hands on to optimo-plan. The request is published again until the
// cluster stores it, instead of being logged and dropped, which left the
// dates NotPlanned until optimo-plan's schedule (30 minutes).
func TestAskRidesOutALostQuorum(t *testing.T) {
	is := is.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := natstest.NewCluster(t, 3)
	nc, js := c.Connect(t)
	logs := &flowtest.Buffer{}
	reg := prometheus.NewRegistry()
	m, err := testMetrics().Register(reg)
	is.NoErr(err)
	d := service.Deps{Log: slog.New(slog.NewTextHandler(logs, nil)), NC: nc, JS: js, Metrics: reg}
	r, err := optimorun.New(ctx, optimorun.Spec{Name: "test", Consumer: testConsumer(t, js),
		LockKey: lock.KeyOptimoCreate, Lock: lock.Config{TTL: time.Minute, Wait: time.Second}, Metrics: m}, d,
		func(context.Context) error { return nil })
	is.NoErr(err)
	c.Stop(1)
	c.Stop(2)
	asked := make(chan error, 1)
	go func() { asked <- r.Ask(ctx, events.SubjectOptimoPlan, events.PlanRequested{Source: "test"}) }()
	flowtest.Eventually(t, "the failed ask to be tried again", func() bool {
		return strings.Contains(logs.String(), "asking another service failed; trying again")
	})
	c.Restart(1)

	is.NoErr(<-asked) // stored once the cluster answers
	s, err := js.Stream(ctx, events.StreamOptimo)
	is.NoErr(err)
	msg, err := s.GetLastMsgForSubject(ctx, events.SubjectOptimoPlan)
	is.NoErr(err) // the request is in the stream
	var req events.PlanRequested
	is.NoErr(json.Unmarshal(msg.Data, &req))
	is.Equal(req.Source, "test")
}

// TestAFailedRunRunsAgain: a run that fails (OptimoRoute's own trouble, say)
// is followed by another after the backoff, with no request and no
// schedule, until one succeeds.
func TestAFailedRunRunsAgain(t *testing.T) {
	is := is.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, m, _ := testDeps(t)
	js := d.JS
	outcomes := []error{errors.New("optimoroute: ERR_INTERNAL"), errors.New("optimoroute: HTTP 502"), nil}
	ran := make(chan int, 10)
	n := 0
	r, err := optimorun.New(ctx, optimorun.Spec{Name: "test", Consumer: testConsumer(t, js),
		LockKey: lock.KeyOptimoCreate, Lock: lock.Config{TTL: time.Minute, Wait: time.Second}, Metrics: m,
		OnStart: true, Retry: 20 * time.Millisecond}, d, func(context.Context) error {
		n++
		ran <- n
		return outcomes[min(n, len(outcomes))-1]
	})
	is.NoErr(err)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	next := func() int {
		select {
		case got := <-ran:
			return got
		case <-time.After(30 * time.Second):
			t.Fatal("no run came")
			return 0
		}
	}
	is.Equal(next(), 1) // the run at start fails
	is.Equal(next(), 2) // so another runs, by itself, and fails too
	is.Equal(next(), 3) // and another, which succeeds
	select {
	case got := <-ran:
		t.Fatalf("run %d after a run that succeeded", got)
	case <-time.After(500 * time.Millisecond): // 25 times the first retry's wait
	}
	stop()
	is.NoErr(<-done)
}

// testDeps is a runner's dependencies on a server of its own, with the
// runner's metrics registered.
func testDeps(t *testing.T) (service.Deps, optimorun.Metrics, *prometheus.Registry) {
	t.Helper()
	nc, js := natstest.Connect(t, natstest.Server(t))
	reg := prometheus.NewRegistry()
	m, err := testMetrics().Register(reg)
	if err != nil {
		t.Fatal(err)
	}
	return service.Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), NC: nc, JS: js, Metrics: reg}, m, reg
}

// testConsumer makes the runner's consumer, as the operators' step makes
// the services'.
func testConsumer(t *testing.T, js jetstream.JetStream) events.Consumer {
	t.Helper()
	c := events.Consumer{Stream: events.StreamOptimo, Durable: "optimorun-test", Subjects: []string{events.SubjectOptimoCreate}}
	if _, err := events.ApplyConsumer(context.Background(), js, c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAnAnswerReflectedOntoTheSubjectRunsNothing is the review's attack on
// the run requests (issue 27): a user that may publish to a stream set the
// request subject as its publish's reply subject, which nats-server checks
// against no permission, and JetStream stored its pub-ack there as a
// request. What is not a request names no source: it is dropped and
// counted, and runs nothing; a request after it runs as before.
func TestAnAnswerReflectedOntoTheSubjectRunsNothing(t *testing.T) {
	is := is.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, m, reg := testDeps(t)
	nc, js := d.NC, d.JS
	ran := make(chan struct{}, 10)
	r, err := optimorun.New(ctx, optimorun.Spec{Name: "test", Consumer: testConsumer(t, js),
		LockKey: lock.KeyOptimoCreate, Lock: lock.Config{TTL: time.Minute, Wait: time.Second}, Metrics: m}, d, func(context.Context) error {
		ran <- struct{}{}
		return nil
	})
	is.NoErr(err)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()

	is.NoErr(nc.PublishMsg(&nats.Msg{Subject: events.SubjectOptimoPlan, Reply: events.SubjectOptimoCreate, Data: []byte(`{}`)}))
	dropped := func() float64 {
		mfs, err := reg.Gather()
		is.NoErr(err)
		for _, mf := range mfs {
			for _, mm := range mf.GetMetric() {
				if mf.GetName() == "primeflow_consumer_messages_total" && slices.ContainsFunc(mm.GetLabel(), func(l *dto.LabelPair) bool { return l.GetValue() == "drop" }) {
					return mm.GetCounter().GetValue()
				}
			}
		}
		return 0
	}
	flowtest.Eventually(t, "the pub-ack dropped", func() bool { return dropped() == 1 })
	is.Equal(testutil.ToFloat64(m.Requests), 0.0) // not taken for a request
	data, err := json.Marshal(events.CreateRequested{Source: "test"})
	is.NoErr(err)
	_, err = js.Publish(ctx, events.SubjectOptimoCreate, data)
	is.NoErr(err)
	<-ran                                         // a request runs
	is.Equal(testutil.ToFloat64(m.Requests), 1.0) // the one request
	stop()
	is.NoErr(<-done)
}
