package jobmirror

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ethosbuilding/primeflow/pkg/metrics"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/prometheus/client_golang/prometheus"
)

type collectors struct {
	firstSight  *prometheus.CounterVec
	wipFailures prometheus.Counter
	ensure      *prometheus.CounterVec
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
			Help: "Ensure-job requests (§4.3) by result: present, mirrored, not_found, rate_limited, error.",
		}, []string{"result"}),
	}
	if err := errors.Join(metrics.Register(reg, &m.firstSight), metrics.Register(reg, &m.wipFailures), metrics.Register(reg, &m.ensure)); err != nil {
		return nil, fmt.Errorf("job-mirror metrics: %w", err)
	}
	// Exported from the start, at 0: the dashboard reads 0, not "no data".
	for _, via := range firstSeenVias {
		m.firstSight.WithLabelValues(via)
	}
	for _, r := range []string{"present", "mirrored", "not_found", "rate_limited", "error"} {
		m.ensure.WithLabelValues(r)
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
