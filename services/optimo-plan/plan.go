package optimoplan

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
	"github.com/ethosbuilding/primeflow/pkg/optimorun"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// ErrPollLimit is what Plan returns when plans were still running after
// MaxPolls polls (§9 "Plan never completes"): the run stops, the lock is
// released, and their dates stay Planning with the error noted, so the next
// run polls them again ("Recovery: Next run").
var ErrPollLimit = errors.New("plans still running at the poll limit")

// refreshBatch is how many orders one order refresh looks up at most.
const refreshBatch = optimoroute.MaxOrdersPerCall

// Result says what one plan run did.
type Result struct {
	// Started are the dates whose planning started, in order.
	Started []string
	// Failed maps the dates whose start_planning OptimoRoute refused for
	// good to the status recorded for them (E:<code>).
	Failed map[string]string
	// Deferred are the dates OptimoRoute was already planning
	// (ERR_OPT_RUNNING): left NotPlanned for the next run.
	Deferred []string
	// Finished maps the dates whose plan ended during the run to the status
	// written, or to "" when the date had been queued again meanwhile and
	// was left NotPlanned (§8.4).
	Finished map[string]string
	// Routed are the dates whose routes were read back.
	Routed []string
	// Refreshed is how many orders the order refresh looked up.
	Refreshed int
}

// running is a plan being polled.
type running struct {
	date string
	id   int64
}

// Plan runs one plan under the optimo-plan lock. It waits for the lock up
// to the configured budget; giving up is an error matching lock.ErrBusy,
// logged and counted, that leaves the lock alone (§8.3). Whatever happens
// after the lock is taken, the lock is released before Plan returns (§8.2);
// only a run that finished and had dates to plan or read back asks for the
// SMS queue to be sent: a run with nothing queued leaves the queue to its
// own schedule (an SMS request after each of them filled the SMS stream).
func (p *Planner) Plan(ctx context.Context) (Result, error) {
	var res Result
	err := p.runs.Locked(ctx, func(ctx context.Context) error {
		var err error
		res, err = p.plan(ctx)
		return err
	})
	switch {
	case errors.Is(err, ErrPollLimit):
		return res, err
	case err != nil:
		return res, fmt.Errorf("optimo-plan: %w", err)
	}
	if !res.Empty() {
		p.requestSMS(ctx)
	}
	return res, nil
}

// Empty reports whether the run found nothing to do: no date to start,
// poll or read back, no order to refresh.
func (r Result) Empty() bool {
	return len(r.Started) == 0 && len(r.Failed) == 0 && len(r.Deferred) == 0 && len(r.Finished) == 0 &&
		len(r.Routed) == 0 && r.Refreshed == 0
}

// result names a run's result for the runs counter: poll_limit, besides
// optimorun's ok and error.
func result(err error) string {
	if errors.Is(err, ErrPollLimit) {
		return "poll_limit"
	}
	return optimorun.DefaultResult(err)
}

// plan is the run under the lock: start, poll, routes, order refresh.
func (p *Planner) plan(ctx context.Context) (Result, error) {
	res := Result{Failed: map[string]string{}, Finished: map[string]string{}}
	polling, err := p.leftovers(ctx)
	if err != nil {
		return res, err
	}
	started, err := p.start(ctx, &res)
	polling = append(polling, started...)
	if err != nil {
		return res, err
	}
	pollErr := p.poll(ctx, polling, &res)
	if pollErr != nil && !errors.Is(pollErr, ErrPollLimit) {
		return res, pollErr
	}
	// Dates that completed are read back even when others hit the limit.
	if err := p.readRoutes(ctx, &res); err != nil {
		return res, err
	}
	if err := p.refreshOrders(ctx, &res); err != nil {
		return res, err
	}
	return res, pollErr
}

