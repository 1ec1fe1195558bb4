package sms

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/metrics"
	"github.com/ethosbuilding/primeflow/pkg/retry"
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
	NextSMSDue(ctx context.Context) (at time.Time, ok bool, err error)
	CountSMS(ctx context.Context) (map[store.SMSState]int, error)
}

// DrainerConfig is the Drainer's configuration, read with caarlos0/env.
type DrainerConfig struct {
	// MaxAttempts is how many times a message is tried before it is Failed.
	MaxAttempts int `env:"SMS_MAX_ATTEMPTS" envDefault:"5"`
	// Backoff is the wait after the n-th failed attempt (the last entry
	// repeats).
	Backoff retry.Backoff `env:"SMS_RETRY_BACKOFF" envDefault:"5s,30s,2m,10m"`
	// Lease is how long a claim holds a message. It must outlast a send
	// (SMS_SEND_TIMEOUT, checked by makesafe): a claim that lapses lets the
	// message be sent again.
	Lease time.Duration `env:"SMS_CLAIM_LEASE" envDefault:"2m"`
	// Sweep is the slowest the queue is looked at, kicks or not.
	Sweep time.Duration `env:"SMS_SWEEP_INTERVAL" envDefault:"1m"`
	// Workers is how many messages are sent at once.
	Workers int `env:"SMS_SEND_WORKERS" envDefault:"4"`
}

// Validate reports a setting the Drainer cannot work with, naming its
// variable. NewDrainer calls it.
func (c DrainerConfig) Validate() error {
	switch {
	case c.MaxAttempts < 1:
		return errors.New("sms: SMS_MAX_ATTEMPTS must be at least 1")
	case len(c.Backoff) == 0:
		return errors.New("sms: SMS_RETRY_BACKOFF needs at least one duration")
	case c.Lease <= 0 || c.Sweep <= 0 || c.Workers < 1:
		return errors.New("sms: SMS_CLAIM_LEASE, SMS_SWEEP_INTERVAL and SMS_SEND_WORKERS must be above zero")
	}
	for _, b := range c.Backoff {
		if b <= 0 {
			return errors.New("sms: SMS_RETRY_BACKOFF durations must be above zero")
		}
	}
	return nil
}

// Drainer sends the queued messages: when kicked, when a retry falls due,
// and at least every Sweep. Each message is claimed before it is sent and
// its outcome recorded against the claim after (store.SMSQueue says when a
// message is posted again). When ctx ends, a post that has started runs to
// its end and is recorded, and a claim not yet posted is given back.
type Drainer struct {
	cfg DrainerConfig
	q   Queue
	s   Sender
	// logOnly: s is the LogSender, whose messages are logged, not sent.
	logOnly bool
	log     *slog.Logger
	m       *collectors
	kick    chan struct{}
}

// NewDrainer makes a drainer and registers its metrics with reg.
func NewDrainer(cfg DrainerConfig, q Queue, s Sender, log *slog.Logger, reg prometheus.Registerer) (*Drainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(reg, q)
	if err != nil {
		return nil, err
	}
	_, logOnly := s.(LogSender)
	return &Drainer{cfg: cfg, q: q, s: s, logOnly: logOnly, log: log, m: m, kick: make(chan struct{}, 1)}, nil
}

// Kick asks for a drain now. It never blocks; kicks while a drain runs
// collapse into one more drain.
func (d *Drainer) Kick() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// Run drains until ctx ends.
func (d *Drainer) Run(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.kick:
		case <-timer.C:
		}
		wait := d.cfg.Sweep
		if err := d.Drain(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			d.log.Warn("sms queue drain failed; trying again", "err", err)
			wait = min(wait, 5*time.Second)
		} else if at, ok, err := d.q.NextSMSDue(ctx); err != nil {
			if ctx.Err() == nil {
				d.log.Warn("sms queue: next due", "err", err)
			}
		} else if ok {
			wait = min(wait, max(time.Until(at), 20*time.Millisecond))
		}
		timer.Reset(wait)
	}
}

// Drain sends every message due now, Workers at a time, and returns when
// none is left, the queue cannot be read, or ctx ends; it returns only once
// the posts it started have finished and been recorded.
func (d *Drainer) Drain(ctx context.Context) error {
	for ctx.Err() == nil {
		// The claim is not cut short by ctx: a claim the database made
		// while the caller gave up would hold its rows, an attempt spent,
		// until the lease lapses. Claimed, they go to send, which gives them
		// back when ctx has ended.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		msgs, err := d.q.ClaimSMS(cctx, time.Now(), d.cfg.Lease, d.cfg.MaxAttempts, d.cfg.Workers)
		cancel()
		if err != nil {
			return err
		}
		if len(msgs) == 0 {
			return nil
		}
		var wg sync.WaitGroup
		for _, m := range msgs {
			wg.Go(func() { d.send(ctx, m) })
		}
		wg.Wait()
	}
	return nil
}

// recordTimeout bounds a claim and the write of a post's outcome, which a
// shutdown does not cut short.
const recordTimeout = 10 * time.Second

