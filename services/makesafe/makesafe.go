// Package makesafe is make-safe detection (§5.5 step 3, §6): a job that
// needs a Make Safe and was created out of hours must reach a person on the
// phone, and the customer an SMS, within minutes.
//
//   - makesafe.detect (from the new-job pipeline with queue-checks on, from
//     create-allocation with it off, on MAKESAFE_DETECT) runs
//     spMakesafeUpsertPhoneCallFromPrimeJob:
//     one idempotent transaction that raises the job's phone call and queues
//     its SMS, or, when the job has no Make Safe allocation yet and
//     queue-checks is on, queues the re-check ladder. Each rung is a
//     JetStream scheduled message written to the outbox in that transaction.
//   - makesafe.recheck (a rung firing, on MAKESAFE, which only makesafe
//     writes) syncs the job's allocations from Prime — ethSyncQueue upsert,
//     then the drain, where an empty answer deletes the queue row (§7) —
//     and runs detection again with queue-checks off. A rung after the call
//     was raised, or after the Make Safe arrived, asks Prime nothing; and
//     a rung is worked only when its own row in makesafeAllocationCheck
//     says it is due and has not fired: a re-check of a rung never queued
//     is dropped, one early waits for its time, one already fired does
//     nothing.
//   - The SMS drainer (pkg/sms) sends what detection queued straight after
//     the commit, on sms.send.requested, and on a slow sweep.
//   - A sweep (rungs.go) fires the rungs that callers outside primeflow
//     queued, which have no schedule.
package makesafe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/consume"
	"github.com/ethosbuilding/primeflow/pkg/delivery"
	"github.com/ethosbuilding/primeflow/pkg/dryrun"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/outbox"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primebudget"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/ethosbuilding/primeflow/pkg/sms"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// Consumers.
const (
	// Durable consumes makesafe.recheck on MAKESAFE.
	Durable = events.DurableMakesafe
	// DurableDetect consumes makesafe.detect on MAKESAFE_DETECT.
	DurableDetect = events.DurableMakesafeDetect
	// DurableSMS consumes sms.send.requested on SMS.
	DurableSMS = events.DurableMakesafeSMS
)

// Config is makesafe's own configuration.
type Config struct {
	// SMSTo is the on-call number the make-safe SMS goes to. Required.
	SMSTo string `env:"MAKESAFE_SMS_TO"`
	// Ladder is the re-check ladder (§6): offsets from the detection that
	// queued it, ascending, whole seconds. Tests use seconds.
	Ladder []time.Duration `env:"MAKESAFE_LADDER" envDefault:"1m,4m,10m,15m"`
	// Workers is how many detections and rungs run at once (one at a time
	// for a job).
	Workers int `env:"MAKESAFE_WORKERS" envDefault:"8"`
	// OutboxSweep is how often a makesafe running on its own sweeps the
	// outbox for rung schedules whose publish failed.
	OutboxSweep time.Duration `env:"MAKESAFE_OUTBOX_SWEEP" envDefault:"10s"`
	// RungSweep is how often rungs overdue by that long are fired: rungs a
	// caller outside primeflow queued (the email flow's two-parameter call
	// of spMakesafeUpsertPhoneCallFromPrimeJob, §7), which no schedule
	// holds. 0 turns it off.
	RungSweep time.Duration `env:"MAKESAFE_RUNG_SWEEP" envDefault:"1m"`
	// SMS configures the sender SenderFor builds (SMS_SEND_URL, …): the
	// existing SMS flow's webhook.
	SMS delivery.HTTPConfig `envPrefix:"SMS_"`
	// Drainer configures the SMS drainer (SMS_MAX_ATTEMPTS, …).
	Drainer delivery.Config `envPrefix:"SMS_"`
}

// Validate refuses the settings makesafe cannot run with, each naming its
// variable (config.Refusal): a blank SMS_SEND_URL passes (see
// ValidateRealPrime). New calls it.
func (c Config) Validate() error {
	var errs []error
	if strings.TrimSpace(c.SMSTo) == "" {
		errs = append(errs, config.Refuse("MAKESAFE_SMS_TO", "is required: the on-call number for make-safe SMS"))
	}
	if err := config.Steps("MAKESAFE_LADDER", c.Ladder); err != nil {
		errs = append(errs, err)
	} else {
		for i, d := range c.Ladder {
			if d%time.Second != 0 || (i > 0 && d <= c.Ladder[i-1]) {
				errs = append(errs, config.Refuse("MAKESAFE_LADDER", "rungs are whole seconds above zero, ascending"))
				break
			}
		}
	}
	return errors.Join(append(errs,
		config.Positive("MAKESAFE_WORKERS", c.Workers),
		config.Positive("MAKESAFE_OUTBOX_SWEEP", c.OutboxSweep),
		config.NotNegative("MAKESAFE_RUNG_SWEEP", c.RungSweep),
		c.Drainer.ValidateWith(sms.Kind.Prefix, c.SMS))...)
}

