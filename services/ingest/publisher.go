package ingest

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// logStore is what ingest needs of the store.
type logStore interface {
	InsertWebhookLogs(ctx context.Context, rows []store.NewWebhookLogRow) ([]int64, error)
	GetWebhookLogUnpublished(ctx context.Context, receivedBefore time.Time, limit int) ([]store.WebhookLogRow, error)
	SetWebhookLogPublished(ctx context.Context, ids []int64, at time.Time) error
	CountWebhookLog(ctx context.Context, f store.LogFilter) (int, error)
}

// publication is one stored webhook to publish.
type publication struct {
	id          int64
	replayCount int
	action      string
	payload     string
}

// publisher publishes rows right after their commit, off the request path:
// the 200 never waits for NATS and never fails because of it. What it cannot
// publish (NATS down, its queue full) the relay publishes later.
type publisher struct {
	js      jetstream.JetStream
	nc      *nats.Conn
	store   logStore
	log     *slog.Logger
	metrics *metrics
	queue   chan publication
	timeout time.Duration

	mu        sync.Mutex
	published []int64 // published, not yet recorded
}

// enqueue hands a row to the publisher without ever blocking.
func (p *publisher) enqueue(pub publication) {
	select {
	case p.queue <- pub:
	default:
		p.metrics.publishFailures.WithLabelValues("queue_full").Inc()
	}
}

// run publishes queued rows with workers goroutines and records what was
// published every flushEvery, until ctx ends.
func (p *publisher) run(ctx context.Context, workers int, flushEvery time.Duration) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case pub := <-p.queue:
					if p.publish(ctx, pub) == nil {
						p.mu.Lock()
						p.published = append(p.published, pub.id)
						p.mu.Unlock()
					}
				}
			}
		})
	}
	tick := time.NewTicker(flushEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			p.flush(context.WithoutCancel(ctx))
			return
		case <-tick.C:
			p.flush(ctx)
		}
	}
}

// publish sends one row to JetStream and waits for its ack.
func (p *publisher) publish(ctx context.Context, pub publication) error {
	if !p.nc.IsConnected() {
		p.metrics.publishFailures.WithLabelValues("disconnected").Inc()
		return errDisconnected
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	_, err := p.js.PublishMsg(ctx, events.NewWebhookMsg(pub.id, pub.replayCount, pub.action, pub.payload))
	if err != nil {
		p.metrics.publishFailures.WithLabelValues("error").Inc()
		p.log.Warn("publish failed; the relay will retry", "id", pub.id, "err", err)
		return err
	}
	return nil
}

var errDisconnected = errors.New("not connected to NATS")

// flush records the published rows; on failure they stay unrecorded and the
// relay publishes them again under the same Nats-Msg-Id, which JetStream drops.
func (p *publisher) flush(ctx context.Context) {
	p.mu.Lock()
	ids := p.published
	p.published = nil
	p.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	if err := p.store.SetWebhookLogPublished(ctx, ids, time.Now()); err != nil {
		p.log.Warn("recording published rows failed; the relay will republish them", "rows", len(ids), "err", err)
	}
}
