package jobmirror

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/pipeline"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/version"
	"github.com/nats-io/nats.go/micro"
)

// ensurePath is one of the ensure-job endpoints: a subject only one role
// may publish (events.Role.Requests, pkg/natsauth), and so what job-mirror
// takes the request to be. The path a first sight is recorded under, the
// class of the Prime call and the log row recorded are derived from it, and
// for a child event from its log row: nothing in a request's body says
// anything about the job but which one it is.
type ensurePath struct {
	// endpoint is the micro endpoint's name (`nats micro stats job-mirror`).
	endpoint string
	subject  string
	// via is what a first sight through it is recorded as (store.Via…;
	// empty: unsaid).
	via string
	// priority is the class of the Prime call it makes (prime.WithPriority);
	// a child event's is its action's (pipeline.Priority).
	priority prime.Priority
	// event: the request names the log row of a child event (required),
	// which job-mirror reads (childEvent).
	event bool
}

// The ensure-job endpoints, one a path a job reaches job-mirror by.
const (
	EndpointEnsureEvent = "ensure-event"
	EndpointEnsureSweep = "ensure-sweep"
	EndpointEnsureDrain = "ensure-drain"
	EndpointEnsureEmail = "ensure-email"
)

var ensurePaths = []ensurePath{
	// child-mirror, for a webhook's child event (§4.3).
	{EndpointEnsureEvent, events.SubjectEnsureJobEvent, store.ViaWebhook, prime.PriorityEvent, true},
	// child-mirror's appointment sweep (§8.1): the sweeps' class.
	{EndpointEnsureSweep, events.SubjectEnsureJobSweep, store.ViaAppointmentSweep, prime.PrioritySweep, false},
	// child-mirror's ethSyncQueue drains (§6): the drains' class.
	{EndpointEnsureDrain, events.SubjectEnsureJobDrain, "", prime.PriorityDrain, false},
	// mail-intake (§7): after the events, before the sweeps.
	{EndpointEnsureEmail, events.SubjectEnsureJobEmail, store.ViaEmail, prime.PriorityDrain, false},
}

// serve adds the micro service "job-mirror" (`nats micro ls`, `nats micro
// stats job-mirror`) with its endpoints: ensure-job, one a path, and the
// jobs sweep (backstop.go). Requests share a queue group, so each is
// answered by one instance. An instance answers its ensure-job requests one
// at a time an endpoint: most are a mirror lookup, and the rest wait on
// Prime's budget, which the shared client paces anyway.
func (m *Mirror) serve(ctx context.Context) (micro.Service, error) {
	svc, err := micro.AddService(m.nc, micro.Config{
		Name:        ServiceName,
		Version:     version.Semver(), // every service the same: the build's (pkg/version)
		Description: "Mirrors Prime jobs: ensure a job is in primeJobs before a child row is written (§4.3) or because an email named it (§7); sweep the jobs updated since the last sweep (the backstop, §7).",
	})
	if err != nil {
		return nil, err
	}
	for _, p := range ensurePaths {
		if err := svc.AddEndpoint(p.endpoint, micro.ContextHandler(ctx, func(ctx context.Context, req micro.Request) { m.handleEnsure(ctx, p, req) }),
			micro.WithEndpointSubject(p.subject)); err != nil {
			return nil, errors.Join(err, svc.Stop())
		}
	}
	if err := m.serveSweepJobs(ctx, svc); err != nil {
		return nil, errors.Join(err, svc.Stop())
	}
	return svc, nil
}

// errRefused marks a request job-mirror does not take: a body that is not
// one of the path's, or a log row that is no child event being handled.
var errRefused = errors.New("refused")

func (m *Mirror) handleEnsure(ctx context.Context, p ensurePath, req micro.Request) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.EnsureTimeout)
	defer cancel()
	var reply events.EnsureJobReply
	result := "refused"
	r, err := decodeEnsure(req.Data(), p)
	if err == nil {
		reply, result = m.ensure(ctx, p, r)
	} else {
		reply.Error = err.Error()
	}
	m.metrics.ensure.WithLabelValues(result).Inc()
	body, _ := json.Marshal(reply) // a struct of strings, bools and numbers always marshals
	switch result {
	case "refused":
		m.log.Warn("ensure-job request refused", "subject", p.subject, "err", reply.Error)
		err = req.Error("400", reply.Error, body)
	case "not_found":
		err = req.Error("404", "Prime has no such job", body)
	case "rate_limited":
		err = req.Error("429", "rate limited by Prime", body)
	case "prime_unavailable":
		err = req.Error("503", "Prime is not answering", body)
	case "error":
		err = req.Error("500", reply.Error, body)
	default:
		err = req.Respond(body)
	}
	if err != nil {
		m.log.Warn("ensure-job: answering", "err", err)
	}
}

// decodeEnsure reads a request of path p: a job's GUID or numeric reference
// (or both), and on a child event's path its log row. Any other field, or a
// log row on another path, refuses it, rather than have job-mirror look as if
// it took what a caller says.
func decodeEnsure(data []byte, p ensurePath) (events.EnsureJobRequest, error) {
	var r events.EnsureJobRequest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("%w: not an ensure-job request (jobId, numericRef%s): %v", errRefused, cond(p.event, ", logId", ""), err)
	}
	switch {
	case r.NumericRef < 0:
		return r, fmt.Errorf("%w: numericRef %d is not a reference", errRefused, r.NumericRef)
	case r.JobID == "" && r.NumericRef == 0:
		return r, fmt.Errorf("%w: an ensure-job request needs jobId or numericRef", errRefused)
	case r.JobID != "" && !events.IsGUID(r.JobID):
		return r, fmt.Errorf("%w: jobId %q is not a GUID", errRefused, r.JobID)
	case p.event && r.LogID <= 0:
		return r, fmt.Errorf("%w: a child event's request needs its logId", errRefused)
	case !p.event && r.LogID != 0:
		return r, fmt.Errorf("%w: %s takes no logId", errRefused, p.subject)
	}
	return r, nil
}

