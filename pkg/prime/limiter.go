package prime

import (
	"context"
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

// reserve takes the next token and returns when it may be used. When that is
// after latest (if latest is not zero) it takes nothing and returns false.
func (b *bucket) reserve(now, latest time.Time) (time.Time, bool) {
	tat := b.tat
	if tat.Before(now) {
		tat = now
	}
	at := tat.Add(-b.tolerance)
	if at.Before(now) {
		at = now
	}
	if !latest.IsZero() && at.After(latest) {
		return at, false
	}
	b.tat = tat.Add(b.interval)
	return at, true
}

// limiter keeps the client inside Prime's budget: at most MaxConcurrent
// requests in flight, the per-minute pace of the bucket, and no requests at
// all while a hold (429 Retry-After, or x-ratelimit-minute-remaining 0) runs.
type limiter struct {
	clock  Clock
	sem    chan struct{}
	onWait func(reason string, d time.Duration)

	mu        sync.Mutex
	bucket    bucket
	holdUntil time.Time
}

func newLimiter(cfg Config, clock Clock, onWait func(string, time.Duration)) *limiter {
	return &limiter{
		clock:  clock,
		sem:    make(chan struct{}, cfg.MaxConcurrent),
		onWait: onWait,
		bucket: newBucket(cfg.RatePerMinute, cfg.RateBurst),
	}
}

// acquire waits until a request may go out and returns the function that
// ends it. While a hold runs, a call waits for it to pass if its context
// allows, and fails fast with a *RateLimitedError if its deadline comes
// first; the same goes for the wait for the per-minute pace.
func (l *limiter) acquire(ctx context.Context, endpoint string) (release func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for {
		if err := l.waitHold(ctx, endpoint); err != nil {
			return nil, err
		}
		select {
		case l.sem <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		release = func() { <-l.sem }
		if err := l.waitRate(ctx, endpoint); err != nil {
			release()
			return nil, err
		}
		if l.held() <= 0 {
			return release, nil
		}
		// A 429 or an exhausted budget arrived while this call waited.
		release()
	}
}

func (l *limiter) waitRate(ctx context.Context, endpoint string) error {
	now := l.clock.Now()
	var latest time.Time
	if dl, ok := ctx.Deadline(); ok {
		latest = now.Add(time.Until(dl))
	}
	l.mu.Lock()
	at, ok := l.bucket.reserve(now, latest)
	l.mu.Unlock()
	d := at.Sub(now)
	if !ok {
		return &RateLimitedError{Wait: d, Endpoint: endpoint}
	}
	return l.sleep(ctx, waitRate, d)
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

func (l *limiter) waitHold(ctx context.Context, endpoint string) error {
	for {
		d := l.held()
		if d <= 0 {
			return nil
		}
		if ctx.Value(failOnHold{}) != nil {
			return &RateLimitedError{Wait: d, Endpoint: endpoint}
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
			return &RateLimitedError{Wait: d, Endpoint: endpoint}
		}
		if err := l.sleep(ctx, waitHold, d); err != nil {
			return err
		}
	}
}

func (l *limiter) sleep(ctx context.Context, reason string, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	l.onWait(reason, d)
	select {
	case <-l.clock.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// held returns how long the current hold still runs (0 when none does).
func (l *limiter) held() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return max(0, l.holdUntil.Sub(l.clock.Now()))
}

// hold stops every call for d from now (a longer hold already running wins).
func (l *limiter) hold(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if until := l.clock.Now().Add(d); until.After(l.holdUntil) {
		l.holdUntil = until
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
