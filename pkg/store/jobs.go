package store

import (
	"context"
	"time"
)

// Job is a row of primeJobs (§5.1): a Prime job's main attributes as
// columns and its raw attributes JSON. GUIDs are lower-case canonical text;
// zero times and empty strings are NULL.
type Job struct {
	JobID         string
	JobNumber     string
	StatusID      string
	ClientID      string
	AssignedID    string
	EstimatorID   string
	CaseManagerID string
	SupervisorID  string
	DivisionID    string
	Region        string
	Description   string
	IncidentDate  time.Time
	CreatedAt     time.Time
	UpdatedAt     time.Time
	Version       int64
	PrimeURL      string
	// AuthorisedTotalIncludingTax is a decimal as text ("700.80").
	AuthorisedTotalIncludingTax string
	AddressLine1                string
	AddressLine2                string
	Suburb                      string
	State                       string
	Postcode                    string
	PrimaryContactID            string
	// Attributes is Prime's attributes object exactly as it came.
	Attributes string
	// SyncedUTC is when primeflow last wrote the row: UpsertJob stamps it and
	// ignores the value given.
	SyncedUTC time.Time
	// AskedUTC is, for UpsertJob, when the Prime call whose answer the job
	// is went out, less the hosts' clock skew (mirror.Job); zero when not
	// known (a job in a list, or handed on). It is not stored.
	AskedUTC time.Time
}

// At is the job's version as the mirror holds it.
func (j Job) At() JobVersion { return JobVersion{Version: j.Version, UpdatedAt: j.UpdatedAt} }

// Jobs is the job mirror, primeJobs.
type Jobs interface {
	// UpsertJob inserts the job or updates the row with its id
	// (spPrimeUpsertJob) and reports whether it inserted. Two upserts of a
	// new job at once report created for exactly one of them. A row whose
	// stored version is newer than the job's is left as it is: a late
	// writer never rolls the mirror back. But not a row written before the
	// job's AskedUTC: Prime's versions only grow, so an answer to a call
	// sent after the row was written that gives a lower version says the
	// row's was never Prime's (a forged one, issue 27), and would otherwise
	// hold the row for good. In the same transaction, the job's open triage
	// invites whose change the write shows over are closed
	// (TriageInvites.QueueTriageInvite), whichever path wrote it.
	UpsertJob(ctx context.Context, job Job) (created bool, err error)
	// GetJob returns the mirrored job; found is false when primeJobs has no
	// row for it.
	GetJob(ctx context.Context, jobID string) (job Job, found bool, err error)
}

// FirstSeen is a row of primeflowJobFirstSeen: the first sight of a job and
// how far the new-job pipeline (§6) has got with it. A primeflow addition
// (sql/README.md).
type FirstSeen struct {
	JobID string
	// LogID is the webhook log row that saw the job first; 0 when none did.
	LogID        int64
	FirstSeenUTC time.Time
	// PipelineCompletedUTC is when the new-job pipeline finished; zero while
	// it is pending.
	PipelineCompletedUTC time.Time
	// PipelineAttempts counts the pipeline's failed attempts.
	PipelineAttempts int
	// PipelineStatus is the outcome, or the last error (MaxStatusLen).
	PipelineStatus string
	// Via is the path that claimed the first sight (ViaWebhook, ViaEmail,
	// ViaBackstop …); empty when the claimer did not say.
	Via string
}

// The paths by which a job reaches primeflow (§7.1): FirstSeen.Via, and
// the coverage report's columns.
const (
	// ViaWebhook: a webhook event (FirstSeen.LogID is its log row).
	ViaWebhook = "webhook"
	// ViaEmail: Prime's new-job email (§7), through the mail intake.
	ViaEmail = "email"
	// ViaBackstop: the jobs-by-date sweep ("Prime Sync Jobs by Date").
	ViaBackstop = "backstop"
	// ViaAppointmentSweep: the appointment sweep of an order run (§8.1).
	ViaAppointmentSweep = "appointment-sweep"
	// ViaManual: a first-sight hand-off published by hand.
	ViaManual = "manual"
)

// Completed reports whether the new-job pipeline has finished for the job.
func (f FirstSeen) Completed() bool { return !f.PipelineCompletedUTC.IsZero() }

// FirstSeenState selects first-sight rows by the pipeline's progress.
type FirstSeenState int

// First-sight states for ListFirstSeen.
const (
	// FirstSeenAny selects every row.
	FirstSeenAny FirstSeenState = iota
	// FirstSeenPending selects rows whose pipeline has not finished.
	FirstSeenPending
	// FirstSeenFailed selects pending rows with at least one failed attempt.
	FirstSeenFailed
	// FirstSeenCompleted selects rows whose pipeline has finished.
	FirstSeenCompleted
)

// FirstSeens records each job's first sight, so the new-job pipeline runs
// once per job (§6: "it fires exactly once").
type FirstSeens interface {
	// ClaimFirstSeen records the first sight of a job — by a log row (0 for
	// none) and a path (a Via… value) — and reports whether this call made
	// the record: only the first claim for a job wins, however many are made
	// at once.
	ClaimFirstSeen(ctx context.Context, jobID string, logID int64, via string) (claimed bool, err error)
	// GetFirstSeen returns a job's first-sight row; found is false when the
	// job was never claimed.
	GetFirstSeen(ctx context.Context, jobID string) (row FirstSeen, found bool, err error)
	// CompleteFirstSeen stamps the job's pipeline finished with status
	// (cut to MaxStatusLen). Completing a row again keeps its first stamp.
	// A job never claimed is ErrNotFound.
	CompleteFirstSeen(ctx context.Context, jobID, status string) error
	// FailFirstSeen records a failed attempt of the job's pipeline and its
	// error (cut to MaxStatusLen) and returns the attempts so far. A job
	// never claimed is ErrNotFound.
	FailFirstSeen(ctx context.Context, jobID, cause string) (attempts int, err error)
	// ListFirstSeen returns the rows in a state, oldest first sight first,
	// at most limit (0 means 100).
	ListFirstSeen(ctx context.Context, state FirstSeenState, limit int) ([]FirstSeen, error)
}
