package store

import (
	"context"
	"time"
)

// SMSMessage is a row of smsQueue: one text message and its sending state.
type SMSMessage struct {
	ID        int64
	Recipient string
	Body      string
	// Source says who queued it ("makesafe").
	Source string
	// DedupeKey, when set, is unique: a second message with it is not queued.
	DedupeKey string
	State     SendState
	// Attempts counts the claims made to send it (a claim given back
	// unused, ReleaseSMS, does not count).
	Attempts       int
	NextAttemptUTC time.Time
	// ClaimedUntilUTC is when a claim in state Sending lapses: after it the
	// message may be claimed again (the crash window, see SMSQueue).
	ClaimedUntilUTC time.Time
	LastError       string
	QueuedUTC       time.Time
	SentUTC         time.Time
	FailedUTC       time.Time
	UpdatedUTC      time.Time
}

// NewSMS is a message to queue.
type NewSMS struct {
	Recipient string
	Body      string
	Source    string
	DedupeKey string
	// Now is the queue time; zero is the database's clock.
	Now time.Time
}

// SMSQueue is the queue of text messages to send. A sender claims a message
// (Sending, Attempts + 1) before it posts it and records the outcome of the
// post against that claim: Sent after the endpoint's 2xx, or failed. A claim
// is named by the message's ID and the Attempts the claim gave it; an
// outcome recorded for a claim the message no longer holds changes nothing
// (ErrClaimLost), so a late sender can never undo a later claim's work.
//
// A message is posted again only when its sender cannot know the endpoint
// took it: a post with no answer or an error answer (SMS_SEND_TIMEOUT, a
// lost connection, 408, 5xx) is retried, and a post whose outcome was
// never recorded (the process died, the database refused the write) is
// posted again when its claim lapses. A post the endpoint did not take
// because it is not there or not taking posts (no connection, 429, 502,
// 503, 504) is a wait: the claim is given back unused (DeferSMS), due
// later, for as long as that lasts. A shutdown is neither: the drainer
// lets a post that has started finish and records it, and gives back a
// claim it has not posted yet (ReleaseSMS). Every post carries the message's
// ID, the same on each attempt, so the endpoint can drop a repeat.
type SMSQueue interface {
	// QueueSMS queues a message and returns its id. With a DedupeKey already
	// queued it queues nothing and returns the existing id, queued false.
	QueueSMS(ctx context.Context, m NewSMS) (id int64, queued bool, err error)
	// ClaimSMS claims up to limit messages due at now, oldest first: Queued
	// ones whose NextAttemptUTC has come, and Sending ones whose claim has
	// lapsed. Each becomes Sending until now+lease with Attempts + 1. A
	// lapsed claim that was already the maxAttempts-th becomes Failed
	// instead. Concurrent claims never return the same message.
	ClaimSMS(ctx context.Context, now time.Time, lease time.Duration, maxAttempts, limit int) ([]SMSMessage, error)
	// SetSMSSent marks a message Sent, if it still holds the claim attempt
	// names (its Attempts as ClaimSMS returned it). It returns ErrNotFound
	// for an unknown id and ErrClaimLost when the claim is gone.
	SetSMSSent(ctx context.Context, id int64, attempt int, at time.Time) error
	// SetSMSLogged marks a message Logged, as SetSMSSent marks one Sent: a
	// sender that only logs handed it on, and it was never sent.
	SetSMSLogged(ctx context.Context, id int64, attempt int, at time.Time) error
	// SetSMSFailed records a failed send and its error (cut to
	// MaxStatusLen) against the claim attempt names, as SetSMSSent does:
	// the message is Queued again from retryAt, or Failed when retryAt is
	// zero.
	SetSMSFailed(ctx context.Context, id int64, attempt int, cause string, retryAt, at time.Time) error
	// ReleaseSMS gives back, unused, a claim that posted nothing: the
	// message is Queued again, as due as it was, with the attempt not
	// counted. Its errors are SetSMSSent's.
	ReleaseSMS(ctx context.Context, id int64, attempt int, at time.Time) error
	// DeferSMS gives back a claim that posted nothing the endpoint took (it
	// is not there or not taking posts now): Queued, due at until, the
	// attempt not counted, cause (cut to MaxStatusLen) its LastError. Its
	// errors are SetSMSSent's.
	DeferSMS(ctx context.Context, id int64, attempt int, cause string, until, at time.Time) error
	// GetSMS returns one message, or ErrNotFound.
	GetSMS(ctx context.Context, id int64) (SMSMessage, error)
	// NextSMSDue returns when the next Queued message is due or the next
	// claim lapses; ok is false when nothing waits.
	NextSMSDue(ctx context.Context) (at time.Time, ok bool, err error)
	// CountSMS counts the messages in each state.
	CountSMS(ctx context.Context) (map[SendState]int, error)
	// OldestSMSWaiting returns when the oldest message not sent yet
	// (Queued or Sending) was queued; ok is false when none is.
	OldestSMSWaiting(ctx context.Context) (queued time.Time, ok bool, err error)
}
