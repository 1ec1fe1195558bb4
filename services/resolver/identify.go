package resolver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/pipeline"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// The statuses of the rows the resolver finishes itself: an action with no
// handler (§3, events.Actions lists those with one), or no identifier.
const (
	statusNoIdentifier = "No identifier in the payload"
	statusNoHandlerFmt = "No handler for '%s'"
)

// PrimeAPI is what the resolver asks Prime while identifying (§4.2 step 3).
type PrimeAPI interface {
	GetJob(ctx context.Context, identifier string) (prime.Job, error)
	GetAppointment(ctx context.Context, id string) (prime.Appointment, error)
	GetAllocation(ctx context.Context, id string) (prime.Allocation, error)
}

// Store is what the resolver needs of the store.
type Store interface {
	store.WebhookLog
	store.JobReferences
	store.Identify
	// Settings pairs the database with PRIME_WEBHOOK's NATS (pkg/instance).
	store.Settings
	// InTx commits a replay's reset and its publication stamp together.
	InTx(ctx context.Context, fn func(store.Store) error) error
}

// outcome of identifying one event.
type outcome struct {
	ev events.Resolved
	// finish, when set, is the processStatus of a row the resolver finishes
	// itself: no stage has anything to do with it.
	finish string
}

// identify works out what a row's event refers to (§4).
func (r *Resolver) identify(ctx context.Context, row store.WebhookLogRow) (outcome, error) {
	p := parsePayload(row.Payload)
	ev := events.Resolved{LogID: row.ID, Action: row.EventAction, Attempt: row.ProcessAttempts, NumericRef: p.numericRef(),
		ReceivedUTC: row.ReceivedUTC}
	if row.ReplayCount > 0 {
		// A replay asks Prime afresh: no answer from before it serves it.
		ev.ReceivedUTC = time.Now().UTC()
	}
	ctx = pipeline.ForEvent(ctx, r.stage.Caller, ev)
	switch row.EventAction {
	case events.ActionChangeJobStatus:
		return r.changeJobStatus(ctx, p, ev)
	case events.ActionCreateAppointment, events.ActionCompleteAppointment:
		// §5.2 step 1: RequireEntityGuid(primeAppointments, "appointmentTypeId", "appointmentId").
		return r.requireEntity(ctx, p, ev, store.TableAppointments, r.probeAppointment, "appointmentTypeId", "appointmentId")
	case events.ActionCreateAllocation:
		// §5.5 step 1: RequireEntityGuid(primeAllocations, "allocationTypeId", "allocationId").
		return r.requireEntity(ctx, p, ev, store.TableAllocations, r.probeAllocation, "allocationTypeId", "allocationId")
	case events.ActionChangeCustomFormStatus:
		// §5.3: the job from its numeric reference; the site form is confirmed after the sync.
		return r.jobByReference(ctx, p, ev, "customFormStatusId", "siteFormId")
	case events.ActionCreateEstimate:
		// §5.4: the same, confirming estimateId.
		return r.jobByReference(ctx, p, ev, "estimateId")
	default:
		return outcome{finish: fmt.Sprintf(statusNoHandlerFmt, row.EventAction)}, nil
	}
}

// changeJobStatus is §5.1 steps 1–2: the job from its GUID properties,
// preferring jobId then jobStatusId, with GetJob as the Prime probe; failing
// that, the numeric reference.
func (r *Resolver) changeJobStatus(ctx context.Context, p payload, ev events.Resolved) (outcome, error) {
	found, err := r.tryResolve(ctx, p, ev.Action, store.TableJobs, r.probeJob, "jobId", "jobStatusId")
	var fault *pipeline.PayloadFault
	switch {
	case err == nil:
		ev.JobID, ev.JobInMirror, ev.Fetched = found.id, found.inMirror, found.fetched
		if ev.NumericRef > 0 {
			if ev.RefWasMapped, err = r.refMapped(ctx, ev.NumericRef); err != nil {
				return outcome{}, err
			}
		}
		return outcome{ev: ev}, nil
	case !errors.As(err, &fault):
		return outcome{}, err // Prime or the database failed, or a rate limit
	}
	// No GUID resolved to a job: the numeric fallback (§5.1 step 2).
	if ev.NumericRef > 0 {
		// First sight is decided here, before job-mirror's fetch writes the mapping.
		if ev.RefWasMapped, err = r.refMapped(ctx, ev.NumericRef); err != nil {
			return outcome{}, err
		}
		return outcome{ev: ev}, nil
	}
	if fault.Kind == pipeline.MissingIdentifier {
		// No identifier of any kind: it will never gain one (§5.1).
		return outcome{finish: statusNoIdentifier}, nil
	}
	return outcome{}, fault // identifiers present, none a job
}

