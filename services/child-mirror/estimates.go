package childmirror

import (
	"context"
	"fmt"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/pipeline"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// estimate is ProcessCreateEstimateAsync (§5.4).
func (c *ChildMirror) estimate(ctx context.Context, ev events.Resolved) (pipeline.Finish, error) {
	// Steps 1–2: the job from the numeric reference, made sure of in the
	// mirror, then GetEstimatesByJob.
	jobID, err := c.referencedJob(ctx, ev)
	if err != nil {
		return pipeline.Finish{}, err
	}
	estimates, err := c.prime.GetEstimatesByJob(ctx, jobID)
	if err != nil {
		return pipeline.Finish{}, fmt.Errorf("estimates of job %s: %w", jobID, err)
	}
	rows := estimateRows(jobID, estimates)
	log := c.log.With("logId", ev.LogID, "action", ev.Action, "jobId", jobID)
	return pipeline.Finish{
		JobID: jobID,
		Write: func(ctx context.Context, tx store.Store) error {
			if err := saveReference(ctx, tx, ev.NumericRef, jobID); err != nil {
				return err
			}
			// Delete and reinsert the job's estimates, categories and items
			// in this one transaction: Prime gives no way to spot deletions.
			if err := tx.ReplaceJobEstimates(ctx, jobID, rows); err != nil {
				return err
			}
			// Step 3: estimateId must now be in primeEstimates.
			return confirm(ctx, tx, log, ev, jobID, store.TableEstimates, "Prime did not list it among the job's estimates")
		},
	}, nil
}
