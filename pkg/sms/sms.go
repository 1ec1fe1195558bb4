// Package sms sends the text messages of the SMS queue (store.SMSQueue): a
// Sender interface, HTTPSender — the default adapter, which posts each
// message as JSON to the existing SMS flow's URL — and the Drainer, which
// claims queued messages, hands them to a Sender, retries failures with
// backoff and leaves a message Failed, visibly, after its last attempt.
package sms

import (
	"context"
	"errors"
	"log/slog"
)

// Message is one text message handed to a Sender.
type Message struct {
	// ID is the smsQueue row; senders pass it on so the receiving end can
	// tell a resend (see store.SMSQueue on the one at-least-once window).
	ID     int64
	To     string
	Body   string
	Source string
	// Attempt counts from 1.
	Attempt int
}

// Sender sends one message. A nil error means the message was accepted. An
// error that matches ErrPermanent means sending it again cannot help;
// any other error is worth a retry. The Drainer does not cancel a send it
// has started, even to shut down: a Sender bounds its own time (HTTPSender:
// SMS_SEND_TIMEOUT).
type Sender interface {
	Send(ctx context.Context, m Message) error
}

// SenderFunc adapts a function to Sender.
type SenderFunc func(ctx context.Context, m Message) error

// Send calls f.
func (f SenderFunc) Send(ctx context.Context, m Message) error { return f(ctx, m) }

// ErrPermanent marks a refusal that a retry cannot fix (a 4xx other than
// 408 and 429 from the SMS endpoint, a message with no recipient).
var ErrPermanent = errors.New("sms: refused for good")

// permanent wraps err so that it matches ErrPermanent.
type permanent struct{ err error }

func (p permanent) Error() string   { return p.err.Error() }
func (p permanent) Unwrap() []error { return []error{p.err, ErrPermanent} }

// Permanent marks err as one a retry cannot fix.
func Permanent(err error) error { return permanent{err} }

// LogSender logs each message instead of sending it: the all-in-one
// process's stand-in when no SMS_SEND_URL is configured. It logs the id,
// source and recipient, never the body (it holds a customer's address).
type LogSender struct{ Log *slog.Logger }

// Send logs m and accepts it.
func (s LogSender) Send(_ context.Context, m Message) error {
	s.Log.Warn("SMS_SEND_URL is not set: SMS logged, not sent", "sms", m.ID, "source", m.Source, "to", m.To, "attempt", m.Attempt)
	return nil
}
