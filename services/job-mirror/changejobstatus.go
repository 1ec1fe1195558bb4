package jobmirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/pipeline"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// changeJobStatus is ProcessChangeJobStatusAsync (§5.1), from the event as
// the resolver identified it. Steps 1–2 (which job, and is it new) are
// decided here from Prime; steps 3, 4 and 6 are written in one transaction
// with the row's processed stamp, in the spec's order, and step 5 follows
// the commit on its own.
func (m *Mirror) changeJobStatus(ctx context.Context, ev events.Resolved) (pipeline.Finish, error) {
	s, err := m.sight(ctx, ev)
	if err != nil {
		return pipeline.Finish{}, err
	}
	jobID := strings.ToLower(s.job.ID)
	log := m.log.With("logId", ev.LogID, "jobId", jobID)
	var firstSight, invited bool
	return pipeline.Finish{
		JobID: jobID,
		Write: func(ctx context.Context, tx store.Store) error {
			var err error
			if firstSight, err = writeJob(ctx, tx, s); err != nil { // steps 1–4; the stage publishes the hand-off
				return err
			}
			// Step 6, last: a missed invite means the customer never hears
			// from us, so a failure fails the event and it retries.
			if invited, err = tx.QueueTriageInvite(ctx, jobID, m.cfg.TriageInitialContactMadeStatusID); err != nil {
				return fmt.Errorf("queue triage invite: %w", err)
			}
			return nil
		},
		After: func(ctx context.Context) {
			m.queueClientWIP(ctx, log, jobID, ev.LogID)
			m.firstSeen(firstSight, store.ViaWebhook)
			if invited {
				m.invites.Kick() // §3.1: the invite goes out in the same pass
			}
		},
	}, nil
}

// queueClientWIP is step 5, logged and swallowed: the job is mirrored
// already, api/clientwipupdate/evaluate recovers a missed trigger, and the
// (job, source) key keeps a replay from queueing it twice. It runs after
// the commit, not in the event's transaction: on SQL Server an error that
// dooms a transaction (a deadlock victim, XACT_ABORT) rolls all of it back,
// so a failure swallowed inside it would fail the event all the same.
func (m *Mirror) queueClientWIP(ctx context.Context, log *slog.Logger, jobID string, logID int64) {
	ctx, cancel := context.WithTimeout(ctx, afterTimeout)
	defer cancel()
	if _, err := m.store.QueueClientWIPStatusChange(ctx, jobID, store.ClientWIPSource(logID)); err != nil {
		m.metrics.wipFailures.Inc()
		log.Warn("Client WIP trigger not queued (logged only, §5.1 step 5)", "err", err)
	}
}

// afterTimeout bounds a step that follows an event's commit, which a
// shutdown does not cut short.
const afterTimeout = 10 * time.Second

// sight is §5.1 steps 1–2: the job, fetched from Prime, and whether this is
// its first sight as the event saw it.
func (m *Mirror) sight(ctx context.Context, ev events.Resolved) (sighting, error) {
	s := sighting{numericRef: ev.NumericRef, logID: ev.LogID, via: store.ViaWebhook}
	var err error
	switch {
	case ev.JobID != "" && ev.JobInMirror:
		// Step 1: already mirrored, so GetJob again to pick up the new status.
		s.job, err = m.getJob(ctx, ev, ev.JobID)
	case ev.JobID != "":
		// Step 1: the job had to be fetched from Prime: first sight. The
		// resolver's fetch is reused rather than repeated.
		s.firstSight = true
		var ok bool
		if s.job, ok = decodeJob(ev.FetchedJob()); !ok {
			s.job, err = m.getJob(ctx, ev, ev.JobID)
		}
	case ev.NumericRef > 0:
		// Step 2: no GUID resolved; the numeric reference with forceSync,
		// because syncing the job is the whole purpose of this handler.
		// First sight is the reference missing from ethPrimeJobReference,
		// as the resolver found it before anything wrote the mapping.
		s.firstSight = !ev.RefWasMapped
		s.newIfRefInserted = true
		s.job, err = m.getJob(ctx, ev, strconv.FormatInt(ev.NumericRef, 10))
	default:
		// The resolver finishes rows with no identifier itself; a message
		// without one is not something this handler can act on.
		err = pipeline.Fault(pipeline.MissingIdentifier, ev.Action, "the resolved event names no job")
	}
	return s, err
}

// getJob fetches the job; an identifier Prime does not know is a payload
// fault (§5.1: identifiers present, none resolved to a job).
func (m *Mirror) getJob(ctx context.Context, ev events.Resolved, identifier string) (prime.Job, error) {
	job, err := m.prime.GetJob(ctx, identifier)
	if errors.Is(err, prime.ErrNotFound) {
		return prime.Job{}, pipeline.Fault(pipeline.UnknownIdentifier, ev.Action, "Prime has no job %s", identifier)
	}
	if err != nil {
		return prime.Job{}, err
	}
	if job.ID == "" {
		return prime.Job{}, fmt.Errorf("prime returned job %s without an id", identifier)
	}
	return job, nil
}
