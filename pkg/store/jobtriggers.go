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

// ArrivalSlack is how far apart Prime may stamp one status change's entry
// in the job's status history and the job's updatedAt (both Prime's clock,
// to the second): a status-history entry more than ArrivalSlack after the
// job as an invite saw it (TriageInvite.JobUpdatedAt) is a later change, one
// within it the arrival the invite answers. Assumed: Prime documents
// neither stamp (the jobs-by-date backstop relies on a status change moving
// updatedAt, too). sql/mssql/061_triage_invites.sql writes it in seconds.
const ArrivalSlack = time.Minute

// TriageInvite is a row of ethTriageInviteQueue: an invite to the customer's
// triage (§3.1, §5.1 step 6) and how its sending went, a send queue's row
// (SendState) that job-mirror's invite sender claims, posts and records as
// smsQueue's are. An invite answers one status change: the job's arrival in
// the status, keyed on its status-history entry where the mirror holds it,
// until the mirror writes the job in another status or its status history
// shows a later change (StatusLeftUTC). primeflow queues an invite only for
// a job with no open one, so the same change never invites twice, and a
// return to the status later may. The table is not given by the spec;
// sql/README.md writes down the reading.
type TriageInvite struct {
	ID    int64
	JobID string
	// StatusID is the job's mirrored status when the invite was queued.
	StatusID string
	// JobVersion is the mirrored job's version when the invite was queued:
	// the status change it answers was seen at that version or before.
	JobVersion int64
	// StatusHistoryID is the job's status-history entry (Prime's record of
	// its arrival in StatusID) the invite answers, when the mirror held it
	// when the invite was queued; empty otherwise.
	StatusHistoryID string
	// JobUpdatedAt is Prime's time of the job as the invite saw it: the
	// mirrored job's updatedAt when it was queued, or its entry's createdAt
	// when later. The arrival it answers came no later; a status-history
	// entry more than ArrivalSlack after it is a later change. Zero when
	// Prime gave neither.
	JobUpdatedAt time.Time
	QueuedUTC    time.Time
	// StatusLeftUTC is when the mirror first saw the job in another status
	// than StatusID after the invite was queued: the change it answers is
	// over. Zero while the job is still in it.
	StatusLeftUTC time.Time
	// SentUTC is when the endpoint accepted it; zero while it is not sent.
	SentUTC time.Time
	State   SendState
	// Attempts counts the claims made to send it (a claim given back
	// unused, or deferred, does not count).
	Attempts int
	// NextAttemptUTC is when a Queued invite is due.
	NextAttemptUTC time.Time
	// ClaimedUntilUTC is when a claim in state Sending lapses.
	ClaimedUntilUTC time.Time
	LastError       string
	FailedUTC       time.Time
	UpdatedUTC      time.Time
	// Payload is the body posted for it, JSON, fixed by the first claim that
	// could build it and posted as it is on every attempt; empty until then.
	Payload string
}

// Pending reports whether the invite has still to be sent: Queued or
// Sending, or Failed and waiting for a person (not Dismissed by one).
func (t TriageInvite) Pending() bool { return t.SentUTC.IsZero() && t.State != SendDismissed }

// InviteListState selects the invites ListTriageInviteQueue returns (and
// the messages and receipts of ListSMSQueue and ListEmailReceipts).
type InviteListState int

// The invites to list.
const (
	// InvitesAll lists every invite.
	InvitesAll InviteListState = iota
	// InvitesPending lists those not sent: Queued, Sending and Failed (not
	// those a person dismissed).
	InvitesPending
	// InvitesFailed lists the Failed ones, which wait for a person.
	InvitesFailed
)

