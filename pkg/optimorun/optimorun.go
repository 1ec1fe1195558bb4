// Package optimorun runs an OptimoRoute job under its lock, on request: what
// optimo-create (§8.1) and optimo-plan (§8.2) share.
//
// Requests on the service's subject of the OPTIMO stream are acked and
// coalesce into runs (pkg/coalesce): a burst causes one run, and requests
// that arrive during a run cause one more, which starts after them. A
// schedule (a fixed interval, or one of the service's own) and a run at
// start recover requests lost before they arrived.
// Each run takes the service's lock, waiting up to the lock's budget (§8.3),
// and releases it before it returns. The requests, the runs by result and
// the time each run held the lock are counted in the service's own metrics.
package optimorun

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/coalesce"
	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/consume"
	"github.com/ethosbuilding/primeflow/pkg/dryrun"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/lock"
	"github.com/ethosbuilding/primeflow/pkg/metrics"
	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
	"github.com/ethosbuilding/primeflow/pkg/outbox"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// Spec is one service's runs.
type Spec struct {
	// Name is the service's name, which New's errors carry.
	Name string
	// Consumer is the service's consumer of its requests on
	// events.StreamOptimo.
	Consumer events.Consumer
	// Lock is the service's lock: its key and its configuration.
	LockKey string
	Lock    lock.Config
	// Busy is what is logged, as an error, when a run gives up waiting for
	// the lock (§8.3): what happens to the work it left.
	Busy string
	// Schedule also requests a run at each time it gives (coalesce.Every for
	// a fixed interval, or a schedule that changes with the time of day,
	// §8.1); nil runs only on request.
	Schedule coalesce.Schedule
	// OnStart requests a run when Run starts, for requests acked before a
	// crash.
	OnStart bool
	// Window is how long a run waits after the request that owed it, so
	// that a burst of requests is one run even when a run is quicker than
	// the gap between them (coalesce.Window); zero starts it at once.
	Window time.Duration
	// Result names the result of a run that ended with err, for the runs
	// counter; nil is DefaultResult.
	Result func(err error) string
	// Metrics are the service's collectors for its runs, registered
	// (Metrics.Register).
	Metrics Metrics
	// Retry is the least wait before a failed run runs again (the wait
	// grows with the time runs have been failing, to retryMax); zero is
	// retryFirst.
	Retry time.Duration
}

