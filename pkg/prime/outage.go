package prime

import (
	"log/slog"
	"sync"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/retry"
)

// Telling Prime's outage from a record's failure. The spec counts an
// attempt for every handler that throws, "Prime down, rate limit, bad
// payload" alike (§9), and caps a row at 5 so that "a broken payload shows
// up for a person" (§3): written for a 2-minute batch. The cap is for the
// record — a payload Prime cannot serve, a record it fails on while it
// answers the rest — not for Prime being down, which is waited out however
// long it lasts. For a call Prime answered 5xx, or did not answer (a
// refused connection, a reset, PRIME_TIMEOUT or the caller's deadline
// passing while it waits for the answer), the rule is:
//
//   - The record's failure: the same call (endpoint, path and query) failed
//     so before, within recordWindow, and since then Prime has answered
//     other calls — at least one, and answersPerFailure for each other call
//     that failed meanwhile — and no outage is on. The caller gets the
//     call's own error (an *APIError, or the transport's) and the work
//     counts an attempt, as the spec says.
//   - Otherwise Prime's: an *UnavailableError, and the work waits with no
//     attempt counted. A call's first failure is always Prime's, so a
//     record's failure costs one wait before it counts.
//
// An outage begins when a second call in a row fails, and no call has been
// answered since it went out: Prime is unreachable since the first of them
// (Client.Unreachable, the gauge prime_client_unreachable_since_seconds).
// One failure alone holds up no other call. While it lasts the client
// lets one call at a time go out, as a probe, when the wait since the last
// probe failed is over — PRIME_OUTAGE_BACKOFF's steps, growing with each
// failed probe, or a 5xx's Retry-After when longer — and every other call
// fails at once, unsent, with an *UnavailableError that says when the next
// probe is due. Any answer that is not a 5xx (2xx, 404, 429, any other 4xx)
// is Prime answering and ends the outage; a 4xx other than 404 and 429
// still fails its call as before. The state is one client's, so one
// process's: another process's calls tell it nothing.

// recordWindow is how long a call's failure is remembered: the same call
// failing again within it, while Prime answers the others, is the record's.
const recordWindow = time.Hour

// maxRemembered bounds the calls whose failure is remembered.
const maxRemembered = 4096

// answersPerFailure is how many answers to other calls, for each other call
// that failed, make Prime "answering the others": one bad record among
// healthy calls, not Prime failing one call in two.
const answersPerFailure = 3

// maxOutageRetryAfter bounds the Retry-After of a 5xx that is honoured: a
// longer one is not taken at its word, and Prime is probed again then.
const maxOutageRetryAfter = 10 * time.Minute

// DefaultOutageBackoff is PRIME_OUTAGE_BACKOFF's default: the wait after
// each failed probe of an outage, the last repeating.
func DefaultOutageBackoff() retry.Backoff {
	return retry.Backoff{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute}
}

// outage is what a client knows of whether Prime answers (the rule above).
type outage struct {
	clock   Clock
	backoff retry.Backoff
	log     *slog.Logger

	mu sync.Mutex
	// since is when Prime stopped answering; zero while it answers.
	since time.Time
	// probes counts the failed calls of the outage that set its wait;
	// next is when the next probe may go; probing, that one is out.
	probes  int
	next    time.Time
	probing bool
	// lastAnswer is when Prime last answered a call; answers and failures
	// count the calls answered and failed (5xx, no answer) so far.
	lastAnswer        time.Time
	answers, failures uint64
	// streak counts the calls failed since the last answer, the first of
	// them at streakFrom.
	streak     int
	streakFrom time.Time
	// fails are the calls that failed, by key, until they are answered.
	fails map[string]callFailure
	// held counts the calls not sent during outages, waited those that
	// failed as Prime's (the work waited).
	held, waited uint64
}

// callFailure is a call's last failure: when, how many in a row, and the
// client's counts of answers and failures right after it.
type callFailure struct {
	at                time.Time
	n                 int
	answers, failures uint64
}

// ticket is a call the outage let through: its key, whether it is the
// outage's probe, and when its request went out.
type ticket struct {
	key   string
	probe bool
	sent  time.Time
}

func newOutage(clock Clock, backoff retry.Backoff, log *slog.Logger) *outage {
	return &outage{clock: clock, backoff: backoff, log: log, fails: make(map[string]callFailure)}
}

