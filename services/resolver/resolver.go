// Package resolver takes every webhook event from prime.webhook.>, works out
// what it refers to (§4), and hands it to the stage that handles its action
// on prime.resolved.<action>. It keeps one lane per job: a job's events are
// handled one at a time, in the order the stream holds them (log order but
// for rows published late: docs/architecture.md, "Lanes instead of a
// polling batch"), and the lane waits for the stage to finish each row
// before it takes the job's next event.
package resolver

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/consume"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/instance"
	"github.com/ethosbuilding/primeflow/pkg/pipeline"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primebudget"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// Durable is the resolver's consumer on PRIME_WEBHOOK.
const Durable = events.DurableResolver

// Config is the resolver's configuration.
type Config struct {
	// Lanes is how many jobs are worked on at once.
	Lanes int `env:"RESOLVER_LANES" envDefault:"64"`
	// LaneWait is how long a lane waits for a stage to finish a row before
	// it hands the event back to JetStream (no attempt counted) and moves on.
	LaneWait time.Duration `env:"RESOLVER_LANE_WAIT" envDefault:"5m"`
	// Backoff is the wait before an event that failed an attempt is tried
	// again, by attempt: the last value repeats.
	Backoff retry.Backoff `env:"RESOLVER_BACKOFF" envDefault:"2s,10s,1m,5m" envSeparator:","`
}

// Validate refuses the settings the resolver cannot run with, each naming
// its variable (config.Refusal). New calls it.
func (c Config) Validate() error {
	return errors.Join(config.Positive("RESOLVER_LANES", c.Lanes), config.Positive("RESOLVER_LANE_WAIT", c.LaneWait),
		config.Steps("RESOLVER_BACKOFF", c.Backoff))
}

// DefaultConfig is the resolver's configuration with no variable set: every
// setting at its default.
func DefaultConfig() Config { return config.MustDefaults[Config]() }

// Resolver is the resolver service.
type Resolver struct {
	cfg     Config
	store   Store
	prime   PrimeAPI
	nc      *nats.Conn
	js      jetstream.JetStream
	log     *slog.Logger
	reg     prometheus.Registerer
	stage   *pipeline.Stage
	metrics *collectors
}

// New builds the resolver.
func New(cfg Config, d service.Deps, pc PrimeAPI) (*Resolver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := d.Log.With("component", "resolver")
	m, err := newMetrics(d.Metrics)
	if err != nil {
		return nil, err
	}
	return &Resolver{
		cfg: cfg, store: d.Store, prime: pc, nc: d.NC, js: d.JS, log: log, reg: d.Metrics, metrics: m,
		stage: &pipeline.Stage{Store: d.Store, NC: d.NC, Log: log, Caller: Durable},
	}, nil
}

// Run consumes prime.webhook.> until ctx ends. It first pairs the database
// with the NATS whose PRIME_WEBHOOK it consumes (pkg/instance), so that
// primectl status can tell a database read beside another instance's NATS.
func (r *Resolver) Run(ctx context.Context) error {
	r.pair(ctx)
	return consume.Run(ctx, r.js, consume.Spec{
		Consumer: events.ConsumerResolver,
		Workers:  r.cfg.Lanes,
		Key: func(m jetstream.Msg) string {
			return laneKey(m.Data(), m.Headers().Get(events.HeaderLogID))
		},
	}, r.log, r.reg, r.handle)
}

// pair records PRIME_WEBHOOK's stream in the database, and says when it
// replaces another; a failure only loses status's check, so it is logged.
func (r *Resolver) pair(ctx context.Context) {
	previous, err := instance.Pair(ctx, r.js, r.store)
	switch {
	case err != nil:
		r.log.Warn("the database is not paired with this NATS: primectl status cannot tell whether they are one instance's", "err", err)
	case previous != "":
		r.log.Warn("the database was paired with another PRIME_WEBHOOK stream, now with this one: another instance's NATS, "+
			"or the stream was made anew (its messages gone; rows never published are published by ingest's relay)",
			"stream", events.StreamWebhook, "wasCreated", previous)
	}
}

// Help is what bin/resolver --help prints: what it is and the variables its
// Main reads.
func Help() service.Help {
	return service.Help{Name: "resolver", Docs: []string{"docs/production.md"}, Configs: []any{Config{}, service.Config{}, prime.Config{}, primebudget.Config{}},
		Summary: "works out what each webhook event refers to (§4) and hands it to the stage of its action on prime.resolved.<action>, one lane a job; it retries failed events with backoff up to 5 attempts."}
}

// Main runs the resolver as a process of its own.
func Main(ctx context.Context, getenv func(string) string, stderr io.Writer) error {
	var cfg Config
	return service.MainWithPrime(ctx, "resolver", getenv, stderr, []config.Part{config.Read(&cfg, Config.Validate)}, func(_ context.Context, d service.Deps, pc *prime.Client) (service.Runner, error) {
		return New(cfg, d, pc)
	})
}