func cond(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}

// ensure is EnsureJobMirroredAsync (§4.3): an IdentifyGuid probe; when the
// job is missing, GetJob, mirror it, and on first sight hand it to the
// new-job pipeline. The job is always Prime's answer to job-mirror's own
// call (which may reuse an answer Prime gave the resolver for the same call,
// pkg/prime's coalescing), never a caller's copy. With a numeric reference
// the call is by the reference, so the reference's mapping (§4.1) is Prime's
// too. result labels the outcome.
func (m *Mirror) ensure(ctx context.Context, p ensurePath, r events.EnsureJobRequest) (reply events.EnsureJobReply, result string) {
	fail := func(err error) (events.EnsureJobReply, string) {
		if errors.Is(err, errRefused) {
			return events.EnsureJobReply{JobID: reply.JobID, Error: err.Error()}, "refused"
		}
		if after := retry.Delay(err); after > 0 {
			// Prime's rate limit, or Prime not answering: the caller waits.
			reply := events.EnsureJobReply{JobID: reply.JobID, RetryAfterMS: after.Milliseconds(), Error: err.Error(),
				PrimeUnavailable: errors.Is(err, prime.ErrUnavailable)}
			if reply.PrimeUnavailable {
				return reply, "prime_unavailable"
			}
			return reply, "rate_limited"
		}
		if errors.Is(err, prime.ErrNotFound) {
			return events.EnsureJobReply{JobID: reply.JobID, NotFound: true, Error: err.Error()}, "not_found"
		}
		m.log.Warn("ensure-job failed", "subject", p.subject, "jobId", reply.JobID, "numericRef", r.NumericRef, "err", err)
		return events.EnsureJobReply{JobID: reply.JobID, Error: err.Error()}, "error"
	}
	reply.JobID = strings.ToLower(r.JobID)
	// Probed by its GUID, a job the mirror lacks is new; known only by an
	// unmapped numeric reference, it is new if the write creates its row.
	probed := reply.JobID != ""
	if reply.JobID == "" {
		// Only the numeric reference: the map first (§4.1).
		id, found, err := m.store.GetJobIDByReference(ctx, r.NumericRef)
		if err != nil {
			return fail(err)
		}
		if found {
			reply.JobID = strings.ToLower(id)
		}
	}
	if reply.JobID != "" {
		tables, err := m.store.IdentifyGuid(ctx, reply.JobID, store.TableJobs)
		if err != nil {
			return fail(err)
		}
		if slices.Contains(tables, store.TableJobs) {
			reply.WasMirrored = true
			return reply, "present"
		}
	}
	ctx, logID, err := m.callFor(ctx, p, r)
	if err != nil {
		return fail(err)
	}
	identifier := reply.JobID
	if r.NumericRef > 0 {
		identifier = strconv.FormatInt(r.NumericRef, 10)
	}
	job, err := m.prime.GetJob(ctx, identifier)
	if err != nil {
		return fail(err)
	}
	if r.JobID != "" && !strings.EqualFold(job.ID, r.JobID) {
		return fail(fmt.Errorf("Prime's job of reference %d is %s, not %s", r.NumericRef, strings.ToLower(job.ID), reply.JobID))
	}
	reply.JobID = strings.ToLower(job.ID)
	reply.FirstSight, err = m.mirrorJob(ctx, sighting{job: job, numericRef: r.NumericRef, firstSight: probed, logID: logID, via: p.via})
	if err != nil {
		return fail(err)
	}
	return reply, "mirrored"
}

// callFor is ctx for the Prime call a request of path p makes, and the log
// row its first sight is recorded under: the path's class; for a child
// event, its action's class and the time it reached us (prime.WithEventTime:
// an answer Prime gave since, the resolver's, serves it), both read from its
// log row, which must be of an event child-mirror handles and not processed
// yet (a child event asks before its row is finished: pipeline.Stage).
func (m *Mirror) callFor(ctx context.Context, p ensurePath, r events.EnsureJobRequest) (context.Context, int64, error) {
	prio := p.priority
	if p.event {
		row, err := m.store.GetWebhookLog(ctx, r.LogID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return ctx, 0, fmt.Errorf("%w: log row %d: no such row", errRefused, r.LogID)
		case err != nil:
			return ctx, 0, err
		case row.Processed():
			return ctx, 0, fmt.Errorf("%w: log row %d is processed: no event of it is being handled", errRefused, r.LogID)
		case !events.ConsumerChildMirror.Takes(row.EventAction):
			return ctx, 0, fmt.Errorf("%w: log row %d is a %q event, not a child event's", errRefused, r.LogID, row.EventAction)
		}
		prio = pipeline.Priority(row.EventAction)
		if row.ReplayCount == 0 {
			// A replay asks Prime afresh, as the resolver did for it.
			ctx = prime.WithEventTime(ctx, row.ReceivedUTC)
		}
	}
	return prime.WithCaller(prime.WithPriority(ctx, prio), ServiceName, p.endpoint), r.LogID, nil
}
