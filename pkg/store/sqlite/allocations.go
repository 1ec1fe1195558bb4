package sqlite

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

const allocationColumns = `allocationId, jobId, assignedId, assignedContactId, allocationType, allocationNumber,
	label, allocationStatusId, isMakeSafe, version, createdAt, updatedAt, attributes, syncedUTC`

func scanAllocation(sc sqlrows.Scanner) (store.Allocation, error) {
	var a store.Allocation
	err := sc.Scan(&a.AllocationID, scanString{&a.JobID}, scanString{&a.AssignedID}, scanString{&a.AssignedContactID},
		scanString{&a.AllocationType}, scanString{&a.AllocationNumber}, scanString{&a.Label},
		scanString{&a.AllocationStatusID}, &a.IsMakeSafe, scanNullInt64{&a.Version}, scanTime{&a.CreatedAt},
		scanTime{&a.UpdatedAt}, scanString{&a.Attributes}, scanTime{&a.SyncedUTC})
	return a, err
}

// SaveAllocation upserts an allocation unless the stored row is newer.
func (s *Store) SaveAllocation(ctx context.Context, a store.Allocation) (bool, error) {
	if a.AllocationID == "" {
		return false, errors.New("sqlite: save allocation: no id")
	}
	// isMakeSafe is a column SQLite derives from allocationType (032).
	res, err := s.w().ExecContext(ctx, `INSERT INTO primeAllocations (allocationId, jobId, assignedId,
			assignedContactId, allocationType, allocationNumber, label, allocationStatusId, version, createdAt,
			updatedAt, attributes, syncedUTC)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (allocationId) DO UPDATE SET
			jobId = excluded.jobId, assignedId = excluded.assignedId,
			assignedContactId = excluded.assignedContactId, allocationType = excluded.allocationType,
			allocationNumber = excluded.allocationNumber, label = excluded.label,
			allocationStatusId = excluded.allocationStatusId,
			version = excluded.version, createdAt = excluded.createdAt, updatedAt = excluded.updatedAt,
			attributes = excluded.attributes, syncedUTC = excluded.syncedUTC
		WHERE primeAllocations.version IS NULL OR excluded.version IS NULL
		   OR primeAllocations.version <= excluded.version`,
		mirrorGUID(a.AllocationID), mirrorGUID(a.JobID), mirrorGUID(a.AssignedID), mirrorGUID(a.AssignedContactID),
		nullString(a.AllocationType), nullString(a.AllocationNumber), nullString(a.Label),
		mirrorGUID(a.AllocationStatusID), a.Version, nullTime(a.CreatedAt), nullTime(a.UpdatedAt),
		nullString(a.Attributes), formatTime(time.Now()))
	if err != nil {
		return false, fmt.Errorf("sqlite: save allocation: %w", err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// GetAllocation reads one allocation.
func (s *Store) GetAllocation(ctx context.Context, id string) (store.Allocation, bool, error) {
	return queryOne(ctx, s.r(), "get allocation", `SELECT `+allocationColumns+`
		FROM primeAllocations WHERE allocationId = ?`, scanAllocation, mirrorGUID(id))
}

// ListJobAllocations reads a job's allocations, oldest first.
func (s *Store) ListJobAllocations(ctx context.Context, jobID string) ([]store.Allocation, error) {
	return queryAll(ctx, s.r(), "list job allocations", `SELECT `+allocationColumns+`
		FROM primeAllocations WHERE jobId = ? ORDER BY createdAt, allocationId`, scanAllocation, mirrorGUID(jobID))
}

// HasMakeSafeAllocation reports whether the job has an allocation whose isMakeSafe is set.
func (s *Store) HasMakeSafeAllocation(ctx context.Context, jobID string) (bool, error) {
	var has bool
	err := s.r().QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM primeAllocations
		WHERE jobId = ? AND isMakeSafe = 1)`, mirrorGUID(jobID)).Scan(&has)
	if err != nil {
		return false, fmt.Errorf("sqlite: has make safe allocation: %w", err)
	}
	return has, nil
}
