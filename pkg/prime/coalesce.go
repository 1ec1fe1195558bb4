package prime

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Coalescing. The handlers mirror Prime's current state (§3), and Prime
// sends a webhook after the change it tells of: any answer Prime gave to a
// call sent after the event reached us already holds that change, and one
// sent before it, however shortly, may not. So a call for the same record —
// the same endpoint, path and query, never another job's or another type's
// — reuses the answer of such a call instead of asking again: one in
// flight, or one that finished, in this process or (WithSharedAnswers) in
// another. Config.CoalesceWindow is how much older than now the call may
// have been sent for a call that names no event (a rung, a sweep);
// Config.CoalesceKeep how long answers are kept.

// eventTimeKey is the context key of WithEventTime.
type eventTimeKey struct{}

// WithEventTime says ctx's calls are made for an event that reached us at
// t (a webhook's receivedUTC): an answer to a call sent at t or after
// serves them. Without it a call wants Prime's state as of now, less the
// coalescing window.
func WithEventTime(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, eventTimeKey{}, t)
}

// EventTimeOf is the event time WithEventTime gave ctx, zero when none.
func EventTimeOf(ctx context.Context) time.Time {
	t, _ := ctx.Value(eventTimeKey{}).(time.Time)
	return t
}

// Answer is Prime's answer to a GET, kept for the calls that may reuse it:
// when its first request went out, and the pages that came back, or that
// the record is not there (404).
type Answer struct {
	Sent     time.Time `json:"sent"`
	NotFound bool      `json:"notFound,omitempty"`
	Pages    [][]byte  `json:"pages,omitempty"`
}

// AnswerStore shares answers between the processes of a deployment
// (pkg/primebudget.Answers). Get returns the answer stored for key, a call
// of endpoint (EndpointJob …), by a writer the store believes for that
// call; Put stores one; both are best effort, and a store out of reach has
// none.
type AnswerStore interface {
	Get(ctx context.Context, endpoint, key string) (Answer, bool)
	Put(ctx context.Context, endpoint, key string, a Answer)
}

// AnswerSkew is how far after now an answer may say it was sent and still
// be believed: the hosts' clocks differ by a little. An answer from further
// on is no answer Prime gave: believed, it would serve every call for its
// record, and never give way to a newer one, until its time came.
const AnswerSkew = 2 * time.Second

// WithSharedAnswers has the client reuse the answers other processes got
// from Prime, and share its own, through s.
func WithSharedAnswers(s AnswerStore) Option { return func(o *options) { o.answers = s } }

// How a call was coalesced, as counted in Stats and the metrics.
const (
	coalescedInFlight = "in_flight" // joined a call in flight in this process
	coalescedRecent   = "recent"    // an answer this process got a moment before
	coalescedShared   = "shared"    // an answer another process got
)

// maxAnswers bounds the answers a process keeps.
const maxAnswers = 4096

// coalescer keeps a client's calls in flight and recent answers by key.
type coalescer struct {
	window, keep time.Duration
	clock        Clock
	shared       AnswerStore

	mu      sync.Mutex
	flights map[string]*flight
	answers map[string]Answer
	pruned  time.Time
}

// flight is a call under way whose answer the calls for the same key wait
// for.
type flight struct {
	done chan struct{}
	// sent is when its first request went out (Unix nanoseconds), 0 while
	// it waits for the budget.
	sent atomic.Int64
	// boost is the highest class (the lowest Priority) of the calls that
	// wait on it: the call waits for its turn in that class.
	boost atomic.Int32
	ans   Answer
	err   error
}

// flightKey is the context key of the flight a call runs for.
type flightKey struct{}

func flightOf(ctx context.Context) *flight {
	f, _ := ctx.Value(flightKey{}).(*flight)
	return f
}

// raise makes p the flight's class if it is higher.
func (f *flight) raise(p Priority) bool {
	for {
		cur := f.boost.Load()
		if int32(p) >= cur {
			return false
		}
		if f.boost.CompareAndSwap(cur, int32(p)) {
			return true
		}
	}
}

