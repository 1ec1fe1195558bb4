package prime

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
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

// Reasons a call waited, as counted in Stats and the metrics.
const (
	waitRate = "rate"        // the client's own per-minute pace
	waitHold = "server_hold" // a Retry-After or an exhausted minute budget
)

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

// limiter keeps the client inside Prime's budget: at most MaxConcurrent
// requests in flight, the per-minute pace of the bucket, and no requests at
// all while a hold (429 Retry-After, or x-ratelimit-minute-remaining 0) runs.
// Calls that wait are served by class (Priority), then by how long they have
// waited: only the first in that order looks for a turn, so a call of a
// higher class that arrives later still goes out first.
type limiter struct {
	clock  Clock
	aging  time.Duration
	onWait func(reason string, d time.Duration)

	mu        sync.Mutex
	bucket    bucket
	inFlight  int
	most      int // MaxConcurrent
	holdUntil time.Time
	queue     queue
}

func newLimiter(cfg Config, clock Clock, onWait func(string, time.Duration)) *limiter {
	return &limiter{
		clock:  clock,
		aging:  cfg.PriorityAging,
		onWait: onWait,
		bucket: newBucket(cfg.RatePerMinute, cfg.RateBurst),
		most:   cfg.MaxConcurrent,
	}
}

// acquire waits until a request may go out, in its class's turn, and returns
// the function that ends it. While a hold runs, a call waits for it to pass
// if its context allows, and fails fast with a *RateLimitedError if its
// deadline comes first (or at once, under FailOnHold); the same goes for the
// wait for the per-minute pace. A call whose deadline passes while others go
// before it fails with a *RateLimitedError too: it waited for the budget.
func (l *limiter) acquire(ctx context.Context, endpoint string) (release func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	_, failFast := ctx.Value(failOnHold{}).(bool)
	deadline, hasDeadline := ctx.Deadline()
	l.mu.Lock()
	w := l.queue.add(PriorityOf(ctx), l.clock.Now())
	l.mu.Unlock()
	defer func() {
		if err != nil {
			l.mu.Lock()
			l.queue.remove(w)
			l.queue.wakeFirst(l.clock.Now(), l.aging)
			l.mu.Unlock()
		}
	}()
	limited := func(d time.Duration) error { return &RateLimitedError{Wait: d, Endpoint: endpoint} }
	for {
		now := l.clock.Now()
		// The time left before the deadline, on the client's clock.
		left := time.Duration(math.MaxInt64)
		if hasDeadline {
			left = time.Until(deadline)
		}
		var (
			wait   time.Duration // how long to sleep; 0: until woken
			reason string
		)
		l.mu.Lock()
		hold := l.holdUntil.Sub(now)
		first := l.queue.first(now, l.aging)
		switch {
		case hold > 0 && (failFast || left < hold):
			l.mu.Unlock()
			return nil, limited(hold)
		case first != w:
			// Another call goes first: make sure it is looking, and wait to
			// be woken.
			first.wake()
		case hold > 0:
			wait, reason = hold, waitHold
		case l.inFlight >= l.most:
			// A release wakes the first waiter.
		default:
			at := l.bucket.next(now)
			if d := at.Sub(now); d > 0 {
				if left < d {
					l.mu.Unlock()
					return nil, limited(d)
				}
				wait, reason = d, waitRate
				break
			}
			l.bucket.take(now)
			l.inFlight++
			l.queue.remove(w)
			l.queue.wakeFirst(now, l.aging)
			l.mu.Unlock()
			var once sync.Once
			return func() { once.Do(l.release) }, nil
		}
		ahead := l.queue.ahead(w, now, l.aging)
		l.mu.Unlock()

		var timer <-chan time.Time
		if wait > 0 {
			timer = l.clock.After(wait)
		}
		select {
		case <-w.woken:
		case <-timer:
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, limited(max(wait, time.Duration(ahead+1)*l.bucket.interval))
			}
			return nil, ctx.Err()
		}
		if reason != "" {
			l.onWait(reason, l.clock.Now().Sub(now))
		}
	}
}

// release ends a request and wakes the first waiter for its slot.
func (l *limiter) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inFlight--
	l.queue.wakeFirst(l.clock.Now(), l.aging)
}

// failOnHold is the context key of FailOnHold.
type failOnHold struct{}

// FailOnHold marks ctx's calls as ones that fail at once with a
// *RateLimitedError while a hold runs (a 429's Retry-After, or the minute's
// budget spent), instead of waiting for it: for background work that must
// not queue up behind the webhooks for the budget they share. The
// per-minute pace still applies to them like any call.
func FailOnHold(ctx context.Context) context.Context {
	return context.WithValue(ctx, failOnHold{}, true)
}

// held returns how long the current hold still runs (0 when none does).
func (l *limiter) held() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return max(0, l.holdUntil.Sub(l.clock.Now()))
}

// hold stops every call for d from now (a longer hold already running wins).
// Every waiter looks again: those that cannot wait so long give up.
func (l *limiter) hold(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if until := l.clock.Now().Add(d); until.After(l.holdUntil) {
		l.holdUntil = until
		l.queue.wakeAll()
	}
}

// maxHold bounds a hold: Prime's longest window is a day (5,000 calls), so
// a header that asks for longer is not Prime's budget speaking.
const maxHold = 24 * time.Hour

// Prime's rate-limit headers.
const (
	headerMinuteRemaining = "X-Ratelimit-Minute-Remaining"
	headerMinuteReset     = "X-Ratelimit-Minute-Reset"
	headerDayRemaining    = "X-Ratelimit-Day-Remaining"
	headerRetryAfter      = "Retry-After"
)

// observe reads the rate-limit headers of a response and starts a hold when
// Prime says to stop, for at most maxHold. It returns the hold a 429
// started.
func (l *limiter) observe(status int, h http.Header) time.Duration {
	now := l.clock.Now()
	if status == http.StatusTooManyRequests {
		d := parseRetryAfter(h.Get(headerRetryAfter), now)
		if d <= 0 {
			d = parseReset(h.Get(headerMinuteReset), now)
		}
		if d <= 0 {
			d = time.Minute
		}
		d = min(d, maxHold)
		l.hold(d)
		return d
	}
	if n, err := strconv.Atoi(strings.TrimSpace(h.Get(headerMinuteRemaining))); err == nil && n <= 0 {
		d := parseReset(h.Get(headerMinuteReset), now)
		if d <= 0 {
			d = time.Minute
		}
		l.hold(min(d, maxHold))
	}
	return 0
}

// parseRetryAfter reads Retry-After as seconds or as an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		return seconds(secs)
	}
	if t, err := http.ParseTime(v); err == nil {
		return t.Sub(now)
	}
	return 0
}

// parseReset reads x-ratelimit-minute-reset, whose unit was not seen in
// public material: a value above 10^9 is taken as a Unix time, anything
// smaller as seconds from now.
func parseReset(v string, now time.Time) time.Duration {
	n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || n <= 0 {
		return 0
	}
	if n > 1e9 {
		sec, frac := math.Modf(n)
		return time.Unix(int64(sec), int64(frac*1e9)).Sub(now)
	}
	return seconds(n)
}

// seconds is s seconds as a Duration: 0 for no positive number (NaN
// included), the longest Duration for more than it holds (a conversion
// would overflow to a negative one).
func seconds(s float64) time.Duration {
	switch {
	case !(s > 0):
		return 0
	case s >= float64(math.MaxInt64)/float64(time.Second):
		return math.MaxInt64
	}
	return time.Duration(s * float64(time.Second))
}
