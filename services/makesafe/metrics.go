package makesafe

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ethosbuilding/primeflow/pkg/metrics"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/prometheus/client_golang/prometheus"
)

// What started a detection, the trigger label.
const (
	triggerFirstSight = "queue_checks"    // new-job pipeline (§6), queue-checks on
	triggerAllocation = "no_queue_checks" // create-allocation (§5.5), queue-checks off
	triggerRecheck    = "recheck"         // a rung of the ladder
)

func triggerOf(queueChecks bool) string {
	if queueChecks {
		return triggerFirstSight
	}
	return triggerAllocation
}

type collectors struct {
	detections     *prometheus.CounterVec
	raised         prometheus.Counter
	rungsScheduled prometheus.Counter
	rungs          *prometheus.CounterVec
	rungLateness   prometheus.Histogram
	rungsOverdue   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*collectors, error) {
	m := &collectors{
		detections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_makesafe_detections_total",
			Help: "Make-safe detections by trigger (queue_checks, no_queue_checks, recheck) and result: raised, already_raised, waiting (no Make Safe yet), business_hours, job_missing, rate_limited, prime_unavailable (Prime answered 5xx or not at all: it waits, like rate_limited), failed.",
		}, []string{"trigger", "result"}),
		raised: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "primeflow_makesafe_phone_calls_raised_total",
			Help: "Make-safe phone calls raised (each with its SMS queued).",
		}),
		rungsScheduled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "primeflow_makesafe_rungs_scheduled_total",
			Help: "Re-check rungs scheduled as JetStream scheduled messages.",
		}),
		rungs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_makesafe_rungs_fired_total",
			Help: "Re-check rungs run, by outcome: called (nothing to do), makesafe (detection only), in_hours (a job created in business hours: nothing to wait for, Prime not asked), synced (allocations synced from Prime), rate_limited, prime_unavailable (Prime answered 5xx or not at all: the rung waits), failed; and re-checks not worked: fired_before (the rung's row says it fired), not_due (worked at its time), not_queued (no such rung: dropped).",
		}, []string{"outcome"}),
		rungLateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "primeflow_makesafe_rung_lateness_seconds",
			Help:    "Time from a rung's due time to makesafe taking it.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
		}),
		rungsOverdue: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "primeflow_makesafe_rungs_overdue_total",
			Help: "Re-check rungs fired by the sweep because no schedule had fired them: queued by a caller outside primeflow, or their schedule was late.",
		}),
	}
	if err := errors.Join(metrics.Register(reg, &m.detections), metrics.Register(reg, &m.raised), metrics.Register(reg, &m.rungsScheduled),
		metrics.Register(reg, &m.rungs), metrics.Register(reg, &m.rungLateness), metrics.Register(reg, &m.rungsOverdue)); err != nil {
		return nil, fmt.Errorf("makesafe metrics: %w", err)
	}
	// The known label values are exported from the start, at 0: an alert
	// on failed detections or rungs reads 0, not "no data", and sees the
	// first one.
	for _, trigger := range []string{triggerFirstSight, triggerAllocation, triggerRecheck} {
		for _, result := range []string{"raised", "already_raised", "waiting", "business_hours", "job_missing", "rate_limited", "prime_unavailable", "failed"} {
			m.detections.WithLabelValues(trigger, result)
		}
	}
	for _, outcome := range []string{"called", "makesafe", "in_hours", "synced", "rate_limited", "prime_unavailable", "failed", "fired_before", "not_due", "not_queued"} {
		m.rungs.WithLabelValues(outcome)
	}
	return m, nil
}

// detection counts one detection.
func (m *collectors) detection(trigger string, out store.MakesafeOutcome, err error) {
	result := "failed"
	switch {
	case errors.Is(err, ErrJobNotMirrored):
		result = "job_missing"
	case errors.Is(err, prime.ErrRateLimited):
		result = "rate_limited"
	case errors.Is(err, prime.ErrUnavailable):
		result = "prime_unavailable"
	case err != nil:
	case out.Raised:
		result = "raised"
		m.raised.Inc()
	case out.PhoneCallID != 0:
		result = "already_raised"
	case !out.HasMakeSafe:
		result = "waiting"
	default:
		result = "business_hours"
	}
	m.detections.WithLabelValues(trigger, result).Inc()
}

// rungLabel names a rung's outcome for the rungs counter.
func rungLabel(outcome string, err error) string {
	var early *notDueError
	switch {
	case errors.Is(err, ErrRungNotQueued):
		return "not_queued"
	case errors.As(err, &early):
		return "not_due"
	case errors.Is(err, prime.ErrRateLimited):
		return "rate_limited"
	case errors.Is(err, prime.ErrUnavailable):
		return "prime_unavailable"
	case err != nil:
		return "failed"
	case outcome == RungFiredBefore:
		return "fired_before"
	case outcome == RungCalled:
		return "called"
	case outcome == RungMakeSafe:
		return "makesafe"
	case outcome == RungInHours:
		return "in_hours"
	case strings.HasPrefix(outcome, RungSynced):
		return "synced"
	}
	return "failed"
}
