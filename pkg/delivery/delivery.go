// Package delivery delivers the rows of a send queue — a table of things to
// send out of primeflow and how their sending went (smsQueue, the make-safe
// SMS; ethTriageInviteQueue, the triage invites of §3.1) — with one set of
// guarantees for every kind:
//
//   - each row is claimed before it is sent, under a lease, and its outcome
//     is recorded against that claim (the row's id and the attempt the claim
//     made it), so two drainers never send one row at once and a late sender
//     whose claim lapsed cannot undo a later claim's work;
//   - a send that fails is retried with backoff (Config.Backoff, or longer
//     when the endpoint's Retry-After asks) until its last attempt, then the
//     row stays Failed, visibly, for a person;
//   - a row that cannot be sent yet waits without using an attempt: an
//     endpoint that is not there or not taking posts (no connection, 429,
//     502, 503, 504: Unavailable), or a message missing what it needs (a
//     retry.Waiter of its Sender). It waits as long again as it has waited
//     (Backoff.AfterWaiting), or as the endpoint's Retry-After asks, for as
//     long as it takes, and the age of the oldest row not sent yet is a
//     metric (Collectors.Oldest) for an alert, so a long wait is seen;
//   - a row is sent again only when its sender cannot know the endpoint took
//     it (no answer, an error answer, a process that died before it
//     recorded the outcome), and every post carries the row's idempotency key
//     so the endpoint can drop the repeat, and the same body (the attempt
//     goes in a header, AttemptHeader);
//   - a shutdown lets a post in flight finish and be recorded, and gives back
//     the claims not yet posted, their attempts uncounted.
//
// A kind of queue is a Queue[M] over its table (the store's claim, sent,
// failed, release, defer, next-due and count calls) and a Sender[M] for its message type
// M; NewDrainer runs them. HTTPConfig and Poster are the JSON-over-HTTP
// sender both kinds use.
package delivery

import (
	"context"
	"errors"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
)

// Claim is one claimed row: its id, the attempt the claim is (the row's
// attempts counting this one), when it was queued, and the message to send.
type Claim[M any] struct {
	ID        int64
	Attempt   int
	QueuedUTC time.Time
	Msg       M
	// Log are slog key-value pairs the row's log lines carry besides its id
	// and attempt ("source", "makesafe").
	Log []any
}

// Kind names a send queue in its logs, variables and metrics.
type Kind struct {
	// Name is the kind in log lines: "sms", "triage invite".
	Name string
	// LogKey is the key of the row's id in log lines: "sms", "invite".
	LogKey string
	// Prefix is its variables' prefix: "SMS_" (SMS_SEND_URL, SMS_CLAIM_LEASE …).
	Prefix string
	// Table is the store's table: "smsQueue".
	Table string
}

// Queue is a send queue's table, as the store keeps it. Each outcome names
// the claim by the row's id and attempt; an outcome for a claim the row no
// longer holds changes nothing and returns an error matching
// store.ErrClaimLost.
type Queue[M any] interface {
	// Claim claims up to limit rows due at now, oldest first, each until
	// now+lease with one more attempt; a lapsed claim that was the
	// maxAttempts-th fails the row instead. Concurrent claims never return
	// the same row.
	Claim(ctx context.Context, now time.Time, lease time.Duration, maxAttempts, limit int) ([]Claim[M], error)
	// SetSent records the send.
	SetSent(ctx context.Context, id int64, attempt int, at time.Time) error
	// SetLogged records a row a sender that sends nothing (NotSender)
	// logged or recorded: done, never sent.
	SetLogged(ctx context.Context, id int64, attempt int, at time.Time) error
	// SetFailed records a failed send: queued again from retryAt, or Failed
	// when retryAt is zero.
	SetFailed(ctx context.Context, id int64, attempt int, cause string, retryAt, at time.Time) error
	// Release gives back, unused, a claim that sent nothing.
	Release(ctx context.Context, id int64, attempt int, at time.Time) error
	// Defer gives back a claim whose row cannot be sent yet: Queued, due
	// at until, the attempt not counted, cause its last error.
	Defer(ctx context.Context, id int64, attempt int, cause string, until, at time.Time) error
	// NextDue is when the next row is due or the next claim lapses; ok is
	// false when nothing waits.
	NextDue(ctx context.Context) (at time.Time, ok bool, err error)
	// Count counts the rows in each state.
	Count(ctx context.Context) (map[store.SendState]int, error)
	// Oldest is when the oldest row not sent yet (Queued or Sending) was
	// queued; ok is false when there is none.
	Oldest(ctx context.Context) (queued time.Time, ok bool, err error)
}

// Sender sends one message. A nil error means the endpoint accepted it; an
// error matching ErrPermanent means sending it again cannot help; a
// retry.Waiter (Unavailable's, or the Sender's own) means it cannot be
// sent yet, and is no attempt: the row is deferred; any other error is a
// failed attempt, worth a retry. The drainer does not cancel a send it has
// started, even to shut down: a Sender bounds its own time (Poster:
// HTTPConfig.Timeout).
type Sender[M any] interface {
	Send(ctx context.Context, m M) error
}

// NotSender is a Sender that sends nothing: it logs or records each message
// it is given and accepts it (no endpoint is configured, or a dry run
// records them). NotSent says why, as the drainer's log line gives it: "no
// SMS_SEND_URL", "SEND_DRY_RUN, recorded in …". A drainer records such a
// sender's rows Logged — done, never sent — and counts them logged, never
// sent (Options.NotSent).
type NotSender interface {
	NotSent() string
}

// NotSentBy is s's NotSent when it is a NotSender, and "" when it sends.
func NotSentBy(s any) string {
	if n, ok := s.(NotSender); ok {
		return n.NotSent()
	}
	return ""
}

// ErrPermanent marks a refusal that a retry cannot fix (a 4xx other than
// 408, 409 and 429, a message with nobody to send it to).
var ErrPermanent = errors.New("refused for good")

// ErrUnavailable marks a send the endpoint did not take because it is not
// there or not taking posts now (Unavailable).
var ErrUnavailable = errors.New("the endpoint is not taking posts")

// unavailable is err as a wait: a retry.Waiter asking for after (0: the
// drainer's backoff alone), matching ErrUnavailable.
type unavailable struct {
	err   error
	after time.Duration
}

func (u unavailable) Error() string             { return u.err.Error() }
func (u unavailable) Unwrap() []error           { return []error{u.err, ErrUnavailable} }
func (u unavailable) RetryAfter() time.Duration { return u.after }

// Unavailable marks err as a send the endpoint did not take because it is
// not there or not taking posts now — nothing of this message's own: the
// row waits, its attempt not counted, at least after (the endpoint's
// Retry-After; 0 for none) and as Config.Backoff.AfterWaiting says.
func Unavailable(err error, after time.Duration) error { return unavailable{err, after} }

// permanent wraps err so that it matches ErrPermanent.
type permanent struct{ err error }

func (p permanent) Error() string   { return p.err.Error() }
func (p permanent) Unwrap() []error { return []error{p.err, ErrPermanent} }

// Permanent marks err as one a retry cannot fix.
func Permanent(err error) error { return permanent{err} }
