// Package ingest receives Prime's webhooks (§2): it stores every event in
// ethPrimeWebhookLog, answers 200 only after the commit, and publishes the
// event on prime.webhook.<eventAction>. A relay republishes rows that were
// never published and rows reset for replay.
package ingest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Config is ingest's own configuration.
type Config struct {
	// APIKey is the webhook's Identifier UUID that Prime sends as API-Key;
	// blank rejects every webhook (§2).
	APIKey string `env:"PRIME_WEBHOOK_API_KEY" secret:"true"`
	// MaxBodyBytes is the largest body stored; a larger one gets 413.
	MaxBodyBytes int64 `env:"INGEST_MAX_BODY_BYTES" envDefault:"1048576"`
	// RelayInterval is how often the relay looks for unpublished rows.
	RelayInterval time.Duration `env:"INGEST_RELAY_INTERVAL" envDefault:"10s"`
	// RelayGrace leaves rows younger than this to the publisher that has them.
	RelayGrace time.Duration `env:"INGEST_RELAY_GRACE" envDefault:"5s"`
	// PublishTimeout bounds one publish and its ack.
	PublishTimeout time.Duration `env:"INGEST_PUBLISH_TIMEOUT" envDefault:"5s"`
}

// Validate refuses the settings ingest cannot run with, each naming its
// variable (config.Refusal); New also checks INGEST_MAX_BODY_BYTES against
// the NATS server's max_payload. New calls it.
func (c Config) Validate() error {
	return errors.Join(config.Positive("INGEST_MAX_BODY_BYTES", c.MaxBodyBytes), config.Positive("INGEST_RELAY_INTERVAL", c.RelayInterval),
		config.NotNegative("INGEST_RELAY_GRACE", c.RelayGrace), config.Positive("INGEST_PUBLISH_TIMEOUT", c.PublishTimeout))
}

// DefaultConfig is ingest's configuration with no variable set: every
// setting at its default (PRIME_WEBHOOK_API_KEY has none).
func DefaultConfig() Config { return config.MustDefaults[Config]() }

// maxPendingAcks bounds the publishes awaiting JetStream's ack.
const maxPendingAcks = 4096

// headerRoom is what a webhook's message may add to its body: the headers
// events.NewWebhookMsg sets (Nats-Msg-Id, Primeflow-Log-Id and the
// eventAction, at most 100 characters) take well under 1 KiB.
const headerRoom = 4 << 10

// Ingest is the webhook receiver.
type Ingest struct {
	cfg       Config
	log       *slog.Logger
	store     logStore
	publisher *publisher
	relay     *relay
	metrics   *collectors
	kick      chan struct{}
	refused   refusals
	unhandled unhandledActions
}

// New builds ingest and adds its routes to r: the webhook (public) and the
// relay trigger (admin).
func New(cfg Config, d service.Deps, r *service.Router) (*Ingest, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// §2: a stored webhook is answered 200, so it must be publishable. A
	// server configured elsewhere (standalone ingest) may take less than a
	// body at the limit plus its headers; NATS's default is 1 MB.
	if accepts := d.NC.MaxPayload(); cfg.MaxBodyBytes > accepts-headerRoom {
		return nil, config.Refuse("INGEST_MAX_BODY_BYTES", "is %d but the NATS server accepts messages of at most %d bytes (max_payload): "+
			"a webhook at the limit plus up to %d bytes of headers would be stored and answered 200 but never published; "+
			"lower INGEST_MAX_BODY_BYTES to %d or raise the server's max_payload",
			cfg.MaxBodyBytes, accepts, headerRoom, max(accepts-headerRoom, 0))
	}
	if cfg.APIKey == "" {
		d.Log.Warn("PRIME_WEBHOOK_API_KEY is blank: every webhook is rejected with 401")
	}
	m, err := newMetrics(d.Metrics, d.Store)
	if err != nil {
		return nil, err
	}
	in := &Ingest{cfg: cfg, log: d.Log, store: d.Store, metrics: m, kick: make(chan struct{}, 1)}
	js, err := jetstream.New(d.NC, jetstream.WithPublishAsyncTimeout(cfg.PublishTimeout), jetstream.WithPublishAsyncMaxPending(maxPendingAcks))
	if err != nil {
		return nil, err
	}
	in.publisher = &publisher{
		js: js, nc: d.NC, store: d.Store, log: d.Log, metrics: m,
		futures: make(chan pendingAck, maxPendingAcks), timeout: cfg.PublishTimeout,
	}
	in.relay = &relay{pub: in.publisher, store: d.Store, log: d.Log, grace: cfg.RelayGrace, page: 500}
	// NATS back after an outage: run the relay now rather than at the next tick.
	d.NC.SetReconnectHandler(func(*nats.Conn) {
		d.Log.Info("nats reconnected: running the relay")
		select {
		case in.kick <- struct{}{}:
		default:
		}
	})
	in.routes(r)
	return in, nil
}

// Run runs the publisher and the relay until ctx ends.
func (in *Ingest) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	collected := make(chan struct{})
	wg.Go(func() { defer close(collected); in.publisher.collect(ctx) })
	wg.Go(func() { in.publisher.record(ctx, collected, 100*time.Millisecond) })
	wg.Go(func() { in.relay.run(ctx, in.cfg.RelayInterval, in.kick) })
	wg.Wait()
	return nil
}

// Help is what bin/ingest --help prints: what it is and the variables its
// Main reads.
func Help() service.Help {
	return service.Help{Name: "ingest", Docs: []string{"docs/production.md"}, Configs: []any{Config{}, service.Config{}},
		Summary: "Prime's webhook receiver (§2, §3): it stores every webhook in ethPrimeWebhookLog, answers 200 once the row is committed, and publishes it on prime.webhook.<eventAction>; a relay publishes the rows left unpublished or reset for replay."}
}

// Main runs ingest as a process of its own.
func Main(ctx context.Context, getenv func(string) string, stderr io.Writer) error {
	var cfg Config
	return service.Main(ctx, "ingest", getenv, stderr, []config.Part{config.Read(&cfg, Config.Validate)}, func(_ context.Context, d service.Deps, r *service.Router) (service.Runner, error) {
		return New(cfg, d, r)
	})
}
