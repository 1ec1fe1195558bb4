package resolver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/consume"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/outbox"
	"github.com/ethosbuilding/primeflow/pkg/pipeline"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// errLaneTimeout: no stage finished the row within LaneWait.
var errLaneTimeout = errors.New("no stage finished the row in time")

// handle is one event in its job's lane. It returns only when the event's
// row is settled for now: processed, failed (redelivered after a backoff,
// or dropped at the attempt cap), or handed back after a lane timeout.
func (r *Resolver) handle(ctx context.Context, msg jetstream.Msg) error {
	logID, err := events.LogID(msg.Headers())
	if err != nil {
		return consume.Drop(fmt.Errorf("%s: %w", msg.Subject(), err))
	}
	md, err := msg.Metadata()
	if err != nil {
		return consume.Drop(fmt.Errorf("%s: %w", msg.Subject(), err))
	}
	row, err := r.store.GetWebhookLog(ctx, logID)
	if errors.Is(err, store.ErrNotFound) {
		return consume.Drop(fmt.Errorf("message for log row %d, which is not in ethPrimeWebhookLog", logID))
	}
	if err != nil {
		return err // the database: redelivered with backoff
	}
	action := events.ActionLabel(row.EventAction)
	if row.Processed() {
		gen, fromIngest := events.WebhookMsgGeneration(msg.Headers().Get(nats.MsgIdHdr), logID)
		switch {
		case fromIngest && md.NumDelivered > 1, !fromIngest && requeuedBy(row, md):
			// A redelivery of an event already finished (its ack was
			// lost), or of an operator's replay that queued the row again
			// (stamping it published at the message's time, requeue) and
			// has run. A replay whose first delivery failed before that
			// finds the row not stamped so, and queues it now.
			r.metrics.events.WithLabelValues(action, "skipped").Inc()
			return nil
		case fromIngest && gen <= row.ReplayCount:
			// A second copy of ingest's own publication, stored as a new
			// message: the relay republished the row after the stream's
			// duplicate window. The event was acted on already; acting on
			// it again is what §2 and §3 keep from happening.
			r.log.Info("ingest's copy of a processed row: skipped as a duplicate", "logId", logID, "action", row.EventAction,
				"msgId", msg.Headers().Get(nats.MsgIdHdr), "replayCount", row.ReplayCount)
			r.metrics.events.WithLabelValues(action, "duplicate").Inc()
			return nil
		}
		// An operator's replay (the nats CLI: docs/operations.md,
		// "Replaying events"): the row is queued again first, so that a
		// failed attempt is retried, counted against the cap and seen like
		// any row's (§3, §9).
		requeued, err := r.requeue(ctx, row.ID, md)
		if err != nil {
			return err
		}
		if row, err = r.store.GetWebhookLog(ctx, logID); err != nil {
			return err
		}
		if requeued {
			r.log.Info("operator replay: log row queued again", "logId", logID, "action", row.EventAction, "replayCount", row.ReplayCount)
			r.metrics.events.WithLabelValues(action, "replayed").Inc()
		}
	}
	switch {
	case row.Processed():
		// Finished again while it was being queued again (a replay of it
		// elsewhere): nothing is left to do.
		r.metrics.events.WithLabelValues(action, "skipped").Inc()
		return nil
	case row.Capped():
		r.metrics.events.WithLabelValues(action, "capped").Inc()
		return consume.Drop(fmt.Errorf("log row %d failed %d attempts: it stays unprocessed; replay it with primectl", logID, row.ProcessAttempts))
	}
	start := time.Now()
	for try := 0; ; try++ {
		d, err := r.attempt(ctx, row, md, try)
		if err != nil {
			return err
		}
		switch d.Outcome {
		case events.OutcomeProcessed:
			r.metrics.laneSeconds.Observe(time.Since(start).Seconds())
			if row.ProcessAttempts > 0 || row.ReplayCount > 0 {
				// Said once: the row is processed once, and a retry or a
				// replay that failed said so when it did.
				r.log.Info("event processed, after failed attempts or a replay", "logId", logID, "action", row.EventAction,
					"failedAttempts", row.ProcessAttempts, "replay", row.ReplayCount)
			}
			return nil
		case events.OutcomeFailed:
			if d.Attempts >= store.MaxAttempts {
				r.metrics.events.WithLabelValues(action, "capped").Inc()
				return consume.Drop(fmt.Errorf("log row %d failed its last attempt (%d): %s", logID, d.Attempts, d.Error))
			}
			wait := r.cfg.Backoff.After(d.Attempts)
			r.log.Warn("event failed; it is retried", "logId", logID, "action", row.EventAction, "attempt", d.Attempts, "of", store.MaxAttempts,
				"err", d.Error, "next", wait, "nextAt", time.Now().Add(wait).UTC().Format(time.RFC3339))
			return consume.Retry(errors.New(d.Error), wait)
		case events.OutcomeWait:
			// Prime asked us to slow down, or a service the stage needs
			// did not answer (pipeline.UnavailableError, §9): the lane
			// holds the job's events and tries again after the wait the
			// stage announced; no attempt is counted.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(retry.Wait(time.Duration(d.RetryAfterMS) * time.Millisecond)):
			}
		}
	}
}

