package jobmirror

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/version"
	"github.com/nats-io/nats.go/micro"
)

// EndpointEnsure is the micro endpoint's name; its subject is
// events.SubjectEnsureJob.
const EndpointEnsure = "ensure"

// serve adds the micro service "job-mirror" (`nats micro ls`, `nats micro
// stats job-mirror`) with its endpoints: ensure-job, and the jobs sweep
// (backstop.go). Requests share a queue group, so each is answered by one
// instance. An instance answers its ensure-job requests one at a time: most
// are a mirror lookup, and the rest wait on Prime's budget, which the
// shared client paces anyway.
func (m *Mirror) serve(ctx context.Context) (micro.Service, error) {
	svc, err := micro.AddService(m.nc, micro.Config{
		Name:        ServiceName,
		Version:     version.Semver(), // every service the same: the build's (pkg/version)
		Description: "Mirrors Prime jobs: ensure a job is in primeJobs before a child row is written (§4.3); sweep the jobs updated since the last sweep (the backstop, §7).",
	})
	if err != nil {
		return nil, err
	}
	if err := svc.AddEndpoint(EndpointEnsure, micro.ContextHandler(ctx, m.handleEnsure),
		micro.WithEndpointSubject(events.SubjectEnsureJob)); err != nil {
		return nil, errors.Join(err, svc.Stop())
	}
	if err := m.serveSweepJobs(ctx, svc); err != nil {
		return nil, errors.Join(err, svc.Stop())
	}
	return svc, nil
}

func (m *Mirror) handleEnsure(ctx context.Context, req micro.Request) {
	var r events.EnsureJobRequest
	if err := json.Unmarshal(req.Data(), &r); err != nil || (r.JobID == "" && r.NumericRef <= 0) {
		m.metrics.ensure.WithLabelValues("error").Inc()
		if err := req.Error("400", "not an ensure-job request: it needs jobId or numericRef", nil); err != nil {
			m.log.Warn("ensure-job: answering", "err", err)
		}
		return
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.EnsureTimeout)
	defer cancel()
	// The Prime call goes in the class of the event that asks (§4.3: a
	// create-allocation's ensure is make-safe work).
	prio := prime.PriorityEvent
	if r.Priority != "" {
		p, err := prime.ParsePriority(r.Priority)
		if err != nil {
			m.log.Warn("ensure-job: unknown priority, asking Prime as an event", "err", err)
		}
		prio = p
	}
	ctx = prime.WithCaller(prime.WithPriority(ctx, prio), ServiceName, EndpointEnsure)
	if !r.EventUTC.IsZero() {
		ctx = prime.WithEventTime(ctx, r.EventUTC)
	}
	reply, result := m.ensure(ctx, r)
	m.metrics.ensure.WithLabelValues(result).Inc()
	body, _ := json.Marshal(reply) // a struct of strings, bools and numbers always marshals
	var err error
	switch result {
	case "not_found":
		err = req.Error("404", "Prime has no such job", body)
	case "rate_limited":
		err = req.Error("429", "rate limited by Prime", body)
	case "error":
		err = req.Error("500", reply.Error, body)
	default:
		err = req.Respond(body)
	}
	if err != nil {
		m.log.Warn("ensure-job: answering", "err", err)
	}
}

// ensure is EnsureJobMirroredAsync (§4.3): an IdentifyGuid probe; when the
// job is missing, GetJob (or the caller's fetch), mirror it, and on first
// sight hand it to the new-job pipeline. result labels the outcome.
func (m *Mirror) ensure(ctx context.Context, r events.EnsureJobRequest) (reply events.EnsureJobReply, result string) {
	fail := func(err error) (events.EnsureJobReply, string) {
		if after := retry.Delay(err); after > 0 {
			return events.EnsureJobReply{JobID: reply.JobID, RetryAfterMS: after.Milliseconds(), Error: err.Error()}, "rate_limited"
		}
		if errors.Is(err, prime.ErrNotFound) {
			return events.EnsureJobReply{JobID: reply.JobID, NotFound: true, Error: err.Error()}, "not_found"
		}
		m.log.Warn("ensure-job failed", "jobId", reply.JobID, "numericRef", r.NumericRef, "err", err)
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
	job, ok := prime.Job{}, false
	if r.Fetched != nil {
		want := reply.JobID
		if want == "" {
			want = r.Fetched.ID
		}
		job, ok = decodeJob(events.FindResource([]events.Resource{*r.Fetched}, events.ResourceJobs, want))
	}
	if !ok {
		identifier := reply.JobID
		if identifier == "" {
			identifier = strconv.FormatInt(r.NumericRef, 10)
		}
		var err error
		if job, err = m.prime.GetJob(ctx, identifier); err != nil {
			return fail(err)
		}
	}
	reply.JobID = strings.ToLower(job.ID)
	var err error
	reply.FirstSight, err = m.mirrorJob(ctx, sighting{job: job, numericRef: r.NumericRef, firstSight: probed, logID: r.LogID, via: requestVia(r)})
	if err != nil {
		return fail(err)
	}
	return reply, "mirrored"
}

// requestVia is the path an ensure-job request names; an older caller's
// request with a log row is a webhook's.
func requestVia(r events.EnsureJobRequest) string {
	if r.Via == "" && r.LogID > 0 {
		return store.ViaWebhook
	}
	return r.Via
}
