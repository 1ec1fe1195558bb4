// Package jobmirror keeps primeJobs in step with Prime. It handles
// change-job-status events (§5.1) once the resolver has identified them, and
// it answers the "ensure job mirrored" request other stages make before they
// write a child row (§4.3), as the NATS micro service "job-mirror". Whichever
// way a job is seen first, job-mirror records the first sight once and hands
// the job to the new-job pipeline (§6) on prime.job.firstseen.
package jobmirror

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/coalesce"
	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/consume"
	"github.com/ethosbuilding/primeflow/pkg/delivery"
	"github.com/ethosbuilding/primeflow/pkg/dryrun"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/outbox"
	"github.com/ethosbuilding/primeflow/pkg/pipeline"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primebudget"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
)

// Durable is job-mirror's consumer on PRIME_RESOLVED.
const Durable = events.DurableJobMirror

// ServiceName is the NATS micro service name (`nats micro ls`).
const ServiceName = "job-mirror"

// Config is job-mirror's own configuration.
type Config struct {
	// TriageInitialContactMadeStatusID is InitialContactMadeStatusId: the
	// job status whose arrival queues a triage invite (§5.1 step 6). Empty
	// queues none.
	TriageInitialContactMadeStatusID string `env:"TRIAGE_INITIAL_CONTACT_MADE_STATUS_ID"`
	// Workers is how many change-job-status events are handled at once (the
	// resolver already keeps one job's events apart).
	Workers int `env:"JOB_MIRROR_WORKERS" envDefault:"16"`
	// EnsureTimeout bounds one ensure-job request; a Prime call that would
	// wait longer for the rate limit answers RetryAfterMS instead.
	EnsureTimeout time.Duration `env:"JOB_MIRROR_ENSURE_TIMEOUT" envDefault:"20s"`
	// OutboxSweep is how often a job-mirror running on its own sweeps the
	// outbox for first-sight hand-offs whose publish failed.
	OutboxSweep time.Duration `env:"JOB_MIRROR_OUTBOX_SWEEP" envDefault:"10s"`
	// JobsSweepEvery is how often the jobs-by-date backstop sweeps ("Prime
	// Sync Jobs by Date"), and once at start; off sweeps only when asked
	// (events.SubjectSweepJobs).
	JobsSweepEvery Every `env:"JOBS_SWEEP_EVERY" envDefault:"15m"`
	// JobsSweepOverlap is how far before its watermark a sweep lists from.
	JobsSweepOverlap time.Duration `env:"JOBS_SWEEP_OVERLAP" envDefault:"10m"`
	// JobsSweepFirst is how far back the first sweep lists, with no
	// watermark yet.
	JobsSweepFirst time.Duration `env:"JOBS_SWEEP_FIRST" envDefault:"24h"`
	// JobsSweepTimeout bounds one sweep; one it cuts short starts again
	// from the same watermark.
	JobsSweepTimeout time.Duration `env:"JOBS_SWEEP_TIMEOUT" envDefault:"10m"`
	// Invites is where triage invites are posted (TRIAGE_INVITE_SEND_URL,
	// …, §3.1); InviteSenderFor builds the sender.
	Invites delivery.HTTPConfig `envPrefix:"TRIAGE_INVITE_"`
	// InviteDrainer configures the invite sender's retries and claims
	// (TRIAGE_INVITE_MAX_ATTEMPTS, …).
	InviteDrainer delivery.Config `envPrefix:"TRIAGE_INVITE_"`
	// InviteContactWait is how long an invite waits, using no attempt, for
	// its job's primary contact to be mirrored (the contacts drain may be
	// held by Prime's budget); past it the invite is Failed for a person.
	InviteContactWait time.Duration `env:"TRIAGE_INVITE_CONTACT_WAIT" envDefault:"24h"`
}

