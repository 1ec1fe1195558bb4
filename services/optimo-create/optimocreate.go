// Package optimocreate turns Prime's appointments and work orders into
// OptimoRoute orders (§5.2 step 5, §8.1): on optimo.create.requested, sent by
// child-mirror after it mirrors an appointment, and on the parent flow's
// schedule (§8.1, NextRun), it takes the optimo-create lock; a run in M–F
// 15:00–16:59 first asks child-mirror to sweep Prime's appointments of the
// coming days into the mirror (the safety net for a webhook Prime never
// sent); then it writes the orders of the appointment queue and then of
// the work-order queue (primeAppointments and primeWorkOrders compared with
// optimoRouteOrder by version), deletes the orders of cancelled or deleted
// appointments, records each order with spOptimoRouteUpsertOrder (which
// marks its date NotPlanned), releases the lock and asks optimo-plan to plan
// (optimo.plan.requested). It never plans itself and never passes dates on
// (§10.7).
//
// Requests coalesce: a burst causes one run, and requests that arrive during
// a run cause one more, which starts after them.
package optimocreate

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/dryrun"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/lock"
	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
	"github.com/ethosbuilding/primeflow/pkg/optimorun"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/nats-io/nats.go"

	_ "time/tzdata" // OPTIMO_TIMEZONE resolves without the host's zoneinfo
)

// Durable is optimo-create's consumer of optimo.create.requested on OPTIMO.
const Durable = events.DurableOptimoCreate

// Source is what optimo-create names itself as in the plan requests it sends.
const Source = "optimo-create"

// Config is optimo-create's own configuration.
type Config struct {
	// Lock is the optimo-create lock: OPTIMO_CREATE_LOCK_TTL (12m),
	// OPTIMO_CREATE_LOCK_WAIT (6m, §8.3), OPTIMO_CREATE_LOCK_RENEW.
	Lock lock.Config `envPrefix:"OPTIMO_CREATE_"`
	// Every runs on a schedule too, as the parent flow did (§8.1): it is
	// what recovers a hand-off that was lost. Unset is the §8.1 schedule; a
	// duration overrides it with a flat interval; "0" or "off" runs only on
	// request (see Schedule).
	Every Schedule `env:"OPTIMO_CREATE_EVERY"`
	// OnStart runs when the service starts, for requests acked before a crash.
	OnStart bool `env:"OPTIMO_CREATE_ON_START" envDefault:"true"`
	// Batch is how many queued sources one queue read takes.
	Batch int `env:"OPTIMO_CREATE_BATCH" envDefault:"500"`
	// OrderDuration is every order's service time: Prime's appointment gives
	// the window the visit may start in, not how long it takes.
	OrderDuration time.Duration `env:"OPTIMO_ORDER_DURATION" envDefault:"1h"`
	// AssignDrivers pins each order to the OptimoRoute driver whose external
	// id is the Prime user the visit is assigned to (assignedId); false
	// leaves the choice of driver to planning.
	AssignDrivers bool `env:"OPTIMO_ASSIGN_DRIVERS" envDefault:"true"`
	// TimeZone is the OptimoRoute account's: order dates and windows are its
	// local days and times.
	TimeZone string `env:"OPTIMO_TIMEZONE" envDefault:"Australia/Melbourne"`
	// SweepDays is how many days after today the appointment sweep of a run
	// in M–F 15:00–16:59 covers (§8.1): the account's local days, today
	// through today + SweepDays.
	SweepDays int `env:"OPTIMO_SWEEP_DAYS" envDefault:"7"`
	// SweepTimeout bounds the wait for the sweep's reply; a sweep that runs
	// out is logged and counted, and the queues are drained all the same.
	// New takes a zero, in a Config made in code, for the default.
	SweepTimeout time.Duration `env:"OPTIMO_SWEEP_TIMEOUT" envDefault:"5m"`
}

// lockPrefix is what the lock's variables start with.
const lockPrefix = "OPTIMO_CREATE_"

// Validate refuses the settings optimo-create cannot run with, each naming
// its variable (config.Refusal). New calls it.
func (c Config) Validate() error {
	var order error
	if c.OrderDuration < time.Minute {
		order = config.Refuse("OPTIMO_ORDER_DURATION", "must be at least 1m")
	}
	_, zone := optimorun.Zone(c.TimeZone)
	return errors.Join(config.Positive("OPTIMO_CREATE_BATCH", c.Batch), order, zone,
		config.NotNegative("OPTIMO_SWEEP_DAYS", c.SweepDays), config.Positive("OPTIMO_SWEEP_TIMEOUT", c.SweepTimeout),
		c.Lock.Named(lockPrefix).Validate())
}