// requeue queues a processed row again for an operator's replay, the way
// primectl replay does (§9: not processed, no attempts, replayCount + 1);
// it reports false when the row was no longer processed. The operator's
// message is the row's publication, so the row is stamped published in
// the same transaction: left unpublished, ingest's relay would publish a
// second copy, which could run the row alongside this one (its payload
// puts it in the job's lane, the operator's message in a lane of its own).
func (r *Resolver) requeue(ctx context.Context, id int64, md *jetstream.MsgMetadata) (bool, error) {
	var requeued bool
	err := r.store.InTx(ctx, func(tx store.Store) error {
		n, err := tx.ResetWebhookLog(ctx, store.LogFilter{IDs: []int64{id}, State: store.Processed})
		if requeued = n > 0; err != nil || !requeued {
			return err
		}
		return tx.SetWebhookLogPublished(ctx, []int64{id}, md.Timestamp)
	})
	if err != nil {
		return false, fmt.Errorf("queue log row %d again for its replay: %w", id, err)
	}
	return requeued, nil
}

// requeuedBy reports whether the operator's message md already queued the
// processed row again: requeue stamped it published at the message's time
// (compared to the millisecond, as SQL Server keeps it).
func requeuedBy(row store.WebhookLogRow, md *jetstream.MsgMetadata) bool {
	d := row.PublishedUTC.Sub(md.Timestamp)
	return !row.PublishedUTC.IsZero() && d > -time.Millisecond && d < time.Millisecond
}

// attempt identifies the event and hands it to its stage, or settles it here.
func (r *Resolver) attempt(ctx context.Context, row store.WebhookLogRow, md *jetstream.MsgMetadata, try int) (events.Done, error) {
	action := events.ActionLabel(row.EventAction)
	out, err := r.identify(ctx, row)
	if err == nil && out.finish != "" {
		if err := r.store.SetWebhookLogProcessed(ctx, row.ID, "", out.finish); err != nil {
			return events.Done{}, err
		}
		outcome := "no_handler"
		if out.finish == statusNoIdentifier {
			outcome = "no_identifier"
		}
		r.metrics.events.WithLabelValues(action, outcome).Inc()
		return events.Done{LogID: row.ID, Outcome: events.OutcomeProcessed}, nil
	}
	var d events.Done
	if err == nil {
		d, err = r.dispatch(ctx, row, md, out.ev, try)
		if errors.Is(err, errLaneTimeout) {
			r.metrics.events.WithLabelValues(action, "lane_timeout").Inc()
			wait := r.cfg.Backoff.After(1)
			r.log.Warn("no stage finished the row in time: handing the event back; it is tried again, no attempt counted", "logId", row.ID,
				"action", row.EventAction, "waited", r.cfg.LaneWait, "next", wait, "nextAt", time.Now().Add(wait).UTC().Format(time.RFC3339))
			return events.Done{}, consume.Retry(err, wait)
		}
	}
	switch after := retry.Delay(err); {
	case err == nil:
	case after > 0:
		d = events.Done{LogID: row.ID, Outcome: events.OutcomeWait, RetryAfterMS: after.Milliseconds(), Wait: pipeline.WaitLabel(err)}
	case ctx.Err() != nil:
		return events.Done{}, ctx.Err()
	default:
		if errors.Is(err, pipeline.ErrPayload) {
			r.metrics.events.WithLabelValues(action, "payload_fault").Inc()
		}
		var ferr error
		if d, ferr = r.stage.Fail(ctx, row.ID, "", err); ferr != nil {
			return events.Done{}, ferr
		}
	}
	outcome := string(d.Outcome)
	if d.Outcome == events.OutcomeWait && d.Wait != "" {
		outcome = d.Wait // a 429 told from an outage (pkg/prime/outage.go)
	}
	r.metrics.events.WithLabelValues(action, outcome).Inc()
	return d, nil
}