// ValidateRealPrime is Validate for a makesafe whose jobs are real (a real
// Prime): SMS_SEND_URL is required, or make-safe SMS are only logged,
// unless dry.Send records them instead (a shadow run). bin/makesafe, and
// bin/primeflow with a PRIME_API_URL.
func (c Config) ValidateRealPrime(dry dryrun.Config) error {
	if c.SMS.URL == "" && !dry.Send {
		return errors.Join(c.Validate(), config.Refuse("SMS_SEND_URL", "is required: without it no make-safe SMS is sent (SEND_DRY_RUN records them instead, for a shadow run)"))
	}
	return c.Validate()
}

// DefaultConfig is makesafe's configuration with no variable set: every
// setting at its default (MAKESAFE_SMS_TO has none).
func DefaultConfig() Config { return config.MustDefaults[Config]() }

// PrimeAPI is what makesafe asks Prime; *prime.Client is one.
type PrimeAPI interface {
	ListJobAllocations(ctx context.Context, jobID string) ([]prime.Allocation, error)
}

// Makesafe is the makesafe service.
type Makesafe struct {
	cfg     Config
	store   store.Store
	prime   PrimeAPI
	js      jetstream.JetStream
	log     *slog.Logger
	reg     prometheus.Registerer
	outbox  *outbox.Publisher
	drainer *sms.Drainer
	metrics *collectors
	// jobs keeps one job's detections and rungs one at a time across the
	// two consumers that take them (each keeps its own in order).
	jobs [64]sync.Mutex
}

// New builds makesafe from the shared Deps, its Config, the Prime client (in
// the all-in-one process, the one every service shares) and the SMS sender
// (SenderFor(cfg.SMS, …) for the configured one).
func New(cfg Config, d service.Deps, pc PrimeAPI, sender sms.Sender) (*Makesafe, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := d.Log.With("component", "makesafe")
	dr, err := sms.NewDrainer(cfg.Drainer, d.Store, sender, log.With("sub", "sms"), d.Metrics)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(d.Metrics)
	if err != nil {
		return nil, err
	}
	return &Makesafe{
		cfg: cfg, store: d.Store, prime: pc, js: d.JS, log: log, reg: d.Metrics,
		outbox: &outbox.Publisher{JS: d.JS, Store: d.Store, Log: log}, drainer: dr, metrics: m,
	}, nil
}

// SenderFor is the SMS sender for cfg: with SEND_DRY_RUN a dryrun.Sink that
// records each SMS instead of sending it; an HTTPSender posting to
// SMS_SEND_URL; or, with no URL, a LogSender that only logs (for `make run`
// on the Prime simulator: bin/primeflow refuses a blank URL with a real
// Prime; a warning says so).
func SenderFor(cfg delivery.HTTPConfig, dry dryrun.Config, log *slog.Logger) (sms.Sender, error) {
	if dry.Send {
		return dryrun.OpenSink[sms.Message](dry, "sms", log)
	}
	if cfg.URL == "" {
		log.Warn("SMS_SEND_URL is not set: make-safe SMS are logged, not sent")
		return sms.LogSender{Log: log}, nil
	}
	return sms.NewHTTPSender(cfg, nil)
}

// Run consumes makesafe.detect, makesafe.recheck and sms.send.requested and
// runs the SMS drainer until ctx ends.
func (m *Makesafe) Run(ctx context.Context) error {
	work := func(c events.Consumer) func(context.Context) error {
		return func(ctx context.Context) error {
			return consume.Run(ctx, m.js, consume.Spec{Consumer: c, Workers: m.cfg.Workers, Key: jobKey}, m.log, m.reg, m.handle)
		}
	}
	return service.RunAll(ctx,
		work(events.ConsumerMakesafeDetect),
		work(events.ConsumerMakesafe),
		func(ctx context.Context) error {
			return consume.Run(ctx, m.js, consume.Spec{Consumer: events.ConsumerMakesafeSMS, Workers: 1}, m.log, m.reg, func(_ context.Context, msg jetstream.Msg) error {
				if _, _, err := events.DecodeRunRequest(msg.Data()); err != nil {
					return consume.Drop(fmt.Errorf("%s: %w", msg.Subject(), err)) // what is not a request sends nothing now
				}
				m.drainer.Kick()
				return nil
			})
		},
		m.drainer.Run,
		m.sweepRungs,
	)
}