// leftovers picks up what a run that ended without finishing (a crash, a
// lost lock) left in Planning: dates with a planning id are polled again;
// a date without one never reached start_planning and is queued again.
func (p *Planner) leftovers(ctx context.Context) ([]running, error) {
	plans, err := p.store.GetPlanningQueue(ctx)
	if err != nil {
		return nil, err
	}
	var polling []running
	for _, pl := range plans {
		if pl.PlanningID != 0 {
			p.log.Info("polling a plan an earlier run left", "date", pl.PlanDate, "planningId", pl.PlanningID)
			polling = append(polling, running{pl.PlanDate, pl.PlanningID})
			continue
		}
		if err := p.requeue(ctx, pl.PlanDate, errEarlierRunStopped); err != nil {
			return nil, err
		}
	}
	return polling, nil
}

// start starts planning every NotPlanned date. Each date moves to Planning
// before start_planning, guarded on NotPlanned (§10.8), so that an order
// written for it at any moment after the mark queues it again (§8.4 step 2)
// rather than being overwritten by this run.
//
// A request OptimoRoute refuses for good parks the date with E:<code> (§8.4
// table). The spec leaves that write unguarded because its date is still
// NotPlanned then; here it is Planning, so the write is guarded on Planning,
// which parks the date just the same unless an order queued it again during
// the call. Only a refusal of the date itself parks it: ERR_OPT_RUNNING (a
// plan for the date is already running) leaves it queued for the next run,
// and a failure that is not about the date — no answer, OptimoRoute's own
// trouble, the API key — puts it back and ends the run, so an outage or a
// wrong key parks nothing (§9: dates stay NotPlanned for the next run).
func (p *Planner) start(ctx context.Context, res *Result) ([]running, error) {
	dates, err := p.store.GetPlanQueue(ctx)
	if err != nil {
		return nil, err
	}
	var started []running
	for _, date := range dates {
		marked, err := p.setStatus(ctx, store.PlanStatusWrite{PlanDate: date, Status: store.PlanPlanning,
			OnlyIfStatus: store.PlanNotPlanned})
		if err != nil {
			return started, err
		}
		if !marked {
			continue // someone moved it since the queue was read
		}
		ps, err := p.optimo.StartPlanning(ctx, optimoroute.StartPlanningRequest{Date: date})
		if err != nil {
			apiErr, refused := refusal(err)
			switch {
			case refused && apiErr.Code == optimoroute.ErrOptRunning:
				if err := p.requeue(ctx, date, apiErr); err != nil {
					return started, err
				}
				res.Deferred = append(res.Deferred, date)
				p.metrics.dates.WithLabelValues("start_deferred").Inc()
				p.log.Warn("start_planning: OptimoRoute is already planning the date; it stays queued for the next run",
					"date", date, "err", apiErr)
			case refused:
				status := store.PlanRequestFailed(failureCode(apiErr))
				parked, err := p.setStatus(ctx, store.PlanStatusWrite{PlanDate: date, Status: status,
					OnlyIfStatus: store.PlanPlanning, ErrorText: apiErr.Error()})
				if err != nil {
					return started, err
				}
				if !parked {
					res.Deferred = append(res.Deferred, date)
					p.metrics.dates.WithLabelValues("requeued").Inc()
					p.log.Info("start_planning refused, but the date was queued again meanwhile; it stays NotPlanned (§8.4)",
						"date", date, "err", apiErr)
					continue
				}
				res.Failed[date] = status
				p.metrics.dates.WithLabelValues("start_failed").Inc()
				p.log.Warn("start_planning refused; the date is parked with its error", "date", date, "status", status, "err", apiErr)
			default:
				serr := p.requeue(context.WithoutCancel(ctx), date, err)
				return started, errors.Join(fmt.Errorf("start planning %s: %w", date, err), serr)
			}
			continue
		}
		started = append(started, running{date, ps.PlanningID})
		res.Started = append(res.Started, date)
		p.metrics.dates.WithLabelValues("started").Inc()
		if len(ps.MissingOrders) > 0 || len(ps.MissingDrivers) > 0 {
			p.log.Warn("start_planning named unknown orders or drivers", "date", date,
				"missingOrders", ps.MissingOrders, "missingDrivers", ps.MissingDrivers)
		}
		// The id is kept only while the date is still this run's: if an
		// order queued it again since the mark, the next run plans it anew.
		if _, err := p.setStatus(ctx, store.PlanStatusWrite{PlanDate: date, Status: store.PlanPlanning,
			OnlyIfStatus: store.PlanPlanning, PlanningID: ps.PlanningID}); err != nil {
			return started, err
		}
	}
	return started, nil
}