// enter lets a call go, or, during an outage, refuses it with the wait
// until the next probe is due.
func (o *outage) enter(endpoint, key string) (*ticket, error) {
	now := o.clock.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	t := &ticket{key: key}
	if o.since.IsZero() {
		return t, nil
	}
	if o.probing || now.Before(o.next) {
		o.held++
		wait := o.next.Sub(now)
		if wait <= 0 {
			wait = o.backoff.After(o.probes) // as long as a failed probe would set
		}
		return nil, &UnavailableError{Endpoint: endpoint, Wait: retry.Wait(wait), Since: o.since}
	}
	o.probing, t.probe = true, true
	return t, nil
}

// answered notes that Prime answered t's call: an outage ends.
func (o *outage) answered(t *ticket) {
	now := o.clock.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lastAnswer = now
	o.answers++
	o.streak = 0
	delete(o.fails, t.key)
	if t.probe {
		o.probing = false
	}
	if !o.since.IsZero() {
		o.log.Info("Prime answers again: calls go out as before", "unreachableFor", now.Sub(o.since).Round(time.Millisecond),
			"since", o.since.UTC(), "failedProbes", o.probes)
		o.since, o.probes, o.next = time.Time{}, 0, time.Time{}
	}
}

// abandoned notes that t's call ended with no word from Prime either way
// (its caller gave up, or it never went out).
func (o *outage) abandoned(t *ticket) {
	if !t.probe {
		return
	}
	o.mu.Lock()
	o.probing = false
	o.mu.Unlock()
}

// failed notes that Prime answered t's call 5xx or not at all (cause), and
// judges it: nil when it is the record's (the caller returns cause), or
// the *UnavailableError the work waits by. retryAfter is the answer's
// Retry-After (0: none).
func (o *outage) failed(t *ticket, endpoint string, retryAfter time.Duration, cause error) error {
	now := o.clock.Now()
	after := min(retryAfter, maxOutageRetryAfter)
	o.mu.Lock()
	defer o.mu.Unlock()
	if t.probe {
		o.probing = false
	}
	o.failures++
	if o.streak == 0 {
		o.streakFrom = now
	}
	o.streak++
	prev, seen := o.fails[t.key]
	seen = seen && now.Sub(prev.at) <= recordWindow
	f := callFailure{at: now, n: 1, answers: o.answers, failures: o.failures}
	if seen {
		f.n = prev.n + 1
	}
	o.remember(t.key, f, now)
	if seen && o.since.IsZero() {
		answered, others := o.answers-prev.answers, o.failures-prev.failures-1
		if answered > 0 && answered >= answersPerFailure*others {
			return nil // the record's
		}
	}
	o.waited++
	var wait time.Duration
	switch {
	case o.since.IsZero() && o.streak > 1 && !o.lastAnswer.After(t.sent):
		// Calls fail one after the other, and nothing was answered while
		// this one was out: Prime is down.
		o.since, o.probes = o.streakFrom, 1
		o.next = now.Add(max(o.backoff.After(1), after))
		o.log.Warn("Prime is not answering: the work that calls it waits, no attempt counted; one call at a time tries it again",
			"endpoint", endpoint, "err", cause, "next", o.next.Sub(now))
		wait = o.next.Sub(now)
	case !o.since.IsZero():
		if t.probe {
			o.probes++
			o.next = now.Add(max(o.backoff.After(o.probes), after))
		} else if until := now.Add(after); until.After(o.next) {
			o.next = until // a call that was out when the outage began
		}
		wait = o.next.Sub(now)
	default:
		// The first call to fail since Prime last answered, or one Prime
		// answered others while it was out: the call's first failure, or
		// one while other calls fail too. It waits by its own failures.
		wait = max(o.backoff.After(f.n), after)
	}
	return &UnavailableError{Endpoint: endpoint, Wait: retry.Wait(wait), Since: o.since, Err: cause}
}

// remember keeps f as key's last failure, within maxRemembered calls:
// failures older than recordWindow go first, and all of them if that is
// not enough. o.mu is held.
func (o *outage) remember(key string, f callFailure, now time.Time) {
	o.fails[key] = f
	if len(o.fails) <= maxRemembered {
		return
	}
	for k, v := range o.fails {
		if now.Sub(v.at) > recordWindow {
			delete(o.fails, k)
		}
	}
	if len(o.fails) > maxRemembered {
		clear(o.fails)
		o.fails[key] = f
	}
}

// unreachable is when Prime stopped answering, zero while it answers.
func (o *outage) unreachable() time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.since
}

// counts are the calls not sent during outages and those that waited.
func (o *outage) counts() (held, waited uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.held, o.waited
}
