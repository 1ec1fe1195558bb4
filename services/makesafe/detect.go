package makesafe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/mirror"
	"github.com/ethosbuilding/primeflow/pkg/outbox"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// ErrJobNotMirrored: detection was asked for a job that is not in primeJobs.
// Every caller mirrors the job first (§4.3), so the message is retried.
var ErrJobNotMirrored = errors.New("makesafe: the job is not mirrored")

// Detect is spMakesafeUpsertPhoneCallFromPrimeJob @JobId,
// @QueueMakeAllocationChecks (§5.5 step 3, §6 step 2): in one transaction
// the phone call and its SMS, or the ladder's rungs with their schedules in
// the outbox, published after the commit. The SMS is handed to the drainer
// straight after the commit. source says who asked, for the logs.
func (m *Makesafe) Detect(ctx context.Context, jobID string, queueChecks bool, source string) (store.MakesafeOutcome, error) {
	jobID = strings.ToLower(jobID)
	now := time.Now().UTC()
	var out store.MakesafeOutcome
	sent, err := m.outbox.With("jobId", jobID).InTx(ctx, m.store, "rung schedules", func(tx store.Store) error {
		var err error
		out, err = tx.UpsertMakeSafePhoneCallFromJob(ctx, store.MakesafeDetection{
			JobID: jobID, QueueChecks: queueChecks, Checks: m.cfg.Ladder,
			// @at holds whole seconds: the ladder starts at the next one.
			ChecksFrom: events.ScheduleAt(now), Now: now, SMSRecipient: m.cfg.SMSTo,
		})
		if err != nil {
			return err
		}
		if !out.JobFound {
			return ErrJobNotMirrored
		}
		return m.scheduleRungs(ctx, tx, out.Checks)
	})
	m.metrics.detection(triggerOf(queueChecks), out, err)
	if err != nil {
		return out, fmt.Errorf("make-safe detection of job %s: %w", jobID, err)
	}
	m.metrics.rungsScheduled.Add(float64(len(sent)))
	m.after(jobID, out)
	m.log.Info("make-safe detection", "jobId", jobID, "source", source, "queueChecks", queueChecks,
		"outsideBusinessHours", out.OutsideBusinessHours, "hasMakeSafe", out.HasMakeSafe,
		"phoneCall", out.PhoneCallID, "raised", out.Raised, "rungsQueued", len(out.Checks))
	return out, nil
}

// scheduleRungs writes one JetStream schedule a rung to the outbox, in the
// detection's transaction: the rungs are durable exactly when their rows
// are. Each has a msg id of its own, so a republish adds no second ladder.
func (m *Makesafe) scheduleRungs(ctx context.Context, tx store.Store, checks []store.MakesafeCheck) error {
	if len(checks) == 0 {
		return nil
	}
	msgs := make([]store.OutboxMessage, len(checks))
	for i, c := range checks {
		body, err := json.Marshal(events.MakesafeRecheck{JobID: c.PrimeJobID, Rung: c.Rung, DueUTC: c.DueUTC})
		if err != nil {
			return err
		}
		msg := outbox.Message(events.MakesafeScheduleSubject(c.PrimeJobID, c.Rung), events.MakesafeRungMsgID(c.PrimeJobID, c.Rung), body)
		msg.Header = events.ScheduleHeaders(c.DueUTC, events.SubjectMakesafeRecheck)
		msgs[i] = msg
	}
	_, err := tx.InsertOutbox(ctx, msgs)
	return err
}

// after runs once a detection has committed: a raised call's SMS goes to
// the drainer at once.
func (m *Makesafe) after(jobID string, out store.MakesafeOutcome) {
	if out.Raised {
		m.drainer.Kick()
		m.log.Info("make-safe phone call raised; SMS queued", "jobId", jobID, "jobNumber", out.JobNumber,
			"phoneCall", out.PhoneCallID, "sms", out.SMSID, "jobCreatedUTC", out.JobCreatedUTC)
	}
}

// Rung outcomes, recorded on makesafeAllocationCheck.Outcome and counted.
const (
	RungCalled   = "phone call already raised: nothing to do"
	RungMakeSafe = "Make Safe already mirrored: detection run again, Prime not asked"
	RungSynced   = "allocations synced from Prime, detection run again"
	RungInHours  = "job created in business hours: no phone call to raise, Prime not asked"
)

// ErrRungNotQueued: a re-check asked for a rung that makesafeAllocationCheck
// does not hold for the job. Only a detection queues a rung, so the
// message is not makesafe's (or the row was removed by hand): it is
// dropped, and Prime is not asked.
var ErrRungNotQueued = errors.New("makesafe: no such rung is queued for the job")

// RungFiredBefore is what Recheck returns for a rung whose row says it has
// fired already: a second schedule, the sweep after a late schedule, or a
// repeat someone else scheduled. Nothing is done.
const RungFiredBefore = "the rung fired before: nothing to do"

// notDueError: the rung's row says it is not due yet; the re-check is
// worked at its time.
type notDueError struct{ due time.Time }

func (e *notDueError) Error() string {
	return "makesafe: the rung is due at " + e.due.UTC().Format(time.RFC3339) + ", not yet"
}

