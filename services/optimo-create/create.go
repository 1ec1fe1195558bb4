package optimocreate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// Result says what one order run did.
type Result struct {
	// Written is how many orders were created or changed in OptimoRoute.
	Written int
	// Deleted is how many orders were deleted from OptimoRoute.
	Deleted int
	// Refused is how many sources were recorded as not (or not yet) an
	// order: cancelled without an order, in the past, without an address,
	// or refused by OptimoRoute (ERR_LOC_GEOCODING …).
	Refused int
	// Dates are the dates the run's order writes marked NotPlanned.
	Dates []string
	// Swept says the run asked child-mirror to sweep Prime's appointments
	// into the mirror before the queues (§8.1: a run in M–F 15:00–16:59).
	Swept bool
	// Sweep is what the sweep reported; its Error says why it failed,
	// stopped or went unanswered (the queues were drained all the same).
	Sweep events.SweepReply
}

func (r Result) changed() bool { return r.Written+r.Deleted > 0 }

// Create runs once under the optimo-create lock: in M–F 15:00–16:59 the
// appointment sweep first (§8.1: lock → Prime Sync Contacts by Date → Prime
// Sync Appointments by Date → …), then the appointment queue, then the
// work-order queue. It waits for the lock up to the configured
// budget; giving up is an error matching lock.ErrBusy, logged and counted,
// that leaves the lock alone (§8.3). The lock is released before Create
// returns. When orders changed (even if the run then failed) it asks
// optimo-plan to plan; the dates themselves are in optimoRoutePlan (§10.7).
func (c *Creator) Create(ctx context.Context) (Result, error) {
	var res Result
	err := c.runs.Locked(ctx, func(ctx context.Context) error {
		now := c.now()
		var sweep events.SweepReply
		swept := c.sweepDue(now)
		if swept {
			sweep = c.sweep(ctx, now)
		}
		var err error
		res, err = c.create(ctx, now)
		res.Swept, res.Sweep = swept, sweep
		return err
	})
	if err == nil || res.changed() {
		c.requestPlan(ctx, res)
	}
	if err != nil {
		return res, fmt.Errorf("optimo-create: %w", err)
	}
	return res, nil
}

// create works through both queues, each once: a page is read after the
// last source of the page before, because handling a source does not always
// take it out of the queue (a job without an address is retried on every
// run; an order whose source is gone stays queued while OptimoRoute refuses
// to delete it). Read from the start each time, enough of those would fill
// every page and hold back the sources after them; read on, they are passed
// over until the next run.
func (c *Creator) create(ctx context.Context, now time.Time) (Result, error) {
	var res Result
	dates := map[string]bool{}
	from := startOfDay(now, c.mapping.zone)
	err := c.drain(ctx, &res, dates, func(after string) ([]decision, string, error) {
		items, err := c.store.GetAppointmentQueue(ctx, from, after, c.cfg.Batch)
		if err != nil || len(items) == 0 {
			return nil, "", err
		}
		batch := make([]decision, len(items))
		for i, it := range items {
			batch[i] = c.mapping.decide(fromAppointment(it), from)
		}
		return batch, items[len(items)-1].AppointmentID, nil
	})
	if err == nil {
		err = c.drain(ctx, &res, dates, func(after string) ([]decision, string, error) {
			items, err := c.store.GetWorkOrderQueue(ctx, after, c.cfg.Batch)
			if err != nil || len(items) == 0 {
				return nil, "", err
			}
			batch := make([]decision, len(items))
			for i, it := range items {
				s, serr := fromWorkOrder(it)
				batch[i] = c.mapping.decide(s, from)
				if serr != nil {
					batch[i] = decision{verb: refuse, row: batch[i].row, reason: serr.Error()}
				}
			}
			return batch, items[len(items)-1].WorkOrderID, nil
		})
	}
	res.Dates = sortedKeys(dates)
	return res, err
}

// drain applies the pages next reads, each after the last source of the
// one before ("" the start), until a page is short; next returns a page's
// decisions, one a queued source, and that last source's id.
func (c *Creator) drain(ctx context.Context, res *Result, dates map[string]bool, next func(after string) ([]decision, string, error)) error {
	after := ""
	for {
		batch, last, err := next(after)
		if err != nil {
			return err
		}
		if err := c.apply(ctx, batch, res, dates); err != nil {
			return err
		}
		if len(batch) < c.cfg.Batch {
			return nil
		}
		after = last
	}
}

