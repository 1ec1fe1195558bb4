package optimoplan

import (
	"fmt"

	"github.com/ethosbuilding/primeflow/pkg/metrics"
	"github.com/ethosbuilding/primeflow/pkg/optimorun"
	"github.com/prometheus/client_golang/prometheus"
)

type collectors struct {
	run   optimorun.Metrics
	dates *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*collectors, error) {
	run, err := optimorun.Metrics{
		Requests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "primeflow_optimoplan_requests_total",
			Help: "Plan requests received on optimo.plan.requested (they coalesce into runs).",
		}),
		Runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_optimoplan_runs_total",
			Help: "Plan runs by result: ok, error, poll_limit (plans still running after the last poll), lock_busy (gave up waiting for the optimo-plan lock, §8.3).",
		}, []string{"result"}),
		Seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "primeflow_optimoplan_run_seconds",
			Help:    "Time a plan run held the optimo-plan lock, from taking it to releasing it.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
		}),
	}.Register(reg)
	if err != nil {
		return nil, fmt.Errorf("optimo-plan metrics: %w", err)
	}
	dates := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "primeflow_optimoplan_dates_total",
		Help: "Dates by what a run did with them: started, start_failed (refused: parked as E:<code>), start_deferred (OptimoRoute already planning it: left NotPlanned), completed, cancelled, error, unknown, poll_limit (left Planning for the next run), requeued (left NotPlanned, §8.4), routed.",
	}, []string{"outcome"})
	if err := metrics.Register(reg, &dates); err != nil {
		return nil, fmt.Errorf("optimo-plan metrics: %w", err)
	}
	// Exported from the start, at 0: the dashboard reads 0, not "no data",
	// and an alert sees the first one.
	run.Runs.WithLabelValues(result(ErrPollLimit))
	for _, o := range []string{"started", "start_failed", "start_deferred", "completed", "cancelled", "error", "unknown", "poll_limit", "requeued", "routed"} {
		dates.WithLabelValues(o)
	}
	return &collectors{run: run, dates: dates}, nil
}
