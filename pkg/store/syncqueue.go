package store

import (
	"context"
	"slices"
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
	// same item. A claim is told by its stamp, kept to the millisecond, so
	// one made in the millisecond of a claim given back is that claim.
	ClaimSyncQueue(ctx context.Context, f SyncQueueFilter, staleBefore time.Time) ([]SyncQueueItem, error)
	// ReleaseSyncQueue gives back the claim item holds (its ClaimedUTC as
	// ClaimSyncQueue returned it), so the item may be claimed again at
	// once. It reports false when the item is no longer so claimed.
	ReleaseSyncQueue(ctx context.Context, item SyncQueueItem) (released bool, err error)
	// DeleteClaimedSyncQueue removes a claimed item while it is as its
	// claim found it — claimed at item.ClaimedUTC, queued at
	// item.QueuedUTC — and reports whether it did: a drain calls it in the
	// transaction of its mirror write. An item queued again since the claim
	// (UpsertSyncQueue), or claimed by another drainer, is kept for the pass
	// that follows.
	DeleteClaimedSyncQueue(ctx context.Context, item SyncQueueItem) (deleted bool, err error)
	// SyncQueueStats returns, for each object of MissingObjects and any
	// other object the queue holds, how many items it has, how many of
	// them are claimed, and when the oldest was queued.
	SyncQueueStats(ctx context.Context) ([]SyncQueueStat, error)
	// GetJobObjectsQueued returns the version of the job that primeflow
	// last queued its missing objects for (at its first sight, or by the
	// jobs-by-date backstop once it changed); found is false when none
	// was recorded (spPrimeflowGetJobObjectsQueued).
	GetJobObjectsQueued(ctx context.Context, jobID string) (v JobVersion, found bool, err error)
	// SetJobObjectsQueued records v as that version
	// (spPrimeflowSetJobObjectsQueued).
	SetJobObjectsQueued(ctx context.Context, jobID string, v JobVersion) error
}

// JobVersion is how far a job has changed: Prime's version, and its
// updatedAt, which stands in for a version Prime does not give.
type JobVersion struct {
	Version   int64
	UpdatedAt time.Time
}

// Covers reports whether v is w or newer: by version when w has one, by
// updatedAt (to the millisecond the stores keep) when it has none.
func (v JobVersion) Covers(w JobVersion) bool {
	if w.Version != 0 {
		return v.Version >= w.Version
	}
	return !w.UpdatedAt.Truncate(time.Millisecond).After(v.UpdatedAt)
}

// SyncQueueStat is one object's part of the sync queue.
type SyncQueueStat struct {
	Object  string
	Items   int
	Claimed int
	// OldestQueuedUTC is the oldest item's queuedUTC; zero when none waits.
	OldestQueuedUTC time.Time
}

// EveryObject is stats with an empty stat for each object of MissingObjects
// it lacks, those objects first, in their order: what SyncQueueStats
// returns whichever objects the queue holds.
func EveryObject(stats []SyncQueueStat) []SyncQueueStat {
	out := make([]SyncQueueStat, 0, len(stats)+4)
	for _, o := range MissingObjects() {
		st := SyncQueueStat{Object: o}
		for _, s := range stats {
			if s.Object == o {
				st = s
			}
		}
		out = append(out, st)
	}
	for _, s := range stats {
		if !slices.Contains(MissingObjects(), s.Object) {
			out = append(out, s)
		}
	}
	return out
}
