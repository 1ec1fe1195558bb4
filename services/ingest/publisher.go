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
	InTx(ctx context.Context, fn func(store.Store) error) error
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

// publisher publishes rows right after their commit, asynchronously: the
// 200 never waits for NATS and never fails because of it. What it cannot
// publish (NATS down, too many acks outstanding) the relay publishes later.
type publisher struct {
	js      jetstream.JetStream // with an async publish timeout
	nc      *nats.Conn
	store   logStore
	log     *slog.Logger
	metrics *metrics
	timeout time.Duration
	futures chan pendingAck

	mu    sync.Mutex
	acked []int64 // acknowledged, not yet recorded
}

type pendingAck struct {
	id  int64
	fut jetstream.PubAckFuture
}

// publishAsync sends a row to JetStream without waiting for its ack.
func (p *publisher) publishAsync(pub publication) {
	if !p.nc.IsConnected() {
		p.metrics.publishFailures.WithLabelValues("disconnected").Inc()
		return
	}
	fut, err := p.js.PublishMsgAsync(events.NewWebhookMsg(pub.id, pub.replayCount, pub.action, pub.payload))
	if err != nil {
		p.metrics.publishFailures.WithLabelValues("error").Inc()
		p.log.Warn("publish failed; the relay will retry", "id", pub.id, "err", err)
		return
	}
	select {
	case p.futures <- pendingAck{id: pub.id, fut: fut}:
	default:
		// Too many acks outstanding to track: the row stays unrecorded and
		// the relay publishes it again under the same Nats-Msg-Id, which
		// JetStream drops if this publish made it.
		p.metrics.publishFailures.WithLabelValues("queue_full").Inc()
	}
}

// collect waits for acks in publish order until ctx ends.
func (p *publisher) collect(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case pa := <-p.futures:
			select {
			case <-pa.fut.Ok():
				p.mu.Lock()
				p.acked = append(p.acked, pa.id)
				p.mu.Unlock()
			case err := <-pa.fut.Err():
				p.metrics.publishFailures.WithLabelValues("error").Inc()
				p.log.Warn("publish not acknowledged; the relay will retry", "id", pa.id, "err", err)
			case <-ctx.Done():
				return
			}
		}
	}
}

// record writes down, every interval until ctx ends, the rows JetStream
// acknowledged, in one statement. What it fails to record the relay
// publishes again under the same Nats-Msg-Id, which JetStream drops.
func (p *publisher) record(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			p.flush(context.WithoutCancel(ctx))
			return
		case <-tick.C:
			p.flush(ctx)
		}
	}
}

func (p *publisher) flush(ctx context.Context) {
	p.mu.Lock()
	ids := p.acked
	p.acked = nil
	p.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	if err := p.store.SetWebhookLogPublished(ctx, ids, time.Now()); err != nil {
		p.log.Warn("recording published rows failed; the relay will republish them", "rows", len(ids), "err", err)
	}
}

// publish sends one row to JetStream and waits for its ack (the relay).
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