// errEarlierRunStopped is why leftovers queues a date again.
var errEarlierRunStopped = errors.New("queued again: an earlier run stopped before starting its plan")

// requeue puts a date a run marked Planning back in the queue, noting
// why, unless an order queued it again meanwhile (then it is NotPlanned
// already).
func (p *Planner) requeue(ctx context.Context, date string, why error) error {
	_, err := p.setStatus(ctx, store.PlanStatusWrite{PlanDate: date, Status: store.PlanNotPlanned,
		OnlyIfStatus: store.PlanPlanning, ErrorText: why.Error()})
	return err
}

// failureCode is the <code> of E:<code>: OptimoRoute's code, or the HTTP
// status when the answer carried none.
func failureCode(e *optimoroute.APIError) string {
	if e.Code != "" {
		return string(e.Code)
	}
	return fmt.Sprintf("HTTP %d", e.HTTPStatus)
}

// refusal is OptimoRoute's refusal of a date's request, which making it
// again will not change: an answer with a code that is neither
// OptimoRoute's own trouble (ERR_INTERNAL, ERR_TOO_MANY_CONNECTIONS) nor
// about the account (a missing or unknown API key, fixed once for every
// date). No answer, or an answer that is not OptimoRoute's (a proxy's error
// page), is no refusal either: such a call may work if made again.
func refusal(err error) (*optimoroute.APIError, bool) {
	var apiErr *optimoroute.APIError
	if !errors.As(err, &apiErr) {
		return nil, false
	}
	switch apiErr.Code {
	case "", optimoroute.ErrInternal, optimoroute.ErrTooManyConnections,
		optimoroute.ErrAuthKeyMissing, optimoroute.ErrAuthKeyUnknown:
		return nil, false
	}
	return apiErr, true
}

// outcome is the status a finished plan writes (§8.4): only while the date
// is still Planning.
func outcome(s optimoroute.PlanningStatusCode) string {
	switch s {
	case optimoroute.PlanningFinished:
		return store.PlanPlanningCompleted
	case optimoroute.PlanningCancelled:
		return store.PlanCancelled
	case optimoroute.PlanningError:
		return store.PlanErrorOccurred
	default:
		return store.PlanUnknownError
	}
}

