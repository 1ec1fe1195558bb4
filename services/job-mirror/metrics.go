package jobmirror

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/metrics"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/prometheus/client_golang/prometheus"
)

type collectors struct {
	firstSight  *prometheus.CounterVec
	wipFailures prometheus.Counter
	ensure      *prometheus.CounterVec
	jobsSweeps  *prometheus.CounterVec
	jobsSwept   *prometheus.CounterVec
	// jobsWatermark has no labels; it is served once a watermark is known.
	jobsWatermark *prometheus.GaugeVec
}

// watermark sets the jobs-by-date watermark gauge, served from then on.
func (m *collectors) watermark(t time.Time) {
	m.jobsWatermark.WithLabelValues().Set(float64(t.Unix()))
}

func newMetrics(reg prometheus.Registerer) (*collectors, error) {
	m := &collectors{
		firstSight: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_jobs_first_seen_total",
			Help: "Jobs seen for the first time, whose new-job pipeline job-mirror handed off, by the path that saw them first (§7.1): webhook, email, backstop, appointment-sweep, or unknown.",
		}, []string{"via"}),
		wipFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "primeflow_jobmirror_clientwip_failures_total",
			Help: "Client WIP triggers that could not be queued (§5.1 step 5: logged and swallowed; api/clientwipupdate/evaluate recovers them).",
		}),
		ensure: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_jobmirror_ensure_total",
			Help: "Ensure-job requests (§4.3, §7) by result: present, mirrored, not_found, rate_limited, prime_unavailable (Prime answered 5xx or not at all, and not for the job alone: the caller waits, no attempt), error, refused (not a request of its path: a field it does not take, a log row that is no child event being handled).",
		}, []string{"result"}),
	}
	m.jobsSweeps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "primeflow_jobmirror_jobs_sweeps_total",
		Help: "Jobs-by-date sweeps (the backstop) by result: ok (the whole list went through; the watermark moved), rate_limited (stopped by Prime's rate limit), prime_unavailable (stopped by Prime answering 5xx or not at all), stopped (a page or a job failed, or the deadline came). A sweep that did not finish leaves the watermark, and the next goes on from its checkpoint.",
	}, []string{"result"})
	m.jobsSwept = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "primeflow_jobmirror_jobs_swept_total",
		Help: "Jobs the jobs-by-date sweeps listed, by outcome: unchanged (mirrored at that version, its objects queued for it: no write, no call), updated (its version moved since: written, its objects queued again for the drains), first_sight (new to the mirror: the new-job pipeline handed off), failed.",
	}, []string{"outcome"})
	m.jobsWatermark = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "primeflow_jobmirror_jobs_sweep_watermark_seconds",
		Help: "The jobs-by-date sweep's watermark (Unix time): the newest updatedAt its last finished sweep listed; not served before a sweep has listed a job. Alert when it stops moving.",
	}, nil)
	if err := errors.Join(metrics.Register(reg, &m.firstSight), metrics.Register(reg, &m.wipFailures), metrics.Register(reg, &m.ensure),
		metrics.Register(reg, &m.jobsSweeps), metrics.Register(reg, &m.jobsSwept), metrics.Register(reg, &m.jobsWatermark)); err != nil {
		return nil, fmt.Errorf("job-mirror metrics: %w", err)
	}
	// Exported from the start, at 0: the dashboard reads 0, not "no data".
	for _, via := range firstSeenVias {
		m.firstSight.WithLabelValues(via)
	}
	for vec, values := range map[*prometheus.CounterVec][]string{
		m.ensure:     {"present", "mirrored", "not_found", "rate_limited", "prime_unavailable", "error", "refused"},
		m.jobsSweeps: {"ok", "rate_limited", "prime_unavailable", "stopped"},
		m.jobsSwept:  {"unchanged", "updated", "first_sight", "failed"},
	} {
		for _, v := range values {
			vec.WithLabelValues(v)
		}
	}
	return m, nil
}

// firstSeenVias are the paths primeflow_jobs_first_seen_total counts.
var firstSeenVias = []string{store.ViaWebhook, store.ViaEmail, store.ViaBackstop, store.ViaAppointmentSweep, viaUnknown}

// viaUnknown counts a first sight whose caller named no path.
const viaUnknown = "unknown"

// firstSeen is the first-sight counter of a path.
func (m *collectors) firstSeen(via string) prometheus.Counter {
	if !slices.Contains(firstSeenVias, via) {
		via = viaUnknown
	}
	return m.firstSight.WithLabelValues(via)
}
