// Package newjobpipeline runs the new-job pipeline (RunNewJobPipelineAsync,
// §6) once for each job job-mirror sees for the first time: it queues the
// job's missing objects into ethSyncQueue, hands them to the sync-queue
// drains (child-mirror's), and hands make-safe detection, with the
// allocation re-checks on, to the makesafe service.
package newjobpipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/consume"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/outbox"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// Durable is the pipeline's consumer on PRIME_JOB.
const Durable = events.DurableNewJobPipeline

// Config is the pipeline's own configuration.
type Config struct {
	// Workers is how many jobs are put through the pipeline at once.
	Workers int `env:"NEWJOB_PIPELINE_WORKERS" envDefault:"4"`
	// Backoff is the wait before a failed run is tried again, by the
	// attempts recorded on the job's first-sight row (pipelineAttempts): the
	// last value repeats. Failures are thrown (§6), so the job retries until
	// the pipeline completes.
	Backoff retry.Backoff `env:"NEWJOB_PIPELINE_BACKOFF" envDefault:"1s,5s,30s,2m,10m" envSeparator:","`
	// OutboxSweep is how often a pipeline running on its own sweeps the
	// outbox for make-safe hand-offs whose publish failed.
	OutboxSweep time.Duration `env:"NEWJOB_PIPELINE_OUTBOX_SWEEP" envDefault:"10s"`
}

// Validate refuses the settings the pipeline cannot run with, each naming
// its variable (config.Refusal). New calls it.
func (c Config) Validate() error {
	return errors.Join(config.Positive("NEWJOB_PIPELINE_WORKERS", c.Workers), config.Steps("NEWJOB_PIPELINE_BACKOFF", c.Backoff),
		config.Positive("NEWJOB_PIPELINE_OUTBOX_SWEEP", c.OutboxSweep))
}

// DefaultConfig is the pipeline's configuration with no variable set: every
// setting at its default.
func DefaultConfig() Config { return config.MustDefaults[Config]() }

// Pipeline is the newjob-pipeline service.
type Pipeline struct {
	cfg     Config
	store   store.Store
	js      jetstream.JetStream
	log     *slog.Logger
	reg     prometheus.Registerer
	outbox  *outbox.Publisher
	metrics *collectors
}

// New builds the pipeline from the shared Deps and its Config.
func New(cfg Config, d service.Deps) (*Pipeline, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := d.Log.With("component", "newjob-pipeline")
	m, err := newMetrics(d.Metrics)
	if err != nil {
		return nil, err
	}
	return &Pipeline{
		cfg: cfg, store: d.Store, js: d.JS, log: log, reg: d.Metrics, metrics: m,
		outbox: &outbox.Publisher{JS: d.JS, Store: d.Store, Log: log},
	}, nil
}

// Run consumes prime.job.firstseen until ctx ends. One job's hand-offs are
// handled one at a time.
func (p *Pipeline) Run(ctx context.Context) error {
	return consume.Run(ctx, p.js, consume.Spec{
		Consumer: events.ConsumerNewJobPipeline,
		Workers:  p.cfg.Workers,
		Key: func(m jetstream.Msg) string {
			var fs events.JobFirstSeen
			_ = json.Unmarshal(m.Data(), &fs) // a bad body gets the "" lane and is dropped there
			return strings.ToLower(fs.JobID)
		},
	}, p.log, p.reg, p.handle)
}

