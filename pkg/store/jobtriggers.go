package store

import (
	"context"
	"strconv"
	"time"
)

// ClientWIPStatusChange is the trigger type a job status change queues for
// Client WIP (§5.1 step 5).
const ClientWIPStatusChange = "StatusChange"

// ClientWIPTrigger is a row of ethClientWIPTrigger: a request for Client WIP
// to re-evaluate a job. The table is not given by the spec; sql/README.md
// writes down the reading.
type ClientWIPTrigger struct {
	ID          int64
	JobID       string
	TriggerType string
	// Source says what asked: "ethPrimeWebhookLog:{id}" for a webhook.
	Source       string
	QueuedUTC    time.Time
	ProcessedUTC time.Time
}

// ClientWIPTriggers is the Client WIP trigger queue (§5.1 step 5).
type ClientWIPTriggers interface {
	// QueueClientWIPStatusChange queues a StatusChange trigger for the job
	// from source and reports whether it queued one: a trigger with the same
	// job and source is never queued twice, so a replayed event queues nothing.
	QueueClientWIPStatusChange(ctx context.Context, jobID, source string) (queued bool, err error)
	// ListClientWIPTriggers returns a job's triggers, oldest first.
	ListClientWIPTriggers(ctx context.Context, jobID string) ([]ClientWIPTrigger, error)
}

// ClientWIPSource is the trigger source of a webhook log row (§5.1 step 5).
func ClientWIPSource(logID int64) string {
	return "ethPrimeWebhookLog:" + strconv.FormatInt(logID, 10)
}

// TriageInvite is a row of ethTriageInviteQueue: an invite to the customer's
// triage, waiting for the triage invite sender (TriageInvite spec) to send it
// and stamp SentUTC. The table is not given by the spec; sql/README.md writes
// down the reading.
type TriageInvite struct {
	ID    int64
	JobID string
	// StatusID is the job's mirrored status when the invite was queued.
	StatusID  string
	QueuedUTC time.Time
	SentUTC   time.Time
}

// Pending reports whether the invite has still to be sent.
func (t TriageInvite) Pending() bool { return t.SentUTC.IsZero() }

// TriageInvites is the triage invite queue (§5.1 step 6).
type TriageInvites interface {
	// QueueTriageInvite is ITaskData.QueueTriageInvite(jobId,
	// InitialContactMadeStatusId): it reads the job's status from primeJobs
	// and queues an invite when that status is initialContactMadeStatusID
	// and the job has no invite pending. It reports whether it queued one.
	// An empty status id queues nothing.
	QueueTriageInvite(ctx context.Context, jobID, initialContactMadeStatusID string) (queued bool, err error)
	// ListTriageInvites returns a job's invites, oldest first.
	ListTriageInvites(ctx context.Context, jobID string) ([]TriageInvite, error)
}
