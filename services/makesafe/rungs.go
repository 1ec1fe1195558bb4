package makesafe

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/nats-io/nats.go/jetstream"
)

// overdueBatch is how many overdue rungs one sweep fires at most; the next
// sweep fires the rest.
const overdueBatch = 500

// sweepRungs fires, every RungSweep, the rungs overdue by more than
// RungSweep. Rungs makesafe queues are JetStream schedules and fire on time;
// the ones the email flow's call of spMakesafeUpsertPhoneCallFromPrimeJob
// queues (§6, §7: @QueueMakeAllocationChecks = 1, the default ladder) have
// none, and would otherwise never fire. A rung whose schedule is late is
// fired by whichever comes first; the second finds nothing left to do.
func (m *Makesafe) sweepRungs(ctx context.Context) error {
	if m.cfg.RungSweep <= 0 {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(m.cfg.RungSweep)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := m.FireOverdueRungs(ctx, time.Now().Add(-m.cfg.RungSweep)); err != nil && ctx.Err() == nil {
			m.log.Warn("firing overdue make-safe rungs; the next sweep tries again", "err", err)
		}
	}
}

// FireOverdueRungs publishes a makesafe.recheck for each rung (up to
// overdueBatch) that was due before dueBefore and has not fired, and
// returns how many the stream took. Each carries a message id of its own,
// so sweeps within JetStream's duplicate window fire a rung once: a sweep
// that comes again before the rung has run is a duplicate, not counted.
func (m *Makesafe) FireOverdueRungs(ctx context.Context, dueBefore time.Time) (int, error) {
	checks, err := m.store.ListDueMakesafeChecks(ctx, dueBefore, overdueBatch)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range checks {
		body, err := json.Marshal(events.MakesafeRecheck{JobID: c.PrimeJobID, Rung: c.Rung, DueUTC: c.DueUTC})
		if err != nil {
			return n, err
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ack, err := m.js.Publish(pctx, events.SubjectMakesafeRecheck, body,
			jetstream.WithMsgID(events.MakesafeRungMsgID(c.PrimeJobID, c.Rung)+":overdue"))
		cancel()
		if err != nil {
			return n, fmt.Errorf("rung %d of job %s: %w", c.Rung, c.PrimeJobID, err)
		}
		if ack.Duplicate {
			continue // fired by an earlier sweep, and not run yet
		}
		n++
		m.metrics.rungsOverdue.Inc()
	}
	if n > 0 {
		m.log.Info("overdue make-safe rungs fired", "rungs", n, "dueBefore", dueBefore)
	}
	return n, nil
}
