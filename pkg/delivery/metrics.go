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
	// that sends nothing (NotSender) logged or recorded instead; Failed those given up on; Retries the failed
	// sends that will be tried again.
	Sent, Logged, Failed, Retries prometheus.Counter
	// Handoff is the time from a row being queued to its first send.
	Handoff prometheus.Histogram
	// Queue describes the gauge of the queue's rows by state (one label,
	// "state"), read from the queue at scrape time, every state served.
	Queue *prometheus.Desc
}

// register registers c's collectors with reg, taking those registered
// before under the same names.
func (c *Collectors) register(reg prometheus.Registerer, q queueCounter) error {
	return errors.Join(metrics.Register(reg, &c.Sent), metrics.Register(reg, &c.Logged), metrics.Register(reg, &c.Failed),
		metrics.Register(reg, &c.Retries), metrics.Register(reg, &c.Handoff), metrics.Replace(reg, queueCollector{q: q, desc: c.Queue}))
}

// queueCounter counts a queue's rows by state.
type queueCounter interface {
	Count(ctx context.Context) (map[store.SendState]int, error)
}

// queueCollector reports a queue's rows by state at scrape time.
type queueCollector struct {
	q    queueCounter
	desc *prometheus.Desc
}

func (c queueCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c queueCollector) Collect(ch chan<- prometheus.Metric) {
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

// errNoCollectors refuses a drainer whose kind declared no metrics.
var errNoCollectors = fmt.Errorf("delivery: the kind's Collectors are not all set")

func (c *Collectors) complete() bool {
	return c.Sent != nil && c.Logged != nil && c.Failed != nil && c.Retries != nil && c.Handoff != nil && c.Queue != nil
}
