package store

import (
	"context"
	"time"
)

// WorkOrder is a row of primeWorkOrders: a Prime work order's main
// attributes as columns and its raw attributes JSON, which OptimoRoute's
// work-order queue reads its dates from. GUIDs are lower-case canonical text;
// zero times and empty strings are NULL.
type WorkOrder struct {
	WorkOrderID string
	JobID       string
	Status      string
	Version     int64
	CreatedAt   time.Time
	UpdatedAt   time.Time
	// Attributes is Prime's attributes object exactly as it came.
	Attributes string
	// SyncedUTC is when primeflow last wrote the row; SaveWorkOrder sets it.
	SyncedUTC time.Time
}

// WorkOrders is the work-order mirror, primeWorkOrders.
type WorkOrders interface {
	// SaveWorkOrder inserts the work order or updates the row with its id
	// (spPrimeSaveWorkOrder). A row whose stored version is newer is left as
	// it is. It reports whether it wrote the row.
	SaveWorkOrder(ctx context.Context, w WorkOrder) (saved bool, err error)
}
