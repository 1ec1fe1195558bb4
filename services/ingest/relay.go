package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/outbox"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// relay publishes rows that were never published (NATS was down, the
// publisher's queue was full) and rows reset for replay, and records as
// published the rows whose message was delivered though its ack was never
// recorded. It replaces the spec's 2-minute tick (§3.1): a row waits for the
// relay only when the publish right after its commit failed.
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
	// Published rows went out to JetStream.
	Published int `json:"published"`
	// AlreadyDelivered rows were recorded as published without a publish:
	// their message had reached the resolver, only its ack was never recorded.
	AlreadyDelivered int `json:"alreadyDelivered"`
	// Failed rows could not be published: rows the run skipped (NATS refused
	// them) and the row at which a lost connection stopped the run.
	Failed int `json:"failed"`
	// Remaining rows are unpublished after the run: the failed ones, those a
	// stopped run did not reach and those younger than the grace.
	Remaining  int       `json:"remaining"`
	StartedUTC time.Time `json:"startedUTC"`
	DurationMS int64     `json:"durationMs"`
	Error      string    `json:"error,omitempty"`
}

// errRelayBusy: a relay run is already under way.
var errRelayBusy = errors.New("a relay run is already under way")

// runOnce publishes every row waiting for the relay, page by page. A row
// NATS refuses is skipped until the next run, so it holds back no other
// row; the run stops early only when NATS itself is unavailable (the next
// run, or NATS's return, goes on). Like the spec's processing endpoint
// (§3.1), the run fails only for what is not a row's own failure.
func (r *relay) runOnce(ctx context.Context) (RelaySummary, error) {
	if !r.mu.TryLock() {
		return RelaySummary{}, errRelayBusy
	}
	defer r.mu.Unlock()
	sum := RelaySummary{StartedUTC: time.Now().UTC()}
	defer func() { sum.DurationMS = time.Since(sum.StartedUTC).Milliseconds() }()
	var failed []int64
	err := r.publishAll(ctx, &sum, &failed)
	if n, cerr := r.store.CountWebhookLog(ctx, store.LogFilter{Unpublished: true}); cerr == nil {
		sum.Remaining = n
	} else {
		err = errors.Join(err, cerr)
	}
	if err != nil {
		sum.Error = err.Error()
	}
	switch {
	case sum.Failed > 0:
		// Logged every run while a row stays unpublishable.
		r.log.Warn("relay run: rows not published stay unpublished for the next run",
			"published", sum.Published, "alreadyDelivered", sum.AlreadyDelivered, "failed", sum.Failed,
			"failedIds", failed, "remaining", sum.Remaining)
	case sum.Published > 0 || sum.AlreadyDelivered > 0:
		r.log.Info("relay run", "published", sum.Published, "alreadyDelivered", sum.AlreadyDelivered, "remaining", sum.Remaining)
	}
	return sum, err
}

// maxLoggedIDs bounds the failed row ids a run's log line lists.
const maxLoggedIDs = 20

func (r *relay) publishAll(ctx context.Context, sum *RelaySummary, failed *[]int64) error {
	var after int64 // the pages go on past the rows skipped
	for {
		rows, err := r.store.GetWebhookLogUnpublished(ctx, after, time.Now().Add(-r.grace), r.page)
		if err != nil {
			return err
		}
		var done []int64
		delivered := 0
		var stop error
		for _, row := range rows {
			after = row.ID
			if wasDelivered(row) {
				done = append(done, row.ID)
				delivered++
				continue
			}
			err := r.pub.publish(ctx, publication{id: row.ID, replayCount: row.ReplayCount, action: row.EventAction, payload: row.Payload})
			if err == nil {
				done = append(done, row.ID)
				sum.Published++
				continue
			}
			sum.Failed++
			if len(*failed) < maxLoggedIDs {
				*failed = append(*failed, row.ID)
			}
			if stop = r.failure(ctx, row.ID, err); stop != nil {
				break
			}
		}
		if err := r.store.SetWebhookLogPublished(ctx, done, time.Now()); err != nil {
			return err
		}
		sum.AlreadyDelivered += delivered
		if stop != nil {
			return stop
		}
		if len(rows) < r.page {
			return nil
		}
	}
}

// wasDelivered reports whether a row's message evidently reached the
// resolver although its publish was never recorded (ingest stopped between
// the ack and its bookkeeping, or the ack was lost): only the stage that
// handles the message stamps processedUTC or counts a failed attempt (§3),
// and a reset for replay clears both along with publishedUTC. Publishing it
// again once JetStream's duplicate window has passed would run the event a
// second time.
func wasDelivered(row store.WebhookLogRow) bool {
	return row.Processed() || row.ProcessAttempts > 0
}

// failure counts and logs a relay publish that failed, and returns the error
// that stops the run when the failure is NATS's rather than the row's (every
// later row would fail the same way), or nil to skip the row: it stays
// unpublished and the next run tries it again.
func (r *relay) failure(ctx context.Context, id int64, err error) error {
	if ctx.Err() != nil {
		return err // shutting down, or the caller of the process endpoint left
	}
	reason := outbox.FailureReason(err)
	if !r.pub.nc.IsConnected() {
		reason = outbox.ReasonDisconnected
	}
	r.pub.metrics.publishFailures.WithLabelValues(reason).Inc()
	switch reason {
	case outbox.ReasonRejected:
		r.log.Warn("relay: row not published, skipped until the next run", "id", id, "err", err)
		return nil
	case outbox.ReasonDisconnected:
		if !errors.Is(err, outbox.ErrDisconnected) {
			err = fmt.Errorf("%w: %w", outbox.ErrDisconnected, err)
		}
	}
	// NATS is down, or connected but JetStream does not answer: each later
	// row would wait out its own publish timeout.
	return fmt.Errorf("publish row %d: %w", id, err)
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
