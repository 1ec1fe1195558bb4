package childmirror

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/mirror"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// What each drain fetches from Prime and writes (the endpoints and their
// shapes are pkg/prime's, the assumed ones marked there; sql/README.md, "The
// sync-queue drains", gives the reading), and how it tells that another
// path has brought it.

// syncStatusHistory is "Sync Queued StatusHistories_Job" (§7): the job's
// status changes, which replace the mirrored ones (Prime lists a job's
// history as it is now).
func (c *ChildMirror) syncStatusHistory(ctx context.Context, job store.Job, _ store.SyncQueueItem) (synced, error) {
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
// The relationships are the mirror's when they were written since the item
// was queued (by the relationships drain, or an event's contact sync), so
// that the two drains share one fetch of them; otherwise Prime's, which it
// writes too, for the relationships drain to take.
func (c *ChildMirror) syncContactsOf(ctx context.Context, job store.Job, it store.SyncQueueItem) (synced, error) {
	ids, fresh, err := c.mirroredContacts(ctx, job.JobID, it.QueuedUTC)
	if err != nil {
		return synced{}, err
	}
	var rels []store.ContactRelationship
	if !fresh {
		fetched, err := c.prime.GetJobContactRelationships(ctx, job.JobID)
		if err != nil {
			return synced{}, fmt.Errorf("contact relationships: %w", err)
		}
		rels = relationshipRows(job.JobID, fetched)
		ids = contactIDs(rels)
	}
	contacts, err := c.fetchContacts(ctx, ids, job.PrimaryContactID)
	if err != nil {
		return synced{}, err
	}
	return synced{empty: len(contacts) == 0, write: func(ctx context.Context, tx store.Store) error {
		if len(rels) > 0 {
			// An empty list erases nothing: the relationships drain's
			// own grace decides on it.
			if err := tx.ReplaceJobContactRelationships(ctx, job.JobID, rels); err != nil {
				return err
			}
		}
		return saveContacts(ctx, tx, contacts)
	}}, nil
}

// mirroredContacts is the contacts the job's mirrored relationships name,
// when every relationship was written after since (the mirror's times are
// to the millisecond: one written in since's millisecond may have come
// first): Prime's whole list as of then (ReplaceJobContactRelationships
// writes the whole list).
// fresh is false when the mirror has none, or older ones.
func (c *ChildMirror) mirroredContacts(ctx context.Context, jobID string, since time.Time) (ids []string, fresh bool, err error) {
	rels, err := c.store.ListJobContactRelationships(ctx, jobID)
	if err != nil || len(rels) == 0 {
		return nil, false, err
	}
	for _, r := range rels {
		if !r.SyncedUTC.After(since) {
			return nil, false, nil
		}
	}
	return contactIDs(rels), true, nil
}

func contactIDs(rels []store.ContactRelationship) []string {
	ids := make([]string, len(rels))
	for i, r := range rels {
		ids[i] = r.ContactID
	}
	return ids
}

// contactsBrought reports whether, since Prime answered nothing for the
// contacts at empty, the job's relationships and every contact they name
// (its primary contact too) were mirrored: an event's contact sync (§5.2
// step 4) writes them together.
func (c *ChildMirror) contactsBrought(ctx context.Context, job store.Job, _ store.SyncQueueItem, empty time.Time) (bool, error) {
	if empty.IsZero() {
		return false, nil
	}
	ids, fresh, err := c.mirroredContacts(ctx, job.JobID, empty)
	if err != nil || !fresh {
		return false, err
	}
	for _, id := range append(ids, job.PrimaryContactID) {
		if id == "" {
			continue
		}
		ct, found, err := c.store.GetContact(ctx, strings.ToLower(id))
		if err != nil || !found || !ct.SyncedUTC.After(empty) {
			return false, err
		}
	}
	return true, nil
}

// syncAllocations is "Prime Sync Queued Allocations" (§6, §7): the job's
// allocations, each saved as child-mirror saves one (version-guarded). A
// Make Safe among them is handed to make-safe detection with queue-checks
// off, as its create-allocation event would be (§5.5 step 3): the sync may
// be the first the mirror hears of it.
func (c *ChildMirror) syncAllocations(ctx context.Context, job store.Job, _ store.SyncQueueItem) (synced, error) {
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

// allocationsBrought reports whether an allocation of the job was mirrored
// since Prime answered that it had none at empty: by its create-allocation
// event (§5.5), or a rung of the ladder. Prime had none then, and each one
// made since sends its own event.
func (c *ChildMirror) allocationsBrought(ctx context.Context, job store.Job, _ store.SyncQueueItem, empty time.Time) (bool, error) {
	if empty.IsZero() {
		return false, nil
	}
	allocs, err := c.store.ListJobAllocations(ctx, job.JobID)
	if err != nil {
		return false, err
	}
	for _, a := range allocs {
		if a.SyncedUTC.After(empty) {
			return true, nil
		}
	}
	return false, nil
}

// drainSource is the Source of the hand-offs a drain makes.
const drainSource = "syncqueue"

// syncRelationships is "Sync Queued ContactRelationships" (§7): the job's
// contact relationships, which replace the mirrored ones.
func (c *ChildMirror) syncRelationships(ctx context.Context, job store.Job, _ store.SyncQueueItem) (synced, error) {
	rels, err := c.prime.GetJobContactRelationships(ctx, job.JobID)
	if err != nil {
		return synced{}, fmt.Errorf("contact relationships: %w", err)
	}
	return synced{empty: len(rels) == 0, write: func(ctx context.Context, tx store.Store) error {
		return tx.ReplaceJobContactRelationships(ctx, job.JobID, relationshipRows(job.JobID, rels))
	}}, nil
}

// relationshipsBrought reports whether the job's relationships were
// mirrored whole since the item was queued, or since Prime last answered
// none (by the contacts drain, which shares this fetch, or an event's
// contact sync): Prime's whole list as of then, as this drain would write.
func (c *ChildMirror) relationshipsBrought(ctx context.Context, job store.Job, it store.SyncQueueItem, empty time.Time) (bool, error) {
	_, fresh, err := c.mirroredContacts(ctx, job.JobID, maxTime(it.QueuedUTC, empty))
	return fresh, err
}
