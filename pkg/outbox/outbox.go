// Package outbox publishes the messages a stage wrote to the transactional
// outbox (store.Outbox): right after the commit, and, for whatever that
// missed, from a sweeper. Each message's Nats-Msg-Id makes a second publish
// harmless, so several sweepers may run at once.
package outbox

import (
	"context"
	"log/slog"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Store is what the outbox needs of the store.
type Store interface {
	GetOutboxUnpublished(ctx context.Context, createdBefore time.Time, limit int) ([]store.OutboxMessage, error)
	SetOutboxPublished(ctx context.Context, ids []int64, at time.Time) error
	PurgeOutbox(ctx context.Context, publishedBefore time.Time) (int, error)
}

// Publisher publishes outbox messages.
type Publisher struct {
	JS    jetstream.JetStream
	Store Store
	Log   *slog.Logger
	// Grace leaves messages younger than this to the stage that wrote them
	// (default 5s).
	Grace time.Duration
	// Keep is how long published messages stay in the table (default 7 days).
	Keep time.Duration
}

// Message builds an outbox message with a JSON body.
func Message(subject, msgID string, data []byte) store.OutboxMessage {
	return store.OutboxMessage{Subject: subject, MsgID: msgID, Data: data}
}

// Send publishes messages that were just committed and records them. A
// message it cannot publish stays for the sweeper; Send reports the first
// error for the caller's logs but the hand-off is already durable.
func (p *Publisher) Send(ctx context.Context, msgs []store.OutboxMessage) error {
	var done []int64
	var firstErr error
	for _, m := range msgs {
		if err := p.publish(ctx, m); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		done = append(done, m.ID)
	}
	if err := p.Store.SetOutboxPublished(ctx, done, time.Now()); err != nil && firstErr == nil {
		firstErr = err
	}
	return firstErr
}

func (p *Publisher) publish(ctx context.Context, m store.OutboxMessage) error {
	msg := nats.NewMsg(m.Subject)
	msg.Data = m.Data
	for k, v := range m.Header {
		msg.Header.Set(k, v)
	}
	msg.Header.Set(nats.MsgIdHdr, m.MsgID)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := p.JS.PublishMsg(ctx, msg)
	return err
}

// Run sweeps the outbox every interval until ctx ends: it publishes what the
// stages could not and purges what was published long ago.
func (p *Publisher) Run(ctx context.Context, interval time.Duration) error {
	grace, keep := p.Grace, p.Keep
	if grace <= 0 {
		grace = 5 * time.Second
	}
	if keep <= 0 {
		keep = 7 * 24 * time.Hour
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if err := p.Sweep(ctx, grace); err != nil && ctx.Err() == nil {
			p.Log.Warn("outbox sweep", "err", err)
		}
		if _, err := p.Store.PurgeOutbox(ctx, time.Now().Add(-keep)); err != nil && ctx.Err() == nil {
			p.Log.Warn("outbox purge", "err", err)
		}
	}
}

// Sweep publishes every message older than grace that is still unpublished.
func (p *Publisher) Sweep(ctx context.Context, grace time.Duration) error {
	for {
		msgs, err := p.Store.GetOutboxUnpublished(ctx, time.Now().Add(-grace), 200)
		if err != nil || len(msgs) == 0 {
			return err
		}
		if err := p.Send(ctx, msgs); err != nil {
			return err
		}
		p.Log.Info("outbox sweep published", "messages", len(msgs))
		if len(msgs) < 200 {
			return nil
		}
	}
}
