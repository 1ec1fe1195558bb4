// Package outbox publishes the messages a stage wrote to the transactional
// outbox (store.Outbox): right after the commit, and, for whatever that
// missed, from a sweeper. Each message's Nats-Msg-Id makes a second publish
// harmless, so several sweepers may run at once.
//
// A hand-off — a message another service must get exactly when this
// service's writes commit — is written in the same transaction as those
// writes, and Publisher.InTx does the rest:
//
//	_, err := pub.InTx(ctx, st, "invite hand-off", func(tx store.Store) error {
//		if err := tx.QueueThing(ctx, id); err != nil {
//			return err
//		}
//		_, err := tx.InsertOutbox(ctx, []store.OutboxMessage{
//			outbox.Message(events.SubjectThing, "thing:"+id, body), // a msg id of its own: a republish is dropped
//		})
//		return err
//	})
//
// To add a hand-off: define its subject, body type and Nats-Msg-Id in
// pkg/events (a stream in streams/ must take the subject, or every publish
// is refused); write it in the transaction whose commit it follows, with
// InTx, or from a stage's handler with pipeline.Finish.Outbox (or an
// InsertOutbox in Finish.Write), which the stage commits this way; give the
// receiving service a consumer (package consume); list the subject in the
// writer's Role.Publishes and the consumer in the receiver's Role.Consumes
// (pkg/events/roles.go: a process's NATS user may publish and consume only
// those, and its sweeper publishes only its own), then regenerate
// compose/nats/users.conf (pkg/natsauth's TestUsersConf -update). A service
// that writes the outbox and runs as a process of its own runs its own
// sweeper (Swept), so a publish that failed never waits for another service.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/metrics"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// Store is what the outbox needs of the store.
type Store interface {
	GetOutboxUnpublished(ctx context.Context, afterID int64, createdBefore time.Time, limit int) ([]store.OutboxMessage, error)
	SetOutboxPublished(ctx context.Context, ids []int64, at time.Time) error
	PurgeOutbox(ctx context.Context, publishedBefore time.Time) (int, error)
}

// Publisher publishes outbox messages. Several publishers and sweepers, in
// one process or several, may share one outbox: a message published twice
// (two sweeps reading the same page, a sweep racing the publish after the
// commit) carries the same Nats-Msg-Id, which JetStream drops within the
// stream's duplicate window, and recording it published twice only moves
// its publishedUTC.
type Publisher struct {
	JS    jetstream.JetStream
	Store Store
	Log   *slog.Logger
	// Grace leaves messages younger than this to the stage that wrote them
	// (default 5s).
	Grace time.Duration
	// Keep is how long published messages stay in the table (default 7 days).
	Keep time.Duration
	// Page is how many messages a sweep reads at a time (default 200).
	Page int
	// Failures, when set, counts the messages a sweep could not publish, by
	// reason (RegisterFailures).
	Failures *prometheus.CounterVec
	// Subjects, when set, are the only subjects a sweep publishes on: those
	// the process's NATS user may publish (its events.Role). Messages on
	// others are another service's, left to its sweeper, which every
	// service that writes the outbox runs.
	Subjects []string
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

// Transactor runs a transaction: a store.Store, or a service's narrower
// view of one.
type Transactor interface {
	InTx(ctx context.Context, fn func(store.Store) error) error
}

// InTx is the transactional outbox in one call: it runs fn in a transaction
// of st and, once that has committed, publishes every message fn wrote to
// the outbox through the store it was given (tx.InsertOutbox). fn may run
// more than once — a group commit runs it again (store.Store.InTx) — and
// only the messages of the run that committed are published. A shutdown
// does not cut the publish short (each publish is bounded): the hand-off is
// committed, and it goes now rather than at the next process's sweep. A
// publish that fails is logged once, as "<what> not published yet; the
// outbox sweeper will", and left to the sweeper: the hand-off is durable
// from the commit, so InTx returns only the transaction's error. It returns
// the messages handed on.
func (p *Publisher) InTx(ctx context.Context, st Transactor, what string, fn func(tx store.Store) error) ([]store.OutboxMessage, error) {
	var written []store.OutboxMessage
	err := st.InTx(ctx, func(tx store.Store) error {
		written = nil // a run rolled back hands nothing on
		return fn(handingOff{Store: tx, written: &written})
	})
	if err != nil {
		return nil, err
	}
	if len(written) > 0 {
		if err := p.Send(context.WithoutCancel(ctx), written); err != nil {
			p.Log.Warn(what+" not published yet; the outbox sweeper will", "err", err)
		}
	}
	return written, nil
}

// With is p logging with args too (slog's key-value pairs): the context of
// one hand-off, for the line InTx logs.
func (p *Publisher) With(args ...any) *Publisher {
	q := *p
	q.Log = p.Log.With(args...)
	return &q
}

// handingOff is the store InTx gives fn: the messages written to its
// outbox are noted for InTx to publish after the commit.
type handingOff struct {
	store.Store
	written *[]store.OutboxMessage
}

func (h handingOff) InsertOutbox(ctx context.Context, msgs []store.OutboxMessage) ([]store.OutboxMessage, error) {
	out, err := h.Store.InsertOutbox(ctx, msgs)
	if err == nil {
		*h.written = append(*h.written, out...)
	}
	return out, err
}

// ProcessNewPrimeJob notes the hand-off the new-job pipeline's procedure
// writes to the outbox itself (spEthProcessNewPrimeJob).
func (h handingOff) ProcessNewPrimeJob(ctx context.Context, jobID string, logID int64, via string, handOff store.OutboxMessage) (store.NewJobRun, error) {
	run, err := h.Store.ProcessNewPrimeJob(ctx, jobID, logID, via, handOff)
	if err == nil {
		*h.written = append(*h.written, run.HandOff...)
	}
	return run, err
}

// InTx keeps noting the messages of a transaction fn starts inside its own
// (which runs in the same one).
func (h handingOff) InTx(ctx context.Context, fn func(store.Store) error) error {
	return h.Store.InTx(ctx, func(tx store.Store) error { return fn(handingOff{Store: tx, written: h.written}) })
}

// publishTimeout bounds one publish, and the question that classifies its
// failure.
const publishTimeout = 5 * time.Second

func (p *Publisher) publish(ctx context.Context, m store.OutboxMessage, opts ...jetstream.PublishOpt) error {
	if !p.JS.Conn().IsConnected() {
		return ErrDisconnected // a publish now would wait out its timeout
	}
	msg := nats.NewMsg(m.Subject)
	msg.Data = m.Data
	for k, v := range m.Header {
		msg.Header.Set(k, v)
	}
	msg.Header.Set(nats.MsgIdHdr, m.MsgID)
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	_, err := p.JS.PublishMsg(ctx, msg, opts...)
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
			p.Log.Warn("outbox sweep stopped early", "err", err)
		}
		if _, err := p.Store.PurgeOutbox(ctx, time.Now().Add(-keep)); err != nil && ctx.Err() == nil {
			p.Log.Warn("outbox purge", "err", err)
		}
	}
}

