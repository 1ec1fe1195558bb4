package childmirror

import (
	"errors"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/metrics"
	"github.com/ethosbuilding/primeflow/pkg/pipeline"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/prometheus/client_golang/prometheus"
)

type collectors struct {
	events    *prometheus.CounterVec
	swallowed *prometheus.CounterVec
	sweeps    *prometheus.CounterVec
	swept     *prometheus.CounterVec
}

// newMetrics registers child-mirror's metrics; unanswered is how long
// job-mirror has gone unanswered (ensurejob.Caller.Unanswered).
func newMetrics(reg prometheus.Registerer, unanswered func() time.Duration) (*collectors, error) {
	m := &collectors{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_childmirror_events_total",
			Help: "Child events handled by child-mirror, by eventAction and outcome: ok (committed unless the commit fails), failed, payload_fault, rate_limited, unavailable (job-mirror did not answer: the event waits, no attempt counted).",
		}, []string{"action", "outcome"}),
		swallowed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_childmirror_swallowed_failures_total",
			Help: "Follow-up steps that failed and were logged and swallowed (§9, §10.5): contact_sync, ai_summary_nudge.",
		}, []string{"step"}),
		sweeps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_childmirror_sweeps_total",
			Help: "Appointment sweeps (§8.1) by result: ok (the whole list worked through), rate_limited (stopped by Prime's rate limit), stopped (the list failed, or the deadline came), bad_request.",
		}, []string{"result"}),
		swept: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_childmirror_sweep_appointments_total",
			Help: "Appointments the sweeps went through, by outcome: saved (the mirror lacked that version), unchanged (held at that version or newer: no Prime call), failed.",
		}, []string{"outcome"}),
	}
	// §9: job-mirror down is not a failure of the child events, which wait
	// for it unseen on the rows; this says they wait.
	jobMirrorUnanswered := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "primeflow_childmirror_job_mirror_unanswered_seconds",
		Help: "How long job-mirror has not answered child-mirror's ensure-job requests (no responders, timeouts), 0 while it answers. Meanwhile child events wait for it, no attempt counted.",
	}, func() float64 { return unanswered().Seconds() })
	if err := errors.Join(metrics.Register(reg, &m.events), metrics.Register(reg, &m.swallowed), metrics.Register(reg, &m.sweeps),
		metrics.Register(reg, &m.swept), metrics.Replace(reg, jobMirrorUnanswered)); err != nil {
		return nil, errors.Join(errors.New("child-mirror metrics"), err)
	}
	// The known label values are exported from the start, at 0: an alert
	// on them reads 0, not "no data".
	for _, a := range Actions() {
		for _, o := range []string{"ok", "failed", "payload_fault", "rate_limited", "unavailable"} {
			m.events.WithLabelValues(a, o)
		}
	}
	for vec, values := range map[*prometheus.CounterVec][]string{
		m.swallowed: {"contact_sync", "ai_summary_nudge"},
		m.sweeps:    {"ok", "rate_limited", "stopped", "bad_request"},
		m.swept:     {"saved", "unchanged", "failed"},
	} {
		for _, v := range values {
			vec.WithLabelValues(v)
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
	case errors.Is(err, pipeline.ErrUnavailable):
		return "unavailable"
	default:
		return "failed"
	}
}