// requireEntity is RequireEntityGuidAsync: TryResolveEntityGuid, and any
// fault is thrown (§4.2).
func (r *Resolver) requireEntity(ctx context.Context, p payload, ev events.Resolved, entity string, probe probeFunc, preferred ...string) (outcome, error) {
	found, err := r.tryResolve(ctx, p, ev.Action, entity, probe, preferred...)
	if err != nil {
		return outcome{}, err
	}
	ev.Entity, ev.EntityID, ev.EntityInMirror, ev.Fetched = entity, found.id, found.inMirror, found.fetched
	ev.JobID = found.jobID
	return outcome{ev: ev}, nil
}

// jobByReference is ResolveJobIdAsync(forceSync: false) (§4.1): the map
// first, Prime on a miss. No reference is MissingIdentifier, thrown (§5.3,
// §5.4). Every GUID-valued property travels in Confirm, the preferred names
// first: which one is the id to confirm is known only after the sync, so
// the stage probes them and warns of a changed shape (§4.2, §10.2).
func (r *Resolver) jobByReference(ctx context.Context, p payload, ev events.Resolved, confirm ...string) (outcome, error) {
	if ev.NumericRef == 0 {
		return outcome{}, pipeline.Fault(pipeline.MissingIdentifier, ev.Action, "no numeric jobId in the payload")
	}
	for _, g := range p.guids(confirm...) {
		ev.Confirm = append(ev.Confirm, events.PayloadGUIDProperty{Property: g.name, ID: g.id, Preferred: g.preferred})
		if g.preferred && ev.ConfirmID == "" {
			// For a child-mirror of the release before Confirm, during a
			// rolling deploy: the id under its expected name, if any.
			ev.ConfirmID = g.id
		}
	}
	jobID, mapped, err := r.store.GetJobIDByReference(ctx, ev.NumericRef)
	if err != nil {
		return outcome{}, err
	}
	ev.RefWasMapped = mapped
	if mapped {
		ev.JobID = jobID
		return outcome{ev: ev}, nil
	}
	job, err := r.prime.GetJob(ctx, fmt.Sprint(ev.NumericRef))
	if errors.Is(err, prime.ErrNotFound) {
		return outcome{}, pipeline.Fault(pipeline.UnknownIdentifier, ev.Action, "Prime has no job with reference %d", ev.NumericRef)
	}
	if err != nil {
		return outcome{}, err
	}
	ev.JobID = job.ID
	ev.Fetched = []events.Resource{{Type: events.ResourceJobs, ID: job.ID, Attributes: job.Raw}}
	return outcome{ev: ev}, nil
}

func (r *Resolver) refMapped(ctx context.Context, ref int64) (bool, error) {
	_, mapped, err := r.store.GetJobIDByReference(ctx, ref)
	return mapped, err
}

// resolvedGuid is what TryResolveEntityGuid found.
type resolvedGuid struct {
	id       string
	inMirror bool
	// fetched is the record Prime returned when the mirror did not have it,
	// and jobID the job it belongs to.
	fetched []events.Resource
	jobID   string
}

// probeFunc fetches a GUID from Prime as the expected entity: ErrNotFound
// proves it is not one (§4.2 step 3).
type probeFunc func(ctx context.Context, id string) (resolvedGuid, error)

