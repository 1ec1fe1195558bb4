package ingest

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
)

// relay publishes rows that were never published (NATS was down, the
// publisher's queue was full) and rows reset for replay. It replaces the
// spec's 2-minute tick (§3.1): a row waits for the relay only when the
// publish right after its commit failed.
type relay struct {
	pub   *publisher
	store logStore
	log   *slog.Logger
	// grace leaves the newest rows to the publisher that has them in hand.
	grace time.Duration
	page  int

	mu sync.Mutex // one run at a time
}

// RelaySummary is what one relay run did.
type RelaySummary struct {
	Published  int       `json:"published"`
	Failed     int       `json:"failed"`
	Remaining  int       `json:"remaining"`
	StartedUTC time.Time `json:"startedUTC"`
	DurationMS int64     `json:"durationMs"`
	Error      string    `json:"error,omitempty"`
}

// errRelayBusy: a relay run is already under way.
var errRelayBusy = errors.New("a relay run is already under way")

// runOnce publishes every row waiting for the relay, page by page, stopping
// at the first failed publish (NATS is down: the next run goes on).
func (r *relay) runOnce(ctx context.Context) (RelaySummary, error) {
	if !r.mu.TryLock() {
		return RelaySummary{}, errRelayBusy
	}
	defer r.mu.Unlock()
	sum := RelaySummary{StartedUTC: time.Now().UTC()}
	defer func() { sum.DurationMS = time.Since(sum.StartedUTC).Milliseconds() }()
	err := r.publishAll(ctx, &sum)
	if n, cerr := r.store.CountWebhookLog(ctx, store.LogFilter{Unpublished: true}); cerr == nil {
		sum.Remaining = n
	} else {
		err = errors.Join(err, cerr)
	}
	if err != nil {
		sum.Error = err.Error()
	}
	if sum.Published > 0 || sum.Failed > 0 {
		r.log.Info("relay run", "published", sum.Published, "failed", sum.Failed, "remaining", sum.Remaining)
	}
	return sum, err
}

func (r *relay) publishAll(ctx context.Context, sum *RelaySummary) error {
	for {
		rows, err := r.store.GetWebhookLogUnpublished(ctx, time.Now().Add(-r.grace), r.page)
		if err != nil {
			return err
		}
		var done []int64
		var pubErr error
		for _, row := range rows {
			if pubErr = r.pub.publish(ctx, publication{id: row.ID, replayCount: row.ReplayCount, action: row.EventAction, payload: row.Payload}); pubErr != nil {
				sum.Failed++
				break
			}
			done = append(done, row.ID)
		}
		sum.Published += len(done)
		if err := r.store.SetWebhookLogPublished(ctx, done, time.Now()); err != nil {
			return err
		}
		if pubErr != nil {
			return pubErr
		}
		if len(rows) < r.page {
			return nil
		}
	}
}

// run runs the relay every interval and whenever kick fires (NATS came back),
// until ctx ends.
func (r *relay) run(ctx context.Context, interval time.Duration, kick <-chan struct{}) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-kick:
		}
		if _, err := r.runOnce(ctx); err != nil && !errors.Is(err, errRelayBusy) && ctx.Err() == nil {
			r.log.Warn("relay run stopped early", "err", err)
		}
	}
}
