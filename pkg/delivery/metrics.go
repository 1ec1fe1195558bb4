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

// Collectors are a kind's metrics, declared by the kind's package (the
// names literal: compose's tests read them from the code) and registered by
// NewDrainer.
type Collectors struct {
	// Sent counts the rows the endpoint accepted; Logged those a sender
	// that sends nothing (NotSender) logged or recorded instead; Failed
	// those given up on; Retries the failed sends that will be tried again;
	// Waits the sends deferred, no attempt counted (the endpoint not taking
	// posts, the message not ready).
	Sent, Logged, Failed, Retries, Waits prometheus.Counter
	// Handoff is the time from a row being queued to its first send that
	// counted an attempt: the waits before it are in it.
	Handoff prometheus.Histogram
	// Queue describes the gauge of the queue's rows by state (one label,
	// "state"), read from the queue at scrape time, every state served.
	Queue *prometheus.Desc
	// Oldest describes the gauge of how long the oldest row not sent yet
	// (Queued or Sending) has waited since it was queued, in seconds (0
	// when none waits), read from the queue at scrape time: a wait that
	// lasts is seen there, though it counts no attempt.
	Oldest *prometheus.Desc
}

// register registers c's collectors with reg, taking those registered
// before under the same names.
func (c *Collectors) register(reg prometheus.Registerer, q queueReader) error {
	return errors.Join(metrics.Register(reg, &c.Sent), metrics.Register(reg, &c.Logged), metrics.Register(reg, &c.Failed),
		metrics.Register(reg, &c.Retries), metrics.Register(reg, &c.Waits), metrics.Register(reg, &c.Handoff),
		metrics.Replace(reg, queueCollector{q: q, desc: c.Queue, oldest: c.Oldest}))
}

// queueReader is what the scrape reads of a queue.
type queueReader interface {
	Count(ctx context.Context) (map[store.SendState]int, error)
	Oldest(ctx context.Context) (queued time.Time, ok bool, err error)
}

// queueCollector reports a queue's rows by state, and the oldest's wait, at
// scrape time.
type queueCollector struct {
	q            queueReader
	desc, oldest *prometheus.Desc
}

func (c queueCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc; ch <- c.oldest }

func (c queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if counts, err := c.q.Count(ctx); err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
	} else {
		for _, state := range store.SendStates() {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[state]), string(state))
		}
	}
	queued, ok, err := c.q.Oldest(ctx)
	switch {
	case err != nil:
		ch <- prometheus.NewInvalidMetric(c.oldest, err)
	case !ok:
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, 0)
	default:
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, max(time.Since(queued).Seconds(), 0))
	}
}

// errNoCollectors refuses a drainer whose kind declared no metrics.
var errNoCollectors = fmt.Errorf("delivery: the kind's Collectors are not all set")

func (c *Collectors) complete() bool {
	return c.Sent != nil && c.Logged != nil && c.Failed != nil && c.Retries != nil && c.Waits != nil && c.Handoff != nil &&
		c.Queue != nil && c.Oldest != nil
}
