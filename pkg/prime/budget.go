package prime

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/retry"
)

// Budget is the Prime budget a Client's calls spend: requests a minute,
// requests in flight, the day's requests, and the holds Prime asks for.
// The client keeps its own waiting calls in order (by Priority, then by how
// long each has waited) and asks the budget for the first of them, one ask
// at a time, whether it may go. New gives each client a budget of its own
// (NewLocalBudget, from its Config); WithBudget gives it one shared with
// other clients, such as the deployment's budget kept in NATS
// (pkg/primebudget).
type Budget interface {
	// Admit is asked for the call whose turn it is. It returns a Permit
	// when the call may go out now. Otherwise it says how long to wait
	// before asking again (a zero Wait.D: until Changed receives, or the
	// client wakes its first call), or returns the error that ends the call:
	// a *RateLimitedError when the call cannot wait so long (its deadline,
	// Turn.FailOnHold: Turn.Await).
	Admit(ctx context.Context, t Turn) (Permit, Wait, error)
	// Changed receives when a waiting call may have its turn now: a call
	// ended, a hold ended, another process's call ended.
	Changed() <-chan struct{}
	// Held is how long the hold in force still runs: 0 when none does.
	Held() time.Duration
	// Idle says that no call of the client waits any more (a shared budget
	// stops reserving the turn for it).
	Idle()
}

// Turn is the call that asks the budget.
type Turn struct {
	// Priority is the call's class as it competes now: its own, or higher
	// when it has waited long (Config.PriorityAging).
	Priority Priority
	// Since is when the call began to wait.
	Since time.Time
	// Endpoint names the call, for its errors.
	Endpoint string
	// FailOnHold: the call fails at once while a hold runs (FailOnHold).
	FailOnHold bool
	// Deadline is the call's context deadline; zero when it has none.
	Deadline time.Time
}

// Await is the wait of d for reason, or the *RateLimitedError that ends
// the call when it cannot wait so long: its deadline comes first, or the
// wait is a hold (WaitHold) and t is FailOnHold.
func (t Turn) Await(d time.Duration, reason string) (Wait, error) {
	if t.cannotWait(d) || reason == WaitHold && t.FailOnHold {
		return Wait{}, t.limited(d)
	}
	return Wait{D: d, Reason: reason}, nil
}

// cannotWait reports whether t must fail rather than wait d: its
// deadline comes first.
func (t Turn) cannotWait(d time.Duration) bool {
	return !t.Deadline.IsZero() && time.Until(t.Deadline) < d
}

// limited is the error of a call that cannot wait d.
func (t Turn) limited(d time.Duration) error {
	return &RateLimitedError{Wait: d, Endpoint: t.Endpoint}
}

// Wait is how long a call waits before it asks the budget again, and why
// (the reason label of prime_client_rate_limit_waits_total).
type Wait struct {
	D      time.Duration
	Reason string
}

// Reasons a call waited, as counted in Stats and the metrics.
const (
	// WaitRate: the per-minute pace, or the minute's budget spent
	// (x-ratelimit-minute-remaining 0).
	WaitRate = "rate"
	// WaitHold: a hold Prime asked for with a 429 (its Retry-After).
	WaitHold = "server_hold"
	// WaitConcurrency: every request in flight that the budget allows.
	WaitConcurrency = "concurrency"
	// WaitPriority: a call of another process goes first.
	WaitPriority = "priority"
	// WaitDay: the day's budget is down to the reserve this class may
	// not spend.
	WaitDay = "day_reserve"
)

// Permit is one call's permission to go out. Done ends the call with
// Prime's answer (status 0 when there was none) and returns the hold a 429
// started (0 for any other answer). A hold stops every call; a minute
// Prime says is spent only makes them wait for its reset.
type Permit interface {
	Done(status int, h http.Header) time.Duration
}

// localBudget is a process's own budget: MaxConcurrent requests in flight,
// the pace of the bucket, no requests at all while a hold (a 429's
// Retry-After) runs, and none until the minute's reset once Prime says it
// is spent (x-ratelimit-minute-remaining 0).
type localBudget struct {
	clock   Clock
	changed chan struct{}

	mu         sync.Mutex
	bucket     bucket
	inFlight   int
	most       int
	holdUntil  time.Time
	spentUntil time.Time
}

