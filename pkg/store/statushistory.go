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
	// so one it no longer lists is deleted. Each is stored with jobID. In
	// the same transaction the job's triage invites are reviewed by it: an
	// open one whose change it shows over is closed, and a job some event
	// invited, mirrored in the status of its last invite, is invited for a
	// later arrival in it that the history's latest entry shows (both events
	// of a leave and a return may have been handled after the return).
	ReplaceJobStatusHistory(ctx context.Context, jobID string, hs []JobStatusHistory) error
	// ListJobStatusHistory returns a job's status changes, oldest createdAt
	// first.
	ListJobStatusHistory(ctx context.Context, jobID string) ([]JobStatusHistory, error)
}
