package sms

import (
	"context"
	"log/slog"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/delivery"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/prometheus/client_golang/prometheus"
)

// Queue is what the Drainer needs of the store (store.SMSQueue).
type Queue interface {
	ClaimSMS(ctx context.Context, now time.Time, lease time.Duration, maxAttempts, limit int) ([]store.SMSMessage, error)
	SetSMSSent(ctx context.Context, id int64, attempt int, at time.Time) error
	SetSMSLogged(ctx context.Context, id int64, attempt int, at time.Time) error
	SetSMSFailed(ctx context.Context, id int64, attempt int, cause string, retryAt, at time.Time) error
	ReleaseSMS(ctx context.Context, id int64, attempt int, at time.Time) error
	DeferSMS(ctx context.Context, id int64, attempt int, cause string, until, at time.Time) error
	NextSMSDue(ctx context.Context) (at time.Time, ok bool, err error)
	CountSMS(ctx context.Context) (map[store.SendState]int, error)
	OldestSMSWaiting(ctx context.Context) (queued time.Time, ok bool, err error)
}

// Kind is the SMS queue as package delivery names it: SMS_* variables.
var Kind = delivery.Kind{Name: "sms", LogKey: "sms", Prefix: "SMS_", Table: "smsQueue"}

// Drainer sends the queued messages (delivery.Drainer): when kicked, when a
// retry falls due, and at least every SMS_SWEEP_INTERVAL.
type Drainer = delivery.Drainer[Message]

// NewDrainer makes the SMS drainer over q and registers its metrics with
// reg. The messages of a sender that sends nothing (a delivery.NotSender:
// LogSender, a dry run's recorder) are recorded Logged and counted as
// logged, never as sent.
func NewDrainer(cfg delivery.Config, q Queue, s Sender, log *slog.Logger, reg prometheus.Registerer) (*Drainer, error) {
	return delivery.NewDrainer(cfg, delivery.Options[Message]{Kind: Kind, Queue: queue{q}, Sender: s, NotSent: delivery.NotSentBy(s), Log: log,
		Collectors: collectors(), Registry: reg})
}

// collectors are the primeflow_sms_* metrics.
func collectors() delivery.Collectors {
	return delivery.Collectors{
		Sent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "primeflow_sms_sent_total",
			Help: "SMS messages the SMS endpoint accepted.",
		}),
		Logged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "primeflow_sms_logged_total",
			Help: "SMS messages logged or recorded instead of sent: no SMS_SEND_URL (bin/primeflow on the Prime simulator), or a dry run (SEND_DRY_RUN).",
		}),
		Failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "primeflow_sms_failed_total",
			Help: "SMS messages given up on (attempts used up or refused for good); they stay Failed in smsQueue.",
		}),
		Retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "primeflow_sms_send_retries_total",
			Help: "Failed SMS sends that will be tried again.",
		}),
		Waits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "primeflow_sms_send_waits_total",
			Help: "SMS sends the endpoint did not take because it was not there or not taking posts (no connection, 429, 502, 503, 504): each waits, its attempt not counted.",
		}),
		Handoff: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "primeflow_sms_handoff_seconds",
			Help:    "Time from an SMS being queued (for make-safe: the detection that raised the call) to its first hand-off to the sender.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
		}),
		Queue: prometheus.NewDesc("primeflow_sms_queue_messages",
			"Messages in smsQueue by state: Queued, Sending, Sent, Logged (logged or recorded, never sent: no SMS_SEND_URL, or SEND_DRY_RUN), Failed (Failed waits for a person: primectl sms requeue or dismiss), Dismissed (a person closed it unsent).",
			[]string{"state"}, nil),
		Oldest: prometheus.NewDesc("primeflow_sms_oldest_waiting_seconds",
			"How long the oldest message not sent yet (Queued or Sending in smsQueue) has waited since it was queued; 0 when none waits.",
			nil, nil),
	}
}

// queue is smsQueue as a delivery.Queue.
type queue struct{ q Queue }

func (q queue) Claim(ctx context.Context, now time.Time, lease time.Duration, maxAttempts, limit int) ([]delivery.Claim[Message], error) {
	msgs, err := q.q.ClaimSMS(ctx, now, lease, maxAttempts, limit)
	if err != nil {
		return nil, err
	}
	out := make([]delivery.Claim[Message], len(msgs))
	for i, m := range msgs {
		out[i] = delivery.Claim[Message]{ID: m.ID, Attempt: m.Attempts, QueuedUTC: m.QueuedUTC, Log: []any{"source", m.Source},
			Msg: Message{ID: m.ID, To: m.Recipient, Body: m.Body, Source: m.Source, Attempt: m.Attempts}}
	}
	return out, nil
}

func (q queue) SetSent(ctx context.Context, id int64, attempt int, at time.Time) error {
	return q.q.SetSMSSent(ctx, id, attempt, at)
}

func (q queue) SetLogged(ctx context.Context, id int64, attempt int, at time.Time) error {
	return q.q.SetSMSLogged(ctx, id, attempt, at)
}

func (q queue) SetFailed(ctx context.Context, id int64, attempt int, cause string, retryAt, at time.Time) error {
	return q.q.SetSMSFailed(ctx, id, attempt, cause, retryAt, at)
}

func (q queue) Release(ctx context.Context, id int64, attempt int, at time.Time) error {
	return q.q.ReleaseSMS(ctx, id, attempt, at)
}

func (q queue) Defer(ctx context.Context, id int64, attempt int, cause string, until, at time.Time) error {
	return q.q.DeferSMS(ctx, id, attempt, cause, until, at)
}

func (q queue) NextDue(ctx context.Context) (time.Time, bool, error) { return q.q.NextSMSDue(ctx) }

func (q queue) Count(ctx context.Context) (map[store.SendState]int, error) { return q.q.CountSMS(ctx) }

func (q queue) Oldest(ctx context.Context) (time.Time, bool, error) { return q.q.OldestSMSWaiting(ctx) }
