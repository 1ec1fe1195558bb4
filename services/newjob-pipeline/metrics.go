package newjobpipeline

import (
	"fmt"

	"github.com/ethosbuilding/primeflow/pkg/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

type collectors struct {
	runs *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*collectors, error) {
	runs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "primeflow_newjob_pipeline_runs_total",
		Help: "New-job pipeline runs (§6) by result: completed, failed (retried with backoff; see primectl firstseen --failed), skipped (already completed).",
	}, []string{"result"})
	if err := metrics.Register(reg, &runs); err != nil {
		return nil, fmt.Errorf("newjob-pipeline metrics: %w", err)
	}
	// Exported from the start, at 0: an alert on failed runs reads 0, not
	// "no data", and sees the first one.
	for _, r := range []string{"completed", "failed", "skipped"} {
		runs.WithLabelValues(r)
	}
	return &collectors{runs: runs}, nil
}