// fetch is call's answer for key, or the answer of an earlier call for the
// same key that serves ctx's event.
func (c *Client) fetch(ctx context.Context, endpoint, key string, call func(context.Context) (Answer, error)) (Answer, error) {
	co := c.co
	if co == nil {
		// Nothing to reuse, but when the call went out (Job.Asked).
		f := &flight{}
		f.boost.Store(int32(PriorityOf(ctx)))
		return ask(ctx, f, call)
	}
	notBefore := EventTimeOf(ctx)
	if notBefore.IsZero() {
		notBefore = co.clock.Now().Add(-co.window)
	}
	prio := PriorityOf(ctx)
	for {
		now := co.clock.Now()
		co.mu.Lock()
		if a, ok := co.answers[key]; ok && co.serves(a, notBefore, now) {
			co.mu.Unlock()
			c.m.coalesced(callerOf(ctx), coalescedRecent)
			return a, nil
		}
		if f := co.flights[key]; f != nil {
			if sent := f.sent.Load(); sent == 0 || !time.Unix(0, sent).Before(notBefore) {
				co.mu.Unlock()
				if f.raise(prio) {
					c.lim.wakeAll() // its place in the queue may have changed
				}
				select {
				case <-f.done:
				case <-ctx.Done():
					if errors.Is(ctx.Err(), context.DeadlineExceeded) {
						// It waited for the budget, behind the call it joined.
						return Answer{}, &RateLimitedError{Wait: time.Second, Endpoint: endpoint}
					}
					return Answer{}, ctx.Err()
				}
				if f.err == nil {
					c.m.coalesced(callerOf(ctx), coalescedInFlight)
					return f.ans, nil
				}
				continue // it failed: look again, and ask Prime ourselves
			}
		}
		f := &flight{done: make(chan struct{})}
		f.boost.Store(int32(prio))
		lead := co.flights[key] == nil
		if lead {
			co.flights[key] = f
		}
		co.mu.Unlock()

		if co.shared != nil {
			if a, ok := co.shared.Get(ctx, endpoint, key); ok && co.serves(a, notBefore, co.clock.Now()) {
				co.finish(key, f, lead, a, nil)
				c.m.coalesced(callerOf(ctx), coalescedShared)
				return a, nil
			}
		}
		a, err := ask(ctx, f, call)
		if errors.Is(err, ErrNotFound) {
			a = Answer{Sent: a.Sent, NotFound: true}
		}
		co.finish(key, f, lead, a, err)
		if (err == nil || a.NotFound) && co.shared != nil && !a.Sent.IsZero() {
			co.shared.Put(ctx, endpoint, key, a)
		}
		return a, err
	}
}

// ask makes call as flight f: its answer says when its first request went
// out.
func ask(ctx context.Context, f *flight, call func(context.Context) (Answer, error)) (Answer, error) {
	a, err := call(context.WithValue(ctx, flightKey{}, f))
	if sent := f.sent.Load(); sent != 0 {
		a.Sent = time.Unix(0, sent)
	}
	return a, err
}

// serves reports whether a, kept at now, may answer a call that needs an
// answer sent no earlier than notBefore: and not one sent after now
// (AnswerSkew), which no call has had yet.
func (co *coalescer) serves(a Answer, notBefore, now time.Time) bool {
	return !a.Sent.Before(notBefore) && now.Sub(a.Sent) <= co.keep && !a.Sent.After(now.Add(AnswerSkew))
}

// finish ends a flight: those waiting on it get its answer, and an answer
// (a record, or its absence) is kept for the calls to come.
func (co *coalescer) finish(key string, f *flight, lead bool, a Answer, err error) {
	keep := err == nil || a.NotFound
	if !keep {
		f.err = err
	}
	f.ans = a
	co.mu.Lock()
	defer co.mu.Unlock()
	if lead {
		delete(co.flights, key)
	}
	close(f.done)
	if !keep || a.Sent.IsZero() {
		return
	}
	if old, ok := co.answers[key]; !ok || a.Sent.After(old.Sent) {
		co.answers[key] = a
	}
	co.prune(co.clock.Now())
}

// prune drops the answers kept longer than keep, every tenth of keep, or
// at once when there are too many. co.mu is held.
func (co *coalescer) prune(now time.Time) {
	if len(co.answers) < maxAnswers && now.Sub(co.pruned) < co.keep/10 {
		return
	}
	co.pruned = now
	for k, a := range co.answers {
		if now.Sub(a.Sent) > co.keep {
			delete(co.answers, k)
		}
	}
	for k := range co.answers {
		if len(co.answers) < maxAnswers {
			break
		}
		delete(co.answers, k)
	}
}
