package optimocreate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/nats-io/nats.go"
)

// defaultSweepTimeout is OPTIMO_SWEEP_TIMEOUT's default, for a Config
// built in code.
const defaultSweepTimeout = 5 * time.Minute

// sweepDue reports whether a run starting at now sweeps first, and if so
// counts it as the band's sweep: the run starts in M–F 15:00–16:59 (§8.1),
// and no sweep was asked for since the band's last scheduled time before
// now. A run the webhook asks for between two scheduled ones therefore does
// not sweep again (the spec's webhook trigger never sweeps), which keeps
// the sweeps' Prime calls to at most one set a quarter hour.
func (c *Creator) sweepDue(now time.Time) bool {
	zone := c.mapping.zone
	if !InSweepBand(now, zone) {
		return false
	}
	c.sweepMu.Lock()
	defer c.sweepMu.Unlock()
	if !c.lastSweep.IsZero() && NextRun(c.lastSweep, zone).After(now) {
		return false
	}
	c.lastSweep = now
	return true
}

// sweepRange is the sweep's range: the account's local days from today
// through today + SweepDays, as UTC instants (Prime's times are UTC).
func (c *Creator) sweepRange(now time.Time) (from, to time.Time) {
	day := startOfDay(now, c.mapping.zone)
	end := time.Date(day.Year(), day.Month(), day.Day()+c.cfg.SweepDays+1, 0, 0, 0, 0, c.mapping.zone)
	return day.UTC(), end.UTC()
}

// sweep asks child-mirror for the parent flow's "Prime Sync Contacts by
// Date" and "Prime Sync Appointments by Date" (§8.1,
// events.SubjectSweepAppointments) and returns its reply. A sweep that
// failed, stopped or did not answer within SweepTimeout is logged as an
// error and counted, and the run goes on to the queues: the spec's flow
// stops with an error here, but nothing the queues do depends on the sweep,
// and stopping would only hold back the orders of the appointments already
// mirrored (sql/README.md, "The parent flow's sweep"). The reply's Error
// says what went wrong, the request's own failure included.
func (c *Creator) sweep(ctx context.Context, now time.Time) events.SweepReply {
	from, to := c.sweepRange(now)
	ctx, cancel := context.WithTimeout(ctx, c.cfg.SweepTimeout)
	defer cancel()
	reply, err := requestSweep(ctx, c.nc, events.SweepRequest{
		FromUTC: from, ToUTC: to, TimeoutMS: c.cfg.SweepTimeout.Milliseconds(), Source: Source,
	})
	log := c.log.With("fromUTC", from, "toUTC", to)
	result := "ok"
	switch {
	case err == nil:
		log.Info("appointment sweep finished", "listed", reply.Listed, "saved", reply.Saved, "unchanged", reply.Unchanged,
			"jobsEnsured", reply.JobsEnsured, "contactJobs", reply.ContactJobs, "failed", reply.Failed)
	case reply.RetryAfterMS > 0:
		result = "rate_limited"
	case errors.Is(err, context.DeadlineExceeded):
		result = "timeout"
	default:
		result = "error"
	}
	if err != nil {
		reply.Error = err.Error()
		log.Error("appointment sweep failed; draining the queues all the same", "result", result, "err", err,
			"listed", reply.Listed, "saved", reply.Saved, "failed", reply.Failed)
	}
	c.metrics.sweeps.WithLabelValues(result).Inc()
	return reply
}

// requestSweep sends the request and reads the reply, which child-mirror
// sends as the body of a micro error too, counts and all, when the sweep
// stopped. It returns an error when the sweep did not go through the whole
// list or did not answer.
func requestSweep(ctx context.Context, nc *nats.Conn, req events.SweepRequest) (events.SweepReply, error) {
	reply, err := events.Request[events.SweepReply](ctx, nc, events.SubjectSweepAppointments, req)
	if err != nil {
		return events.SweepReply{}, fmt.Errorf("sweep: %w", err)
	}
	if reply.Error != "" {
		return reply, fmt.Errorf("sweep: child-mirror: %s", reply.Error)
	}
	return reply, nil
}
