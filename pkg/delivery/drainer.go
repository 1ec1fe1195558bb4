package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/prometheus/client_golang/prometheus"
)

// Config is a drainer's configuration, read with caarlos0/env under the
// kind's prefix (`envPrefix:"SMS_"` reads SMS_MAX_ATTEMPTS, …).
type Config struct {
	// MaxAttempts is how many times a row is tried before it is Failed.
	MaxAttempts int `env:"MAX_ATTEMPTS" envDefault:"5"`
	// Backoff is the wait after the n-th failed attempt (the last entry
	// repeats).
	Backoff retry.Backoff `env:"RETRY_BACKOFF" envDefault:"5s,30s,2m,10m"`
	// Lease is how long a claim holds a row. It must outlast a send
	// (ValidateWith): a claim that lapses lets the row be sent again.
	Lease time.Duration `env:"CLAIM_LEASE" envDefault:"2m"`
	// Sweep is the slowest the queue is looked at, kicks or not.
	Sweep time.Duration `env:"SWEEP_INTERVAL" envDefault:"1m"`
	// Workers is how many rows are sent at once.
	Workers int `env:"SEND_WORKERS" envDefault:"4"`
}

// Validate refuses the settings the drainer cannot work with, each naming
// its variable under prefix ("SMS_"; config.Refusal). NewDrainer calls it.
func (c Config) Validate(prefix string) error {
	return errors.Join(
		config.Positive(prefix+"MAX_ATTEMPTS", c.MaxAttempts),
		config.Steps(prefix+"RETRY_BACKOFF", c.Backoff),
		config.Positive(prefix+"CLAIM_LEASE", c.Lease),
		config.Positive(prefix+"SWEEP_INTERVAL", c.Sweep),
		config.Positive(prefix+"SEND_WORKERS", c.Workers))
}

// ValidateWith is Validate for a drainer that posts with send, as a
// service checks its settings at start: with send.Validate, a timeout of
// the post's that is not above zero (a zero in a config made in code is
// SendTimeout's default; read from the environment, where it has a
// default of its own, it is refused), and a lease that a post can outlast:
// a claim that lapses during a post lets the row be posted again.
func (c Config) ValidateWith(prefix string, send HTTPConfig) error {
	var lease error
	if t := send.SendTimeout(); c.Lease > 0 && c.Lease <= t {
		lease = config.Refuse(prefix+"CLAIM_LEASE", "must be longer than %sSEND_TIMEOUT (%s): a claim that lapses during a post lets it be posted again", prefix, t)
	}
	return errors.Join(lease, c.Validate(prefix), send.Validate(prefix), config.Positive(prefix+"SEND_TIMEOUT", send.Timeout))
}

// Drainer sends a queue's rows: when kicked, when a retry falls due, and at
// least every Sweep. When ctx ends, a post that has started runs to its end
// and is recorded, and a claim not yet posted is given back.
type Drainer[M any] struct {
	cfg  Config
	kind Kind
	q    Queue[M]
	s    Sender[M]
	// notSent, when set, says why s sends nothing (Options.NotSent).
	notSent string
	log     *slog.Logger
	m       Collectors
	kick    chan struct{}
}

// Options are what a Drainer is made of besides its Config.
type Options[M any] struct {
	Kind   Kind
	Queue  Queue[M]
	Sender Sender[M]
	// NotSent, when set, says that Sender sends nothing, and why
	// (NotSentBy: a NotSender's NotSent, for a Sender that may be wrapped):
	// its rows are recorded Logged, never Sent, and counted as logged.
	NotSent string
	Log     *slog.Logger
	// Collectors are the kind's metrics, registered with Registry.
	Collectors Collectors
	Registry   prometheus.Registerer
}

