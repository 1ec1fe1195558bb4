package store

import (
	"context"
	"time"
)

// Estimate is a row of primeEstimates with its categories
// (primeEstimateCategories) and their line items (primeEstimateItems), §5.4.
// Decimals are text ("2068.00"); SQL Server keeps them as DECIMAL(19,4), so
// read them back as numbers, not as strings to compare.
type Estimate struct {
	EstimateID string
	JobID      string
	Status     string
	Total      string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// Attributes is Prime's attributes object exactly as it came.
	Attributes string
	// SyncedUTC is when primeflow last wrote the row.
	SyncedUTC time.Time
	// Categories are the estimate's categories, in SortOrder.
	Categories []EstimateCategory
}

// EstimateCategory is a row of primeEstimateCategories: a group of an
// estimate's line items. EstimateID and JobID are its estimate's.
type EstimateCategory struct {
	CategoryID string
	EstimateID string
	JobID      string
	Name       string
	// SortOrder is the category's place in the estimate, from 0.
	SortOrder int
	// Attributes is the category's JSON as Prime sent it.
	Attributes string
	SyncedUTC  time.Time
	// Items are the category's line items, in SortOrder.
	Items []EstimateItem
}

// EstimateItem is a row of primeEstimateItems: one line of an estimate.
type EstimateItem struct {
	ItemID      string
	CategoryID  string
	EstimateID  string
	JobID       string
	Description string
	Quantity    string
	UnitPrice   string
	Total       string
	// SortOrder is the item's place in its category, from 0.
	SortOrder int
	// Attributes is the item's JSON as Prime sent it.
	Attributes string
	SyncedUTC  time.Time
}

// Estimates is the estimate mirror: primeEstimates, primeEstimateCategories
// and primeEstimateItems.
type Estimates interface {
	// ReplaceJobEstimates deletes the job's estimates, categories and line
	// items and inserts estimates with theirs, in one transaction
	// (GetEstimatesByJob, §5.4: Prime gives no way to spot deletions, so the
	// whole job is swept). Every row is stored with jobID; categories and
	// items with their estimate's and category's ids.
	ReplaceJobEstimates(ctx context.Context, jobID string, estimates []Estimate) error
	// ListJobEstimates returns the job's estimates, oldest createdAt first
	// (then by id), each with its categories and items in SortOrder.
	ListJobEstimates(ctx context.Context, jobID string) ([]Estimate, error)
}
