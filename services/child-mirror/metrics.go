package childmirror

import (
	"context"
	"errors"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/metrics"
	"github.com/ethosbuilding/primeflow/pkg/pipeline"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/prometheus/client_golang/prometheus"
)

type collectors struct {
	events    *prometheus.CounterVec
	swallowed *prometheus.CounterVec
	sweeps    *prometheus.CounterVec
	swept     *prometheus.CounterVec
	drained   *prometheus.CounterVec
}

// newMetrics registers child-mirror's metrics; unanswered is how long
// job-mirror has gone unanswered (ensurejob.Caller.Unanswered), q the sync
// queue whose depth is read at scrape time.
func newMetrics(reg prometheus.Registerer, unanswered func() time.Duration, q syncQueueStats) (*collectors, error) {
	m := &collectors{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_childmirror_events_total",
			Help: "Child events handled by child-mirror, by eventAction and outcome: ok (committed unless the commit fails), failed, payload_fault, rate_limited, prime_unavailable (Prime answered 5xx or not at all, and not for the record alone), unavailable (job-mirror did not answer): the last three wait, no attempt counted.",
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
		drained: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_syncqueue_drained_total",
			Help: "ethSyncQueue items the drains worked, by object and outcome: mirrored (written, the item removed), empty (Prime had nothing past the item's grace: removed), kept (Prime had nothing soon after it was queued: kept for a later pass, §7), requeued (queued again meanwhile: kept), no_job (Prime has no such job: removed), waited (Prime's rate limit or job-mirror: given back), failed (given back, tried again later).",
		}, []string{"object", "outcome"}),
	}
	// §9: job-mirror down is not a failure of the child events, which wait
	// for it unseen on the rows; this says they wait.
	jobMirrorUnanswered := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "primeflow_childmirror_job_mirror_unanswered_seconds",
		Help: "How long job-mirror has not answered child-mirror's ensure-job requests (no responders, timeouts), 0 while it answers. Meanwhile child events wait for it, no attempt counted.",
	}, func() float64 { return unanswered().Seconds() })
	if err := errors.Join(metrics.Register(reg, &m.events), metrics.Register(reg, &m.swallowed), metrics.Register(reg, &m.sweeps),
		metrics.Register(reg, &m.swept), metrics.Register(reg, &m.drained), metrics.Replace(reg, jobMirrorUnanswered, syncQueueCollector{q})); err != nil {
		return nil, errors.Join(errors.New("child-mirror metrics"), err)
	}
	// The known label values are exported from the start, at 0: an alert
	// on them reads 0, not "no data".
	for _, a := range Actions() {
		for _, o := range []string{"ok", "failed", "payload_fault", "rate_limited", "prime_unavailable", "unavailable"} {
			m.events.WithLabelValues(a, o)
		}
	}
	for _, o := range store.MissingObjects() {
		for _, outcome := range drainOutcomes() {
			m.drained.WithLabelValues(o, outcome)
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

// syncQueueStats is what the queue collector reads (store.SyncQueue).
type syncQueueStats interface {
	SyncQueueStats(ctx context.Context) ([]store.SyncQueueStat, error)
}

// syncQueueCollector reports ethSyncQueue by object at scrape time: its
// items, and how long the oldest has waited (0 when none waits). Every
// object the drains sync is served.
type syncQueueCollector struct{ q syncQueueStats }

var (
	syncQueueItemsDesc = prometheus.NewDesc("primeflow_syncqueue_items",
		"Items in ethSyncQueue by object (primeJobStatusHistory, primeContacts, primeAllocations, primeContactRelationships): the per-job syncs still to run (§6).",
		[]string{"object"}, nil)
	syncQueueOldestDesc = prometheus.NewDesc("primeflow_syncqueue_oldest_age_seconds",
		"How long the oldest item of each object has waited in ethSyncQueue, 0 when none waits.",
		[]string{"object"}, nil)
)

func (c syncQueueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- syncQueueItemsDesc
	ch <- syncQueueOldestDesc
}

func (c syncQueueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stats, err := c.q.SyncQueueStats(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(syncQueueItemsDesc, err)
		return
	}
	for _, st := range stats {
		age := 0.0
		if !st.OldestQueuedUTC.IsZero() {
			age = max(time.Since(st.OldestQueuedUTC).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(syncQueueItemsDesc, prometheus.GaugeValue, float64(st.Items), st.Object)
		ch <- prometheus.MustNewConstMetric(syncQueueOldestDesc, prometheus.GaugeValue, age, st.Object)
	}
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
	case errors.Is(err, prime.ErrUnavailable):
		return "prime_unavailable"
	case errors.Is(err, pipeline.ErrUnavailable):
		return "unavailable"
	default:
		return "failed"
	}
}