func (r *Resolver) probeJob(ctx context.Context, id string) (resolvedGuid, error) {
	j, err := r.prime.GetJob(ctx, id)
	if err != nil {
		return resolvedGuid{}, err
	}
	return resolvedGuid{id: j.ID, jobID: j.ID, fetched: []events.Resource{{Type: events.ResourceJobs, ID: j.ID, Attributes: j.Raw}}}, nil
}

func (r *Resolver) probeAppointment(ctx context.Context, id string) (resolvedGuid, error) {
	a, err := r.prime.GetAppointment(ctx, id)
	if err != nil {
		return resolvedGuid{}, err
	}
	return resolvedGuid{id: a.ID, jobID: a.JobID, fetched: []events.Resource{{Type: events.ResourceAppointments, ID: a.ID, Attributes: a.Raw}}}, nil
}

func (r *Resolver) probeAllocation(ctx context.Context, id string) (resolvedGuid, error) {
	a, err := r.prime.GetAllocation(ctx, id)
	if err != nil {
		return resolvedGuid{}, err
	}
	return resolvedGuid{id: a.ID, jobID: a.JobID, fetched: []events.Resource{{Type: events.ResourceAllocations, ID: a.ID, Attributes: a.Raw}}}, nil
}

// tryResolve is TryResolveEntityGuidAsync (§4.2): every GUID-valued property
// is probed against the mirror, the preferred names first; an id under an
// unexpected property is used with a warning; GUIDs the mirror does not know
// are fetched from Prime as the expected entity. It fails with one of the
// three payload faults.
func (r *Resolver) tryResolve(ctx context.Context, p payload, action, entity string, probe probeFunc, preferred ...string) (resolvedGuid, error) {
	ids := p.guids(preferred...)
	if len(ids) == 0 {
		return resolvedGuid{}, pipeline.Fault(pipeline.MissingIdentifier, action, "no GUID in the payload (expected %v)", preferred)
	}
	var unknown []guidProp
	var elsewhere []string
	for _, g := range ids {
		tables, err := r.store.IdentifyGuid(ctx, g.id, entity)
		if err != nil {
			return resolvedGuid{}, err
		}
		if slices.Contains(tables, entity) {
			r.warnShape(action, entity, g, preferred)
			return resolvedGuid{id: g.id, inMirror: true}, nil
		}
		if len(tables) == 0 {
			unknown = append(unknown, g)
		} else {
			elsewhere = append(elsewhere, fmt.Sprintf("%s=%s is in %v", g.name, g.id, tables))
		}
	}
	for _, g := range unknown {
		r.metrics.probes.WithLabelValues(entity).Inc()
		found, err := probe(ctx, g.id)
		if errors.Is(err, prime.ErrNotFound) {
			continue
		}
		if err != nil {
			return resolvedGuid{}, err
		}
		r.warnShape(action, entity, g, preferred)
		found.inMirror = false
		return found, nil
	}
	if len(elsewhere) > 0 {
		return resolvedGuid{}, pipeline.Fault(pipeline.WrongEntityType, action, "expected %s; %v", entity, elsewhere)
	}
	return resolvedGuid{}, pipeline.Fault(pipeline.UnknownIdentifier, action, "no %s in the mirror or in Prime for %v", entity, propNames(unknown))
}

// warnShape logs when an id turned up under a property that is not one of
// the preferred names (§4.2 step 2, §9).
func (r *Resolver) warnShape(action, entity string, g guidProp, preferred []string) {
	if g.preferred {
		return
	}
	r.metrics.shapeChanged.WithLabelValues(events.ActionLabel(action)).Inc()
	r.log.Warn("payload shape has changed: id found under an unexpected property; update the preferred property names",
		"action", action, "entity", entity, "property", g.name, "preferred", preferred)
}

func propNames(gs []guidProp) []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.name + "=" + g.id
	}
	return out
}
