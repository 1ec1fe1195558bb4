package prime

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Clock is the time source of the client's limiter and token cache. Tests
// inject a fake one so that a minute of budget passes without a minute of
// waiting.
type Clock interface {
	Now() time.Time
	// After sends on the returned channel once d has passed, like time.After.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// bucket is a token bucket kept as a GCRA: tat is the theoretical arrival
// time of the next request, interval the time one token takes to refill, and
// tolerance how far ahead of the pace a burst may run.
type bucket struct {
	interval  time.Duration
	tolerance time.Duration
	tat       time.Time
}

func newBucket(perMinute, burst int) bucket {
	interval := time.Minute / time.Duration(perMinute)
	return bucket{interval: interval, tolerance: time.Duration(burst-1) * interval}
}

// next is when the next token may be used: now, or later when the pace
// says so.
func (b *bucket) next(now time.Time) time.Time {
	at := b.tat.Add(-b.tolerance)
	if at.Before(now) {
		return now
	}
	return at
}

// take uses a token at now.
func (b *bucket) take(now time.Time) {
	tat := b.tat
	if tat.Before(now) {
		tat = now
	}
	b.tat = tat.Add(b.interval)
}

// limiter keeps a client's calls in order while they wait for the budget:
// by class (Priority), then by how long each has waited. Only the first in
// that order asks the budget, so a call of a higher class that arrives later
// still goes out first.
type limiter struct {
	clock  Clock
	aging  time.Duration
	budget Budget
	onWait func(reason string, d time.Duration)

	mu        sync.Mutex
	queue     queue
	admitting bool // the first call is asking the budget
}

func newLimiter(cfg Config, clock Clock, budget Budget, onWait func(string, time.Duration)) *limiter {
	return &limiter{clock: clock, aging: cfg.PriorityAging, budget: budget, onWait: onWait}
}

// acquire waits until a request may go out, in its class's turn, and returns
// its permit. While a hold runs, a call waits for it to pass if its context
// allows, and fails fast with a *RateLimitedError if its deadline comes
// first (or at once, under FailOnHold); the same goes for the wait for the
// per-minute pace. A call whose deadline passes while others go before it
// fails with a *RateLimitedError too: it waited for the budget.
func (l *limiter) acquire(ctx context.Context, endpoint string) (permit Permit, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	deadline, _ := ctx.Deadline()
	turn := Turn{Endpoint: endpoint, FailOnHold: ctx.Value(failOnHold{}) != nil, Deadline: deadline}
	l.mu.Lock()
	w := l.queue.add(PriorityOf(ctx), l.clock.Now())
	if f := flightOf(ctx); f != nil {
		w.boost = &f.boost // calls that joined this one may raise its class
	}
	l.mu.Unlock()
	defer func() {
		if err != nil {
			l.mu.Lock()
			l.leave(w)
			l.mu.Unlock()
		}
	}()
	for {
		if hold := l.budget.Held(); hold > 0 {
			if _, err := turn.Await(hold, WaitHold); err != nil {
				return nil, err
			}
		}
		now := l.clock.Now()
		var wait Wait
		l.mu.Lock()
		first := l.queue.first(now, l.aging)
		if first == w && !l.admitting {
			l.admitting = true
			turn.Priority, turn.Since = w.class(now, l.aging), w.since
			l.mu.Unlock()
			p, wt, err := l.budget.Admit(ctx, turn)
			l.mu.Lock()
			l.admitting = false
			switch {
			case err != nil:
				l.mu.Unlock()
				return nil, err
			case p != nil:
				l.leave(w)
				l.mu.Unlock()
				return p, nil
			}
			wait = wt
			if f := l.queue.first(l.clock.Now(), l.aging); f != w {
				// A call of a higher class arrived while this one asked:
				// its turn now, and it waited for this ask to end.
				f.wake()
			}
		} else if first != w {
			// Another call goes first: make sure it is looking.
			first.wake()
		}
		ahead := l.queue.ahead(w, now, l.aging)
		l.mu.Unlock()

		var timer <-chan time.Time
		if wait.D > 0 {
			timer = l.clock.After(wait.D)
		}
		select {
		case <-w.woken:
		case <-l.budget.Changed():
		case <-timer:
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				// Waited its deadline out behind other calls.
				return nil, turn.limited(max(wait.D, time.Duration(ahead+1)*time.Second))
			}
			return nil, ctx.Err()
		}
		if wait.Reason != "" && wait.D > 0 {
			l.onWait(wait.Reason, l.clock.Now().Sub(now))
		}
	}
}

// leave takes w out of the queue and wakes the call whose turn it is now,
// or tells the budget that none waits. l.mu is held.
func (l *limiter) leave(w *waiter) {
	l.queue.remove(w)
	if f := l.queue.first(l.clock.Now(), l.aging); f != nil {
		f.wake()
	} else {
		l.budget.Idle()
	}
}

// waiting counts the calls waiting now, by the class they wait in: their
// own, or that of a call that waits for their answer.
func (l *limiter) waiting() map[Priority]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := make(map[Priority]int)
	for _, w := range l.queue.waiters {
		n[w.class(time.Time{}, 0)]++
	}
	return n
}

// wakeAll has every waiting call look again, after a hold started: those
// that cannot wait so long give up.
func (l *limiter) wakeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queue.wakeAll()
}

// failOnHold is the context key of FailOnHold.
type failOnHold struct{}

// FailOnHold marks ctx's calls as ones that fail at once with a
// *RateLimitedError while a hold runs (a 429's Retry-After: Prime refused
// a call), instead of waiting for it: for background work that should stop
// rather than wait Prime out. The pace, and a minute Prime says is spent,
// apply to them like any call: they wait their turn in their class.
func FailOnHold(ctx context.Context) context.Context {
	return context.WithValue(ctx, failOnHold{}, true)
}
