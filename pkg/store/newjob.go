package store

import (
	"context"
	"fmt"
)

// NewJobRun is what ProcessNewPrimeJob did.
type NewJobRun struct {
	// Ran is false when the job's pipeline had completed already.
	Ran bool
	// Queued is how many missing objects step 1 queued.
	Queued int
	// HandOff is the outbox message of step 2, stored with its id, to
	// publish once the transaction commits; nil when Ran is false.
	HandOff []OutboxMessage
}

// NewJobPath is the one entry to the new-job pipeline's SQL (§6, §7.1),
// whichever path saw the job.
type NewJobPath interface {
	// ProcessNewPrimeJob runs the new-job pipeline's SQL for a job, once
	// (spEthProcessNewPrimeJob @JobId): it claims the job's first sight if
	// nobody has (with logID and via), and, unless the pipeline completed
	// before, queues the job's missing objects (step 1), stores handOff —
	// step 2's make-safe detection — in the outbox and stamps the pipeline
	// completed, all in one transaction.
	ProcessNewPrimeJob(ctx context.Context, jobID string, logID int64, via string, handOff OutboxMessage) (NewJobRun, error)
}

// NewJobCompletedStatus is the pipelineStatus ProcessNewPrimeJob stamps.
func NewJobCompletedStatus(queued int) string {
	return fmt.Sprintf("Completed: %d missing objects queued, make-safe detection requested", queued)
}