// DefaultConfig is optimo-create's configuration with no variable set:
// every setting at its default.
func DefaultConfig() Config { return config.MustDefaults[Config]() }

// Creator is the optimo-create service.
type Creator struct {
	cfg     Config
	store   store.Store
	nc      *nats.Conn
	optimo  *optimoroute.Client
	log     *slog.Logger
	now     func() time.Time
	mapping mapping
	runs    *optimorun.Runner
	metrics *collectors

	sweepMu   sync.Mutex
	lastSweep time.Time // when the last sweep was asked for
}

// Option changes how New builds optimo-create.
type Option func(*Creator)

// WithClock sets the time a run goes by (default time.Now): whether it is
// in the sweep band, the days the sweep covers, and today for the queue.
// The schedule's timer runs on the real clock.
func WithClock(now func() time.Time) Option { return func(c *Creator) { c.now = now } }

// New builds optimo-create from the shared Deps, its Config and the
// OptimoRoute client it shares with optimo-plan.
func New(ctx context.Context, cfg Config, d service.Deps, optimo *optimoroute.Client, opts ...Option) (*Creator, error) {
	if cfg.SweepTimeout == 0 {
		cfg.SweepTimeout = defaultSweepTimeout
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if optimo == nil {
		return nil, errors.New("optimo-create: no OptimoRoute client")
	}
	zone, err := optimorun.Zone(cfg.TimeZone)
	if err != nil {
		return nil, err
	}
	d.Log = d.Log.With("component", "optimo-create")
	m, err := newMetrics(d.Metrics)
	if err != nil {
		return nil, err
	}
	c := &Creator{cfg: cfg, store: d.Store, nc: d.NC, optimo: optimo, log: d.Log, now: time.Now,
		mapping: mapping{zone: zone, duration: cfg.OrderDuration, assignDrivers: cfg.AssignDrivers}, metrics: m}
	for _, opt := range opts {
		opt(c)
	}
	c.runs, err = optimorun.New(ctx, optimorun.Spec{
		Name:     "optimo-create",
		Consumer: events.ConsumerOptimoCreate,
		LockKey:  lock.KeyOptimoCreate,
		Lock:     cfg.Lock.Named(lockPrefix),
		Busy:     "order run gave up waiting for the lock; the queues keep their rows for the next run",
		Schedule: cfg.Every.next(zone),
		OnStart:  cfg.OnStart,
		Metrics:  m.run,
	}, d, c.scheduled)
	if err != nil {
		return nil, err
	}
	c.log.Info("optimo-create schedule", "every", cfg.Every.String(), "zone", zone.String(), "sweepDays", cfg.SweepDays)
	return c, nil
}

// Run consumes create requests and writes orders until ctx ends.
func (c *Creator) Run(ctx context.Context) error { return c.runs.Run(ctx) }

// scheduled is one coalesced run; its outcome is logged and counted, and
// its error returned (a failed run is run again after a backoff).
func (c *Creator) scheduled(ctx context.Context) error {
	res, err := c.Create(ctx)
	switch {
	case err == nil:
		c.log.Info("order run finished", "written", res.Written, "deleted", res.Deleted, "refused", res.Refused, "dates", res.Dates, "swept", res.Swept)
	case ctx.Err() != nil:
		c.log.Info("order run interrupted by shutdown", "err", err)
	default:
		c.log.Error("order run failed", "err", err, "written", res.Written, "deleted", res.Deleted, "refused", res.Refused)
	}
	return err
}

// Help is what bin/optimo-create --help prints: what it is and the variables its
// Main reads.
func Help() service.Help {
	return service.Help{Name: "optimo-create", Docs: []string{"docs/production.md"}, Configs: []any{Config{}, optimoroute.Config{}, dryrun.Config{}, service.Config{}},
		Summary: "writes OptimoRoute orders from the appointment and work-order queues (§5.2, §8.1), on optimo.create.requested and on §8.1's schedule (the appointment sweep first, M–F 15:00–16:59), then asks optimo-plan to plan."}
}

// Main runs optimo-create as a process of its own.
func Main(ctx context.Context, getenv func(string) string, stderr io.Writer) error {
	var cfg Config
	own := []config.Part{config.Read(&cfg, Config.Validate)}
	return optimorun.Main(ctx, "optimo-create", getenv, stderr, own, func(ctx context.Context, d service.Deps, oc *optimoroute.Client) (service.Runner, error) {
		return New(ctx, cfg, d, oc)
	})
}
