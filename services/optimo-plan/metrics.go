package optimoplan

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests prometheus.Counter
	runs     *prometheus.CounterVec
	seconds  prometheus.Histogram
	dates    *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "primeflow_optimoplan_requests_total",
			Help: "Plan requests received on optimo.plan.requested (they coalesce into runs).",
		}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_optimoplan_runs_total",
			Help: "Plan runs by result: ok, error, poll_limit (plans still running after the last poll), lock_busy (gave up waiting for the optimo-plan lock, §8.3).",
		}, []string{"result"}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "primeflow_optimoplan_run_seconds",
			Help:    "Time a plan run held the optimo-plan lock, from taking it to releasing it.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
		}),
		dates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_optimoplan_dates_total",
			Help: "Dates by what a run did with them: started, start_failed, completed, cancelled, error, unknown, poll_limit, requeued (left NotPlanned, §8.4), routed.",
		}, []string{"outcome"}),
	}
	var err error
	if m.requests, err = register(reg, m.requests); err != nil {
		return nil, err
	}
	if m.runs, err = register(reg, m.runs); err != nil {
		return nil, err
	}
	if m.seconds, err = register(reg, m.seconds); err != nil {
		return nil, err
	}
	if m.dates, err = register(reg, m.dates); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or returns the collector registered before it (a
// service built twice in one process, as a restart test does).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	if err != nil {
		return c, fmt.Errorf("optimo-plan metrics: %w", err)
	}
	return c, nil
}