// Validate refuses the settings job-mirror cannot run with, each naming its
// variable (config.Refusal): a blank TRIAGE_INITIAL_CONTACT_MADE_STATUS_ID
// passes (see ValidateRealPrime). New calls it.
func (c Config) Validate() error {
	return errors.Join(
		config.Positive("JOB_MIRROR_WORKERS", c.Workers),
		config.Positive("JOB_MIRROR_ENSURE_TIMEOUT", c.EnsureTimeout),
		config.Positive("JOB_MIRROR_OUTBOX_SWEEP", c.OutboxSweep),
		config.NotNegative("JOBS_SWEEP_OVERLAP", c.JobsSweepOverlap),
		config.Positive("JOBS_SWEEP_FIRST", c.JobsSweepFirst),
		config.Positive("JOBS_SWEEP_TIMEOUT", c.JobsSweepTimeout),
		config.Positive("TRIAGE_INVITE_CONTACT_WAIT", c.InviteContactWait),
		c.InviteDrainer.ValidateWith(inviteKind.Prefix, c.Invites),
		checkTriageStatus(c.TriageInitialContactMadeStatusID))
}

// ValidateRealPrime is Validate for a job-mirror on a real Prime, whose
// customers would never be invited with a blank
// TRIAGE_INITIAL_CONTACT_MADE_STATUS_ID (ErrNoTriageStatus) or
// TRIAGE_INVITE_SEND_URL (ErrNoInviteURL; SEND_DRY_RUN records the invites
// instead, for a shadow run): bin/job-mirror, and bin/primeflow with a
// PRIME_API_URL.
func (c Config) ValidateRealPrime(dry dryrun.Config) error {
	errs := []error{c.Validate()}
	if c.TriageInitialContactMadeStatusID == "" {
		errs = append(errs, ErrNoTriageStatus)
	}
	if c.Invites.URL == "" && !dry.Send {
		errs = append(errs, ErrNoInviteURL)
	}
	return errors.Join(errs...)
}

// DefaultConfig is job-mirror's configuration with no variable set: every
// setting at its default.
func DefaultConfig() Config { return config.MustDefaults[Config]() }

// PrimeAPI is what job-mirror asks Prime: the job, by GUID or numeric
// reference (§4.1), and, for the backstop, the jobs updated since a time, a
// page at a time. *prime.Client is one.
type PrimeAPI interface {
	GetJob(ctx context.Context, identifier string) (prime.Job, error)
	ListJobsUpdatedSince(ctx context.Context, since time.Time, page int) (prime.Page[prime.Job], error)
}

// Mirror is the job-mirror service.
type Mirror struct {
	cfg     Config
	store   store.Store
	prime   PrimeAPI
	nc      *nats.Conn
	js      jetstream.JetStream
	log     *slog.Logger
	reg     prometheus.Registerer
	outbox  *outbox.Publisher
	stage   *pipeline.Stage
	metrics *collectors
	// sweeping serialises the jobs-by-date sweeps ("Prime Sync Jobs by
	// Date", the scheduled backstop of §7: the safety net for a job no
	// webhook and no email brought): one runs at a time.
	sweeping sync.Mutex
	invites  *delivery.Drainer[Invite]
}

// ErrNoTriageStatus: job-mirror on a real Prime needs
// TRIAGE_INITIAL_CONTACT_MADE_STATUS_ID, or no customer is ever invited to
// triage (§5.1 step 6: "a missed invite means the customer never hears from
// us"); only bin/primeflow on the Prime simulator runs without it.
var ErrNoTriageStatus = config.Refuse("TRIAGE_INITIAL_CONTACT_MADE_STATUS_ID", "is required: without it no triage invite is queued (§5.1 step 6)")

// ErrNoInviteURL: job-mirror on a real Prime needs TRIAGE_INVITE_SEND_URL,
// or the invites it queues are never sent (§3.1).
var ErrNoInviteURL = config.Refuse("TRIAGE_INVITE_SEND_URL", "is required: without it no triage invite is sent (§3.1; SEND_DRY_RUN records them instead, for a shadow run)")

// checkTriageStatus refuses a TRIAGE_INITIAL_CONTACT_MADE_STATUS_ID that
// is set but cannot be a status: the all-zero GUID (a placeholder) or
// anything not a GUID would match no job's status and queue no invite,
// silently.
func checkTriageStatus(v string) error {
	if v == "" {
		return nil
	}
	if id, err := uuid.Parse(v); err != nil || len(v) != 36 || id == uuid.Nil {
		return config.Refuse("TRIAGE_INITIAL_CONTACT_MADE_STATUS_ID", "want the GUID of Prime's InitialContactMade job status")
	}
	return nil
}