// NewDrainer makes a drainer and registers its metrics.
func NewDrainer[M any](cfg Config, o Options[M]) (*Drainer[M], error) {
	if err := cfg.Validate(o.Kind.Prefix); err != nil {
		return nil, fmt.Errorf("%s: %w", o.Kind.Name, err)
	}
	m := o.Collectors
	if !m.complete() {
		return nil, errNoCollectors
	}
	if err := m.register(o.Registry, o.Queue); err != nil {
		return nil, fmt.Errorf("%s metrics: %w", o.Kind.Name, err)
	}
	return &Drainer[M]{cfg: cfg, kind: o.Kind, q: o.Queue, s: o.Sender, notSent: o.NotSent, log: o.Log, m: m, kick: make(chan struct{}, 1)}, nil
}

// Kick asks for a drain now. It never blocks; kicks while a drain runs
// collapse into one more drain.
func (d *Drainer[M]) Kick() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// Run drains until ctx ends: at once, then on each kick, when the next row
// falls due, and at least every Sweep.
func (d *Drainer[M]) Run(ctx context.Context) error {
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
			d.log.Warn(d.kind.Name+" queue drain failed; trying again", "err", err)
			wait = min(wait, 5*time.Second)
		} else if at, ok, err := d.q.NextDue(ctx); err != nil {
			if ctx.Err() == nil {
				d.log.Warn(d.kind.Name+" queue: next due", "err", err)
			}
		} else if ok {
			wait = min(wait, max(time.Until(at), 20*time.Millisecond))
		}
		timer.Reset(wait)
	}
}

// Drain sends every row due now, Workers at a time, and returns when none
// is left, the queue cannot be read, or ctx ends; it returns only once the
// posts it started have finished and been recorded.
func (d *Drainer[M]) Drain(ctx context.Context) error {
	for ctx.Err() == nil {
		// The claim is not cut short by ctx: a claim the database made
		// while the caller gave up would hold its rows, an attempt spent,
		// until the lease lapses. Claimed, they go to send, which gives them
		// back when ctx has ended.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		claims, err := d.q.Claim(cctx, time.Now(), d.cfg.Lease, d.cfg.MaxAttempts, d.cfg.Workers)
		cancel()
		if err != nil {
			return err
		}
		if len(claims) == 0 {
			return nil
		}
		var wg sync.WaitGroup
		for _, c := range claims {
			wg.Go(func() { d.send(ctx, c) })
		}
		wg.Wait()
	}
	return nil
}

// recordTimeout bounds a claim and the write of a post's outcome, which a
// shutdown does not cut short.
const recordTimeout = 10 * time.Second

// send hands one claimed row to the sender and records the outcome.
func (d *Drainer[M]) send(ctx context.Context, c Claim[M]) {
	log := d.log.With(append([]any{d.kind.LogKey, c.ID, "attempt", c.Attempt}, c.Log...)...)
	// What is written after ctx ends must still be written.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if ctx.Err() != nil {
		// Stopping before the post: give the claim back unused, so the row
		// is due again at once (for another process, or this one's next
		// start) rather than after its lease, and keeps its attempt.
		if err := d.q.Release(rctx, c.ID, c.Attempt, time.Now()); err != nil {
			log.Warn(d.kind.Name+" claim not given back: it is sent when the claim lapses", "err", err)
		}
		return
	}
	// A post that has started finishes whatever ctx does: cut short, the
	// endpoint may have acted on it all the same. The Sender bounds it.
	handed := time.Now()
	err := d.s.Send(context.WithoutCancel(ctx), c.Msg)
	now := time.Now()
	var w retry.Waiter
	if errors.As(err, &w) {
		d.wait(rctx, log, c, err, now.Add(d.waitFor(w, now.Sub(c.QueuedUTC))), now)
		return
	}
	if c.Attempt == 1 {
		d.m.Handoff.Observe(handed.Sub(c.QueuedUTC).Seconds())
	}
	if err == nil {
		d.sent(rctx, log, c, now)
		return
	}
	final := errors.Is(err, ErrPermanent) || c.Attempt >= d.cfg.MaxAttempts
	var retryAt time.Time
	if !final {
		// The endpoint's Retry-After, when it asks for longer than the
		// backoff (and no more than maxRetryAfter).
		retryAt = now.Add(max(d.cfg.Backoff.After(c.Attempt), min(RetryAfter(err), maxRetryAfter)))
	}
	if rerr := d.q.SetFailed(rctx, c.ID, c.Attempt, err.Error(), retryAt, now); rerr != nil {
		if errors.Is(rerr, store.ErrClaimLost) {
			log.Error(d.kind.Name+" failure not recorded: its claim lapsed during the post ("+d.kind.Prefix+"CLAIM_LEASE)", "err", err, "lease", d.cfg.Lease)
			return
		}
		log.Error(d.kind.Name+" failure not recorded: it is tried again when its claim lapses", "err", rerr, "cause", err)
		return
	}
	if final {
		d.m.Failed.Inc()
		log.Error(d.kind.Name+" failed for good: it stays Failed in "+d.kind.Table+" for a person to look at", "err", err)
		return
	}
	d.m.Retries.Inc()
	// The attempt is on log already: with "of", the line says which attempt
	// failed, why, and when the next comes.
	log.Warn(d.kind.Name+" not sent; it is retried", "of", d.cfg.MaxAttempts, "err", err,
		"next", retryAt.Sub(now).Round(time.Millisecond), "nextAt", retryAt.UTC().Format(time.RFC3339))
}

