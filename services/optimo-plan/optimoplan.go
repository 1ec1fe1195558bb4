// Package optimoplan plans OptimoRoute's days: on optimo.plan.requested
// (sent by optimo-create after it writes orders, and by the portals after a
// booking) it takes the optimo-plan lock, starts planning every NotPlanned
// date, polls the plans, writes each outcome only while the date is still in
// the state the run observed (§8.4), reads the routes back into
// optimoRouteOrder, refreshes the orders the routes left out, releases the
// lock and asks for the queued SMS messages to be sent (§8.2).
//
// Requests coalesce: a run starts OPTIMO_PLAN_DEBOUNCE after the request
// that owed it, so a burst causes one run even when each run would end
// before the next request came, and requests that arrive during a run
// cause one more, which starts after them.
package optimoplan

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/coalesce"
	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/dryrun"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/lock"
	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
	"github.com/ethosbuilding/primeflow/pkg/optimorun"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/ethosbuilding/primeflow/pkg/store"

	_ "time/tzdata" // OPTIMO_TIMEZONE resolves without the host's zoneinfo
)

// Durable is optimo-plan's consumer of optimo.plan.requested on OPTIMO.
const Durable = events.DurableOptimoPlan

// Source is what optimo-plan names itself as in the messages it sends.
const Source = "optimo-plan"

// Config is optimo-plan's own configuration.
type Config struct {
	// Lock is the optimo-plan lock: OPTIMO_PLAN_LOCK_TTL (12m),
	// OPTIMO_PLAN_LOCK_WAIT (6m, §8.3), OPTIMO_PLAN_LOCK_RENEW.
	Lock lock.Config `envPrefix:"OPTIMO_PLAN_"`
	// PollInterval is the wait before each status poll (§8.2: 3 seconds).
	PollInterval time.Duration `env:"OPTIMO_PLAN_POLL_INTERVAL" envDefault:"3s"`
	// MaxPolls bounds the status polls of one run (§8.2: 60).
	MaxPolls int `env:"OPTIMO_PLAN_MAX_POLLS" envDefault:"60"`
	// Every runs a plan on a schedule too, the way the n8n flows had one:
	// dates left NotPlanned by a run that gave up are planned by the next.
	// Zero runs only on request.
	Every time.Duration `env:"OPTIMO_PLAN_EVERY" envDefault:"30m"`
	// OnStart runs a plan when the service starts, for requests acked
	// before a crash.
	OnStart bool `env:"OPTIMO_PLAN_ON_START" envDefault:"true"`
	// Debounce is how long a plan run waits after the request that owed
	// it: the requests of a burst (a portal's bookings, an order run's
	// dates) share one run even when a run with nothing queued ends before
	// the next request comes. Zero starts a run at once.
	Debounce time.Duration `env:"OPTIMO_PLAN_DEBOUNCE" envDefault:"1s"`
	// TimeZone is the OptimoRoute account's: routes give local times.
	TimeZone string `env:"OPTIMO_TIMEZONE" envDefault:"Australia/Melbourne"`
}

// lockPrefix is what the lock's variables start with.
const lockPrefix = "OPTIMO_PLAN_"

// Validate refuses the settings optimo-plan cannot run with, each naming
// its variable (config.Refusal). New calls it.
func (c Config) Validate() error {
	_, zone := optimorun.Zone(c.TimeZone)
	return errors.Join(config.Positive("OPTIMO_PLAN_POLL_INTERVAL", c.PollInterval), config.Positive("OPTIMO_PLAN_MAX_POLLS", c.MaxPolls),
		config.NotNegative("OPTIMO_PLAN_EVERY", c.Every), config.Between("OPTIMO_PLAN_DEBOUNCE", c.Debounce, 0, time.Minute), zone,
		c.Lock.Named(lockPrefix).Validate())
}

// DefaultConfig is optimo-plan's configuration with no variable set: every
// setting at its default.
func DefaultConfig() Config { return config.MustDefaults[Config]() }

// Planner is the optimo-plan service.
type Planner struct {
	cfg     Config
	store   store.Store
	optimo  *optimoroute.Client
	log     *slog.Logger
	zone    *time.Location
	runs    *optimorun.Runner
	metrics *collectors
}

// New builds optimo-plan from the shared Deps, its Config and the
// OptimoRoute client it shares with optimo-create (one client, so one limit
// of concurrent requests for the account).
func New(ctx context.Context, cfg Config, d service.Deps, optimo *optimoroute.Client) (*Planner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if optimo == nil {
		return nil, errors.New("optimo-plan: no OptimoRoute client")
	}
	zone, err := optimorun.Zone(cfg.TimeZone)
	if err != nil {
		return nil, err
	}
	d.Log = d.Log.With("component", "optimo-plan")
	m, err := newMetrics(d.Metrics)
	if err != nil {
		return nil, err
	}
	p := &Planner{cfg: cfg, store: d.Store, optimo: optimo, log: d.Log, zone: zone, metrics: m}
	p.runs, err = optimorun.New(ctx, optimorun.Spec{
		Name:     "optimo-plan",
		Consumer: events.ConsumerOptimoPlan,
		LockKey:  lock.KeyOptimoPlan,
		Lock:     cfg.Lock.Named(lockPrefix),
		Busy:     "plan run gave up waiting for the lock; the dates stay NotPlanned for the next run",
		Schedule: coalesce.Every(cfg.Every),
		OnStart:  cfg.OnStart,
		Window:   cfg.Debounce,
		Result:   result,
		Metrics:  m.run,
	}, d, p.scheduled)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Run consumes plan requests and plans until ctx ends.
func (p *Planner) Run(ctx context.Context) error { return p.runs.Run(ctx) }

// scheduled is one coalesced run; its outcome is logged and counted, and
// its error returned (a failed run is run again after a backoff).
func (p *Planner) scheduled(ctx context.Context) error {
	res, err := p.Plan(ctx)
	switch {
	case err == nil:
		p.log.Info("plan run finished", "started", res.Started, "failed", res.Failed, "deferred", res.Deferred,
			"finished", res.Finished, "routed", res.Routed, "refreshed", res.Refreshed)
	case ctx.Err() != nil:
		p.log.Info("plan run interrupted by shutdown", "err", err)
	default:
		p.log.Error("plan run failed", "err", err, "started", res.Started, "failed", res.Failed, "deferred", res.Deferred,
			"finished", res.Finished)
	}
	return err
}

// Help is what bin/optimo-plan --help prints: what it is and the variables its
// Main reads.
func Help() service.Help {
	return service.Help{Name: "optimo-plan", Docs: []string{"docs/production.md"}, Configs: []any{Config{}, optimoroute.Config{}, dryrun.Config{}, service.Config{}},
		Summary: "plans OptimoRoute's days (§8.2–§8.4): on optimo.plan.requested (coalesced) and every OPTIMO_PLAN_EVERY it starts planning every NotPlanned date, polls the plans, reads the routes back and asks for the SMS queue to be sent."}
}

// Main runs optimo-plan as a process of its own.
func Main(ctx context.Context, getenv func(string) string, stderr io.Writer) error {
	var cfg Config
	own := []config.Part{config.Read(&cfg, Config.Validate)}
	return optimorun.Main(ctx, "optimo-plan", getenv, stderr, own, func(ctx context.Context, d service.Deps, oc *optimoroute.Client) (service.Runner, error) {
		return New(ctx, cfg, d, oc)
	})
}
