package sqlite

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// QueueMissingObjectsByJob queues the job's missing objects
// (spEthSyncQueueMissingObjectsByJobID), skipping those already queued.
func (s *Store) QueueMissingObjectsByJob(ctx context.Context, jobID string) (int, error) {
	if jobID == "" {
		return 0, errors.New("sqlite: queue missing objects: no job id")
	}
	queued := 0
	now := formatTime(time.Now())
	err := s.inTx(ctx, func(tx *Store) error {
		for _, object := range store.MissingObjects() {
			res, err := tx.tx.ExecContext(ctx, `INSERT INTO ethSyncQueue (objectName, jobId, queuedUTC) VALUES (?, ?, ?)
				ON CONFLICT (objectName, jobId) DO NOTHING`, object, strings.ToLower(jobID), now)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			queued += int(n)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: queue missing objects: %w", err)
	}
	return queued, nil
}

// UpsertSyncQueue queues an object of a job, or queues it again (spEthSyncQueueUpsert).
func (s *Store) UpsertSyncQueue(ctx context.Context, object, jobID string) error {
	if object == "" || jobID == "" {
		return errors.New("sqlite: upsert sync queue: object and job are required")
	}
	if _, err := s.w().ExecContext(ctx, `INSERT INTO ethSyncQueue (objectName, jobId, queuedUTC) VALUES (?, ?, ?)
		ON CONFLICT (objectName, jobId) DO UPDATE SET queuedUTC = excluded.queuedUTC, claimedUTC = NULL`,
		object, strings.ToLower(jobID), formatTime(time.Now())); err != nil {
		return fmt.Errorf("sqlite: upsert sync queue: %w", err)
	}
	return nil
}

// DeleteSyncQueue removes an object of a job from the queue (spEthSyncQueueDelete).
func (s *Store) DeleteSyncQueue(ctx context.Context, object, jobID string) (bool, error) {
	res, err := s.w().ExecContext(ctx, `DELETE FROM ethSyncQueue WHERE objectName = ? AND jobId = ?`, object, strings.ToLower(jobID))
	if err != nil {
		return false, fmt.Errorf("sqlite: delete sync queue: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("sqlite: delete sync queue: %w", err)
	}
	return n > 0, nil
}

func syncQueueWhere(f store.SyncQueueFilter) (string, []any) {
	var conds []string
	var args []any
	if f.Object != "" {
		conds = append(conds, "objectName = ?")
		args = append(args, f.Object)
	}
	if f.JobID != "" {
		conds = append(conds, "jobId = ?")
		args = append(args, strings.ToLower(f.JobID))
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

func syncQueueLimit(f store.SyncQueueFilter) int {
	if f.Limit <= 0 {
		return 100
	}
	return f.Limit
}

// ListSyncQueue lists queued items, oldest queued first.
func (s *Store) ListSyncQueue(ctx context.Context, f store.SyncQueueFilter) ([]store.SyncQueueItem, error) {
	where, args := syncQueueWhere(f)
	items, err := querySyncQueue(ctx, s.r(), where, append(args, syncQueueLimit(f)))
	if err != nil {
		return nil, fmt.Errorf("sqlite: list sync queue: %w", err)
	}
	return items, nil
}

// ClaimSyncQueue takes the selected items no drainer holds and stamps them
// claimed; the one write connection keeps two claims apart.
func (s *Store) ClaimSyncQueue(ctx context.Context, f store.SyncQueueFilter, staleBefore time.Time) ([]store.SyncQueueItem, error) {
	where, args := syncQueueWhere(f)
	if where == "" {
		where = " WHERE "
	} else {
		where += " AND "
	}
	where += "(claimedUTC IS NULL OR claimedUTC < ?)"
	args = append(args, formatTime(staleBefore), syncQueueLimit(f))
	var items []store.SyncQueueItem
	err := s.inTx(ctx, func(tx *Store) error {
		var err error
		items, err = querySyncQueue(ctx, tx.tx, where, args)
		if err != nil || len(items) == 0 {
			return err
		}
		now := time.Now().UTC().Truncate(time.Millisecond)
		ids := []any{formatTime(now)}
		for i := range items {
			ids = append(ids, items[i].ID)
			items[i].ClaimedUTC = now
		}
		_, err = tx.tx.ExecContext(ctx, `UPDATE ethSyncQueue SET claimedUTC = ? WHERE id IN (`+placeholders(len(items))+`)`, ids...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim sync queue: %w", err)
	}
	return items, nil
}

func querySyncQueue(ctx context.Context, q sqlrows.Querier, where string, args []any) ([]store.SyncQueueItem, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, objectName, jobId, queuedUTC, claimedUTC FROM ethSyncQueue`+where+
		` ORDER BY queuedUTC, id LIMIT ?`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.SyncQueueItem
	for rows.Next() {
		var it store.SyncQueueItem
		if err := rows.Scan(&it.ID, &it.Object, &it.JobID, scanTime{&it.QueuedUTC}, scanTime{&it.ClaimedUTC}); err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	return out, rows.Err()
}

// ReleaseSyncQueue gives back a claim, while the item still holds it.
func (s *Store) ReleaseSyncQueue(ctx context.Context, it store.SyncQueueItem) (bool, error) {
	n, err := s.execCount(ctx, `UPDATE ethSyncQueue SET claimedUTC = NULL WHERE id = ? AND claimedUTC = ?`,
		it.ID, formatTime(it.ClaimedUTC))
	if err != nil {
		return false, fmt.Errorf("sqlite: release sync queue %d: %w", it.ID, err)
	}
	return n > 0, nil
}

// DeleteClaimedSyncQueue removes a claimed item while it is as claimed.
func (s *Store) DeleteClaimedSyncQueue(ctx context.Context, it store.SyncQueueItem) (bool, error) {
	n, err := s.execCount(ctx, `DELETE FROM ethSyncQueue WHERE id = ? AND queuedUTC = ? AND claimedUTC = ?`,
		it.ID, formatTime(it.QueuedUTC), formatTime(it.ClaimedUTC))
	if err != nil {
		return false, fmt.Errorf("sqlite: delete claimed sync queue %d: %w", it.ID, err)
	}
	return n > 0, nil
}

// execCount runs a write and returns how many rows it changed.
func (s *Store) execCount(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := s.w().ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// SyncQueueStats counts the queue by object.
func (s *Store) SyncQueueStats(ctx context.Context) ([]store.SyncQueueStat, error) {
	stats, err := queryAll(ctx, s.r(), "sync queue stats", `SELECT objectName, COUNT(*),
		SUM(CASE WHEN claimedUTC IS NULL THEN 0 ELSE 1 END), MIN(queuedUTC)
		FROM ethSyncQueue GROUP BY objectName ORDER BY objectName`, func(sc sqlrows.Scanner) (store.SyncQueueStat, error) {
		var st store.SyncQueueStat
		err := sc.Scan(&st.Object, &st.Items, &st.Claimed, scanTime{&st.OldestQueuedUTC})
		return st, err
	})
	if err != nil {
		return nil, err
	}
	return store.EveryObject(stats), nil
}

// GetJobObjectsQueued reads the version of the job whose objects were last
// queued (primeflowJobObjectsQueued).
func (s *Store) GetJobObjectsQueued(ctx context.Context, jobID string) (store.JobVersion, bool, error) {
	return queryOne(ctx, s.r(), "get job objects queued", `SELECT version, updatedAt FROM primeflowJobObjectsQueued WHERE jobId = ?`,
		func(sc sqlrows.Scanner) (store.JobVersion, error) {
			var v store.JobVersion
			err := sc.Scan(&v.Version, scanTime{&v.UpdatedAt})
			return v, err
		}, strings.ToLower(jobID))
}

// SetJobObjectsQueued records the version of the job whose objects were
// queued now.
func (s *Store) SetJobObjectsQueued(ctx context.Context, jobID string, v store.JobVersion) error {
	if jobID == "" {
		return errors.New("sqlite: set job objects queued: no job id")
	}
	if _, err := s.w().ExecContext(ctx, `INSERT INTO primeflowJobObjectsQueued (jobId, version, updatedAt, queuedUTC) VALUES (?, ?, ?, ?)
		ON CONFLICT (jobId) DO UPDATE SET version = excluded.version, updatedAt = excluded.updatedAt, queuedUTC = excluded.queuedUTC`,
		strings.ToLower(jobID), v.Version, formatTime(v.UpdatedAt.Truncate(time.Millisecond)), formatTime(time.Now())); err != nil {
		return fmt.Errorf("sqlite: set job objects queued: %w", err)
	}
	return nil
}