// handle runs the pipeline for one first sight, or skips a job whose
// pipeline has completed (a redelivery, or a replayed hand-off).
func (p *Pipeline) handle(ctx context.Context, msg jetstream.Msg) error {
	var fs events.JobFirstSeen
	if err := json.Unmarshal(msg.Data(), &fs); err != nil || fs.JobID == "" {
		return consume.Drop(fmt.Errorf("%s: not a first-sight hand-off: %v", msg.Subject(), err))
	}
	jobID := strings.ToLower(fs.JobID)
	log := p.log.With("jobId", jobID)
	if fs.LogID != 0 {
		log = log.With("logId", fs.LogID) // a webhook's; an email or the backstop has none
	}
	ran, queued, err := p.run(ctx, jobID, fs.LogID)
	switch {
	case err != nil && ctx.Err() != nil:
		return err // shutting down: the message goes back, no attempt recorded
	case err != nil:
		p.metrics.runs.WithLabelValues("failed").Inc()
		attempts, ferr := p.store.FailFirstSeen(context.WithoutCancel(ctx), jobID, err.Error())
		if ferr != nil {
			// Redelivered with the consumer's own backoff.
			log.Error("new-job pipeline failed, and its failure could not be recorded", "err", err, "recordErr", ferr)
			return err
		}
		wait := p.cfg.Backoff.After(attempts)
		log.Warn("new-job pipeline failed; it is retried with backoff", "attempt", attempts, "err", err,
			"next", wait, "nextAt", time.Now().Add(wait).UTC().Format(time.RFC3339))
		return consume.Retry(err, wait)
	case !ran:
		p.metrics.runs.WithLabelValues("skipped").Inc()
		log.Debug("new-job pipeline already completed for the job")
		return nil
	}
	p.metrics.runs.WithLabelValues("completed").Inc()
	log.Info("new-job pipeline completed", "queuedObjects", queued)
	return nil
}

// run is §6 through the one entry every path shares
// (store.ProcessNewPrimeJob, spEthProcessNewPrimeJob): step 1 (queue the
// missing objects, which are handed to the drains), step 2 (make-safe
// detection with queue-checks on, handed off through the outbox) and the
// completed stamp in one transaction, so a failure anywhere leaves nothing half done and the
// retry runs it all again. ran is false when the job's pipeline had
// completed already. A hand-off nobody claimed (published by hand to run
// the pipeline for a job) is claimed as ViaManual, so its progress shows.
func (p *Pipeline) run(ctx context.Context, jobID string, logID int64) (ran bool, queued int, err error) {
	body, err := json.Marshal(events.MakesafeDetect{JobID: jobID, QueueChecks: true, Source: events.SourceFirstSeen})
	if err != nil {
		return false, 0, err
	}
	handOff := outbox.Message(events.SubjectMakesafeDetect, events.FirstSeenDetectMsgID(jobID), body)
	synced, err := json.Marshal(events.SyncQueued{JobID: jobID, Objects: store.MissingObjects(), Source: events.SourceFirstSeen})
	if err != nil {
		return false, 0, err
	}
	var r store.NewJobRun
	_, err = p.outbox.With("jobId", jobID).InTx(ctx, p.store, "make-safe and sync-queue hand-off", func(tx store.Store) error {
		var err error
		if r, err = tx.ProcessNewPrimeJob(ctx, jobID, logID, store.ViaManual, handOff); err != nil || !r.Ran {
			return err
		}
		// The objects step 1 queued go to the drains at once (child-mirror's).
		_, err = tx.InsertOutbox(ctx, []store.OutboxMessage{
			outbox.Message(events.SubjectSyncQueued, events.SyncQueuedMsgID(events.SourceFirstSeen, jobID), synced)})
		return err
	})
	if err != nil {
		return false, 0, err
	}
	return r.Ran, r.Queued, nil
}

// Help is what bin/newjob-pipeline --help prints: what it is and the variables its
// Main reads.
func Help() service.Help {
	return service.Help{Name: "newjob-pipeline", Docs: []string{"docs/production.md"}, Configs: []any{Config{}, service.Config{}},
		Summary: "runs the new-job pipeline (§6) once for each job seen for the first time: queues its missing objects into ethSyncQueue and asks for make-safe detection."}
}

// Main runs the pipeline as a process of its own, with an outbox sweeper.
func Main(ctx context.Context, getenv func(string) string, stderr io.Writer) error {
	var cfg Config
	return service.Main(ctx, "newjob-pipeline", getenv, stderr, []config.Part{config.Read(&cfg, Config.Validate)}, func(_ context.Context, d service.Deps, _ *service.Router) (service.Runner, error) {
		p, err := New(cfg, d)
		if err != nil {
			return nil, err
		}
		return outbox.Swept(p, d, cfg.OutboxSweep, events.RoleNewJobPipeline)
	})
}
