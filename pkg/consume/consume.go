// Package consume runs a durable JetStream consumer (pull, or push where
// its definition names a deliver subject) with a pool of
// handlers: ack after the handler's effect is committed, redelivery with
// backoff on failure, heartbeats for every message it holds (in hand or
// waiting for a worker), and optional per-key order (messages with the same
// key are handled one at a time, in stream order). Every primeflow service
// consumes through it.
package consume

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/metrics"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// Handler handles one message. What it returns decides the message's fate:
// nil acks it; an error made by Retry redelivers it after the given delay;
// one made by Drop terminates it (it is not redelivered); any other error
// redelivers it after the consumer's backoff (Spec.Backoff, by delivery).
//
// A handler that counts its own attempts (on the row it works on) returns
// Retry(err, backoff.After(attempts)), and Retry(err, retry.Delay(err)) for
// an error that makes the work wait without an attempt: see package retry.
type Handler func(ctx context.Context, msg jetstream.Msg) error

// Spec describes how a durable consumer is read.
type Spec struct {
	// Consumer is the consumer's definition (pkg/events), which the
	// operators' step made: Run reads it, and waits while NATS does not
	// hold it as defined. Every message it holds, waiting or in hand, is
	// kept alive with a heartbeat every third of its AckWait.
	Consumer events.Consumer
	// Workers is how many messages are handled at once (default 8).
	Workers int
	// Key, when set, orders messages: those with the same key are handled
	// one at a time in the order the stream holds them.
	Key func(jetstream.Msg) string
	// Backoff is the redelivery delay after a plain error, by how many times
	// the message was delivered (default DefaultBackoff).
	Backoff retry.Backoff
}

// DefaultBackoff waits 1s, 5s, 30s, 2m, then 10m between deliveries.
func DefaultBackoff() retry.Backoff {
	return retry.Backoff{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute}
}

type retryError struct {
	err   error
	after time.Duration
}

func (e *retryError) Error() string { return e.err.Error() }
func (e *retryError) Unwrap() error { return e.err }

// Retry makes a handler error that redelivers the message after the delay.
func Retry(err error, after time.Duration) error { return &retryError{err: err, after: after} }

type dropError struct{ err error }

func (e *dropError) Error() string { return e.err.Error() }
func (e *dropError) Unwrap() error { return e.err }

// Drop makes a handler error that terminates the message: it is never
// redelivered. Use it when the message can never succeed.
func Drop(err error) error { return &dropError{err: err} }

