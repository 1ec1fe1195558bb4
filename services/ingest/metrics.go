package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/metrics"
	"github.com/ethosbuilding/primeflow/pkg/outbox"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/prometheus/client_golang/prometheus"
)

// Webhook outcomes, the values of the outcome label.
const (
	outcomeStored       = "stored"
	outcomeUnauthorized = "unauthorized"
	outcomeTooLarge     = "too_large"
	outcomeStoreError   = "store_error"
	outcomeBadRequest   = "bad_request"
)

// reasonQueueFull is ingest's own reason label value of
// primeflow_webhook_publish_failures_total: too many acks outstanding to
// track one more. The others are outbox.FailureReason's: disconnected,
// error (the publish right after the commit or its ack failed, or the
// relay's found JetStream not answering) and rejected (the relay's publish
// of a row failed while NATS was up, one over the server's max_payload, say:
// the relay skips the row, goes on with the next ones and tries it again
// every run). The row stays unpublished in each case, and the relay
// publishes it later.
const reasonQueueFull = "queue_full"

type collectors struct {
	webhooks        *prometheus.CounterVec
	insertSeconds   prometheus.Histogram
	publishFailures *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, st logStore) (*collectors, error) {
	m := &collectors{
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_webhooks_total",
			Help: "Webhooks received, by eventAction (the actions a stage handles; _none, _other, and _unread for a webhook refused before its body was read) and outcome.",
		}, []string{"action", "outcome"}),
		insertSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "primeflow_webhook_insert_seconds",
			Help:    "Time from a webhook's arrival to its row's durable commit.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		publishFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_webhook_publish_failures_total",
			Help: "Publishes to JetStream that failed after commit (the relay publishes those rows later), by reason: disconnected, error, queue_full, rejected (a row the relay skips, tried again every run).",
		}, []string{"reason"}),
	}
	if err := errors.Join(metrics.Register(reg, &m.webhooks), metrics.Register(reg, &m.insertSeconds),
		metrics.Register(reg, &m.publishFailures), metrics.Replace(reg, &logCollector{store: st})); err != nil {
		return nil, fmt.Errorf("ingest metrics: %w", err)
	}
	// Every reason is exported from the start, at 0, so that a rate or an
	// alert on it reads 0, not "no data".
	for _, r := range []string{outbox.ReasonDisconnected, outbox.ReasonError, reasonQueueFull, outbox.ReasonRejected} {
		m.publishFailures.WithLabelValues(r)
	}
	for _, o := range []string{outcomeUnauthorized, outcomeTooLarge, outcomeBadRequest} {
		m.webhooks.WithLabelValues(events.LabelUnread, o)
	}
	return m, nil
}

// logCollector reports the log's queue depths at scrape time.
type logCollector struct{ store logStore }

var logRowsDesc = prometheus.NewDesc("primeflow_webhooklog_rows",
	"Rows of ethPrimeWebhookLog by state: unprocessed (queued, under the attempt cap), capped (failed 5 times, waiting for a person), unpublished (waiting for the relay).",
	[]string{"state"}, nil)

func (c *logCollector) Describe(ch chan<- *prometheus.Desc) { ch <- logRowsDesc }

func (c *logCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for state, f := range map[string]store.LogFilter{
		"unprocessed": {State: store.Unprocessed},
		"capped":      {State: store.Capped},
		"unpublished": {Unpublished: true},
	} {
		n, err := c.store.CountWebhookLog(ctx, f)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(logRowsDesc, err)
			continue
		}
		ch <- prometheus.MustNewConstMetric(logRowsDesc, prometheus.GaugeValue, float64(n), state)
	}
}