// dispatch publishes the resolved event and waits for its stage to finish
// the row: the stage announces it on events.DoneSubject, and, in case that
// announcement is missed, the row itself is read every few seconds.
func (r *Resolver) dispatch(ctx context.Context, row store.WebhookLogRow, md *jetstream.MsgMetadata, ev events.Resolved, try int) (events.Done, error) {
	done := make(chan *nats.Msg, 4)
	sub, err := r.nc.ChanSubscribe(events.DoneSubject(row.ID), done)
	if err != nil {
		return events.Done{}, err
	}
	defer sub.Unsubscribe()

	data, err := json.Marshal(ev)
	if err != nil {
		return events.Done{}, err
	}
	m := nats.NewMsg(events.ResolvedSubject(ev.Action))
	m.Data = data
	m.Header.Set(events.HeaderLogID, fmt.Sprint(row.ID))
	// One message per delivery and try: a duplicate publish of the same one
	// is dropped, a redelivery or a retry after a rate limit is new.
	m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("resolved:%d:%d:%d:%d", row.ID, md.Sequence.Stream, md.NumDelivered, try))
	if _, err := r.js.PublishMsg(ctx, m); err != nil {
		err = fmt.Errorf("publish resolved event: %w", err)
		if ctx.Err() == nil && outbox.FailureReason(err) != outbox.ReasonRejected {
			// JetStream did not answer (a failover): like a stage's service
			// that does not answer, it is waited out, no attempt counted.
			return events.Done{}, &pipeline.UnavailableError{Service: "JetStream", Wait: unavailable.After(try + 1), Err: err}
		}
		return events.Done{}, err
	}

	deadline := time.NewTimer(r.cfg.LaneWait)
	defer deadline.Stop()
	check := time.NewTicker(2 * time.Second)
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			return events.Done{}, ctx.Err()
		case <-deadline.C:
			return events.Done{}, errLaneTimeout
		case m := <-done:
			if d, ok := events.DecodeDone(m.Data, row.ID); ok {
				return d, nil
			}
		case <-check.C:
			now, err := r.store.GetWebhookLog(ctx, row.ID)
			if err != nil {
				continue
			}
			switch {
			case now.Processed() && !now.ProcessedUTC.Equal(row.ProcessedUTC):
				return events.Done{LogID: row.ID, Outcome: events.OutcomeProcessed}, nil
			case now.ProcessAttempts > row.ProcessAttempts:
				return events.Done{LogID: row.ID, Outcome: events.OutcomeFailed, Attempts: now.ProcessAttempts, Error: now.ProcessStatus}, nil
			}
		}
	}
}

// unavailable is the wait of an event after its try-th publish found
// JetStream unavailable: the step after the try, the last repeating.
var unavailable = retry.Backoff{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second}
