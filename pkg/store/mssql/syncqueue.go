package mssql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// The procedures behind the SyncQueue methods (sql/mssql/012_sync_queue.sql).
const (
	procQueueMissingObjects = "dbo.spEthSyncQueueMissingObjectsByJobID"
	procUpsertSyncQueue     = "dbo.spEthSyncQueueUpsert"
	procDeleteSyncQueue     = "dbo.spEthSyncQueueDelete"
	procListSyncQueue       = "dbo.spPrimeflowListSyncQueue"
	procClaimSyncQueue      = "dbo.spPrimeflowClaimSyncQueue"
	defaultSyncQueueLimit   = 100
)

// QueueMissingObjectsByJob queues a job's missing objects (spEthSyncQueueMissingObjectsByJobID).
func (s *Store) QueueMissingObjectsByJob(ctx context.Context, jobID string) (int, error) {
	id, err := parseGUID(jobID)
	if err != nil {
		return 0, fmt.Errorf("mssql: queue missing objects: %w", err)
	}
	var queued int
	if err := s.q().QueryRowContext(ctx, procQueueMissingObjects, sql.Named("JobId", id)).Scan(&queued); err != nil {
		return 0, fmt.Errorf("mssql: queue missing objects: %w", err)
	}
	return queued, nil
}

// UpsertSyncQueue queues an object of a job, or queues it again (spEthSyncQueueUpsert).
func (s *Store) UpsertSyncQueue(ctx context.Context, object, jobID string) error {
	id, err := parseGUID(jobID)
	if err != nil {
		return fmt.Errorf("mssql: upsert sync queue: %w", err)
	}
	if object == "" {
		return errors.New("mssql: upsert sync queue: no object")
	}
	if _, err := s.q().ExecContext(ctx, procUpsertSyncQueue, sql.Named("ObjectName", object), sql.Named("JobId", id)); err != nil {
		return fmt.Errorf("mssql: upsert sync queue: %w", err)
	}
	return nil
}

// DeleteSyncQueue removes an object of a job from the queue (spEthSyncQueueDelete).
func (s *Store) DeleteSyncQueue(ctx context.Context, object, jobID string) (bool, error) {
	id, ok := jobGUID(jobID)
	if !ok {
		return false, nil
	}
	var deleted int64
	if err := s.q().QueryRowContext(ctx, procDeleteSyncQueue, sql.Named("ObjectName", object), sql.Named("JobId", id)).Scan(&deleted); err != nil {
		return false, fmt.Errorf("mssql: delete sync queue: %w", err)
	}
	return deleted > 0, nil
}

// syncQueueArgs are the filter parameters the list and claim procedures
// share; ok is false when the filter names a job that cannot exist.
func syncQueueArgs(f store.SyncQueueFilter) (args []any, ok bool) {
	job := nullGUID()
	if f.JobID != "" {
		id, valid := jobGUID(f.JobID)
		if !valid {
			return nil, false
		}
		job = id
	}
	top := f.Limit
	if top <= 0 {
		top = defaultSyncQueueLimit
	}
	return []any{sql.Named("ObjectName", sqlString(f.Object)), sql.Named("JobId", job), sql.Named("Top", top)}, true
}

// ListSyncQueue lists queued items (spPrimeflowListSyncQueue).
func (s *Store) ListSyncQueue(ctx context.Context, f store.SyncQueueFilter) ([]store.SyncQueueItem, error) {
	args, ok := syncQueueArgs(f)
	if !ok {
		return nil, nil
	}
	items, err := s.querySyncQueue(ctx, procListSyncQueue, args)
	if err != nil {
		return nil, fmt.Errorf("mssql: list sync queue: %w", err)
	}
	return items, nil
}

// ClaimSyncQueue takes the selected items no drainer holds (spPrimeflowClaimSyncQueue).
func (s *Store) ClaimSyncQueue(ctx context.Context, f store.SyncQueueFilter, staleBefore time.Time) ([]store.SyncQueueItem, error) {
	args, ok := syncQueueArgs(f)
	if !ok {
		return nil, nil
	}
	items, err := s.querySyncQueue(ctx, procClaimSyncQueue, append(args, sql.Named("StaleBefore", sqlTime(staleBefore))))
	if err != nil {
		return nil, fmt.Errorf("mssql: claim sync queue: %w", err)
	}
	// OUTPUT returns rows in no set order.
	slices.SortFunc(items, func(a, b store.SyncQueueItem) int {
		if c := a.QueuedUTC.Compare(b.QueuedUTC); c != 0 {
			return c
		}
		return int(a.ID - b.ID)
	})
	return items, nil
}