// send hands one claimed message to the sender and records the outcome.
func (d *Drainer) send(ctx context.Context, m store.SMSMessage) {
	log := d.log.With("sms", m.ID, "source", m.Source, "attempt", m.Attempts)
	// What is written after ctx ends must still be written.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if ctx.Err() != nil {
		// Stopping before the post: give the claim back unused, so the
		// message is due again at once (for another process, or this one's
		// next start) rather than after its lease, and keeps its attempt. A
		// make-safe SMS goes within minutes (§6).
		if err := d.q.ReleaseSMS(rctx, m.ID, m.Attempts, time.Now()); err != nil {
			log.Warn("sms claim not given back: it is sent when the claim lapses", "err", err)
		}
		return
	}
	if m.Attempts == 1 {
		d.m.handoff.Observe(time.Since(m.QueuedUTC).Seconds())
	}
	// A post that has started finishes whatever ctx does: cut short, the
	// endpoint may have acted on it all the same. The Sender bounds it
	// (HTTPSender: SMS_SEND_TIMEOUT).
	err := d.s.Send(context.WithoutCancel(ctx), Message{ID: m.ID, To: m.Recipient, Body: m.Body, Source: m.Source, Attempt: m.Attempts})
	now := time.Now()
	if err == nil {
		d.sent(rctx, log, m, now)
		return
	}
	final := errors.Is(err, ErrPermanent) || m.Attempts >= d.cfg.MaxAttempts
	var retryAt time.Time
	if !final {
		retryAt = now.Add(d.cfg.Backoff.After(m.Attempts))
	}
	if rerr := d.q.SetSMSFailed(rctx, m.ID, m.Attempts, err.Error(), retryAt, now); rerr != nil {
		if errors.Is(rerr, store.ErrSMSClaimLost) {
			log.Error("sms failure not recorded: its claim lapsed during the post (SMS_CLAIM_LEASE)", "err", err, "lease", d.cfg.Lease)
			return
		}
		log.Error("sms failure not recorded: the message is tried again when its claim lapses", "err", rerr, "cause", err)
		return
	}
	if final {
		d.m.failed.Inc()
		log.Error("sms failed for good: it stays Failed in smsQueue for a person to look at", "err", err)
		return
	}
	d.m.retries.Inc()
	log.Warn("sms not sent; it is retried", "attempt", m.Attempts, "of", d.cfg.MaxAttempts, "err", err,
		"next", retryAt.Sub(now).Round(time.Millisecond), "nextAt", retryAt.UTC().Format(time.RFC3339))
}

// sent records a message the sender accepted.
func (d *Drainer) sent(ctx context.Context, log *slog.Logger, m store.SMSMessage, at time.Time) {
	what, record := "sms sent", d.q.SetSMSSent
	if d.logOnly {
		what, record = "sms logged (not sent: no SMS_SEND_URL)", d.q.SetSMSLogged
		d.m.logged.Inc()
	} else {
		d.m.sent.Inc()
	}
	if err := record(ctx, m.ID, m.Attempts, at); err != nil {
		if errors.Is(err, store.ErrSMSClaimLost) {
			log.Error(what+" but not recorded: its claim lapsed during the post (SMS_CLAIM_LEASE)", "lease", d.cfg.Lease)
			return
		}
		log.Error(what+" but not recorded: it is sent again when its claim lapses", "err", err)
		return
	}
	log.Info(what)
}

type collectors struct {
	sent, logged, failed, retries prometheus.Counter
	handoff                       prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer, q Queue) (*collectors, error) {
	m := &collectors{
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "primeflow_sms_sent_total",
			Help: "SMS messages the SMS endpoint accepted.",
		}),
		logged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "primeflow_sms_logged_total",
			Help: "SMS messages logged instead of sent: no SMS_SEND_URL (bin/primeflow on the Prime simulator).",
		}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "primeflow_sms_failed_total",
			Help: "SMS messages given up on (attempts used up or refused for good); they stay Failed in smsQueue.",
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "primeflow_sms_send_retries_total",
			Help: "Failed SMS sends that will be tried again.",
		}),
		handoff: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "primeflow_sms_handoff_seconds",
			Help:    "Time from an SMS being queued (for make-safe: the detection that raised the call) to its first hand-off to the sender.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
		}),
	}
	if err := errors.Join(metrics.Register(reg, &m.sent), metrics.Register(reg, &m.logged), metrics.Register(reg, &m.failed),
		metrics.Register(reg, &m.retries), metrics.Register(reg, &m.handoff), metrics.Replace(reg, queueCollector{q})); err != nil {
		return nil, fmt.Errorf("sms metrics: %w", err)
	}
	return m, nil
}

// queueCollector reports smsQueue's rows by state at scrape time.
type queueCollector struct{ q Queue }

var queueDesc = prometheus.NewDesc("primeflow_sms_queue_messages",
	"Messages in smsQueue by state: Queued, Sending, Sent, Logged (handed to the log, never sent: no SMS_SEND_URL), Failed (Failed waits for a person).",
	[]string{"state"}, nil)

func (c queueCollector) Describe(ch chan<- *prometheus.Desc) { ch <- queueDesc }

func (c queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.q.CountSMS(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(queueDesc, err)
		return
	}
	for state, n := range counts {
		ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, float64(n), string(state))
	}
}
