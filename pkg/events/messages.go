package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Message bodies are JSON. Each type says which subject carries it.

// Resolved is what the resolver publishes on ResolvedSubject(action) once it
// has identified what a log row's event refers to (§4). The stage that takes
// it finishes the row: it stamps the row processed or records a failed
// attempt, then announces the outcome on DoneSubject(LogID).
type Resolved struct {
	LogID  int64  `json:"logId"`
	Action string `json:"action"`
	// Attempt is processAttempts when the resolver read the row.
	Attempt int `json:"attempt"`
	// NumericRef is the payload's numeric jobId (§4.1), 0 when it had none.
	NumericRef int64 `json:"numericRef,omitempty"`
	// JobID is the job's GUID when the resolver knows it.
	JobID string `json:"jobId,omitempty"`
	// JobInMirror: the job was already in primeJobs when the resolver looked.
	JobInMirror bool `json:"jobInMirror,omitempty"`
	// RefWasMapped: NumericRef was already in ethPrimeJobReference when the
	// resolver looked (§5.1 step 2 decides first sight on it).
	RefWasMapped bool `json:"refWasMapped,omitempty"`
	// Entity and EntityID are what a GUID in the payload identified as: the
	// mirror table ("primeAppointments", "primeAllocations", …) and the GUID.
	Entity   string `json:"entity,omitempty"`
	EntityID string `json:"entityId,omitempty"`
	// EntityInMirror: EntityID was already in its mirror table.
	EntityInMirror bool `json:"entityInMirror,omitempty"`
	// Confirm lists the payload's GUID-valued properties, to look for in the
	// mirror after the sync: the site form of change-custom-form-status
	// (§5.3), the estimate of create-estimate (§5.4). Property names are not
	// trusted (§10.2), so every one is carried, in the order they are probed
	// (§4.2 steps 1–2): the preferred names first, then the rest by name.
	Confirm []PayloadGUIDProperty `json:"confirm,omitempty"`
	// ConfirmID is the single GUID to confirm that resolvers sent before
	// Confirm; it is read only from messages that have no Confirm, and still
	// set (the first preferred one) for child-mirrors that read only it.
	ConfirmID string `json:"confirmId,omitempty"`
	// Fetched holds Prime records the resolver fetched while identifying, so
	// the next stage does not fetch them again.
	Fetched []Resource `json:"fetched,omitempty"`
	// ReceivedUTC is when the webhook reached ingest (its receivedUTC), or
	// when a replay of it began: an answer Prime gave to a call sent since
	// already holds the change the event tells of, so the stage may reuse
	// it (prime.WithEventTime).
	ReceivedUTC time.Time `json:"receivedUTC,omitzero"`
}

// ConfirmCandidates is what to confirm after the sync, in probe order:
// Confirm, or, in a message from an older resolver, its ConfirmID under a
// preferred name.
func (r Resolved) ConfirmCandidates() []PayloadGUIDProperty {
	if len(r.Confirm) == 0 && r.ConfirmID != "" {
		return []PayloadGUIDProperty{{ID: r.ConfirmID, Preferred: true}}
	}
	return r.Confirm
}

// PayloadGUIDProperty is a payload property whose value is a GUID.
type PayloadGUIDProperty struct {
	Property string `json:"property"`
	ID       string `json:"id"`
	// Preferred: Property is one of the names the action expects the id
	// under; an id found under any other means Prime's payload has changed.
	Preferred bool `json:"preferred,omitempty"`
}

// Resource is a Prime record as JSON:API gives it: its type, id and attributes.
type Resource struct {
	Type       string          `json:"type"`
	ID         string          `json:"id"`
	Attributes json.RawMessage `json:"attributes"`
}

// FindResource returns the record of JSON:API type typ (ResourceJobs, …)
// and id, compared without case, among rs.
func FindResource(rs []Resource, typ, id string) (Resource, bool) {
	for _, r := range rs {
		if r.Type == typ && strings.EqualFold(r.ID, id) {
			return r, true
		}
	}
	return Resource{}, false
}

// FetchedJob is the job the resolver fetched while identifying, if it did:
// the one JobID names, or, with no JobID, the first job fetched (§5.3,
// §5.4: the job of a numeric reference the map did not have).
func (r Resolved) FetchedJob() (Resource, bool) {
	if r.JobID != "" {
		return FindResource(r.Fetched, ResourceJobs, r.JobID)
	}
	for _, f := range r.Fetched {
		if f.Type == ResourceJobs {
			return f, true
		}
	}
	return Resource{}, false
}

// Outcome is how a stage finished a log row.
type Outcome string

