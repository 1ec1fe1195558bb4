// Package retry is the vocabulary of trying again, in one place for every
// service:
//
//   - a failed attempt waits by a Backoff, steps indexed by attempt, the
//     last repeating;
//   - a fault that is not the work's own — Prime's rate limit
//     (*prime.RateLimitedError), Prime not answering (*prime.UnavailableError),
//     a service that did not answer (*pipeline.UnavailableError) — is an
//     error with a RetryAfter method (a Waiter): the work waits that long
//     and runs again, and no attempt is counted (§9). Delay is the one place
//     such an error becomes a wait.
//
// A retrying consumer counts its attempts where the work's state lives (the
// row it records them on), not by JetStream's delivery count, which also
// counts deliveries that were no attempt (a shutdown, a lost ack):
//
//	if d := retry.Delay(err); d > 0 {
//		return consume.Retry(err, d) // waits, no attempt counted
//	}
//	attempts, rerr := st.FailThing(ctx, id, err.Error()) // the attempt, recorded
//	if rerr != nil {
//		return err // redelivered with the consumer's backoff
//	}
//	return consume.Retry(err, cfg.Backoff.After(attempts))
package retry

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Backoff is how long to wait after each failed attempt: after attempt n
// the n-th step, the last step after every attempt beyond. A Config reads
// it as a comma-separated list of durations, e.g.
// `env:"X_BACKOFF" envDefault:"1s,5s,30s" envSeparator:","`.
type Backoff []time.Duration

// After is the wait after attempt n, counting from 1 (n below 1 waits the
// first step). b must not be empty: a Config's Validate refuses that.
func (b Backoff) After(n int) time.Duration {
	return b[min(max(n, 1), len(b))-1]
}

// AfterWaiting is the wait of work that has waited d so far without an
// attempt counted (a Waiter's, when it names no wait of its own): as long
// again, and between the first and the last step. Successive waits so
// double, up to the last step, without a count of them to keep.
func (b Backoff) AfterWaiting(d time.Duration) time.Duration {
	return min(max(d, b.After(1)), b.After(len(b)))
}

// Waiter is an error that makes the work wait instead of failing an
// attempt, and knows for how long.
type Waiter interface {
	error
	RetryAfter() time.Duration
}

// MinWait is the least a Waiter's wait lasts: Prime paces calls at one a
// second (60 a minute) and sends Retry-After in whole seconds, so asking
// again sooner only meets the same limit, and a wait of zero would spin.
const MinWait = time.Second

// Wait is the wait for a request to wait d: d, and at least MinWait.
func Wait(d time.Duration) time.Duration { return max(d, MinWait) }

// Delay is how long err makes the work wait before it runs again: Wait of
// the RetryAfter of the first Waiter in err's chain. It is 0 when err is no
// Waiter's (a failure, which counts an attempt) or nil.
func Delay(err error) time.Duration {
	var w Waiter
	if errors.As(err, &w) {
		return Wait(w.RetryAfter())
	}
	return 0
}

// ParseRetryAfter reads a Retry-After header (RFC 9110: seconds, or an HTTP
// date) as the wait from now: 0 when it is absent, unreadable or not in the
// future, and never more than time.Duration holds, whatever the number.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		return Seconds(secs)
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// Seconds is s seconds as a Duration: 0 for no positive number (NaN
// included), the longest Duration for more than it holds (a conversion
// would overflow to a negative one).
func Seconds(s float64) time.Duration {
	switch {
	case !(s > 0):
		return 0
	case s >= float64(math.MaxInt64)/float64(time.Second):
		return math.MaxInt64
	}
	return time.Duration(s * float64(time.Second))
}
