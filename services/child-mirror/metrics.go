package childmirror

import (
	"errors"

	"github.com/ethosbuilding/primeflow/pkg/pipeline"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	events    *prometheus.CounterVec
	swallowed *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_childmirror_events_total",
			Help: "Child events handled by child-mirror, by eventAction and outcome: ok (committed unless the commit fails), failed, payload_fault, rate_limited.",
		}, []string{"action", "outcome"}),
		swallowed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_childmirror_swallowed_failures_total",
			Help: "Follow-up steps that failed and were logged and swallowed (§9, §10.5): contact_sync, ai_summary_nudge.",
		}, []string{"step"}),
	}
	for _, c := range []prometheus.Collector{m.events, m.swallowed} {
		if err := reg.Register(c); err != nil {
			return nil, errors.Join(errors.New("child-mirror metrics"), err)
		}
	}
	return m, nil
}

// outcome names how a handler ended, for the events counter.
func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, pipeline.ErrPayload):
		return "payload_fault"
	case errors.Is(err, prime.ErrRateLimited):
		return "rate_limited"
	default:
		return "failed"
	}
}