// poll waits for the plans, bounded by MaxPolls, writing each outcome
// guarded on Planning. A failure that is no refusal ends the run; its dates
// stay Planning and the next run polls them again. Plans still running at
// the limit are left running and their dates Planning, with the error
// noted: the next run polls them again (§9 "Plan never completes …
// Recovery: Next run"). Stopping them instead would throw away a slow
// plan's progress on every run, and a date queued again meanwhile is
// planned anew by the next run either way.
func (p *Planner) poll(ctx context.Context, plans []running, res *Result) error {
	pending := plans
	for n := 0; len(pending) > 0 && n < p.cfg.MaxPolls; n++ {
		if err := sleep(ctx, p.cfg.PollInterval); err != nil {
			return err
		}
		var still []running
		for _, r := range pending {
			st, err := p.optimo.GetPlanningStatus(ctx, r.id)
			if err != nil {
				apiErr, refused := refusal(err)
				if !refused {
					return fmt.Errorf("planning status of %s (planning %d): %w", r.date, r.id, err)
				}
				// OptimoRoute will never answer for this plan: park the
				// date with the code rather than fail every run on it.
				if err := p.finish(ctx, r, store.PlanRequestFailed(failureCode(apiErr)), apiErr.Error(), res); err != nil {
					return err
				}
				continue
			}
			if st.Status == optimoroute.PlanningNew || st.Status == optimoroute.PlanningRunning {
				still = append(still, r)
				continue
			}
			status := outcome(st.Status)
			errText := ""
			if status != store.PlanPlanningCompleted {
				errText = fmt.Sprintf("planning %d ended with status %q", r.id, st.Status)
			}
			if err := p.finish(ctx, r, status, errText, res); err != nil {
				return err
			}
		}
		pending = still
	}
	if len(pending) == 0 {
		return nil
	}
	for _, r := range pending {
		errText := fmt.Sprintf("planning %d still running after %d polls %s apart; the next run polls it again",
			r.id, p.cfg.MaxPolls, p.cfg.PollInterval)
		if _, err := p.setStatus(ctx, store.PlanStatusWrite{PlanDate: r.date, Status: store.PlanPlanning,
			OnlyIfStatus: store.PlanPlanning, ErrorText: errText}); err != nil {
			return err
		}
		p.metrics.dates.WithLabelValues("poll_limit").Inc()
		p.log.Warn("a plan is still running at the poll limit; the next run polls it again",
			"date", r.date, "planningId", r.id, "polls", p.cfg.MaxPolls)
	}
	return fmt.Errorf("%d plan(s) after %d polls: %w", len(pending), p.cfg.MaxPolls, ErrPollLimit)
}

// finish writes a plan's outcome while its date is still Planning.
func (p *Planner) finish(ctx context.Context, r running, status, errText string, res *Result) error {
	written, err := p.setStatus(ctx, store.PlanStatusWrite{PlanDate: r.date, Status: status,
		OnlyIfStatus: store.PlanPlanning, ErrorText: errText})
	if err != nil {
		return err
	}
	if !written {
		res.Finished[r.date] = ""
		p.metrics.dates.WithLabelValues("requeued").Inc()
		p.log.Info("the date was queued again while it was planned; it stays NotPlanned for the next run (§8.4)",
			"date", r.date, "planningId", r.id, "outcome", status)
		return nil
	}
	res.Finished[r.date] = status
	p.metrics.dates.WithLabelValues(outcomeLabel(status)).Inc()
	return nil
}

func outcomeLabel(status string) string {
	switch status {
	case store.PlanPlanningCompleted:
		return "completed"
	case store.PlanCancelled:
		return "cancelled"
	case store.PlanErrorOccurred:
		return "error"
	default:
		return "unknown"
	}
}

// readRoutes reads back the routes of every PlanningCompleted date: each
// order's scheduled time and driver; then RoutesCompleted, guarded on
// PlanningCompleted.
func (p *Planner) readRoutes(ctx context.Context, res *Result) error {
	dates, err := p.store.GetRoutesRefreshQueue(ctx)
	if err != nil {
		return err
	}
	for _, date := range dates {
		routes, err := p.optimo.GetRoutes(ctx, date)
		if err != nil {
			apiErr, refused := refusal(err)
			if !refused {
				return fmt.Errorf("routes of %s: %w", date, err)
			}
			// Park the date with the code rather than fail every run on it.
			if _, err := p.setStatus(ctx, store.PlanStatusWrite{PlanDate: date, Status: store.PlanRequestFailed(failureCode(apiErr)),
				OnlyIfStatus: store.PlanPlanningCompleted, ErrorText: apiErr.Error()}); err != nil {
				return err
			}
			p.log.Warn("get_routes refused; the date is parked with its error", "date", date, "err", apiErr)
			continue
		}
		var schedules []store.OrderSchedule
		for _, rt := range routes {
			for _, stop := range rt.Stops {
				if !stop.IsOrder() {
					continue
				}
				at, err := p.scheduledAt(date, stop)
				if err != nil {
					p.log.Warn("a stop's scheduled time is unreadable", "date", date, "orderNo", stop.OrderNo, "err", err)
				}
				schedules = append(schedules, store.OrderSchedule{OrderNo: stop.OrderNo, ScheduledUTC: at,
					DriverSerial: rt.DriverSerial, DriverName: rt.DriverName})
			}
		}
		if err := p.store.SaveRoutes(ctx, date, schedules, time.Now()); err != nil {
			return err
		}
		written, err := p.setStatus(ctx, store.PlanStatusWrite{PlanDate: date, Status: store.PlanRoutesCompleted,
			OnlyIfStatus: store.PlanPlanningCompleted})
		if err != nil {
			return err
		}
		if written {
			res.Routed = append(res.Routed, date)
			p.metrics.dates.WithLabelValues("routed").Inc()
		}
	}
	return nil
}

