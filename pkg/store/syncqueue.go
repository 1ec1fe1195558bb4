package store

import (
	"context"
	"time"
)

// Mirror tables that ethSyncQueue names but IdentifyGuid does not probe.
const (
	TableJobStatusHistory     = "primeJobStatusHistory"
	TableContactRelationships = "primeContactRelationships"
)

// MissingObjects returns the objects QueueMissingObjectsByJob queues for a
// job (§6 step 1: status histories, contacts, allocations, contact
// relationships), in that order.
func MissingObjects() []string {
	return []string{TableJobStatusHistory, TableContacts, TableAllocations, TableContactRelationships}
}

// SyncQueueItem is a row of ethSyncQueue: "sync this job's <object> from
// Prime". The spec does not give the table's columns; sql/README.md writes
// down the reading.
type SyncQueueItem struct {
	ID int64
	// Object is the mirror table to sync: one of MissingObjects.
	Object string
	JobID  string
	// QueuedUTC is when the item was last queued (an upsert re-queues it).
	QueuedUTC time.Time
	// ClaimedUTC is when a drainer last claimed it; zero when none holds it.
	ClaimedUTC time.Time
}

// SyncQueueFilter selects sync queue items. Zero fields do not filter.
type SyncQueueFilter struct {
	Object string
	JobID  string
	// Limit is how many items to return; 0 means 100.
	Limit int
}

// SyncQueue is ethSyncQueue: the per-job child syncs still to run (§6, §7).
type SyncQueue interface {
	// QueueMissingObjectsByJob queues the job's status histories, contacts,
	// allocations and contact relationships, skipping those already queued
	// (spEthSyncQueueMissingObjectsByJobID), and returns how many it queued.
	QueueMissingObjectsByJob(ctx context.Context, jobID string) (queued int, err error)
	// UpsertSyncQueue queues one object of a job, or queues it again when it
	// is there: queued now and held by no drainer (spEthSyncQueueUpsert).
	UpsertSyncQueue(ctx context.Context, object, jobID string) error
	// DeleteSyncQueue removes one object of a job from the queue and reports
	// whether it was there (spEthSyncQueueDelete). A drain deletes the item
	// once it has synced it, and also when Prime answers with nothing (§7).
	DeleteSyncQueue(ctx context.Context, object, jobID string) (deleted bool, err error)
	// ListSyncQueue returns the selected items, oldest queued first.
	ListSyncQueue(ctx context.Context, f SyncQueueFilter) ([]SyncQueueItem, error)
	// ClaimSyncQueue takes the selected items no drainer holds — never
	// claimed, or claimed before staleBefore — oldest queued first, stamps
	// them claimed now and returns them. Two claims at once never take the
	// same item.
	ClaimSyncQueue(ctx context.Context, f SyncQueueFilter, staleBefore time.Time) ([]SyncQueueItem, error)
}
