package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/metrics"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/prometheus/client_golang/prometheus"
)

type collectors struct {
	sent, logged, failed, retries prometheus.Counter
	handoff                       prometheus.Histogram
}

// newMetrics registers a kind's metrics: <Metric>_sent_total,
// _logged_total, _failed_total, _send_retries_total, _handoff_seconds, and
// QueueMetric{state}, read from the queue at scrape time with every state
// served, 0 when none is in it.
func newMetrics[M any](reg prometheus.Registerer, k Kind, q Queue[M]) (*collectors, error) {
	m := &collectors{
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: k.Metric + "_sent_total",
			Help: k.Things + " the endpoint accepted.",
		}),
		logged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: k.Metric + "_logged_total",
			Help: k.Things + " logged instead of sent: no " + k.Prefix + "SEND_URL (bin/primeflow on the Prime simulator).",
		}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: k.Metric + "_failed_total",
			Help: k.Things + " given up on (attempts used up or refused for good); they stay Failed in " + k.Table + ".",
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: k.Metric + "_send_retries_total",
			Help: "Failed sends of " + k.Things + " that will be tried again.",
		}),
		handoff: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    k.Metric + "_handoff_seconds",
			Help:    "Time from one of the " + k.Things + " being queued to its first hand-off to the sender.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
		}),
	}
	if err := errors.Join(metrics.Register(reg, &m.sent), metrics.Register(reg, &m.logged), metrics.Register(reg, &m.failed),
		metrics.Register(reg, &m.retries), metrics.Register(reg, &m.handoff), metrics.Replace(reg, newQueueCollector(k, q))); err != nil {
		return nil, fmt.Errorf("%s metrics: %w", k.Name, err)
	}
	return m, nil
}

// queueCollector reports a queue's rows by state at scrape time.
type queueCollector[M any] struct {
	q    Queue[M]
	desc *prometheus.Desc
}

func newQueueCollector[M any](k Kind, q Queue[M]) queueCollector[M] {
	return queueCollector[M]{q: q, desc: prometheus.NewDesc(k.QueueMetric,
		k.Things+" in "+k.Table+" by state: Queued, Sending, Sent, Failed (Failed waits for a person).",
		[]string{"state"}, nil)}
}

func (c queueCollector[M]) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c queueCollector[M]) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.q.Count(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for _, state := range store.SendStates() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[state]), string(state))
	}
}