// scheduledAt is a stop's time in UTC; OptimoRoute gives it in the
// account's time zone.
func (p *Planner) scheduledAt(date string, s optimoroute.Stop) (time.Time, error) {
	if s.ScheduledAtDt != "" {
		t, err := time.ParseInLocation(time.DateTime, s.ScheduledAtDt, p.zone)
		return t.UTC(), err
	}
	t, err := time.ParseInLocation(time.DateOnly+" 15:04", date+" "+s.ScheduledAt, p.zone)
	return t.UTC(), err
}

// refreshOrders looks up, with one get_orders call per 500, the active
// orders the latest routes left unscheduled: an order OptimoRoute no longer
// holds is recorded deleted, so its source's queue writes it again.
func (p *Planner) refreshOrders(ctx context.Context, res *Result) error {
	orders, err := p.store.GetOrderRefreshQueue(ctx, refreshBatch)
	if err != nil || len(orders) == 0 {
		return err
	}
	nos := make([]string, len(orders))
	for i, o := range orders {
		nos[i] = o.OrderNo
	}
	results, err := p.optimo.GetOrders(ctx, nos)
	if err != nil {
		if _, refused := refusal(err); !refused {
			return fmt.Errorf("order refresh: %w", err)
		}
		// The orders stay queued for the next run's refresh.
		p.log.Warn("order refresh refused", "orders", len(nos), "err", err)
		return nil
	}
	now := time.Now()
	for _, r := range results {
		found := r.Err == nil
		if !found && !errors.Is(r.Err, optimoroute.ErrOrderNotFound) {
			p.log.Warn("order refresh: OptimoRoute did not answer for the order", "orderNo", r.OrderNo, "err", r.Err)
			continue
		}
		if err := p.store.SetOrderRefreshed(ctx, r.OrderNo, found, r.ID, now); err != nil {
			return err
		}
		res.Refreshed++
		if !found {
			p.log.Warn("order refresh: OptimoRoute no longer holds the order; it will be written again", "orderNo", r.OrderNo)
		}
	}
	return nil
}

// setStatus writes a date's status (spOptimoRoutePlanSetStatus).
func (p *Planner) setStatus(ctx context.Context, w store.PlanStatusWrite) (bool, error) {
	written, err := p.store.SetPlanStatus(ctx, w)
	if err != nil {
		return false, err
	}
	p.log.Debug("plan status", "date", w.PlanDate, "status", w.Status, "onlyIf", w.OnlyIfStatus, "written", written)
	return written, nil
}

// requestSMS asks for the queued SMS messages to be sent now (§8.2's last
// step), again while NATS is unavailable (Runner.Ask). A request that still
// fails is logged: the SMS queue is drained on its own schedule too.
func (p *Planner) requestSMS(ctx context.Context) {
	if err := p.runs.Ask(ctx, events.SubjectSMSSend, events.SMSSendRequested{Source: Source}); err != nil {
		p.log.Warn("asking for the SMS queue to be sent", "err", err)
	}
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