// DefaultResult is "ok" for a run that ended without an error and "error"
// otherwise.
func DefaultResult(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// Metrics are a service's collectors for its runs; the service names them.
type Metrics struct {
	// Requests counts the requests received.
	Requests prometheus.Counter
	// Runs counts the runs by result (label "result"): ok, error,
	// lock_busy, and what Spec.Result adds.
	Runs *prometheus.CounterVec
	// Seconds observes how long each run held the lock, from taking it to
	// releasing it.
	Seconds prometheus.Histogram
}

// Register registers the three collectors with reg, each as
// metrics.Register does.
func (m Metrics) Register(reg prometheus.Registerer) (Metrics, error) {
	err := errors.Join(metrics.Register(reg, &m.Requests), metrics.Register(reg, &m.Runs), metrics.Register(reg, &m.Seconds))
	// The results every runner has are exported from the start, at 0: an
	// alert on lock_busy reads 0, not "no data", and sees the first one.
	for _, r := range []string{"ok", "error", "lock_busy"} {
		m.Runs.WithLabelValues(r)
	}
	return m, err
}

// Zone is the location OPTIMO_TIMEZONE names, the OptimoRoute account's,
// whose days and times both services go by; a name that is none is
// refused (config.Refusal), alike for both.
func Zone(name string) (*time.Location, error) {
	zone, err := time.LoadLocation(name)
	if err != nil || name == "" {
		// "" would be UTC, not the account's zone
		return nil, config.Refuse("OPTIMO_TIMEZONE", "not a time zone of the IANA database (Australia/Melbourne)")
	}
	return zone, nil
}

// Runner consumes a service's requests and runs its job, coalesced, each
// run under the service's lock.
type Runner struct {
	spec    Spec
	js      jetstream.JetStream
	log     *slog.Logger
	reg     prometheus.Registerer
	locks   *lock.Locker
	metrics Metrics
	loop    *coalesce.Loop
	job     func(ctx context.Context) error

	// failingSince is when the runs began failing (zero while they
	// succeed); retry requests the run after the last failure. Both belong
	// to the loop's goroutine.
	failingSince time.Time
	retry        *time.Timer
	asked        atomic.Int64 // requests since the last run started
}

// A failed run is run again after as long as the runs have been failing,
// at least Spec.Retry (retryFirst) and at most retryMax: the wait grows
// with the outage, however many requests fail during it.
const (
	retryFirst = 15 * time.Second
	retryMax   = 5 * time.Minute
)

// New builds the runner of spec from d (its NATS, its logger, its
// registry, which the consumer's metrics go to), with job as what each run
// does: job is handed the run's context, calls Locked for the part that
// needs the lock, and returns the run's error. A run that failed otherwise
// than by giving up on a busy lock (§8.3) or by the end of its context —
// OptimoRoute's own trouble, no answer, a database error — is followed by
// another after a backoff (Spec.Retry, growing with the time the runs have
// been failing up to retryMax), so that it waits seconds, not the
// schedule's next run.
func New(ctx context.Context, spec Spec, d service.Deps, job func(ctx context.Context) error) (*Runner, error) {
	if spec.Result == nil {
		spec.Result = DefaultResult
	}
	spec.Retry = cmp.Or(spec.Retry, retryFirst)
	locks, err := lock.New(ctx, d.JS, spec.Lock, d.Log)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", spec.Name, err)
	}
	r := &Runner{spec: spec, js: d.JS, log: d.Log, reg: d.Metrics, locks: locks, metrics: spec.Metrics, job: job}
	r.loop = coalesce.New(r.run, spec.Schedule, coalesce.Window(spec.Window))
	r.retry = time.AfterFunc(time.Hour, r.loop.Request)
	r.retry.Stop()
	return r, nil
}

// run is one run of the job, and the retry a failure asks for.
func (r *Runner) run(ctx context.Context) {
	// How many requests this run serves: a burst coalesced shows here.
	r.log.Info(r.spec.Name+" run started", "requests", r.asked.Swap(0))
	err := r.job(ctx)
	if err == nil || errors.Is(err, lock.ErrBusy) || ctx.Err() != nil {
		r.failingSince = time.Time{}
		return
	}
	if r.failingSince.IsZero() {
		r.failingSince = time.Now()
	}
	wait := min(max(r.spec.Retry, time.Since(r.failingSince)), retryMax)
	r.log.Warn(r.spec.Name+" run failed; running again", "err", err, "in", wait, "at", time.Now().Add(wait).UTC().Format(time.RFC3339),
		"failingSince", r.failingSince)
	r.retry.Reset(wait)
}

