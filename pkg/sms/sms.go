// Package sms sends the text messages of the SMS queue (store.SMSQueue) as
// a kind of package delivery's send queues: HTTPSender, the default sender,
// posts each message as JSON to the existing SMS flow's URL (SMS_SEND_URL),
// and NewDrainer's drainer claims queued messages, hands them to a Sender,
// retries failures with backoff and leaves a message Failed, visibly, after
// its last attempt; an endpoint that is not there or not taking posts is
// waited out, no attempt counted (package delivery).
package sms

import (
	"context"
	"log/slog"

	"github.com/ethosbuilding/primeflow/pkg/delivery"
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

// Sender sends one message (delivery.Sender says what its errors mean).
type Sender = delivery.Sender[Message]

// LogSender logs each message instead of sending it: the all-in-one
// process's stand-in when no SMS_SEND_URL is configured. It logs the id,
// source and recipient, never the body (it holds a customer's address).
type LogSender struct{ Log *slog.Logger }

// Send logs m and accepts it.
func (s LogSender) Send(_ context.Context, m Message) error {
	s.Log.Warn("SMS_SEND_URL is not set: SMS logged, not sent", "sms", m.ID, "source", m.Source, "to", m.To, "attempt", m.Attempt)
	return nil
}

// NotSent says it sends nothing (delivery.NotSender): the drainer records
// its messages Logged.
func (LogSender) NotSent() string { return "no SMS_SEND_URL" }
