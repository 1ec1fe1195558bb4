// Package childmirror mirrors the records that hang off a Prime job (§5.2–
// §5.5): appointments, site forms, estimates with their categories and line
// items, allocations, and the contacts of a job. It takes the resolved
// events of those actions from prime.resolved.<action> and finishes their
// log rows, and it serves the appointment sweep of the parent OptimoRoute
// flow (§8.1, events.SubjectSweepAppointments) as the NATS micro service
// "child-mirror". The job comes first (§4.3): before any child row is written,
// job-mirror is asked to make sure the job is mirrored (events.SubjectEnsureJobEvent,
// and the sweep's and the drains' subjects),
// which also puts a job seen for the first time through the new-job
// pipeline. Then come each action's follow-ups, each of which either fails
// the event or is logged and swallowed, as §10.5 decides:
//
//   - appointments: contact sync (swallowed), then optimo.create.requested
//     (fire-and-forget, from the transactional outbox);
//   - site forms: the AI summary queue (fails the event), then a
//     best-effort nudge to AI_SUMMARY_NUDGE_URL (swallowed);
//   - allocations: make-safe detection with queue-checks off, a durable
//     hand-off in the outbox (fails the event).
//
// Every handler mirrors Prime's current state, so replaying an event changes
// nothing (§10.4).
package childmirror

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/consume"
	"github.com/ethosbuilding/primeflow/pkg/ensurejob"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/outbox"
	"github.com/ethosbuilding/primeflow/pkg/pipeline"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primebudget"
	"github.com/ethosbuilding/primeflow/pkg/secureurl"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// Durable is child-mirror's consumer on PRIME_RESOLVED.
const Durable = events.DurableChildMirror

// Actions lists the actions child-mirror handles (§5.2–§5.5).
func Actions() []string {
	return []string{
		events.ActionCreateAppointment, events.ActionCompleteAppointment, events.ActionChangeCustomFormStatus,
		events.ActionCreateEstimate, events.ActionCreateAllocation,
	}
}

// Config is child-mirror's own configuration.
type Config struct {
	// Workers is how many events are handled at once (the resolver already
	// keeps each job's events one at a time).
	Workers int `env:"CHILD_MIRROR_WORKERS" envDefault:"16"`
	// EnsureTimeout bounds the ensure-job request to job-mirror (§4.3). A
	// request it cuts short, like one nobody answers, makes the event wait
	// for job-mirror: no attempt is counted (§9).
	EnsureTimeout time.Duration `env:"CHILD_MIRROR_ENSURE_TIMEOUT" envDefault:"60s"`
	// ContactSyncTimeout bounds the contact sync after an appointment
	// (§5.2 step 4); it is swallowed when it runs out, so a Prime hold does
	// not keep the job's lane waiting.
	ContactSyncTimeout time.Duration `env:"CHILD_MIRROR_CONTACT_SYNC_TIMEOUT" envDefault:"30s"`
	// AISummaryNudgeURL is the AI job summary generator's trigger (n8n
	// AIJobSummaryGenerateForJob, §5.3 step 4), called GET with ?jobId= after
	// a site form event. §5.3 says both halves — the queue row and the
	// nudge — are needed, so with a real Prime it is required
	// (ValidateRealPrime); "off" runs without it on purpose, and blank is
	// off only on the Prime simulator. It may carry a key, so it is never
	// logged, goes over https only (http to a loopback address alone:
	// secureurl.Check) and follows no redirect.
	AISummaryNudgeURL string `env:"AI_SUMMARY_NUDGE_URL"`
	// AISummaryNudgeTimeout bounds the nudge.
	AISummaryNudgeTimeout time.Duration `env:"AI_SUMMARY_NUDGE_TIMEOUT" envDefault:"10s"`
	// OutboxSweep is how often a child-mirror running on its own sweeps the
	// outbox for hand-offs whose publish failed.
	OutboxSweep time.Duration `env:"CHILD_MIRROR_OUTBOX_SWEEP" envDefault:"10s"`
	// Drain configures the sync-queue drains (SYNC_DRAIN_*, drains.go).
	Drain DrainConfig
}

// Validate refuses the settings child-mirror cannot run with, each naming
// its variable (config.Refusal). New calls it.
func (c Config) Validate() error {
	var nudge error
	if c.nudges() {
		nudge = checkNudgeURL(c.AISummaryNudgeURL)
	}
	return errors.Join(
		config.Positive("CHILD_MIRROR_WORKERS", c.Workers),
		config.Positive("CHILD_MIRROR_ENSURE_TIMEOUT", c.EnsureTimeout),
		config.Positive("CHILD_MIRROR_CONTACT_SYNC_TIMEOUT", c.ContactSyncTimeout),
		nudge,
		config.Positive("AI_SUMMARY_NUDGE_TIMEOUT", c.AISummaryNudgeTimeout),
		config.Positive("CHILD_MIRROR_OUTBOX_SWEEP", c.OutboxSweep),
		c.Drain.Validate())
}