func (s *Store) querySyncQueue(ctx context.Context, proc string, args []any) ([]store.SyncQueueItem, error) {
	rows, err := s.q().QueryContext(ctx, proc, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.SyncQueueItem
	for rows.Next() {
		var it store.SyncQueueItem
		if err := rows.Scan(&it.ID, &it.Object, scanGUID{&it.JobID}, scanTime{&it.QueuedUTC}, scanTime{&it.ClaimedUTC}); err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	return out, rows.Err()
}

// The procedures of the drains (sql/mssql/060_sync_drains.sql).
const (
	procReleaseSyncQueue       = "dbo.spPrimeflowReleaseSyncQueue"
	procDeleteClaimedSyncQueue = "dbo.spPrimeflowDeleteClaimedSyncQueue"
	procSyncQueueStats         = "dbo.spPrimeflowSyncQueueStats"
)

// ReleaseSyncQueue gives back a claim (spPrimeflowReleaseSyncQueue).
func (s *Store) ReleaseSyncQueue(ctx context.Context, it store.SyncQueueItem) (bool, error) {
	var n int
	if err := s.q().QueryRowContext(ctx, procReleaseSyncQueue, sql.Named("ID", it.ID),
		sql.Named("ClaimedUTC", sqlTime(it.ClaimedUTC))).Scan(&n); err != nil {
		return false, fmt.Errorf("mssql: release sync queue %d: %w", it.ID, err)
	}
	return n > 0, nil
}

// DeleteClaimedSyncQueue removes a claimed item still as claimed
// (spPrimeflowDeleteClaimedSyncQueue).
func (s *Store) DeleteClaimedSyncQueue(ctx context.Context, it store.SyncQueueItem) (bool, error) {
	var n int
	if err := s.q().QueryRowContext(ctx, procDeleteClaimedSyncQueue, sql.Named("ID", it.ID),
		sql.Named("QueuedUTC", sqlTime(it.QueuedUTC)), sql.Named("ClaimedUTC", sqlTime(it.ClaimedUTC))).Scan(&n); err != nil {
		return false, fmt.Errorf("mssql: delete claimed sync queue %d: %w", it.ID, err)
	}
	return n > 0, nil
}

// SyncQueueStats counts the queue by object (spPrimeflowSyncQueueStats).
func (s *Store) SyncQueueStats(ctx context.Context) ([]store.SyncQueueStat, error) {
	stats, err := queryAll(ctx, s.q(), "sync queue stats", procSyncQueueStats, func(sc sqlrows.Scanner) (store.SyncQueueStat, error) {
		var st store.SyncQueueStat
		err := sc.Scan(&st.Object, &st.Items, &st.Claimed, scanTime{&st.OldestQueuedUTC})
		return st, err
	})
	if err != nil {
		return nil, err
	}
	return store.EveryObject(stats), nil
}

// The procedures of the versions whose objects were queued
// (sql/mssql/062_job_objects_queued.sql).
const (
	procGetJobObjectsQueued = "dbo.spPrimeflowGetJobObjectsQueued"
	procSetJobObjectsQueued = "dbo.spPrimeflowSetJobObjectsQueued"
)

// GetJobObjectsQueued reads the version of the job whose objects were last
// queued (spPrimeflowGetJobObjectsQueued).
func (s *Store) GetJobObjectsQueued(ctx context.Context, jobID string) (store.JobVersion, bool, error) {
	id, ok := jobGUID(jobID)
	if !ok {
		return store.JobVersion{}, false, nil
	}
	var v store.JobVersion
	err := s.q().QueryRowContext(ctx, procGetJobObjectsQueued, sql.Named("JobId", id)).Scan(&v.Version, scanTime{&v.UpdatedAt})
	if errors.Is(err, sql.ErrNoRows) {
		return store.JobVersion{}, false, nil
	}
	if err != nil {
		return store.JobVersion{}, false, fmt.Errorf("mssql: get job objects queued: %w", err)
	}
	return v, true, nil
}

// SetJobObjectsQueued records the version of the job whose objects were
// queued now (spPrimeflowSetJobObjectsQueued).
func (s *Store) SetJobObjectsQueued(ctx context.Context, jobID string, v store.JobVersion) error {
	id, err := parseGUID(jobID)
	if err != nil {
		return fmt.Errorf("mssql: set job objects queued: %w", err)
	}
	if _, err := s.q().ExecContext(ctx, procSetJobObjectsQueued, sql.Named("JobId", id), sql.Named("Version", v.Version),
		sql.Named("UpdatedAt", v.UpdatedAt.UTC().Truncate(time.Millisecond))); err != nil {
		return fmt.Errorf("mssql: set job objects queued: %w", err)
	}
	return nil
}
