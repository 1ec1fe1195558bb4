package resolver

import (
	"errors"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

type collectors struct {
	events       *prometheus.CounterVec
	laneSeconds  prometheus.Histogram
	probes       *prometheus.CounterVec
	shapeChanged *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*collectors, error) {
	m := &collectors{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_resolver_events_total",
			Help: "Events through the resolver by eventAction (known actions, else 'other') and outcome: processed, failed, capped, payload_fault, rate_limited (Prime's 429: the event waits, no attempt), prime_unavailable (Prime answered 5xx or not at all: it waits likewise), unavailable (a service the stage needs did not answer: it waits likewise), lane_timeout, no_handler, no_identifier, skipped (a redelivery of a row already finished), duplicate (ingest's copy of a processed row, republished after the duplicate window), replayed (an operator's replay of a processed row, queued again).",
		}, []string{"action", "outcome"}),
		laneSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "primeflow_resolver_lane_seconds",
			Help:    "Time from the resolver taking an event to the stage finishing its row.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_resolver_prime_probes_total",
			Help: "GUIDs the mirror did not know, fetched from Prime as the expected entity (§4.2 step 3).",
		}, []string{"entity"}),
		shapeChanged: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_resolver_payload_shape_changed_total",
			Help: "Ids found under an unexpected payload property (§4.2 step 2).",
		}, []string{"action"}),
	}
	if err := errors.Join(metrics.Register(reg, &m.events), metrics.Register(reg, &m.laneSeconds),
		metrics.Register(reg, &m.probes), metrics.Register(reg, &m.shapeChanged)); err != nil {
		return nil, errors.Join(errors.New("resolver metrics"), err)
	}
	// Exported from the start, at 0: an alert on it reads 0, not "no data".
	for _, a := range events.Actions() {
		m.shapeChanged.WithLabelValues(a)
	}
	return m, nil
}