// Recheck is one rung of the ladder (§6), worked only when the job's row
// for that rung says it is due and has not fired (ErrRungNotQueued, a
// *notDueError, RungFiredBefore otherwise): unless the wait is already
// over — the call raised, or a Make Safe mirrored — it queues the job's
// allocations in ethSyncQueue (spEthSyncQueueUpsert), drains that entry
// from Prime (an empty answer deletes it too, §7) and runs detection again
// with queue-checks off. It returns what the rung did.
func (m *Makesafe) Recheck(ctx context.Context, rc events.MakesafeRecheck) (string, error) {
	jobID := strings.ToLower(rc.JobID)
	outcome, out, err := m.recheck(ctx, jobID, rc.Rung)
	m.metrics.rungs.WithLabelValues(rungLabel(outcome, err)).Inc()
	if err != nil {
		return "", fmt.Errorf("make-safe re-check %d of job %s: %w", rc.Rung, jobID, err)
	}
	if outcome == RungFiredBefore {
		m.log.Info("make-safe re-check of a rung that fired before: nothing done", "jobId", jobID, "rung", rc.Rung)
		return outcome, nil
	}
	m.after(jobID, out)
	m.log.Info("make-safe re-check", "jobId", jobID, "rung", rc.Rung, "outcome", outcome, "raised", out.Raised)
	return outcome, nil
}

// due reads the job's row for rung: the rung's due time, if it is queued,
// due and not fired.
func (m *Makesafe) due(ctx context.Context, jobID string, rung int, now time.Time) (store.MakesafeCheck, error) {
	checks, err := m.store.ListMakesafeChecks(ctx, jobID)
	if err != nil {
		return store.MakesafeCheck{}, err
	}
	i := slices.IndexFunc(checks, func(c store.MakesafeCheck) bool { return c.Rung == rung })
	switch {
	case i < 0:
		return store.MakesafeCheck{}, ErrRungNotQueued
	case !checks[i].FiredUTC.IsZero():
		return checks[i], nil
	case checks[i].DueUTC.After(now):
		return checks[i], &notDueError{due: checks[i].DueUTC}
	}
	return checks[i], nil
}

func (m *Makesafe) recheck(ctx context.Context, jobID string, rung int) (string, store.MakesafeOutcome, error) {
	var out store.MakesafeOutcome
	now := time.Now().UTC()
	check, err := m.due(ctx, jobID, rung, now)
	if err != nil {
		return "", out, err
	}
	if !check.FiredUTC.IsZero() {
		return RungFiredBefore, out, nil
	}
	m.metrics.rungLateness.Observe(now.Sub(check.DueUTC).Seconds())
	detection := store.MakesafeDetection{JobID: jobID, Now: now, SMSRecipient: m.cfg.SMSTo}
	if _, called, err := m.store.GetMakesafePhoneCall(ctx, jobID); err != nil {
		return "", out, err
	} else if called {
		return RungCalled, out, m.fired(ctx, m.store, jobID, rung, RungCalled, now)
	}
	if has, err := m.store.HasMakeSafeAllocation(ctx, jobID); err != nil {
		return "", out, err
	} else if has {
		err := m.store.InTx(ctx, func(tx store.Store) error {
			var err error
			if out, err = tx.UpsertMakeSafePhoneCallFromJob(ctx, detection); err != nil {
				return err
			}
			return m.fired(ctx, tx, jobID, rung, RungMakeSafe, now)
		})
		m.metrics.detection(triggerRecheck, out, err)
		return RungMakeSafe, out, err
	}

	// Only a job created out of hours can get a call (§5.5): for any other
	// the rung has nothing to wait for, and the job's events and the sync
	// drains mirror its allocations without it.
	if job, found, err := m.store.GetJob(ctx, jobID); err != nil {
		return "", out, err
	} else if found && !store.RungAsksPrime(job.CreatedAt) {
		return RungInHours, out, m.fired(ctx, m.store, jobID, rung, RungInHours, now)
	}

	// §6: spEthSyncQueueUpsert for primeAllocations, then Prime Sync Queued
	// Allocations for the job, then the make-safe proc again.
	if err := m.store.UpsertSyncQueue(ctx, store.TableAllocations, jobID); err != nil {
		return "", out, err
	}
	// A rung is make-safe work: it goes before every other Prime call.
	allocs, err := m.prime.ListJobAllocations(prime.WithCaller(prime.WithPriority(ctx, prime.PriorityMakesafe), Durable, "recheck"), jobID)
	if err != nil {
		return "", out, err // rate-limited, or Prime not answering: the rung waits and is tried again
	}
	now = time.Now().UTC()
	detection.Now = now
	err = m.store.InTx(ctx, func(tx store.Store) error {
		for _, a := range allocs {
			row := mirror.Allocation(a) // as child-mirror writes it
			if row.JobID == "" {
				row.JobID = jobID // Prime reported no job
			}
			if _, err := tx.SaveAllocation(ctx, row); err != nil {
				return err
			}
		}
		// The entry is drained: synced, or Prime had nothing, which counts
		// as done too (§7, spEthSyncQueueDelete); the next rung queues it again.
		if _, err := tx.DeleteSyncQueue(ctx, store.TableAllocations, jobID); err != nil {
			return err
		}
		var err error
		if out, err = tx.UpsertMakeSafePhoneCallFromJob(ctx, detection); err != nil {
			return err
		}
		return m.fired(ctx, tx, jobID, rung, fmt.Sprintf("%s (%d allocations)", RungSynced, len(allocs)), now)
	})
	m.metrics.detection(triggerRecheck, out, err)
	return RungSynced, out, err
}

// fired records what a rung did.
func (m *Makesafe) fired(ctx context.Context, st store.Store, jobID string, rung int, outcome string, at time.Time) error {
	return st.SetMakesafeCheckFired(ctx, jobID, rung, outcome, at)
}
