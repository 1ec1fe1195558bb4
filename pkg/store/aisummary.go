package store

import (
	"context"
	"time"
)

// JobSummaryQueueRow is a row of ethAIJobSummaryQueue: when a job's AI
// summary is next due. The table is not given by the spec; sql/README.md
// writes down the reading.
type JobSummaryQueueRow struct {
	JobID string
	// QueuedFor is when the summary is due; due now or earlier means the
	// summary generator picks the job up on its next pass.
	QueuedFor  time.Time
	CreatedUTC time.Time
	UpdatedUTC time.Time
}

// AISummaryQueue is the AI job summary queue (§5.3 step 4).
type AISummaryQueue interface {
	// QueueJobSummaryNow is IAIData.QueueJobSummaryNow(jobId), with the
	// spec's call shape, the job alone (sql/README.md, "Integration
	// points"): it makes the job's summary due now, by the database's
	// clock, inserting the job's row or moving its QueuedFor back (or
	// forward) to now. Earlier attempts that found no triage form pushed
	// QueuedFor up to 36 hours out; this undoes that.
	QueueJobSummaryNow(ctx context.Context, jobID string) error
	// GetJobSummaryQueue returns a job's row; found is false when the job
	// was never queued.
	GetJobSummaryQueue(ctx context.Context, jobID string) (row JobSummaryQueueRow, found bool, err error)
}
