package childmirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/mirror"
	"github.com/ethosbuilding/primeflow/pkg/pipeline"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// appointment is ProcessAppointmentEventAsync (§5.2), for create-appointment
// and complete-appointment: both mean Prime's copy of the appointment has
// changed.
func (c *ChildMirror) appointment(ctx context.Context, ev events.Resolved) (pipeline.Finish, error) {
	// Step 1 is the resolver's: RequireEntityGuid(primeAppointments, …).
	if ev.Entity != store.TableAppointments || ev.EntityID == "" {
		return pipeline.Finish{}, pipeline.Fault(pipeline.MissingIdentifier, ev.Action, "the resolver named no appointment (entity %q)", ev.Entity)
	}
	// Step 2, MirrorAppointmentAsync: the appointment as Prime has it now —
	// the resolver's copy when it had to fetch it, otherwise fetched again
	// ("it runs a second time to refresh an appointment we already held").
	a, err := c.getAppointment(ctx, ev)
	if err != nil {
		return pipeline.Finish{}, err
	}
	m, err := c.mirrorAppointment(ctx, c.log.With("logId", ev.LogID, "action", ev.Action), ev, a)
	if err != nil {
		return pipeline.Finish{}, err
	}

	// Step 5, RequestOptimoRouteCreateAndPlanAsync: fire-and-forget. It
	// goes through the outbox, which cannot fail the event once the
	// appointment commits, and publishes once per appointment state: a
	// replay or a Prime retry within the stream's duplicate window is
	// dropped, and optimo-create coalesces the rest.
	msg, err := message(events.SubjectOptimoCreate, optimoCreateMsgID(m.row),
		events.CreateRequested{Source: source(ev.LogID), Reason: ev.Action + " " + m.row.AppointmentID})
	if err != nil {
		return pipeline.Finish{}, err
	}
	return pipeline.Finish{
		JobID: m.jobID,
		Write: func(ctx context.Context, tx store.Store) error {
			if _, err := m.save(ctx, tx); err != nil {
				return err
			}
			// Step 3, the mapping.
			return saveReference(ctx, tx, ev.NumericRef, m.jobID)
		},
		Outbox: []store.OutboxMessage{msg},
		// Step 4, SyncAppointmentContactsAsync, once the appointment and
		// the mapping are committed: logged and swallowed (§9), so it can
		// neither hold them back nor fail the event. It runs after the
		// hand-off of step 5 is published, which reads no contacts.
		After: func(ctx context.Context) { c.syncContacts(ctx, m.log, m.jobID) },
	}, nil
}

// mirroredAppointment is an appointment mirrorAppointment made ready: its
// row, under a job that is now in the mirror, for the caller to save.
type mirroredAppointment struct {
	row   store.Appointment
	jobID string
	log   *slog.Logger
}

// mirrorAppointment is what the appointment handler and the sweep (§8.1)
// share of MirrorAppointmentAsync (§5.2 step 2): the appointment's job made
// sure of in the mirror first (§4.3), for the caller to save the appointment
// under it, then to sync the job's contacts (step 4). A record without a job
// falls back to the event's numeric reference, as childJob does.
func (c *ChildMirror) mirrorAppointment(ctx context.Context, log *slog.Logger, ev events.Resolved, a prime.Appointment) (mirroredAppointment, error) {
	row := appointmentRow(a)
	jobID, err := c.childJob(ctx, ev, row.JobID)
	if err != nil {
		return mirroredAppointment{}, err
	}
	m := mirroredAppointment{row: row, jobID: jobID, log: log.With("jobId", jobID, "appointmentId", row.AppointmentID)}
	if row.JobID == "" {
		m.log.Warn("Prime reported no job on the appointment: mirrored under the job of the numeric reference")
		m.row.JobID = jobID
	}
	return m, nil
}

// save writes the appointment (§4.3: its job was mirrored first) and
// reports whether it did: a mirror that holds a newer version keeps it.
func (m mirroredAppointment) save(ctx context.Context, tx store.Store) (bool, error) {
	saved, err := tx.SaveAppointment(ctx, m.row)
	if err == nil && !saved {
		m.log.Info("the mirror holds a newer version of the appointment; left as it is", "version", m.row.Version)
	}
	return saved, err
}

// getAppointment is the resolver's copy of the appointment, or Prime's.
func (c *ChildMirror) getAppointment(ctx context.Context, ev events.Resolved) (prime.Appointment, error) {
	if r, ok := events.FindResource(ev.Fetched, events.ResourceAppointments, ev.EntityID); ok && !ev.EntityInMirror {
		return prime.FromResource[prime.Appointment](r.ID, r.Attributes)
	}
	a, err := c.prime.GetAppointment(ctx, ev.EntityID)
	if errors.Is(err, prime.ErrNotFound) {
		return a, fmt.Errorf("appointment %s is mirrored but Prime no longer has it: %w", ev.EntityID, err)
	}
	return a, err
}