// ErrSweepInterval: a sweeper's interval is not above zero. The service's
// <SERVICE>_OUTBOX_SWEEP sets it.
var ErrSweepInterval = errors.New("outbox: the sweep interval (the service's *_OUTBOX_SWEEP) must be above zero")

// WithSweeper runs a service with an outbox sweeper next to it: a service
// that writes the outbox runs this way as a process of its own, so that its
// hand-offs whose publish failed never wait for another service's sweeper.
type WithSweeper struct {
	Service service.Runner
	Sweeper *Publisher
	// Every is how often the sweeper sweeps.
	Every time.Duration
}

// Run runs the service and the sweeper until the service returns, and
// returns the service's error.
func (w WithSweeper) Run(ctx context.Context) error {
	ctx, stop := context.WithCancel(ctx)
	swept := make(chan struct{})
	go func() {
		defer close(swept)
		_ = w.Sweeper.Run(ctx, w.Every) // Run returns only when ctx ends, with nil
	}()
	err := w.Service.Run(ctx)
	stop()
	<-swept
	return err
}

// NewSweeper is a process's outbox sweeper, counting what it cannot publish
// in primeflow_outbox_sweep_failures_total on reg. It publishes on subjects
// only, or on every subject when none are given (bin/primeflow, which runs
// every service).
func NewSweeper(js jetstream.JetStream, st Store, log *slog.Logger, reg prometheus.Registerer, subjects ...string) (*Publisher, error) {
	failures, err := RegisterFailures(reg)
	if err != nil {
		return nil, err
	}
	return &Publisher{JS: js, Store: st, Log: log, Failures: failures, Subjects: subjects}, nil
}

// Swept is svc, a service that writes the outbox, run as a process of its
// own: WithSweeper, with the process's sweeper (NewSweeper) sweeping every,
// which must be above zero (ErrSweepInterval), publishing what role may
// publish (events.Role.Publishes).
func Swept(svc service.Runner, d service.Deps, every time.Duration, role events.Role) (service.Runner, error) {
	if every <= 0 {
		return nil, fmt.Errorf("%w, not %s", ErrSweepInterval, every)
	}
	sweeper, err := NewSweeper(d.JS, d.Store, d.Log, d.Metrics, role.Publishes...)
	if err != nil {
		return nil, err
	}
	return WithSweeper{Service: svc, Sweeper: sweeper, Every: every}, nil
}

// maxLoggedIDs bounds the skipped message ids a sweep's log line lists.
const maxLoggedIDs = 20

