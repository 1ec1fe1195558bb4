package jobmirror

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/mirror"
	"github.com/ethosbuilding/primeflow/pkg/outbox"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// sighting is a job fetched from Prime, about to be written to the mirror.
type sighting struct {
	job prime.Job
	// numericRef is the job's numeric reference when the event or request
	// carried one (§4.1); 0 otherwise.
	numericRef int64
	// firstSight says the caller found the job new before writing anything
	// (§5.1 steps 1–2: fetched because the mirror lacked it, or a numeric
	// reference not yet in ethPrimeJobReference).
	firstSight bool
	// newIfRefInserted: a numeric reference this write maps for the first
	// time also makes the sight a first one (the numeric path, §5.1 step 2).
	newIfRefInserted bool
	// logID is the log row on whose behalf it is written; 0 for none.
	logID int64
	// via is the path the job came by (store.ViaWebhook …), for the
	// first-sight record and the coverage report (§7.1).
	via string
	// requeue: a write that claims no first sight queues the job's objects
	// again (queueObjects): the backstop's, for a job whose version moved
	// since they were last queued.
	requeue bool
}

// writeJob mirrors a job inside tx: upsert primeJobs, save the numeric
// mapping (§5.1 step 3), and on first sight claim it and write the hand-off
// to the new-job pipeline to the outbox (§5.1 step 4, §4.3), which the
// caller's transaction publishes once it commits (outbox.Publisher.InTx,
// or the stage's). It is the one implementation of first sight, for
// change-job-status and ensure-job alike; firstSight says this write
// claimed it. A first sight records the job's version as the one its
// objects are queued for (the pipeline queues them, §6 step 1), so that the
// backstop queues them again only once the job has changed since.
//
// First sight is claimed, never assumed: the caller's view of "new" came
// before this transaction, and another event or request may have mirrored
// the job since. The created flag of the upsert and the inserted flag of the
// mapping catch a job that turned out new after all; the first-sight row's
// primary key lets only one claim win, so the pipeline is handed off once.
func writeJob(ctx context.Context, tx store.Store, s sighting) (firstSight bool, err error) {
	jobID := strings.ToLower(s.job.ID)
	row := mirror.Job(s.job)
	created, err := tx.UpsertJob(ctx, row)
	if err != nil {
		return false, err
	}
	inserted := false
	if s.numericRef > 0 {
		// §5.1 step 3; a reference mapped to another job is an error (§4.1).
		if inserted, err = tx.SaveJobReference(ctx, s.numericRef, jobID); err != nil {
			return false, fmt.Errorf("save job reference %d: %w", s.numericRef, err)
		}
	}
	claimed := false
	if s.firstSight || created || (s.newIfRefInserted && inserted) {
		if claimed, err = tx.ClaimFirstSeen(ctx, jobID, s.logID, s.via); err != nil {
			return false, err
		}
	}
	if !claimed {
		if s.requeue {
			return false, queueObjects(ctx, tx, jobID, s.job)
		}
		return false, nil
	}
	if err := tx.SetJobObjectsQueued(ctx, jobID, versionOf(s.job)); err != nil {
		return false, err
	}
	body, err := json.Marshal(events.JobFirstSeen{JobID: jobID, LogID: s.logID})
	if err != nil {
		return false, err
	}
	if _, err := tx.InsertOutbox(ctx, []store.OutboxMessage{
		outbox.Message(events.SubjectJobFirstSeen, events.FirstSeenMsgID(jobID), body),
	}); err != nil {
		return false, err
	}
	return true, nil
}

// mirrorJob is writeJob in a transaction of its own, for a job that no
// event's row commits with (ensure-job, the backstop): the hand-off is
// published once it commits (outbox.Publisher.InTx), and a first sight is
// then counted by s.via.
func (m *Mirror) mirrorJob(ctx context.Context, s sighting) (firstSight bool, err error) {
	_, err = m.outbox.With("jobId", strings.ToLower(s.job.ID)).InTx(ctx, m.store, "first-sight hand-off", func(tx store.Store) error {
		var err error
		firstSight, err = writeJob(ctx, tx, s)
		return err
	})
	if err != nil {
		return false, err
	}
	m.firstSeen(firstSight, s.via)
	return firstSight, nil
}

// firstSeen counts a first sight once its hand-off has committed, by how the
// job arrived.
func (m *Mirror) firstSeen(firstSight bool, via string) {
	if firstSight {
		m.metrics.firstSeen(via).Inc()
	}
}

// decodeJob is the job the resolver (or an ensure-job caller) already
// fetched from Prime, as events.FindResource or Resolved.FetchedJob found
// it, so it is not fetched twice; ok is false when there is none or it does
// not decode.
func decodeJob(r events.Resource, found bool) (prime.Job, bool) {
	if !found {
		return prime.Job{}, false
	}
	j, err := prime.FromResource[prime.Job](r.ID, r.Attributes)
	return j, err == nil
}