// New builds job-mirror from the shared Deps, its Config, the Prime client it
// shares with the other services of the process, and the triage invite
// sender (InviteSenderFor(cfg.Invites, …) for the configured one).
func New(cfg Config, d service.Deps, pc PrimeAPI, invites InviteSender) (*Mirror, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := d.Log.With("component", "job-mirror")
	if cfg.TriageInitialContactMadeStatusID == "" {
		log.Warn("TRIAGE_INITIAL_CONTACT_MADE_STATUS_ID is not set: no triage invites are queued (§5.1 step 6)")
	}
	m, err := newMetrics(d.Metrics)
	if err != nil {
		return nil, err
	}
	pub := &outbox.Publisher{JS: d.JS, Store: d.Store, Log: log}
	inv, err := newInviteDrainer(cfg.InviteDrainer, cfg.InviteContactWait, d.Store, pub, invites, log.With("sub", "triage-invite"), d.Metrics)
	if err != nil {
		return nil, err
	}
	return &Mirror{
		cfg: cfg, store: d.Store, prime: pc, nc: d.NC, js: d.JS, log: log, reg: d.Metrics, outbox: pub, metrics: m,
		stage:   &pipeline.Stage{Store: d.Store, NC: d.NC, Outbox: pub, Log: log, Caller: ServiceName},
		invites: inv,
	}, nil
}

// Run consumes change-job-status events, serves ensure-job and jobs-sweep
// requests, sweeps on JOBS_SWEEP_EVERY and sends the triage invites until
// ctx ends; a post of an invite in flight then finishes, and is recorded,
// before it returns.
func (m *Mirror) Run(ctx context.Context) error {
	return service.WhileServing(ctx, m.log, m.serve, func(ctx context.Context) error {
		var g errgroup.Group
		if every := time.Duration(m.cfg.JobsSweepEvery); every > 0 {
			loop := coalesce.New(func(ctx context.Context) { m.sweepJobs(ctx, "schedule") }, coalesce.Every(every))
			loop.Request() // and once at start
			g.Go(func() error { return loop.Run(ctx) })
		}
		g.Go(func() error { return m.invites.Run(ctx) })
		g.Go(func() error {
			return consume.Run(ctx, m.js, consume.Spec{
				Consumer: events.ConsumerJobMirror,
				Workers:  m.cfg.Workers,
			}, m.log, m.reg, m.stage.Handler(m.changeJobStatus))
		})
		return g.Wait()
	})
}

// Help is what bin/job-mirror --help prints: what it is and the variables its
// Main reads.
func Help() service.Help {
	return service.Help{Name: "job-mirror", Docs: []string{"docs/production.md"}, Configs: []any{Config{}, service.Config{}, prime.Config{}, primebudget.Config{}, dryrun.Config{}},
		Summary: "mirrors Prime's jobs (change-job-status, §5.1), answers ensure-job requests (§4.3, NATS micro \"job-mirror\") and hands each job seen for the first time to the new-job pipeline."}
}

// SendInvites sends every triage invite due now and returns when none is
// left: what a commit's kick does, for a caller that wants it done first.
func (m *Mirror) SendInvites(ctx context.Context) error { return m.invites.Drain(ctx) }

// Main runs job-mirror as a process of its own, with its own Prime client
// (prime.Config from PRIME_*), the HTTP invite sender (TRIAGE_INVITE_SEND_URL,
// required here, or SEND_DRY_RUN's recorder) and an outbox sweeper.
func Main(ctx context.Context, getenv func(string) string, stderr io.Writer) error {
	var cfg Config
	var dry dryrun.Config
	own := []config.Part{config.Read(&cfg, func(c Config) error { return c.ValidateRealPrime(dry) }), config.Read(&dry, nil)}
	return service.MainWithPrime(ctx, "job-mirror", getenv, stderr, own, func(_ context.Context, d service.Deps, pc *prime.Client) (service.Runner, error) {
		d.Log.Info("triage invite sender", "config", cfg.Invites)
		invites, err := InviteSenderFor(cfg.Invites, dry, d.Log)
		if err != nil {
			return nil, err
		}
		m, err := New(cfg, d, pc, invites)
		if err != nil {
			return nil, err
		}
		return outbox.Swept(m, d, cfg.OutboxSweep, events.RoleJobMirror)
	})
}
