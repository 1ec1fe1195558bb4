package childmirror

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/version"
	"github.com/nats-io/nats.go/micro"
)

// ServiceName is child-mirror's NATS micro service name (`nats micro ls`).
const ServiceName = "child-mirror"

// EndpointSweep is the sweep endpoint's name; its subject is
// events.SubjectSweepAppointments.
const EndpointSweep = "sweep"

// sweepAction stands where an event's action would, in the sweep's logs and
// payload faults, and is the purpose of its Prime calls.
const sweepAction = "appointment-sweep"

// purposeContactSync is the purpose of the contact sync's Prime calls.
const purposeContactSync = "contact-sync"

// defaultSweepTimeout bounds a sweep whose request names no timeout.
const defaultSweepTimeout = 5 * time.Minute

// serveSweep adds the sweep endpoint as the micro service "child-mirror"
// (`nats micro ls`, `nats micro stats child-mirror`). Requests share a queue
// group, so each is answered by one instance, and an instance sweeps one
// request at a time.
func (c *ChildMirror) serveSweep(ctx context.Context) (micro.Service, error) {
	svc, err := micro.AddService(c.nc, micro.Config{
		Name:        ServiceName,
		Version:     version.Semver(), // every service the same: the build's (pkg/version)
		Description: "Mirrors the records that hang off Prime jobs: sweep the appointments of a date range into the mirror (§8.1).",
	})
	if err != nil {
		return nil, err
	}
	if err := svc.AddEndpoint(EndpointSweep, micro.ContextHandler(ctx, c.handleSweep),
		micro.WithEndpointSubject(events.SubjectSweepAppointments)); err != nil {
		return nil, errors.Join(err, svc.Stop())
	}
	return svc, nil
}

func (c *ChildMirror) handleSweep(ctx context.Context, req micro.Request) {
	var r events.SweepRequest
	var bad string
	switch err := json.Unmarshal(req.Data(), &r); {
	case err != nil:
		bad = fmt.Sprintf("not a sweep request (%v): want {\"fromUTC\":…,\"toUTC\":…} with RFC 3339 times, e.g. 2026-12-01T00:00:00Z", err)
	case r.FromUTC.IsZero() || !r.FromUTC.Before(r.ToUTC):
		bad = "not a sweep request: it needs fromUTC before toUTC"
	}
	if bad != "" {
		c.metrics.sweeps.WithLabelValues("bad_request").Inc()
		if err := req.Error("400", bad, nil); err != nil {
			c.log.Warn("sweep: answering", "err", err)
		}
		return
	}
	timeout := defaultSweepTimeout
	if r.TimeoutMS > 0 {
		timeout = time.Duration(r.TimeoutMS) * time.Millisecond
	}
	// Stop a little before the caller gives up, so that the reply, with
	// what was done, still reaches it.
	ctx, cancel := context.WithTimeout(ctx, timeout-min(timeout/10, 10*time.Second))
	defer cancel()
	reply, result := c.sweep(ctx, r)
	c.metrics.sweeps.WithLabelValues(result).Inc()
	if r.OrderRun {
		reply.OrderRunRequested = c.askOrderRun(ctx, r)
	}
	body, _ := json.Marshal(reply) // a struct of strings and numbers always marshals
	var err error
	switch result {
	case "rate_limited":
		err = req.Error("429", "sweep stopped: rate limited by Prime", body)
	case "stopped":
		err = req.Error("500", "sweep stopped before the end of the list", body)
	default:
		err = req.Respond(body)
	}
	if err != nil {
		c.log.Warn("sweep: answering", "err", err)
	}
}

// askOrderRun asks optimo-create for an order run after a sweep that asked
// for one (events.SweepRequest.OrderRun), so the appointments it saved
// become orders now rather than at the next scheduled run. It reports
// whether the request was stored; a failure is logged.
func (c *ChildMirror) askOrderRun(ctx context.Context, r events.SweepRequest) bool {
	body, _ := json.Marshal(events.CreateRequested{Source: sweepAction, Reason: "sweep asked for by " + cmp.Or(r.Source, "an unnamed caller")})
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := c.js.Publish(pctx, events.SubjectOptimoCreate, body); err != nil {
		c.log.Warn("sweep: the order run it was asked for could not be requested; the next scheduled run makes the orders", "err", err)
		return false
	}
	c.log.Info("sweep: order run requested", "source", r.Source)
	return true
}

