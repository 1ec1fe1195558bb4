package optimocreate

import (
	"errors"
	"fmt"

	"github.com/ethosbuilding/primeflow/pkg/metrics"
	"github.com/ethosbuilding/primeflow/pkg/optimorun"
	"github.com/prometheus/client_golang/prometheus"
)

type collectors struct {
	run    optimorun.Metrics
	orders *prometheus.CounterVec
	sweeps *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*collectors, error) {
	run, err := optimorun.Metrics{
		Requests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "primeflow_optimocreate_requests_total",
			Help: "Order requests received on optimo.create.requested (they coalesce into runs).",
		}),
		Runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_optimocreate_runs_total",
			Help: "Order runs by result: ok, error, lock_busy (gave up waiting for the optimo-create lock, §8.3).",
		}, []string{"result"}),
		Seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "primeflow_optimocreate_run_seconds",
			Help:    "Time an order run held the optimo-create lock, from taking it to releasing it.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}),
	}.Register(reg)
	if err != nil {
		return nil, fmt.Errorf("optimo-create metrics: %w", err)
	}
	m := &collectors{
		run: run,
		orders: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_optimocreate_orders_total",
			Help: "Orders by outcome: written (created or changed), deleted, refused (not an order, or refused by OptimoRoute; recorded with the reason).",
		}, []string{"outcome"}),
		sweeps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_optimocreate_sweeps_total",
			Help: "Appointment sweeps asked of child-mirror before the queues (§8.1, runs in M–F 15:00–16:59), by result: ok, rate_limited (Prime's limit stopped it), timeout (no reply within OPTIMO_SWEEP_TIMEOUT), error. The queues are drained whatever the result.",
		}, []string{"result"}),
	}
	if err := errors.Join(metrics.Register(reg, &m.orders), metrics.Register(reg, &m.sweeps)); err != nil {
		return nil, fmt.Errorf("optimo-create metrics: %w", err)
	}
	// Exported from the start, at 0: the dashboard reads 0, not "no data",
	// and an alert sees the first one.
	for vec, values := range map[*prometheus.CounterVec][]string{
		m.orders: {"written", "deleted", "refused"},
		m.sweeps: {"ok", "rate_limited", "timeout", "error"},
	} {
		for _, v := range values {
			vec.WithLabelValues(v)
		}
	}
	return m, nil
}