// Run consumes requests and runs the job until ctx ends; a run in progress
// finishes before Run returns.
func (r *Runner) Run(ctx context.Context) error {
	if r.spec.OnStart {
		r.loop.Request()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer r.retry.Stop()
	var wg sync.WaitGroup
	wg.Go(func() { r.loop.Run(ctx) })
	err := consume.Run(ctx, r.js, consume.Spec{
		Consumer: r.spec.Consumer,
	}, r.log, r.reg, r.request)
	cancel()
	wg.Wait()
	return err
}

// request acks a request and owes it a run that starts after it. The run
// needs nothing from the body but that it is a request
// (events.DecodeRunRequest): what is not one is dropped, logged and
// counted (primeflow_consumer_messages_total{result="drop"}), and runs
// nothing.
func (r *Runner) request(_ context.Context, msg jetstream.Msg) error {
	source, reason, err := events.DecodeRunRequest(msg.Data())
	if err != nil {
		return consume.Drop(fmt.Errorf("%s: %w", msg.Subject(), err))
	}
	r.metrics.Requests.Inc()
	r.log.Debug("run requested", "source", source, "reason", reason)
	r.asked.Add(1)
	r.loop.Request()
	return nil
}

// Locked takes the lock, runs job with the lock's context and releases the
// lock, whatever job returned, before it returns job's error. Giving up
// waiting for the lock is an error matching lock.ErrBusy, logged and
// counted as a lock_busy run, that leaves the lock alone (§8.3); a NATS
// failure while taking or releasing it is tried again until NATS answers
// (lock.Locker.Take, lock.Lock.Release), so that a failover delays a run
// by seconds instead of dropping it until the schedule's next run. A run
// that took the lock is timed and counted by its result.
func (r *Runner) Locked(ctx context.Context, job func(ctx context.Context) error) error {
	start := time.Now()
	lk, err := r.locks.Take(ctx, r.spec.LockKey)
	if err != nil {
		if errors.Is(err, lock.ErrBusy) {
			r.metrics.Runs.WithLabelValues("lock_busy").Inc()
			r.log.Error(r.spec.Busy, "err", err)
		}
		return err
	}
	err = job(lk.Context())
	// Not cut short by a shutdown: Release tries until the lock is released
	// or no longer ours, which its TTL bounds.
	if rerr := lk.Release(context.WithoutCancel(ctx)); rerr != nil {
		r.log.Warn("releasing the "+r.spec.LockKey+" lock", "err", rerr)
	}
	r.metrics.Seconds.Observe(time.Since(start).Seconds())
	r.metrics.Runs.WithLabelValues(r.spec.Result(err)).Inc()
	return err
}

// Ask publishes v as JSON on subject, how a run hands on to another
// service: each publish waits at most 5 seconds for the stream's ack, and
// while NATS is unavailable (a failover: outbox.FailureReason) the publish
// is tried again with backoff until it is stored or ctx ends. A message
// NATS refuses is returned at once.
func (r *Runner) Ask(ctx context.Context, subject string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = r.js.Publish(pctx, subject, data)
		cancel()
		if err == nil || ctx.Err() != nil || outbox.FailureReason(err) == outbox.ReasonRejected {
			return err
		}
		pause := askRetry.After(attempt)
		r.log.Warn("asking another service failed; trying again", "subject", subject, "in", pause, "err", err)
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(pause):
		}
	}
}

// askRetry paces Ask's publishes while NATS is unavailable.
var askRetry = retry.Backoff{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second}

// Main runs a service as a process of its own: it reads the OptimoRoute
// client's configuration from getenv with the service's own (own, see
// service.Main), builds the client (its collectors in the service's
// registry; with OPTIMOROUTE_DRY_RUN, answered inside the process,
// pkg/dryrun) and hands it to build inside service.Main.
func Main(ctx context.Context, name string, getenv func(string) string, stderr io.Writer, own []config.Part,
	build func(ctx context.Context, d service.Deps, optimo *optimoroute.Client) (service.Runner, error)) error {
	var ocfg optimoroute.Config
	var dry dryrun.Config
	own = slices.Concat(own, []config.Part{config.Read(&ocfg, optimoroute.Config.Validate), config.Read(&dry, nil),
		config.Check(func() error { return CheckKey(ocfg, dry) })})
	return service.Main(ctx, name, getenv, stderr, own, func(ctx context.Context, d service.Deps, _ *service.Router) (service.Runner, error) {
		oc, err := NewClient(ocfg, dry, d.Log)
		if err != nil {
			return nil, err
		}
		if err := metrics.Replace(d.Metrics, oc.Collectors()...); err != nil {
			return nil, err
		}
		return build(ctx, d, oc)
	})
}

// CheckKey refuses a blank OPTIMOROUTE_API_KEY but for a dry run, which
// answers inside the process (NewClient).
func CheckKey(cfg optimoroute.Config, dry dryrun.Config) error {
	if dry.OptimoRoute {
		return nil
	}
	return cfg.CheckKey()
}

// NewClient is the OptimoRoute client of cfg, or with dry.OptimoRoute the
// dry run's, which answers inside the process and records its writes
// (OPTIMOROUTE_API_KEY is not needed then).
func NewClient(cfg optimoroute.Config, dry dryrun.Config, log *slog.Logger) (*optimoroute.Client, error) {
	if !dry.OptimoRoute {
		return optimoroute.New(cfg)
	}
	if cfg.APIKey == "" {
		cfg.APIKey = "dry-run"
	}
	opt, err := dryrun.OpenOptimoRoute(dry, cfg.APIKey, log)
	if err != nil {
		return nil, err
	}
	return optimoroute.New(cfg, opt)
}