// NudgeOff is the AI_SUMMARY_NUDGE_URL that runs without the nudge on
// purpose.
const NudgeOff = "off"

// nudges reports whether the AI summary nudge is on.
func (c Config) nudges() bool { return c.AISummaryNudgeURL != "" && c.AISummaryNudgeURL != NudgeOff }

// ErrNoNudgeURL: child-mirror on a real Prime needs AI_SUMMARY_NUDGE_URL, or
// "off" said on purpose: without the nudge, a job whose summary an earlier
// pass pushed out waits up to 36 hours (§5.3).
var ErrNoNudgeURL = config.Refuse("AI_SUMMARY_NUDGE_URL", "is required (§5.3: the queue row and the nudge are both needed); set it to off to run without the nudge")

// ValidateRealPrime is Validate for a child-mirror on a real Prime:
// bin/child-mirror, and bin/primeflow with a PRIME_API_URL.
func (c Config) ValidateRealPrime() error {
	if c.AISummaryNudgeURL == "" {
		return errors.Join(c.Validate(), ErrNoNudgeURL)
	}
	return c.Validate()
}

// DefaultConfig is child-mirror's configuration with no variable set: every
// setting at its default.
func DefaultConfig() Config { return config.MustDefaults[Config]() }

// PrimeAPI is what child-mirror asks Prime; *prime.Client is one.
type PrimeAPI interface {
	GetJob(ctx context.Context, identifier string) (prime.Job, error)
	GetAppointment(ctx context.Context, id string) (prime.Appointment, error)
	ListAppointmentsByStartDate(ctx context.Context, from, to time.Time) ([]prime.Appointment, error)
	GetAllocation(ctx context.Context, id string) (prime.Allocation, error)
	GetSiteFormsByJob(ctx context.Context, jobID string) ([]prime.SiteForm, error)
	GetEstimatesByJob(ctx context.Context, jobID string) ([]prime.Estimate, error)
	GetContact(ctx context.Context, id string) (prime.Contact, error)
	GetJobContactRelationships(ctx context.Context, jobID string) ([]prime.ContactRelationship, error)
	ListJobAllocations(ctx context.Context, jobID string) ([]prime.Allocation, error)
	GetJobStatusHistories(ctx context.Context, jobID string) ([]prime.StatusHistory, error)
}

// ChildMirror is the child-mirror service.
type ChildMirror struct {
	cfg     Config
	store   store.Store
	prime   PrimeAPI
	nc      *nats.Conn
	js      jetstream.JetStream
	log     *slog.Logger
	reg     prometheus.Registerer
	stage   *pipeline.Stage
	hc      *http.Client
	metrics *collectors
	ensure  *ensurejob.Caller
	empties empties // the drains' items Prime had nothing for, within their grace
}

// New builds child-mirror from the shared Deps, its Config and the Prime
// client (in the all-in-one process, the client every service shares).
func New(cfg Config, d service.Deps, pc PrimeAPI) (*ChildMirror, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := d.Log.With("component", "child-mirror")
	ensure := &ensurejob.Caller{NC: d.NC, Timeout: cfg.EnsureTimeout, Log: log}
	m, err := newMetrics(d.Metrics, ensure.Unanswered, d.Store)
	if err != nil {
		return nil, err
	}
	if !cfg.nudges() {
		log.Info("AI_SUMMARY_NUDGE_URL is " + cmp.Or(cfg.AISummaryNudgeURL, "blank") + ": no AI summary nudge after site form events (the queue row is still written)")
	}
	return &ChildMirror{
		cfg: cfg, store: d.Store, prime: pc, nc: d.NC, js: d.JS, log: log, reg: d.Metrics, metrics: m, ensure: ensure,
		// A redirect is the answer, not followed: it would take the URL's key elsewhere.
		hc: &http.Client{Timeout: cfg.AISummaryNudgeTimeout, CheckRedirect: secureurl.NoRedirects},
		stage: &pipeline.Stage{Store: d.Store, NC: d.NC, Log: log, Caller: ServiceName,
			Outbox: &outbox.Publisher{JS: d.JS, Store: d.Store, Log: log}},
	}, nil
}

