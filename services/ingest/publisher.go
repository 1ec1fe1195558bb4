package ingest

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/outbox"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// logStore is what ingest needs of the store.
type logStore interface {
	InTx(ctx context.Context, fn func(store.Store) error) error
	GetWebhookLogUnpublished(ctx context.Context, afterID int64, receivedBefore time.Time, limit int) ([]store.WebhookLogRow, error)
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
	metrics *collectors
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
		p.metrics.publishFailures.WithLabelValues(outbox.ReasonDisconnected).Inc()
		return
	}
	fut, err := p.js.PublishMsgAsync(events.NewWebhookMsg(pub.id, pub.replayCount, pub.action, pub.payload))
	if err != nil {
		p.metrics.publishFailures.WithLabelValues(outbox.ReasonError).Inc()
		p.log.Warn("publish failed; the relay will retry", "id", pub.id, "err", err)
		return
	}
	select {
	case p.futures <- pendingAck{id: pub.id, fut: fut}:
	default:
		// Too many acks outstanding to track: the row stays unrecorded and
		// the relay publishes it again under the same Nats-Msg-Id, which
		// JetStream drops if this publish made it.
		p.metrics.publishFailures.WithLabelValues(reasonQueueFull).Inc()
	}
}

// collect waits for acks in publish order until ctx ends, and then for the
// acks of the publishes already sent, so that record writes those rows down
// before ingest stops: the relay would publish them again, and once
// JetStream's duplicate window has passed that is a second message.
// Ingest's HTTP server has drained by then, so no publish follows.
func (p *publisher) collect(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			p.drain(nil)
			return
		case pa := <-p.futures:
			select {
			case <-pa.fut.Ok():
				p.ack(pa.id)
			case err := <-pa.fut.Err():
				p.notAcked(pa.id, err)
			case <-ctx.Done():
				p.drain(&pa)
				return
			}
		}
	}
}

// drain awaits first (when not nil) and the acks still queued, for at most
// one publish timeout: every one of them is due by then.
func (p *publisher) drain(first *pendingAck) {
	limit := time.NewTimer(p.timeout)
	defer limit.Stop()
	pa := first
	for {
		if pa == nil {
			select {
			case next := <-p.futures:
				pa = &next
			default:
				return
			}
		}
		select {
		case <-pa.fut.Ok():
			p.ack(pa.id)
		case err := <-pa.fut.Err():
			p.notAcked(pa.id, err)
		case <-limit.C:
			return
		}
		pa = nil
	}
}

func (p *publisher) ack(id int64) {
	p.mu.Lock()
	p.acked = append(p.acked, id)
	p.mu.Unlock()
}

func (p *publisher) notAcked(id int64, err error) {
	p.metrics.publishFailures.WithLabelValues(outbox.ReasonError).Inc()
	p.log.Warn("publish not acknowledged; the relay will retry", "id", id, "err", err)
}

// record writes down, every interval until ctx ends, the rows JetStream
// acknowledged, in one statement, and once more when collected closes (the
// acks collect awaited on the way down). What it fails to record the relay
// publishes again under the same Nats-Msg-Id, which JetStream drops within
// its duplicate window.
func (p *publisher) record(ctx context.Context, collected <-chan struct{}, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			<-collected
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

// publish sends one row to JetStream and waits for its ack (the relay, which
// counts and logs a failure).
func (p *publisher) publish(ctx context.Context, pub publication) error {
	if !p.nc.IsConnected() {
		return outbox.ErrDisconnected
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	_, err := p.js.PublishMsg(ctx, events.NewWebhookMsg(pub.id, pub.replayCount, pub.action, pub.payload))
	return err
}