// Outcomes announced on DoneSubject.
const (
	// OutcomeProcessed: the row is stamped processed.
	OutcomeProcessed Outcome = "processed"
	// OutcomeFailed: a failed attempt is recorded on the row; Attempts says
	// how many so far.
	OutcomeFailed Outcome = "failed"
	// OutcomeWait: the event waits RetryAfterMS, no attempt counted — a
	// retry.Waiter stopped it: Prime's rate limit, or a service the stage
	// needs did not answer (pipeline.UnavailableError: job-mirror's
	// ensure-job). The value is the one lanes of earlier releases read, and
	// the resolver's metrics label such waits by it.
	OutcomeWait Outcome = "rate_limited"
)

// Done announces, on core NATS subject DoneSubject(LogID), how a stage
// finished a log row, so the resolver can release the job's lane.
type Done struct {
	LogID        int64   `json:"logId"`
	Outcome      Outcome `json:"outcome"`
	Attempts     int     `json:"attempts,omitempty"`
	RetryAfterMS int64   `json:"retryAfterMs,omitempty"`
	Error        string  `json:"error,omitempty"`
	// Wait says, for OutcomeWait, what the event waits for: rate_limited
	// (Prime's 429), prime_unavailable (Prime answered 5xx or not at all),
	// unavailable (a service the stage needs did not answer); the
	// resolver's metrics label the wait by it (pipeline.WaitLabel). Empty
	// from a stage of an earlier release: labelled by Outcome.
	Wait string `json:"wait,omitempty"`
}

// DecodeDone reads an announcement on DoneSubject(logID): a stage's Done
// for that row, of an outcome a stage announces. Anything else is not one
// (ok false): a pub-ack or another JetStream answer a user had the server
// publish on the subject, setting it as a request's reply subject, which
// nats-server checks against no permission, would release the job's lane
// with no outcome, and the row would be handed to its stage again.
func DecodeDone(data []byte, logID int64) (d Done, ok bool) {
	if json.Unmarshal(data, &d) != nil || d.LogID != logID {
		return Done{}, false
	}
	switch d.Outcome {
	case OutcomeProcessed, OutcomeFailed, OutcomeWait:
		return d, true
	}
	return Done{}, false
}

// JobFirstSeen, on SubjectJobFirstSeen, asks the new-job pipeline (§6) to
// run for a job seen for the first time. Its Nats-Msg-Id is FirstSeenMsgID.
type JobFirstSeen struct {
	JobID string `json:"jobId"`
	// LogID is the event that saw the job first (0 when none did).
	LogID int64 `json:"logId,omitempty"`
}

// FirstSeenMsgID makes the hand-off of one job's first sight publish once.
func FirstSeenMsgID(jobID string) string { return "firstseen:" + jobID }

// SyncQueued, on SubjectSyncQueued, hands the drains the ethSyncQueue items
// a transaction queued for a job, so they are synced within seconds rather
// than at the drains' backstop pass. Its Nats-Msg-Id is SyncQueuedMsgID.
type SyncQueued struct {
	JobID string `json:"jobId"`
	// Objects are the items' objectName: the mirror tables to sync
	// (primeAllocations, …).
	Objects []string `json:"objects"`
	// Source says who queued them, for the logs ("firstseen", "triage-invite",
	// "backstop").
	Source string `json:"source,omitempty"`
	// Priority is the class of the drains' Prime calls for them, as
	// prime.Priority names it ("drain", "sweep"); empty is "drain". The
	// jobs-by-date backstop's are "sweep".
	Priority string `json:"priority,omitempty"`
}

// SyncQueuedMsgID makes a hand-off of a job's queued objects publish once
// for what queued them: the pipeline's first sight, say, or a triage
// invite's contacts (key the invite's id).
func SyncQueuedMsgID(source, key string) string { return "syncqueued:" + source + ":" + key }

// MakesafeDetect, on SubjectMakesafeDetect, asks for make-safe detection of a
// job: spMakesafeUpsertPhoneCallFromPrimeJob @JobId, @QueueMakeAllocationChecks.
type MakesafeDetect struct {
	JobID string `json:"jobId"`
	// QueueChecks is @QueueMakeAllocationChecks: on from the new-job
	// pipeline (§6), off from create-allocation (§5.5).
	QueueChecks bool `json:"queueChecks"`
	// Source says who asked, for the logs ("firstseen", "ethPrimeWebhookLog:123").
	Source string `json:"source,omitempty"`
}

// SourceFirstSeen is the Source of the make-safe detection the new-job
// pipeline asks for (§6 step 2).
const SourceFirstSeen = "firstseen"

// FirstSeenDetectMsgID is the Nats-Msg-Id of a job's make-safe hand-off
// from the new-job pipeline: one a job, so a rerun cannot hand it off twice.
// spEthProcessNewPrimeJob writes the same one for a caller in SQL.
func FirstSeenDetectMsgID(jobID string) string { return "makesafe.detect:firstseen:" + jobID }

