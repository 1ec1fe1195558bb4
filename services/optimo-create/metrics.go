package optimocreate

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests prometheus.Counter
	runs     *prometheus.CounterVec
	seconds  prometheus.Histogram
	orders   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "primeflow_optimocreate_requests_total",
			Help: "Order requests received on optimo.create.requested (they coalesce into runs).",
		}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_optimocreate_runs_total",
			Help: "Order runs by result: ok, error, lock_busy (gave up waiting for the optimo-create lock, §8.3).",
		}, []string{"result"}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "primeflow_optimocreate_run_seconds",
			Help:    "Time an order run held the optimo-create lock, from taking it to releasing it.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}),
		orders: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_optimocreate_orders_total",
			Help: "Orders by outcome: written (created or changed), deleted, refused (not an order, or refused by OptimoRoute; recorded with the reason).",
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
	if m.orders, err = register(reg, m.orders); err != nil {
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
		return c, fmt.Errorf("optimo-create metrics: %w", err)
	}
	return c, nil
}
