package childmirror

import (
	"context"
	"fmt"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/mirror"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// What each drain fetches from Prime and writes (the endpoints and their
// shapes are pkg/prime's, the assumed ones marked there; sql/README.md, "The
// sync-queue drains", gives the reading).

// syncStatusHistory is "Sync Queued StatusHistories_Job" (§7): the job's
// status changes, which replace the mirrored ones (Prime lists a job's
// history as it is now).
func (c *ChildMirror) syncStatusHistory(ctx context.Context, job store.Job) (synced, error) {
	hs, err := c.prime.GetJobStatusHistories(ctx, job.JobID)
	if err != nil {
		return synced{}, fmt.Errorf("status histories: %w", err)
	}
	return synced{empty: len(hs) == 0, write: func(ctx context.Context, tx store.Store) error {
		return tx.ReplaceJobStatusHistory(ctx, job.JobID, statusHistoryRows(job.JobID, hs))
	}}, nil
}

// syncContactsOf is "Sync Queued Contacts" (§7): every contact of the job —
// those its relationships name, and its primary contact as the mirrored job
// has it (the job was mirrored just before it was queued, §6) — upserted.
func (c *ChildMirror) syncContactsOf(ctx context.Context, job store.Job) (synced, error) {
	rels, err := c.prime.GetJobContactRelationships(ctx, job.JobID)
	if err != nil {
		return synced{}, fmt.Errorf("contact relationships: %w", err)
	}
	contacts, err := c.fetchContacts(ctx, rels, job.PrimaryContactID)
	if err != nil {
		return synced{}, err
	}
	return synced{empty: len(contacts) == 0, write: func(ctx context.Context, tx store.Store) error {
		return saveContacts(ctx, tx, contacts)
	}}, nil
}

// syncAllocations is "Prime Sync Queued Allocations" (§6, §7): the job's
// allocations, each saved as child-mirror saves one (version-guarded). A
// Make Safe among them is handed to make-safe detection with queue-checks
// off, as its create-allocation event would be (§5.5 step 3): the sync may
// be the first the mirror hears of it.
func (c *ChildMirror) syncAllocations(ctx context.Context, job store.Job) (synced, error) {
	allocs, err := c.prime.ListJobAllocations(ctx, job.JobID)
	if err != nil {
		return synced{}, fmt.Errorf("allocations: %w", err)
	}
	rows := make([]store.Allocation, len(allocs))
	var handOff []store.OutboxMessage
	for i, a := range allocs {
		rows[i] = mirror.Allocation(a)
		if rows[i].JobID == "" {
			rows[i].JobID = job.JobID // Prime reported no job
		}
		if a.IsMakeSafe() {
			msg, err := message(events.SubjectMakesafeDetect, makesafeMsgID(rows[i]),
				events.MakesafeDetect{JobID: job.JobID, QueueChecks: false, Source: drainSource})
			if err != nil {
				return synced{}, err
			}
			handOff = append(handOff, msg)
		}
	}
	return synced{empty: len(rows) == 0, handOff: handOff, write: func(ctx context.Context, tx store.Store) error {
		for _, r := range rows {
			if _, err := tx.SaveAllocation(ctx, r); err != nil {
				return err
			}
		}
		return nil
	}}, nil
}

// drainSource is the Source of the hand-offs a drain makes.
const drainSource = "syncqueue"

// syncRelationships is "Sync Queued ContactRelationships" (§7): the job's
// contact relationships, which replace the mirrored ones.
func (c *ChildMirror) syncRelationships(ctx context.Context, job store.Job) (synced, error) {
	rels, err := c.prime.GetJobContactRelationships(ctx, job.JobID)
	if err != nil {
		return synced{}, fmt.Errorf("contact relationships: %w", err)
	}
	return synced{empty: len(rels) == 0, write: func(ctx context.Context, tx store.Store) error {
		return tx.ReplaceJobContactRelationships(ctx, job.JobID, relationshipRows(job.JobID, rels))
	}}, nil
}