// PlanRequested, on SubjectOptimoPlan, asks optimo-plan to plan every
// NotPlanned date. The portals publish it: {"source":"AdminPortal","reason":"booking"}.
type PlanRequested struct {
	Source string `json:"source"`
	Reason string `json:"reason,omitempty"`
}

// CreateRequested, on SubjectOptimoCreate, asks optimo-create to turn the
// appointment and work-order queues into OptimoRoute orders (§5.2 step 5).
type CreateRequested struct {
	Source string `json:"source"`
	Reason string `json:"reason,omitempty"`
}

// SMSSendRequested, on SubjectSMSSend, asks for the queued SMS messages to
// be sent now.
type SMSSendRequested struct {
	Source string `json:"source"`
}

// DecodeRunRequest reads a request for a run (PlanRequested,
// CreateRequested, SMSSendRequested): JSON that names its source, as every
// publisher's does. Anything else is an error, for the stage to drop: a
// pub-ack or another JetStream answer a user had the server publish on the
// subject, setting it as a request's reply subject (nats-server checks no
// reply subject against permissions), is not a request.
func DecodeRunRequest(data []byte) (source, reason string, err error) {
	var r CreateRequested
	if err := json.Unmarshal(data, &r); err != nil {
		return "", "", fmt.Errorf("not a run request: %w", err)
	}
	if r.Source == "" {
		return "", "", errors.New("not a run request: no source")
	}
	return r.Source, r.Reason, nil
}

// The ensure-job endpoints of job-mirror (a NATS micro service, see `nats
// micro ls`): make sure a job is mirrored before a child row is written
// (§4.3), or because a new-job email named it (§7). One subject a path a
// job comes by, and each published by one role alone (Role.Requests, which
// pkg/natsauth makes the users' permissions): the subject is what job-mirror
// believes of a request, so the path its first-sight record names (via), the
// class of its Prime call and the log row it records come from the subject,
// and for a child event from the webhook log, never from the body. Request
// EnsureJobRequest, reply EnsureJobReply.
const (
	// SubjectEnsureJobEvent is child-mirror's, for a webhook's child event:
	// the request names the event's log row, which job-mirror reads.
	SubjectEnsureJobEvent = "primeflow.jobmirror.ensure.event"
	// SubjectEnsureJobSweep is child-mirror's appointment sweep's (§8.1).
	SubjectEnsureJobSweep = "primeflow.jobmirror.ensure.sweep"
	// SubjectEnsureJobDrain is child-mirror's ethSyncQueue drains', for an
	// item whose job the mirror lacks (§6).
	SubjectEnsureJobDrain = "primeflow.jobmirror.ensure.drain"
	// SubjectEnsureJobEmail is mail-intake's, for a new-job email's JobID (§7).
	SubjectEnsureJobEmail = "primeflow.jobmirror.ensure.email"
)

// EnsureJobRequest asks job-mirror to make sure a job is in primeJobs. It
// names the job and says nothing about it: job-mirror asks Prime for a job
// the mirror lacks, whoever asks.
type EnsureJobRequest struct {
	// JobID is the job's GUID, or empty when only NumericRef is known.
	JobID      string `json:"jobId,omitempty"`
	NumericRef int64  `json:"numericRef,omitempty"`
	// LogID is the log row of the child event the request is made for:
	// required on SubjectEnsureJobEvent, refused on the others.
	LogID int64 `json:"logId,omitempty"`
}

// EnsureJobReply says what job-mirror did. Error is set when it failed;
// RetryAfterMS when Prime's rate limit stopped it, or Prime did not answer
// (PrimeUnavailable: a 5xx or no answer that is not the job's, pkg/prime):
// either way the caller waits, no attempt.
type EnsureJobReply struct {
	JobID            string `json:"jobId,omitempty"`
	WasMirrored      bool   `json:"wasMirrored"`
	FirstSight       bool   `json:"firstSight"`
	Error            string `json:"error,omitempty"`
	NotFound         bool   `json:"notFound,omitempty"`
	RetryAfterMS     int64  `json:"retryAfterMs,omitempty"`
	PrimeUnavailable bool   `json:"primeUnavailable,omitempty"`
}

// SubjectSweepAppointments is the request/reply endpoint of child-mirror (a
// NATS micro service, see `nats micro ls`): the parent OptimoRoute flow's
// "Prime Sync Appointments by Date" and "Prime Sync Contacts by Date"
// (§8.1), which optimo-create asks for before it drains the queues. Request
// SweepRequest, reply SweepReply.
const SubjectSweepAppointments = "primeflow.childmirror.sweep"