// Run reads the consumer and handles its messages until ctx ends; it
// waits for handlers in flight before it returns. A pull consumer's are
// fetched; a push consumer's (events.Consumer.DeliverSubject) arrive on its
// deliver subject, in its queue group.
func Run(ctx context.Context, js jetstream.JetStream, spec Spec, log *slog.Logger, reg prometheus.Registerer, h Handler) error {
	spec = withDefaults(spec)
	cfg := spec.Consumer.Config()
	var pull jetstream.Consumer
	var push jetstream.PushConsumer
	var err error
	if spec.Consumer.Push() {
		push, err = bind(ctx, spec.Consumer, log, js.PushConsumer)
	} else {
		pull, err = bind(ctx, spec.Consumer, log, js.Consumer)
	}
	if err != nil {
		return err
	}
	m, err := newMetrics(cfg.Durable, reg)
	if err != nil {
		return err
	}
	log = log.With("consumer", cfg.Durable)

	// Every message the consumer holds is kept alive until it is settled:
	// the one in hand, and those waiting for a worker. A message is taken
	// off the iterator (or the subscription) at once (the server's
	// MaxAckPending bounds how many wait), so none sits unseen in its
	// buffer while AckWait runs out.
	held := newHolder()
	stopBeats := held.heartbeat(cfg.AckWait / 3)
	queues := make([]*queue, spec.Workers)
	var wg sync.WaitGroup
	shared := newQueue()
	for i := range queues {
		q := shared
		if spec.Key != nil {
			q = newQueue()
		}
		queues[i] = q
		wg.Go(func() {
			for {
				msg, ok := q.pop()
				if !ok {
					return
				}
				if ctx.Err() != nil {
					m.result("interrupted")
					held.settle(msg, msg.Nak)
					continue
				}
				handle(ctx, spec, log, m, held, h, msg)
			}
		})
	}
	defer func() {
		for _, q := range queues {
			q.close() // the shared queue once a worker, which is harmless
		}
		wg.Wait()
		stopBeats()
	}()
	take := func(msg jetstream.Msg) {
		if !held.hold(msg) {
			// A copy the server sent again while the original is queued or
			// in hand: the original is kept alive and settled, the copy
			// is not handled a second time.
			m.result("duplicate")
			return
		}
		if ctx.Err() != nil {
			m.result("interrupted")
			held.settle(msg, msg.Nak)
			return
		}
		q := shared
		if spec.Key != nil {
			q = queues[laneOf(spec.Key(msg), len(queues))]
		}
		q.push(msg)
	}
	if push != nil {
		return runPush(ctx, js, spec.Consumer, push, log, m, take)
	}

	msgs, err := pull.Messages(jetstream.PullMaxMessages(min(cfg.MaxAckPending, 256)))
	if err != nil {
		return fmt.Errorf("consumer %s: %w", cfg.Durable, err)
	}
	// On the way down, messages already fetched are handed back (Nak) rather
	// than left to the server's AckWait, so another instance takes them now.
	go func() {
		<-ctx.Done()
		msgs.Drain()
	}()
	for {
		msg, err := msgs.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) || ctx.Err() != nil {
				return nil
			}
			log.Warn("fetching messages", "err", err)
			continue
		}
		take(msg)
	}
}

// runPush takes the push consumer's deliveries until ctx ends, then
// drains its subscription (what it had received is handed back, Nak) and
// returns; a message the server was still sending as it unsubscribed
// reaches no one and is delivered again after AckWait (a minute for the
// re-checks, whose overdue rungs makesafe's sweep fires anyway). Its
// deliver subject is a plain subject that any user's reply subject may
// name (nats-server checks none), so only a delivery of this consumer is
// taken: a pub-ack, an API answer or another consumer's message reflected
// there is counted (result "foreign") and ignored. If the subscription
// ends before ctx (the consumer deleted), the consumer is found again as
// bind does.
func runPush(ctx context.Context, js jetstream.JetStream, c events.Consumer, cons jetstream.PushConsumer, log *slog.Logger, m *collectors, take func(jetstream.Msg)) error {
	onMsg := func(msg jetstream.Msg) {
		if md, err := msg.Metadata(); err != nil || md.Stream != c.Stream || md.Consumer != c.Durable {
			m.result("foreign")
			log.Warn("a message on the deliver subject that is not the consumer's: ignored", "subject", msg.Subject(), "reply", msg.Reply())
			return
		}
		take(msg)
	}
	onErr := jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		log.Warn("push consumer", "err", err)
	})
	for {
		cc, err := cons.Consume(onMsg, onErr)
		if err != nil {
			return fmt.Errorf("consumer %s: subscribe to %s: %w", c.Durable, c.DeliverSubject, err)
		}
		select {
		case <-ctx.Done():
			cc.Drain()
			<-cc.Closed()
			return nil
		case <-cc.Closed():
		}
		log.Warn("the push consumer stopped delivering; finding it again", "stream", c.Stream)
		if cons, err = bind(ctx, c, log, js.PushConsumer); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// bind finds the consumer as it is defined, by get (js.Consumer for a
// pull consumer, js.PushConsumer for a push one), waiting with backoff
// while JetStream does not answer (a failover, a node restarting, no
// quorum), and while the consumer is missing or not as defined (the
// operators' step, events.ApplyCommand, makes it), each wait logged.
func bind[T interface {
	CachedInfo() *jetstream.ConsumerInfo
}](ctx context.Context, c events.Consumer, log *slog.Logger, get func(context.Context, string, string) (T, error)) (T, error) {
	var none T
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		cons, err := get(cctx, c.Stream, c.Durable)
		cancel()
		switch {
		case err == nil:
			diff := c.Drift(cons.CachedInfo().Config)
			if len(diff) == 0 {
				return cons, nil
			}
			err = &events.NotAppliedError{Problems: []string{fmt.Sprintf("consumer %s/%s differs from its definition in %s", c.Stream, c.Durable, strings.Join(diff, ", "))}}
		case errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound):
			err = &events.NotAppliedError{Problems: []string{fmt.Sprintf("consumer %s/%s is missing", c.Stream, c.Durable)}}
		case errors.Is(err, jetstream.ErrNotPullConsumer) || errors.Is(err, jetstream.ErrNotPushConsumer):
			err = &events.NotAppliedError{Problems: []string{events.KindProblem(c)}}
		default:
			err = fmt.Errorf("consumer %s on %s: %w", c.Durable, c.Stream, err)
		}
		if ctx.Err() != nil {
			return none, errors.Join(ctx.Err(), err)
		}
		pause := bindRetry.After(attempt)
		var notApplied *events.NotAppliedError
		if errors.As(err, &notApplied) {
			log.Warn("waiting for the operators' step", "consumer", c.Durable, "stream", c.Stream, "run", events.ApplyCommand, "in", pause, "err", err)
		} else {
			log.Warn("JetStream did not answer for the consumer; trying again", "consumer", c.Durable, "stream", c.Stream, "in", pause, "err", err)
		}
		select {
		case <-ctx.Done():
			return none, errors.Join(ctx.Err(), err)
		case <-time.After(pause):
		}
	}
}

