package store

import (
	"context"
	"time"
)

// JobStatusHistory is a row of primeJobStatusHistory: one status change of
// a job, as the status-history drain mirrors it (§6: ethSyncQueue's
// primeJobStatusHistory rows).
type JobStatusHistory struct {
	StatusHistoryID string
	JobID           string
	StatusID        string
	CreatedAt       time.Time
	// Attributes is Prime's attributes object exactly as it came.
	Attributes string
	// SyncedUTC is when primeflow last wrote the row.
	SyncedUTC time.Time
}

// StatusHistories is the mirror of the jobs' status changes.
type StatusHistories interface {
	// ReplaceJobStatusHistory makes the job's status changes exactly hs, in
	// one transaction: Prime lists a job's history as it is now (§10.4),
	// so one it no longer lists is deleted. Each is stored with jobID.
	ReplaceJobStatusHistory(ctx context.Context, jobID string, hs []JobStatusHistory) error
	// ListJobStatusHistory returns a job's status changes, oldest createdAt
	// first.
	ListJobStatusHistory(ctx context.Context, jobID string) ([]JobStatusHistory, error)
}