// SweepRequest asks child-mirror to mirror every appointment Prime has
// starting in [FromUTC, ToUTC) that the mirror lacks at its version.
type SweepRequest struct {
	FromUTC time.Time `json:"fromUTC"`
	ToUTC   time.Time `json:"toUTC"`
	// TimeoutMS is how long the caller waits for the reply: the sweep stops
	// in time to answer with what it did. Zero leaves it to child-mirror.
	TimeoutMS int64 `json:"timeoutMs,omitempty"`
	// Source says who asked, for the logs.
	Source string `json:"source,omitempty"`
	// OrderRun asks child-mirror to ask for an order run
	// (SubjectOptimoCreate) once the sweep is over, so that what it saved
	// becomes OptimoRoute orders now: what a sweep by hand wants.
	// optimo-create's own sweep, which its run drains after, leaves it off.
	OrderRun bool `json:"orderRun,omitempty"`
}

// SweepReply says what a sweep did. Error is set when it stopped before the
// end of the list (Prime's list failed, Prime's rate limit, its deadline);
// RetryAfterMS when it was Prime's rate limit. Per-appointment failures do
// not stop it: they are counted in Failed.
type SweepReply struct {
	// Listed is how many appointments Prime listed in the range.
	Listed int `json:"listed"`
	// Saved is how many were written to primeAppointments.
	Saved int `json:"saved"`
	// Unchanged is how many the mirror already held at their version or a
	// newer one (no Prime call was made for them).
	Unchanged int `json:"unchanged"`
	// JobsEnsured is how many jobs were made sure of in the mirror (§4.3).
	JobsEnsured int `json:"jobsEnsured"`
	// ContactJobs is how many jobs had their contacts synced (§5.2 step 4).
	ContactJobs int `json:"contactJobs"`
	// Failed is how many appointments could not be mirrored.
	Failed       int    `json:"failed"`
	Error        string `json:"error,omitempty"`
	RetryAfterMS int64  `json:"retryAfterMs,omitempty"`
	// OrderRunRequested: the sweep asked for an order run (OrderRun).
	OrderRunRequested bool `json:"orderRunRequested,omitempty"`
}

// LogValue logs a reply as its counts, and its error and wait only when it
// has them, rather than as a Go struct.
func (r SweepReply) LogValue() slog.Value {
	attrs := []slog.Attr{slog.Int("listed", r.Listed), slog.Int("saved", r.Saved), slog.Int("unchanged", r.Unchanged),
		slog.Int("jobsEnsured", r.JobsEnsured), slog.Int("contactJobs", r.ContactJobs), slog.Int("failed", r.Failed)}
	if r.Error != "" {
		attrs = append(attrs, slog.String("error", r.Error))
	}
	if r.RetryAfterMS > 0 {
		attrs = append(attrs, slog.Duration("retryAfter", time.Duration(r.RetryAfterMS)*time.Millisecond))
	}
	if r.OrderRunRequested {
		attrs = append(attrs, slog.Bool("orderRunRequested", true))
	}
	return slog.GroupValue(attrs...)
}

// SubjectSweepJobs is the request/reply endpoint of job-mirror's jobs-by-date
// backstop ("Prime Sync Jobs by Date", §7): sweep now, besides the schedule
// (JOBS_SWEEP_EVERY). Request JobsSweepRequest, reply JobsSweepReply.
const SubjectSweepJobs = "primeflow.jobmirror.sweepjobs"

// JobsSweepRequest asks job-mirror for a jobs-by-date sweep.
type JobsSweepRequest struct {
	// Source says who asked, for the logs ("request" when empty).
	Source string `json:"source,omitempty"`
}

// JobsSweepReply says what a jobs-by-date sweep did. Error is set when it
// stopped before the end of the list (RetryAfterMS when Prime's rate limit
// stopped it); the watermark then stays where it was, and the next sweep
// goes on from the last page all of whose jobs went through.
type JobsSweepReply struct {
	// FromUTC is where the list started: the watermark less the overlap,
	// or the list of the sweep cut short that this one goes on with.
	FromUTC time.Time `json:"fromUTC"`
	// FromPage is the page this sweep went on from, that of a sweep cut
	// short; 0 when it started at the first.
	FromPage int `json:"fromPage,omitempty"`
	// WatermarkUTC is where the next sweep starts from, less the overlap.
	WatermarkUTC time.Time `json:"watermarkUTC"`
	Pages        int       `json:"pages"`
	Listed       int       `json:"listed"`
	// Unchanged were mirrored at that version already, their objects
	// queued for it (no write, no call).
	Unchanged int `json:"unchanged"`
	// Updated were mirrored, but their version moved since the mirror's
	// (the primeJobs row, or the objects last queued): written, and their
	// objects queued again (§6 step 1), drained in the sweeps' class.
	Updated int `json:"updated"`
	// FirstSight were new to the mirror: first sight and the pipeline.
	FirstSight   int    `json:"firstSight"`
	Failed       int    `json:"failed"`
	Error        string `json:"error,omitempty"`
	RetryAfterMS int64  `json:"retryAfterMs,omitempty"`
}
