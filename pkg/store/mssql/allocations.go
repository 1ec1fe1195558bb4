package mssql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

func allocationDest(a *store.Allocation) []any {
	return []any{scanGUID{&a.AllocationID}, scanGUID{&a.JobID}, scanGUID{&a.AssignedID}, scanGUID{&a.AssignedContactID},
		scanString{&a.AllocationType}, scanString{&a.AllocationNumber}, scanString{&a.Label},
		scanGUID{&a.AllocationStatusID}, &a.IsMakeSafe, scanInt64{&a.Version}, scanTime{&a.CreatedAt},
		scanTime{&a.UpdatedAt}, scanString{&a.Attributes}, scanTime{&a.SyncedUTC}}
}

// SaveAllocation upserts an allocation unless the stored row is newer
// (spPrimeflowSaveAllocation).
func (s *Store) SaveAllocation(ctx context.Context, a store.Allocation) (bool, error) {
	id, err := parseGUID(a.AllocationID)
	if err != nil {
		return false, err
	}
	args, err := guidArgs("JobId", a.JobID, "AssignedId", a.AssignedID,
		"AssignedContactId", a.AssignedContactID, "AllocationStatusId", a.AllocationStatusID)
	if err != nil {
		return false, err
	}
	args = append(args, sql.Named("AllocationId", id),
		sql.Named("AllocationType", sqlString(a.AllocationType)), sql.Named("AllocationNumber", sqlString(a.AllocationNumber)),
		sql.Named("Label", sqlString(a.Label)), sql.Named("Version", a.Version),
		sql.Named("CreatedAt", sqlTime(a.CreatedAt)), sql.Named("UpdatedAt", sqlTime(a.UpdatedAt)),
		sql.Named("Attributes", sqlString(a.Attributes)))
	var saved bool
	if err := s.q().QueryRowContext(ctx, procSaveAllocation, args...).Scan(&saved); err != nil {
		return false, fmt.Errorf("mssql: save allocation: %w", err)
	}
	return saved, nil
}

// GetAllocation reads one allocation (spPrimeflowGetAllocation).
func (s *Store) GetAllocation(ctx context.Context, allocationID string) (store.Allocation, bool, error) {
	id, ok := keyGUID(allocationID)
	if !ok {
		return store.Allocation{}, false, nil
	}
	var a store.Allocation
	found, err := s.getOne(ctx, "get allocation", procGetAllocation, allocationDest(&a), sql.Named("AllocationId", id))
	if !found || err != nil {
		return store.Allocation{}, false, err
	}
	return a, true, nil
}

// ListJobAllocations reads a job's allocations (spPrimeflowListJobAllocations).
func (s *Store) ListJobAllocations(ctx context.Context, jobID string) ([]store.Allocation, error) {
	job, ok := keyGUID(jobID)
	if !ok {
		return nil, nil
	}
	return queryAll(ctx, s.q(), "list job allocations", procListJobAllocations, func(sc sqlrows.Scanner) (store.Allocation, error) {
		var a store.Allocation
		err := sc.Scan(allocationDest(&a)...)
		return a, err
	}, sql.Named("JobId", job))
}

// HasMakeSafeAllocation reports whether the job has an allocation saved as
// Make Safe (spPrimeflowHasMakeSafeAllocation).
func (s *Store) HasMakeSafeAllocation(ctx context.Context, jobID string) (bool, error) {
	job, ok := keyGUID(jobID)
	if !ok {
		return false, nil
	}
	var has bool
	if err := s.q().QueryRowContext(ctx, procHasMakeSafeAllocation, sql.Named("JobId", job)).Scan(&has); err != nil {
		return false, fmt.Errorf("mssql: has make safe allocation: %w", err)
	}
	return has, nil
}