// childJob is the job a child record belongs to, made sure of in the
// mirror before its child is written (§4.3). A record without a job falls
// back to the job of the event's numeric reference (§5.2 step 3, §5.5 step
// 2: ResolveJobIdAsync with forceSync false): the reference map, or Prime
// through job-mirror.
func (c *ChildMirror) childJob(ctx context.Context, ev events.Resolved, recordJob string) (string, error) {
	subject, req := events.SubjectEnsureJobEvent, events.EnsureJobRequest{JobID: recordJob, LogID: ev.LogID}
	if ev.Action == sweepAction {
		subject, req.LogID = events.SubjectEnsureJobSweep, 0
	}
	if req.JobID == "" {
		if ev.NumericRef <= 0 {
			return "", pipeline.Fault(pipeline.MissingIdentifier, ev.Action, "the %s has no job and the payload no numeric jobId", strings.TrimSuffix(ev.Entity, "s"))
		}
		jobID, mapped, err := c.store.GetJobIDByReference(ctx, ev.NumericRef)
		if err != nil {
			return "", err
		}
		if mapped {
			req.JobID = jobID
		} else {
			req.NumericRef = ev.NumericRef
		}
	}
	return c.ensureJob(ctx, subject, req)
}

// syncContacts is SyncAppointmentContactsAsync (§5.2 step 4): the job's
// contact relationships from Prime, primaryContactId off a fresh fetch of
// the job (saved, like GetandSaveJob; not primeJobs, which may be stale or
// not yet hold the contact), and every distinct contact. A failure is
// logged and swallowed: ethSyncQueue and the job's own sync cover contacts
// later. It returns the failure it swallowed, for the sweep to tell a rate
// limit from the rest.
func (c *ChildMirror) syncContacts(ctx context.Context, log *slog.Logger, jobID string) error {
	ctx = prime.WithCaller(ctx, ServiceName, purposeContactSync) // the class stays the event's, or the sweep's
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ContactSyncTimeout)
	defer cancel()
	err := c.contactSync(ctx, jobID)
	if err != nil {
		c.metrics.swallowed.WithLabelValues("contact_sync").Inc()
		log.Warn("contact sync failed; logged only, ethSyncQueue and the job sync cover contacts later", "err", err)
	}
	return err
}

func (c *ChildMirror) contactSync(ctx context.Context, jobID string) error {
	rels, err := c.prime.GetJobContactRelationships(ctx, jobID)
	if err != nil {
		return fmt.Errorf("contact relationships: %w", err)
	}
	job, err := c.prime.GetJob(ctx, jobID)
	if err != nil {
		return fmt.Errorf("job: %w", err)
	}
	rows := relationshipRows(jobID, rels)
	contacts, err := c.fetchContacts(ctx, contactIDs(rows), job.PrimaryContactID)
	if err != nil {
		return err
	}
	return c.store.InTx(ctx, func(tx store.Store) error {
		if _, err := tx.UpsertJob(ctx, mirror.Job(job)); err != nil {
			return err
		}
		if err := saveContacts(ctx, tx, contacts); err != nil {
			return err
		}
		return tx.ReplaceJobContactRelationships(ctx, jobID, rows)
	})
}

// fetchContacts fetches every distinct contact of a job: those its
// relationships name (named), and its primary contact.
func (c *ChildMirror) fetchContacts(ctx context.Context, named []string, primaryContactID string) ([]store.Contact, error) {
	ids := []string{strings.ToLower(primaryContactID)}
	for _, id := range named {
		ids = append(ids, strings.ToLower(id))
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	var contacts []store.Contact
	for _, id := range ids {
		if id == "" {
			continue
		}
		ct, err := c.prime.GetContact(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("contact %s: %w", id, err)
		}
		contacts = append(contacts, contactRow(ct))
	}
	return contacts, nil
}

func saveContacts(ctx context.Context, tx store.Store, contacts []store.Contact) error {
	for _, ct := range contacts {
		if err := tx.SaveContact(ctx, ct); err != nil {
			return err
		}
	}
	return nil
}

// optimoCreateMsgID makes the hand-off publish once per state of an
// appointment (optimo-create's queue compares versions, §5.2).
func optimoCreateMsgID(a store.Appointment) string {
	return fmt.Sprintf("optimo-create:appointment:%s:v%d:%d", a.AppointmentID, a.Version, a.UpdatedAt.Unix())
}