// Run consumes the resolved child events, serves sweep requests and runs
// the sync-queue drains until ctx ends.
func (c *ChildMirror) Run(ctx context.Context) error {
	return service.WhileServing(ctx, c.log, c.serveSweep, func(ctx context.Context) error {
		return service.RunAll(ctx, c.runDrains, func(ctx context.Context) error {
			return consume.Run(ctx, c.js, consume.Spec{
				Consumer: events.ConsumerChildMirror,
				Workers:  c.cfg.Workers,
			}, c.log, c.reg, c.stage.Handler(c.work))
		})
	})
}

// work handles one resolved event.
func (c *ChildMirror) work(ctx context.Context, ev events.Resolved) (pipeline.Finish, error) {
	var (
		fin pipeline.Finish
		err error
	)
	switch ev.Action {
	case events.ActionCreateAppointment, events.ActionCompleteAppointment:
		fin, err = c.appointment(ctx, ev)
	case events.ActionChangeCustomFormStatus:
		fin, err = c.customFormStatus(ctx, ev)
	case events.ActionCreateEstimate:
		fin, err = c.estimate(ctx, ev)
	case events.ActionCreateAllocation:
		fin, err = c.allocation(ctx, ev)
	default:
		return pipeline.Finish{}, fmt.Errorf("child-mirror has no handler for %q", ev.Action)
	}
	c.metrics.events.WithLabelValues(events.ActionLabel(ev.Action), outcome(err)).Inc()
	return fin, err
}

// ensureJob makes sure the job is in primeJobs before a child row is
// written (§4.3, EnsureJobMirroredAsync) and returns its GUID: job-mirror
// fetches a missing job, writes it and hands it to the new-job pipeline. A
// rate-limited answer is a *prime.RateLimitedError, and no answer a
// *pipeline.UnavailableError: either way the event waits, no attempt
// counted (§9).
func (c *ChildMirror) ensureJob(ctx context.Context, subject string, req events.EnsureJobRequest) (string, error) {
	reply, err := c.ensure.Ensure(ctx, subject, req)
	if err != nil {
		return "", err
	}
	jobID := strings.ToLower(reply.JobID)
	if jobID == "" {
		jobID = strings.ToLower(req.JobID)
	}
	if jobID == "" {
		return "", fmt.Errorf("ensure job: job-mirror named no job for reference %d", req.NumericRef)
	}
	if reply.FirstSight {
		c.log.Info("job first seen through a child event: job-mirror mirrored it and started the new-job pipeline",
			"logId", req.LogID, "jobId", jobID)
	}
	return jobID, nil
}

// saveReference is §5.2 step 3 / §5.5 step 2: the numeric → GUID mapping,
// in the event's transaction. A reference mapped to another job fails the
// event (§4.1: the mapping is immutable).
func saveReference(ctx context.Context, tx store.Store, ref int64, jobID string) error {
	if ref <= 0 {
		return nil
	}
	if _, err := tx.SaveJobReference(ctx, ref, jobID); err != nil {
		return fmt.Errorf("save job reference %d: %w", ref, err)
	}
	return nil
}

// source is the Source of a hand-off made for a log row.
func source(logID int64) string { return fmt.Sprintf("ethPrimeWebhookLog:%d", logID) }

// message is an outbox message with a JSON body.
func message(subject, msgID string, body any) (store.OutboxMessage, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return store.OutboxMessage{}, err
	}
	return outbox.Message(subject, msgID, b), nil
}

// Help is what bin/child-mirror --help prints: what it is and the variables its
// Main reads.
func Help() service.Help {
	return service.Help{Name: "child-mirror", Docs: []string{"docs/production.md"}, Configs: []any{Config{}, service.Config{}, prime.Config{}, primebudget.Config{}},
		Summary: "mirrors the records that hang off a Prime job (appointments, site forms, estimates, allocations, contacts: §5.2–§5.5) and serves the appointment sweep (§8.1, NATS micro \"child-mirror\")."}
}

// Main runs child-mirror as a process of its own, with its own Prime client
// (prime.Config from PRIME_*) and an outbox sweeper.
func Main(ctx context.Context, getenv func(string) string, stderr io.Writer) error {
	var cfg Config
	own := []config.Part{config.Read(&cfg, Config.ValidateRealPrime)}
	return service.MainWithPrime(ctx, "child-mirror", getenv, stderr, own, func(_ context.Context, d service.Deps, pc *prime.Client) (service.Runner, error) {
		cm, err := New(cfg, d, pc)
		if err != nil {
			return nil, err
		}
		return outbox.Swept(cm, d, cfg.OutboxSweep, events.RoleChildMirror)
	})
}