// DrainSMS sends every SMS due now and returns when none is left: what a
// detection's kick does, for a caller that wants it done before it goes on.
func (m *Makesafe) DrainSMS(ctx context.Context) error { return m.drainer.Drain(ctx) }

// jobKey keeps one job's detections, and its rungs, one at a time in each
// consumer; handle keeps them one at a time across both.
func jobKey(msg jetstream.Msg) string {
	var k struct {
		JobID string `json:"jobId"`
	}
	_ = json.Unmarshal(msg.Data(), &k) // a bad body gets the empty key, and is dropped by the handler
	return strings.ToLower(k.JobID)
}

// handle takes one makesafe.detect or makesafe.recheck message, one at a
// time for a job.
func (m *Makesafe) handle(ctx context.Context, msg jetstream.Msg) error {
	job := &m.jobs[fnv32(jobKey(msg))%uint32(len(m.jobs))]
	job.Lock()
	defer job.Unlock()
	var err error
	switch msg.Subject() {
	case events.SubjectMakesafeDetect:
		var req events.MakesafeDetect
		if jerr := json.Unmarshal(msg.Data(), &req); jerr != nil || !guidRE.MatchString(req.JobID) {
			return consume.Drop(fmt.Errorf("%s: not a detection request of a job GUID: %v", msg.Subject(), jerr))
		}
		_, err = m.Detect(ctx, req.JobID, req.QueueChecks, req.Source)
	case events.SubjectMakesafeRecheck:
		var rc events.MakesafeRecheck
		if jerr := json.Unmarshal(msg.Data(), &rc); jerr != nil || !guidRE.MatchString(rc.JobID) || rc.Rung < 1 {
			return consume.Drop(fmt.Errorf("%s: not a re-check: %v", msg.Subject(), jerr))
		}
		_, err = m.Recheck(ctx, rc)
	default:
		return consume.Drop(fmt.Errorf("makesafe takes no %s", msg.Subject()))
	}
	var early *notDueError
	switch {
	case errors.Is(err, ErrRungNotQueued):
		return consume.Drop(err) // not a rung of makesafe's: never worked
	case errors.As(err, &early):
		return consume.Retry(err, time.Until(early.due)) // worked at its time
	}
	if after := retry.Delay(err); after > 0 {
		return consume.Retry(err, after) // Prime's rate limit, or Prime not answering: the rung waits, it is not dropped
	}
	return err
}

func fnv32(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

// guidRE is a job's GUID; anything else can never be detected and is dropped.
var guidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// Help is what bin/makesafe --help prints: what it is and the variables its
// Main reads.
func Help() service.Help {
	return service.Help{Name: "makesafe", Docs: []string{"docs/production.md"}, Configs: []any{Config{}, dryrun.Config{}, service.Config{}, prime.Config{}, primebudget.Config{}},
		Summary: "make-safe detection (§5.5, §6): a job that needs a Make Safe and was created out of hours gets one phone call and an SMS within minutes, with re-checks at +1/+4/+10/+15 minutes; it also sends the SMS queue."}
}

// Main runs makesafe as a process of its own, with its own Prime client
// (PRIME_*), the HTTP SMS sender (SMS_SEND_URL, required here unless
// SEND_DRY_RUN records the SMS instead) and an outbox sweeper.
func Main(ctx context.Context, getenv func(string) string, stderr io.Writer) error {
	var cfg Config
	var dry dryrun.Config
	own := []config.Part{config.Read(&cfg, func(c Config) error { return c.ValidateRealPrime(dry) }), config.Read(&dry, nil)}
	return service.MainWithPrime(ctx, Durable, getenv, stderr, own, func(_ context.Context, d service.Deps, pc *prime.Client) (service.Runner, error) {
		d.Log.Info("sms sender", "config", cfg.SMS)
		sender, err := SenderFor(cfg.SMS, dry, d.Log)
		if err != nil {
			return nil, err
		}
		ms, err := New(cfg, d, pc, sender)
		if err != nil {
			return nil, err
		}
		return outbox.Swept(ms, d, cfg.OutboxSweep, events.RoleMakesafe)
	})
}