// Sweep publishes every message older than grace that is still unpublished,
// page by page. A message NATS refuses is counted, logged with its id and
// skipped until the next sweep, so it holds back no other; the sweep stops
// early, with an error, only when NATS itself is unavailable, since every
// later message would fail the same way. Like the spec's processing run
// (§3.1), which records each row's failure against that row, a sweep fails
// only for what is not a message's own failure.
func (p *Publisher) Sweep(ctx context.Context, grace time.Duration) error {
	page := p.Page
	if page <= 0 {
		page = 200
	}
	// The store keeps createdUTC to the millisecond: without rounding up,
	// a message created in the current millisecond is not "before" it.
	before := time.Now().Add(-grace).Truncate(time.Millisecond).Add(time.Millisecond)
	var after int64 // the pages go on past the messages skipped
	published, failed := 0, 0
	var failedIDs []int64
	defer func() {
		switch {
		case failed > 0:
			// Logged every sweep while a message stays unpublishable.
			p.Log.Warn("outbox sweep: messages not published stay unpublished for the next sweep",
				"published", published, "failed", failed, "failedIds", failedIDs)
		case published > 0:
			p.Log.Info("outbox sweep published", "messages", published)
		}
	}()
	for {
		msgs, err := p.Store.GetOutboxUnpublished(ctx, after, before, page)
		if err != nil {
			return err
		}
		var done []int64
		var stop error
		for _, m := range msgs {
			after = m.ID
			if !p.mine(m.Subject) {
				continue
			}
			// No retry on "no responders": the next sweep is the retry,
			// and failure tells at once a subject no stream takes from
			// JetStream being down.
			err := p.publish(ctx, m, jetstream.WithRetryAttempts(0))
			if err == nil {
				done = append(done, m.ID)
				continue
			}
			if stop = p.failure(ctx, m, err); stop != nil {
				break
			}
			failed++
			if len(failedIDs) < maxLoggedIDs {
				failedIDs = append(failedIDs, m.ID)
			}
		}
		if err := p.Store.SetOutboxPublished(ctx, done, time.Now()); err != nil {
			return err
		}
		published += len(done)
		if stop != nil {
			return stop
		}
		if len(msgs) < page {
			return nil
		}
	}
}

// mine reports whether a sweep publishes a message on subject.
func (p *Publisher) mine(subject string) bool {
	return len(p.Subjects) == 0 || slices.ContainsFunc(p.Subjects, func(s string) bool { return events.SubjectWithin(subject, s) })
}

// failure counts and logs a sweep's publish that failed, and returns the
// error that stops the sweep when NATS is unavailable, or nil to skip the
// message: it stays unpublished and the next sweep tries it again.
func (p *Publisher) failure(ctx context.Context, m store.OutboxMessage, err error) error {
	if ctx.Err() != nil {
		return err // shutting down
	}
	reason := FailureReason(err)
	switch {
	case !p.JS.Conn().IsConnected():
		reason = ReasonDisconnected
	case reason == ReasonError && errors.Is(err, jetstream.ErrNoStreamResponse) && p.noStreamFor(ctx, m.Subject):
		reason = ReasonRejected
	}
	p.count(reason)
	if reason != ReasonRejected {
		return fmt.Errorf("publish outbox message %d: %w", m.ID, err)
	}
	p.Log.Warn("outbox: message not published, skipped until the next sweep", "id", m.ID, "subject", m.Subject, "err", err)
	return nil
}

// noStreamFor reports whether JetStream answers that no stream takes
// subject: "no responders" to a publish is what a missing stream and an
// unavailable JetStream both look like.
func (p *Publisher) noStreamFor(ctx context.Context, subject string) bool {
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	_, err := p.JS.StreamNameBySubject(ctx, subject)
	return errors.Is(err, jetstream.ErrStreamNotFound)
}

func (p *Publisher) count(reason string) {
	if p.Failures != nil {
		p.Failures.WithLabelValues(reason).Inc()
	}
}

// RegisterFailures registers primeflow_outbox_sweep_failures_total on reg and
// returns it for Publisher.Failures, or returns the one registered before:
// every sweeper of a process counts into one.
func RegisterFailures(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "primeflow_outbox_sweep_failures_total",
		Help: "Outbox messages a sweep could not publish, by reason: disconnected and error (NATS unavailable, JetStream not answering: the sweep stopped), rejected (NATS refused the message: skipped, tried again every sweep).",
	}, []string{"reason"})
	if err := metrics.Register(reg, &c); err != nil {
		return nil, fmt.Errorf("outbox metrics: %w", err)
	}
	// Every reason is exported from the start, at 0: an alert on it reads
	// 0, not "no data", and sees the first failure.
	for _, r := range []string{ReasonDisconnected, ReasonError, ReasonRejected} {
		c.WithLabelValues(r)
	}
	return c, nil
}