// bindRetry paces the attempts to find the consumer.
var bindRetry = retry.Backoff{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second}

func withDefaults(s Spec) Spec {
	if s.Workers <= 0 {
		s.Workers = 8
	}
	if len(s.Backoff) == 0 {
		s.Backoff = DefaultBackoff()
	}
	return s
}

func laneOf(key string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// handle runs the handler and settles the message; the holder keeps it
// alive meanwhile.
func handle(ctx context.Context, spec Spec, log *slog.Logger, m *collectors, held *holder, h Handler, msg jetstream.Msg) {
	start := time.Now()
	err := h(ctx, msg)
	m.seconds.Observe(time.Since(start).Seconds())
	var retry *retryError
	var drop *dropError
	switch {
	case err == nil:
		m.result("ack")
		held.settle(msg, func() error {
			if aerr := msg.Ack(); aerr != nil {
				log.Warn("ack failed; the message will be redelivered", "subject", msg.Subject(), "err", aerr)
			}
			return nil
		})
	case ctx.Err() != nil:
		m.result("interrupted")
		held.settle(msg, msg.Nak) // shutting down: hand it back now
	case errors.As(err, &drop):
		m.result("drop")
		log.Error("message dropped", "subject", msg.Subject(), "err", err)
		held.settle(msg, msg.Term)
	case errors.As(err, &retry):
		m.result("retry")
		held.settle(msg, func() error { return msg.NakWithDelay(retry.after) })
	default:
		m.result("error")
		delivered := uint64(1)
		if md, merr := msg.Metadata(); merr == nil {
			delivered = md.NumDelivered
		}
		delay := spec.Backoff.After(int(delivered))
		log.Warn("handler failed; redelivering", "subject", msg.Subject(), "delivered", delivered, "in", delay, "err", err)
		held.settle(msg, func() error { return msg.NakWithDelay(delay) })
	}
}

// holder is the set of messages a consumer holds — waiting for a worker or
// in hand — by stream sequence. It keeps them alive with heartbeats and
// tells a redelivered copy of one from a new message.
type holder struct {
	mu   sync.Mutex // held across a round of heartbeats, so none follows a settle
	msgs map[uint64]jetstream.Msg
}

func newHolder() *holder { return &holder{msgs: map[uint64]jetstream.Msg{}} }

// hold records msg and reports whether it is new; false means the consumer
// already holds a delivery of the same stream message.
func (h *holder) hold(msg jetstream.Msg) bool {
	md, err := msg.Metadata()
	if err != nil {
		return true // not a JetStream delivery: nothing to keep alive
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.msgs[md.Sequence.Stream]; ok {
		return false
	}
	h.msgs[md.Sequence.Stream] = msg
	return true
}

// settle stops the heartbeats of msg, then settles it with fn. The order
// matters: a heartbeat that reached the server after a NakWithDelay would
// reset the delay to a whole AckWait.
func (h *holder) settle(msg jetstream.Msg, fn func() error) {
	if md, err := msg.Metadata(); err == nil {
		h.mu.Lock()
		if h.msgs[md.Sequence.Stream] == msg {
			delete(h.msgs, md.Sequence.Stream)
		}
		h.mu.Unlock()
	}
	_ = fn() // a lost settle is redelivered after AckWait
}

// heartbeat tells the server every interval that the held messages are
// still being worked on, until stop is called.
func (h *holder) heartbeat(every time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				h.mu.Lock()
				for _, msg := range h.msgs {
					msg.InProgress()
				}
				h.mu.Unlock()
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// queue is a FIFO of held messages for the workers that take from it. A
// push never blocks: the server's MaxAckPending bounds what is held.
type queue struct {
	mu     sync.Mutex
	ready  sync.Cond
	msgs   []jetstream.Msg
	closed bool
}

func newQueue() *queue {
	q := &queue{}
	q.ready.L = &q.mu
	return q
}

func (q *queue) push(msg jetstream.Msg) {
	q.mu.Lock()
	q.msgs = append(q.msgs, msg)
	q.mu.Unlock()
	q.ready.Signal()
}

// pop waits for the next message; ok is false once the queue is closed and
// empty.
func (q *queue) pop() (msg jetstream.Msg, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.msgs) == 0 && !q.closed {
		q.ready.Wait()
	}
	if len(q.msgs) == 0 {
		return nil, false
	}
	msg = q.msgs[0]
	q.msgs[0] = nil
	q.msgs = q.msgs[1:]
	return msg, true
}

func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.ready.Broadcast()
}

type collectors struct {
	results *prometheus.CounterVec
	seconds prometheus.Histogram
}

func (m *collectors) result(r string) { m.results.WithLabelValues(r).Inc() }

// newMetrics registers a consumer's metrics; a consumer run twice in one
// process (a restart) shares the collectors registered the first time.
func newMetrics(consumer string, reg prometheus.Registerer) (*collectors, error) {
	reg = prometheus.WrapRegistererWith(prometheus.Labels{"consumer": consumer}, reg)
	m := &collectors{
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "primeflow_consumer_messages_total",
			Help: "Messages handled by a consumer, by result: ack, retry, error (redelivered with backoff), drop, interrupted, duplicate (a redelivered copy of a message already held, not handled), foreign (a message on a push consumer's deliver subject that is not its delivery, ignored).",
		}, []string{"result"}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "primeflow_consumer_handle_seconds",
			Help:    "Time a consumer's handler took for one message.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
	}
	if err := errors.Join(metrics.Register(reg, &m.results), metrics.Register(reg, &m.seconds)); err != nil {
		return nil, fmt.Errorf("consumer %s metrics: %w", consumer, err)
	}
	// Every result is exported from the start, at 0: an alert on drops
	// reads 0, not "no data", and sees the first one.
	for _, r := range []string{"ack", "retry", "error", "drop", "interrupted", "duplicate", "foreign"} {
		m.results.WithLabelValues(r)
	}
	return m, nil
}