// TriageInvites is the triage invite queue (§3.1, §5.1 step 6). Its claims
// and outcomes are SMSQueue's, with the same guarantees (a claim named by
// the invite's ID and Attempts; an outcome for a claim it no longer holds
// changes nothing and is ErrClaimLost).
type TriageInvites interface {
	// QueueTriageInvite is ITaskData.QueueTriageInvite(jobId,
	// InitialContactMadeStatusId): it reads the job's status from primeJobs
	// and queues an invite when that status is initialContactMadeStatusID
	// and the job has no open invite (one whose status change is not over:
	// sent, pending or Failed, it answered this change), so a replayed or
	// repeated event invites nobody twice. It first closes (StatusLeftUTC)
	// an open invite whose change the mirror shows over, as every write of
	// the job (UpsertJob) and of its status history (ReplaceJobStatusHistory)
	// does: the job mirrored in another status, or an entry of its status
	// history more than ArrivalSlack after the job as the invite saw it. The
	// invite answers the job's latest status-history entry (StatusHistoryID)
	// when that is its arrival in the status and no invite answers it yet.
	// It reports whether it queued one. An empty status id queues nothing.
	QueueTriageInvite(ctx context.Context, jobID, initialContactMadeStatusID string) (queued bool, err error)
	// ListTriageInvites returns a job's invites, oldest first.
	ListTriageInvites(ctx context.Context, jobID string) ([]TriageInvite, error)
	// ListTriageInviteQueue returns up to limit invites in the selected
	// state, oldest first (limit 0: 100).
	ListTriageInviteQueue(ctx context.Context, state InviteListState, limit int) ([]TriageInvite, error)
	// ClaimTriageInvites claims up to limit invites due at now, oldest
	// first, as ClaimSMS claims messages.
	ClaimTriageInvites(ctx context.Context, now time.Time, lease time.Duration, maxAttempts, limit int) ([]TriageInvite, error)
	// SetTriageInviteSent marks an invite Sent and stamps SentUTC, if it
	// still holds the claim attempt names.
	SetTriageInviteSent(ctx context.Context, id int64, attempt int, at time.Time) error
	// SetTriageInviteLogged marks an invite Logged, as SetTriageInviteSent
	// marks one Sent: a sender that only logs handed it on, and it was never
	// sent.
	SetTriageInviteLogged(ctx context.Context, id int64, attempt int, at time.Time) error
	// SetTriageInviteFailed records a failed send (cut to MaxStatusLen)
	// against its claim: Queued again from retryAt, or Failed when retryAt
	// is zero.
	SetTriageInviteFailed(ctx context.Context, id int64, attempt int, cause string, retryAt, at time.Time) error
	// ReleaseTriageInvite gives back, unused, a claim that posted nothing.
	ReleaseTriageInvite(ctx context.Context, id int64, attempt int, at time.Time) error
	// DeferTriageInvite gives back a claim that posted nothing the endpoint
	// took because the invite cannot be sent yet (its primary contact not
	// mirrored, the endpoint not taking posts), as DeferSMS does.
	DeferTriageInvite(ctx context.Context, id int64, attempt int, cause string, until, at time.Time) error
	// SetTriageInvitePayload fixes the body to post for an invite, if the
	// claim attempt names still holds it and none is fixed yet (else
	// ErrClaimLost).
	SetTriageInvitePayload(ctx context.Context, id int64, attempt int, payload string) error
	// GetTriageInvite returns one invite, or ErrNotFound.
	GetTriageInvite(ctx context.Context, id int64) (TriageInvite, error)
	// NextTriageInviteDue returns when the next Queued invite is due or the
	// next claim lapses; ok is false when nothing waits.
	NextTriageInviteDue(ctx context.Context) (at time.Time, ok bool, err error)
	// CountTriageInvites counts the invites in each state.
	CountTriageInvites(ctx context.Context) (map[SendState]int, error)
	// OldestTriageInviteWaiting returns when the oldest invite not sent
	// yet (Queued or Sending, no SentUTC) was queued; ok is false when none
	// is.
	OldestTriageInviteWaiting(ctx context.Context) (queued time.Time, ok bool, err error)
}