// sweep is the parent flow's "Prime Sync Appointments by Date" and "Prime
// Sync Contacts by Date" (§8.1), the safety net for an appointment whose
// webhook Prime never sent or whose event failed for good: every
// appointment Prime lists as starting in the range is mirrored unless the
// mirror holds it at that version or a newer one, which costs no Prime call
// beyond the list. The rest go the handler's way (mirrorAppointment): job
// first (§4.3), then the appointment, then the job's contacts, once a job.
// A failed appointment is counted and the sweep goes on; Prime's rate limit,
// Prime not answering (pkg/prime's outage: stopped) or the deadline stops
// it, so that it never hammers Prime. result labels the outcome: ok,
// rate_limited or stopped.
func (c *ChildMirror) sweep(ctx context.Context, r events.SweepRequest) (reply events.SweepReply, result string) {
	log := c.log.With("action", sweepAction, "fromUTC", r.FromUTC.UTC(), "toUTC", r.ToUTC.UTC(), "source", r.Source)
	stop := func(err error) (events.SweepReply, string) {
		reply.Error = err.Error()
		if after := retry.Delay(err); after > 0 && errors.Is(err, prime.ErrRateLimited) {
			reply.RetryAfterMS = after.Milliseconds()
			log.Warn("sweep stopped by Prime's rate limit", "retryAfter", after, "reply", reply)
			return reply, "rate_limited"
		}
		log.Error("sweep stopped before the end of the list", "err", err, "reply", reply)
		return reply, "stopped"
	}
	// A hold on Prime's budget stops the sweep rather than queue it up
	// behind the webhooks; otherwise its calls get what the events leave
	// (PrioritySweep), its ensure-job requests too.
	ctx = prime.WithCaller(prime.WithPriority(prime.FailOnHold(ctx), prime.PrioritySweep), ServiceName, sweepAction)
	// Any answer Prime gave to a call sent since the sweep began is as new
	// as the sweep needs (its list is of then): a job's contacts as the
	// drains of its first sight fetched them, the job as its ensure-job
	// did. Prime is not asked for them again.
	ctx = prime.WithEventTime(ctx, time.Now())
	list, err := c.prime.ListAppointmentsByStartDate(ctx, r.FromUTC, r.ToUTC)
	if err != nil {
		return stop(fmt.Errorf("list appointments: %w", err))
	}
	reply.Listed = len(list)
	ensured := map[string]bool{}
	contacts := map[string]bool{} // jobs whose contacts this sweep synced, or tried to
	for i, a := range list {
		if err := ctx.Err(); err != nil {
			return stop(fmt.Errorf("%d of %d appointments left: %w", len(list)-i, len(list), err))
		}
		if err := c.sweepOne(ctx, log, a, ensured, contacts, &reply); err != nil {
			return stop(fmt.Errorf("appointment %s: %w", a.ID, err))
		}
	}
	log.Info("sweep finished", "reply", reply)
	return reply, "ok"
}

// sweepOne mirrors one listed appointment and counts it in reply. A
// failure is logged and counted, and the sweep goes on; the error it
// returns stops the sweep: Prime's rate limit (met by the appointment, or
// by its contact sync, which is otherwise swallowed as in the handler: the
// next call would only meet the same limit), Prime not answering (the same
// goes), or the sweep's deadline.
func (c *ChildMirror) sweepOne(ctx context.Context, log *slog.Logger, a prime.Appointment, ensured, contacts map[string]bool, reply *events.SweepReply) error {
	count := func(outcome string, n *int) {
		*n++
		c.metrics.swept.WithLabelValues(outcome).Inc()
	}
	fail := func(err error) error {
		count("failed", &reply.Failed)
		if retry.Delay(err) > 0 || ctx.Err() != nil {
			return err
		}
		return nil
	}
	row := appointmentRow(a)
	held, found, err := c.store.GetAppointment(ctx, row.AppointmentID)
	if err != nil {
		log.Warn("sweep: reading the mirrored appointment", "appointmentId", row.AppointmentID, "err", err)
		return fail(err)
	}
	if found && held.Version >= row.Version {
		count("unchanged", &reply.Unchanged)
		return nil
	}
	ev := events.Resolved{Action: sweepAction, Entity: store.TableAppointments, EntityID: row.AppointmentID}
	m, err := c.mirrorAppointment(ctx, log, ev, a)
	if err != nil {
		log.Warn("sweep: appointment not mirrored", "appointmentId", row.AppointmentID, "jobId", row.JobID, "err", err)
		return fail(err)
	}
	if !ensured[m.jobID] {
		ensured[m.jobID] = true
		reply.JobsEnsured++
	}
	saved, err := m.save(ctx, c.store)
	switch {
	case err != nil:
		m.log.Warn("sweep: saving the appointment", "err", err)
		return fail(err)
	case saved:
		count("saved", &reply.Saved)
		m.log.Info("sweep mirrored an appointment the mirror lacked at this version", "version", row.Version)
	default:
		count("unchanged", &reply.Unchanged)
	}
	if contacts[m.jobID] {
		return nil
	}
	// §5.2 step 4 after the appointment, once a job.
	contacts[m.jobID] = true
	err = c.syncContacts(ctx, m.log, m.jobID)
	if err == nil {
		reply.ContactJobs++
	}
	if retry.Delay(err) > 0 {
		return err
	}
	return nil
}