// NewLocalBudget is a budget of perMinute requests a minute (burst of them
// back to back, at least 1) and maxConcurrent in flight, kept in this
// process on clock (nil: the system's).
func NewLocalBudget(perMinute, burst, maxConcurrent int, clock Clock) Budget {
	if clock == nil {
		clock = realClock{}
	}
	return &localBudget{
		clock:   clock,
		changed: make(chan struct{}, 1),
		bucket:  newBucket(max(perMinute, 1), max(burst, 1)),
		most:    max(maxConcurrent, 1),
	}
}

func (b *localBudget) Admit(_ context.Context, t Turn) (Permit, Wait, error) {
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if hold := b.holdUntil.Sub(now); hold > 0 {
		w, err := t.Await(hold, WaitHold)
		return nil, w, err
	}
	if d := b.spentUntil.Sub(now); d > 0 {
		w, err := t.Await(d, WaitRate)
		return nil, w, err
	}
	if b.inFlight >= b.most {
		return nil, Wait{Reason: WaitConcurrency}, nil // a release signals Changed
	}
	if d := b.bucket.next(now).Sub(now); d > 0 {
		w, err := t.Await(d, WaitRate)
		return nil, w, err
	}
	b.bucket.take(now)
	b.inFlight++
	return &localPermit{b: b}, Wait{}, nil
}

func (b *localBudget) Changed() <-chan struct{} { return b.changed }

func (b *localBudget) Held() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(0, b.holdUntil.Sub(b.clock.Now()))
}

func (b *localBudget) Idle() {}

func (b *localBudget) signal() {
	select {
	case b.changed <- struct{}{}:
	default:
	}
}

type localPermit struct {
	b    *localBudget
	once sync.Once
}

func (p *localPermit) Done(status int, h http.Header) time.Duration {
	var l Limits
	p.once.Do(func() {
		b := p.b
		now := b.clock.Now()
		l = ReadLimits(status, h, now)
		b.mu.Lock()
		b.inFlight--
		if until := now.Add(l.Hold); until.After(b.holdUntil) {
			b.holdUntil = until
		}
		if until := now.Add(l.Spent); until.After(b.spentUntil) {
			b.spentUntil = until
		}
		b.mu.Unlock()
		b.signal()
	})
	return l.Hold
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

// Limits is what one of Prime's answers says of the budget.
type Limits struct {
	// RateLimited: Prime answered 429.
	RateLimited bool
	// Hold is how long every call must stop after a 429: its Retry-After,
	// failing that the minute's reset, failing that a minute; maxHold at
	// most. Zero: no hold.
	Hold time.Duration
	// Spent is how long until the minute's reset when Prime says the
	// minute is spent (x-ratelimit-minute-remaining 0): no call goes
	// before then, but none is refused for it (FailOnHold); maxHold at
	// most.
	Spent time.Duration
	// MinuteRemaining and DayRemaining are x-ratelimit-minute-remaining
	// and x-ratelimit-day-remaining; -1 when Prime did not send them.
	MinuteRemaining, DayRemaining int
}

// ReadLimits reads the rate-limit headers of an answer with status status
// (0: no answer) that arrived at now.
func ReadLimits(status int, h http.Header, now time.Time) Limits {
	l := Limits{MinuteRemaining: -1, DayRemaining: -1}
	if h == nil {
		return l
	}
	if n, err := strconv.Atoi(strings.TrimSpace(h.Get(headerMinuteRemaining))); err == nil {
		l.MinuteRemaining = max(n, 0)
	}
	if n, err := strconv.Atoi(strings.TrimSpace(h.Get(headerDayRemaining))); err == nil {
		l.DayRemaining = max(n, 0)
	}
	reset := func() time.Duration {
		if d := parseReset(h.Get(headerMinuteReset), now); d > 0 {
			return d
		}
		return time.Minute
	}
	switch {
	case status == http.StatusTooManyRequests:
		l.RateLimited = true
		l.Hold = retry.ParseRetryAfter(h.Get(headerRetryAfter), now)
		if l.Hold <= 0 {
			l.Hold = reset()
		}
	case l.MinuteRemaining == 0:
		l.Spent = reset()
	}
	l.Hold, l.Spent = min(l.Hold, maxHold), min(l.Spent, maxHold)
	return l
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
	return retry.Seconds(n)
}
