package store

import (
	"context"
	"time"
)

// Allocation is a row of primeAllocations (§5.5): a Prime allocation's main
// attributes as columns and its raw attributes JSON.
type Allocation struct {
	AllocationID      string
	JobID             string
	AssignedID        string
	AssignedContactID string
	// AllocationType is Prime's allocationType as sent ("Make Safe", …).
	AllocationType     string
	AllocationNumber   string
	Label              string
	AllocationStatusID string
	// IsMakeSafe is the Make Safe rule's verdict on the allocation, which
	// SQL derives from AllocationType (a computed column of
	// primeAllocations: "Make Safe", without regard to case, spaces,
	// hyphens or underscores, as prime.Allocation.IsMakeSafe reads it), so
	// that a row any writer saves — an n8n sync too — carries it. Read back
	// only: SaveAllocation ignores it.
	IsMakeSafe bool
	Version    int64
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// Attributes is Prime's attributes object exactly as it came.
	Attributes string
	// SyncedUTC is when primeflow last wrote the row; SaveAllocation sets it.
	SyncedUTC time.Time
}

// Allocations is the allocation mirror, primeAllocations.
type Allocations interface {
	// SaveAllocation inserts the allocation or updates the row with its id
	// (§5.5 SaveAllocation). A row whose stored version is newer than the
	// allocation's is left as it is. It reports whether it wrote the row.
	SaveAllocation(ctx context.Context, a Allocation) (saved bool, err error)
	// GetAllocation returns a mirrored allocation; found is false when
	// primeAllocations has no row for it.
	GetAllocation(ctx context.Context, allocationID string) (a Allocation, found bool, err error)
	// ListJobAllocations returns a job's mirrored allocations, oldest
	// createdAt first (then by id).
	ListJobAllocations(ctx context.Context, jobID string) ([]Allocation, error)
	// HasMakeSafeAllocation reports whether the mirror holds a Make Safe
	// allocation of the job (§5.5, §6): one whose isMakeSafe is set.
	HasMakeSafeAllocation(ctx context.Context, jobID string) (bool, error)
}