// apply carries out one batch of decisions: one create_or_update_orders and
// one delete_orders call for the lot (500 orders a call), then each outcome
// recorded. An order OptimoRoute refused is recorded with its error; a call
// that failed as a whole leaves its sources queued and ends the run.
func (c *Creator) apply(ctx context.Context, batch []decision, res *Result, dates map[string]bool) error {
	var writes, removes []decision
	for _, d := range batch {
		switch d.verb {
		case write:
			writes = append(writes, d)
		case remove:
			removes = append(removes, d)
		case refuse:
			if err := c.refuse(ctx, d.row, d.reason, res); err != nil {
				return err
			}
		}
	}
	var callErr error
	if len(writes) > 0 {
		orders := make([]optimoroute.Order, len(writes))
		for i, d := range writes {
			orders[i] = d.order
		}
		results, err := c.optimo.CreateOrUpdateOrders(ctx, orders)
		callErr = err
		for i, r := range results {
			if err := c.settle(ctx, writes[i], writes[i].row, r, res, dates); err != nil {
				return err
			}
		}
	}
	if len(removes) > 0 && callErr == nil {
		nos := make([]string, len(removes))
		for i, d := range removes {
			nos[i] = d.row.OrderNo
		}
		results, err := c.optimo.DeleteOrders(ctx, nos)
		callErr = err
		for i, r := range results {
			row := removes[i].row
			row.State, row.ErrorText = store.OrderDeleted, removes[i].reason
			if err := c.settle(ctx, removes[i], row, r, res, dates); err != nil {
				return err
			}
		}
	}
	return callErr
}

// settle records one order's outcome: written or deleted (which marks its
// dates, §8), refused (recorded, nothing marked), or not sent (left queued).
func (c *Creator) settle(ctx context.Context, d decision, row store.OptimoOrder, r optimoroute.OrderResult, res *Result, dates map[string]bool) error {
	var apiErr *optimoroute.APIError
	var chunkErr *optimoroute.ChunkError
	switch {
	case r.Err == nil:
		row.OptimoID = r.ID
		if err := c.store.UpsertOrder(ctx, row); err != nil {
			return err
		}
		if row.State == store.OrderDeleted {
			res.Deleted++
			c.metrics.orders.WithLabelValues("deleted").Inc()
		} else {
			res.Written++
			c.metrics.orders.WithLabelValues("written").Inc()
		}
		if row.State == store.OrderActive {
			dates[row.OrderDate] = true
		}
		if d.prev != "" {
			dates[d.prev] = true
		}
		return nil
	case errors.As(r.Err, &chunkErr) || errors.Is(r.Err, optimoroute.ErrNotSent):
		return nil // the call failed as a whole: the source stays queued
	case errors.As(r.Err, &apiErr):
		return c.refuse(ctx, row, apiErr.Error(), res)
	default:
		return r.Err
	}
}

// refuse records that a source's version is not an order, and why.
func (c *Creator) refuse(ctx context.Context, row store.OptimoOrder, reason string, res *Result) error {
	row.ErrorText = reason
	if err := c.store.RecordOrderFailure(ctx, row); err != nil {
		return err
	}
	res.Refused++
	c.metrics.orders.WithLabelValues("refused").Inc()
	c.log.Info("not an order", "orderNo", row.OrderNo, "version", row.Version, "reason", reason)
	return nil
}

// requestPlan asks optimo-plan to plan every NotPlanned date, again while
// NATS is unavailable (Runner.Ask). A request that still fails (a shutdown,
// a message NATS refuses) is logged: the dates stay NotPlanned and
// optimo-plan's schedule, or its run at start, plans them.
func (c *Creator) requestPlan(ctx context.Context, res Result) {
	reason := fmt.Sprintf("%d written, %d deleted", res.Written, res.Deleted)
	if err := c.runs.Ask(ctx, events.SubjectOptimoPlan, events.PlanRequested{Source: Source, Reason: reason}); err != nil {
		c.log.Warn("asking optimo-plan to plan", "err", err)
	}
}

// startOfDay is midnight of t's day in zone.
func startOfDay(t time.Time, zone *time.Location) time.Time {
	l := t.In(zone)
	return time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, zone)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
