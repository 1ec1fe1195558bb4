package childmirror

import (
	"context"
	"errors"
	"fmt"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/mirror"
	"github.com/ethosbuilding/primeflow/pkg/pipeline"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// allocation is ProcessCreateAllocationAsync (§5.5). A Make Safe
// allocation appearing is what make-safe detection waits for, and this
// event is the moment we learn of it.
func (c *ChildMirror) allocation(ctx context.Context, ev events.Resolved) (pipeline.Finish, error) {
	// Step 1 is the resolver's RequireEntityGuid(primeAllocations, …) with
	// GET allocations/{id} as the probe; MirrorAllocationAsync follows:
	// the allocation, its job first, then the allocation.
	if ev.Entity != store.TableAllocations || ev.EntityID == "" {
		return pipeline.Finish{}, pipeline.Fault(pipeline.MissingIdentifier, ev.Action, "the resolver named no allocation (entity %q)", ev.Entity)
	}
	a, err := c.getAllocation(ctx, ev)
	if err != nil {
		return pipeline.Finish{}, err
	}
	row := mirror.Allocation(a)
	jobID, err := c.childJob(ctx, ev, row.JobID)
	if err != nil {
		return pipeline.Finish{}, err
	}
	log := c.log.With("logId", ev.LogID, "action", ev.Action, "jobId", jobID, "allocationId", row.AllocationID)
	if row.JobID == "" {
		log.Warn("Prime reported no job on the allocation: mirrored under the job of the numeric reference")
		row.JobID = jobID
	}
	// Step 3, RunMakeSafeDetectionAsync with @QueueMakeAllocationChecks = 0:
	// the ladder was queued at first sight. A durable hand-off in this
	// transaction: losing it would lose the detection for good (§10.5).
	msg, err := message(events.SubjectMakesafeDetect, makesafeMsgID(row),
		events.MakesafeDetect{JobID: jobID, QueueChecks: false, Source: source(ev.LogID)})
	if err != nil {
		return pipeline.Finish{}, err
	}
	return pipeline.Finish{
		JobID: jobID,
		Write: func(ctx context.Context, tx store.Store) error {
			if saved, err := tx.SaveAllocation(ctx, row); err != nil {
				return err
			} else if !saved {
				log.Info("the mirror holds a newer version of the allocation; left as it is", "version", row.Version)
			}
			// Step 2: the mapping.
			return saveReference(ctx, tx, ev.NumericRef, jobID)
		},
		Outbox: []store.OutboxMessage{msg},
	}, nil
}

// getAllocation is the resolver's copy of the allocation, or Prime's.
func (c *ChildMirror) getAllocation(ctx context.Context, ev events.Resolved) (prime.Allocation, error) {
	if r, ok := events.FindResource(ev.Fetched, events.ResourceAllocations, ev.EntityID); ok && !ev.EntityInMirror {
		return prime.FromResource[prime.Allocation](r.ID, r.Attributes)
	}
	a, err := c.prime.GetAllocation(ctx, ev.EntityID)
	if errors.Is(err, prime.ErrNotFound) {
		return a, fmt.Errorf("allocation %s is mirrored but Prime no longer has it: %w", ev.EntityID, err)
	}
	return a, err
}

// makesafeMsgID makes the detection hand-off publish once per state of an
// allocation: a replay or a Prime retry within the stream's duplicate
// window is dropped (detection is idempotent in any case, §5.5).
func makesafeMsgID(a store.Allocation) string {
	return fmt.Sprintf("makesafe-detect:allocation:%s:v%d:%d", a.AllocationID, a.Version, a.UpdatedAt.Unix())
}
