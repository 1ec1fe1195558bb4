package sqlite

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ethosbuilding/primeflow/pkg/store"
)

// ProcessNewPrimeJob runs the new-job pipeline's SQL for a job, once: the
// statements of spEthProcessNewPrimeJob, in one transaction.
func (s *Store) ProcessNewPrimeJob(ctx context.Context, jobID string, logID int64, via string, handOff store.OutboxMessage) (store.NewJobRun, error) {
	if jobID == "" || handOff.Subject == "" {
		return store.NewJobRun{}, errors.New("sqlite: process new prime job: a job id and a hand-off are required")
	}
	jobID = strings.ToLower(jobID)
	var run store.NewJobRun
	err := s.inTx(ctx, func(tx *Store) error {
		run = store.NewJobRun{}
		if _, err := claimFirstSeen(ctx, tx.w(), jobID, logID, via); err != nil {
			return err
		}
		row, _, err := tx.GetFirstSeen(ctx, jobID)
		if err != nil || row.Completed() {
			return err
		}
		run.Ran = true
		if run.Queued, err = tx.QueueMissingObjectsByJob(ctx, jobID); err != nil {
			return err
		}
		if run.HandOff, err = tx.InsertOutbox(ctx, []store.OutboxMessage{handOff}); err != nil {
			return err
		}
		return tx.CompleteFirstSeen(ctx, jobID, store.NewJobCompletedStatus(run.Queued))
	})
	if err != nil {
		return store.NewJobRun{}, fmt.Errorf("sqlite: process new prime job %s: %w", jobID, err)
	}
	return run, nil
}