// maxRetryAfter is the longest an endpoint's Retry-After holds a retry or
// a wait.
const maxRetryAfter = time.Hour

// waitFor is how long a row waits now for w, having waited waited since
// it was queued: as long again (Config.Backoff.AfterWaiting: between its
// first and last step), or as w asks when that is longer (at most
// maxRetryAfter). A row whose endpoint stays down is so looked at again
// less and less often, up to the last step, however long that lasts.
func (d *Drainer[M]) waitFor(w retry.Waiter, waited time.Duration) time.Duration {
	return max(d.cfg.Backoff.AfterWaiting(waited), min(w.RetryAfter(), maxRetryAfter))
}

// wait records a row that could not be sent yet (a retry.Waiter: the
// endpoint is not taking posts, or something the message needs is not
// there) as due again at until, its attempt not counted.
func (d *Drainer[M]) wait(ctx context.Context, log *slog.Logger, c Claim[M], cause error, until, at time.Time) {
	why, level := cause.Error(), slog.LevelInfo
	if errors.Is(cause, ErrUnavailable) {
		// The row's last error says it waits, not that it failed.
		why, level = "waiting for the endpoint, no attempt counted: "+why, slog.LevelWarn
	}
	if err := d.q.Defer(ctx, c.ID, c.Attempt, why, until, at); err != nil {
		log.Error(d.kind.Name+" wait not recorded: it is tried again when its claim lapses", "err", err, "cause", cause)
		return
	}
	d.m.Waits.Inc()
	log.Log(ctx, level, d.kind.Name+" waits; no attempt counted", "why", cause, "waited", at.Sub(c.QueuedUTC).Round(time.Second),
		"next", until.Sub(at).Round(time.Millisecond), "nextAt", until.UTC().Format(time.RFC3339))
}

// sent records a row the sender accepted: Sent, or Logged when the sender
// sends nothing.
func (d *Drainer[M]) sent(ctx context.Context, log *slog.Logger, c Claim[M], at time.Time) {
	what, record := d.kind.Name+" sent", d.q.SetSent
	if d.notSent != "" {
		what, record = d.kind.Name+" logged (not sent: "+d.notSent+")", d.q.SetLogged
		d.m.Logged.Inc()
	} else {
		d.m.Sent.Inc()
	}
	if err := record(ctx, c.ID, c.Attempt, at); err != nil {
		if errors.Is(err, store.ErrClaimLost) {
			log.Error(what+" but not recorded: its claim lapsed during the post ("+d.kind.Prefix+"CLAIM_LEASE)", "lease", d.cfg.Lease)
			return
		}
		log.Error(what+" but not recorded: it is sent again when its claim lapses", "err", err)
		return
	}
	log.Info(what)
}
