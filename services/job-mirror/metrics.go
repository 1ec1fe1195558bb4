package jobmirror

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	firstSight  *prometheus.CounterVec
	wipFailures prometheus.Counter
	ensure      *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		firstSight: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_jobmirror_first_sight_total",
			Help: "Jobs seen for the first time, whose new-job pipeline job-mirror handed off, by how they arrived: change-job-status or ensure.",
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
	var err error
	if m.firstSight, err = register(reg, m.firstSight); err != nil {
		return nil, err
	}
	if m.wipFailures, err = register(reg, m.wipFailures); err != nil {
		return nil, err
	}
	if m.ensure, err = register(reg, m.ensure); err != nil {
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
		return c, fmt.Errorf("job-mirror metrics: %w", err)
	}
	return c, nil
}
