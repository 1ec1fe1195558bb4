package store

import (
	"context"
	"time"
)

// Overview is the database's part of the pipeline's state at a glance
// (primectl status, bin/primeflow's page): what an operator looks at
// first, each figure one query.
type Overview struct {
	// The webhook log's rows by state (LogFilter's): queued under the
	// attempt cap, capped, processed; and those the relay has still to
	// publish.
	Unprocessed, Capped, Processed, Unpublished int
	// OldestUnprocessed is the oldest queued row (its ID, ReceivedUTC,
	// EventAction, ProcessAttempts); ID 0 when none is queued.
	OldestUnprocessed WebhookLogRow
	// Failing is, for each eventAction, the newest unprocessed row with a
	// failed attempt (ID, ReceivedUTC, EventAction, ProcessAttempts and
	// ProcessStatus, its last error), by action.
	Failing []WebhookLogRow
	// The outbox's hand-offs not published yet, and when the oldest was
	// written.
	OutboxUnpublished int
	OutboxOldestUTC   time.Time
	// SMS counts smsQueue by state; SMSLastError is the newest error a
	// send recorded on a message not Sent, nor Dismissed by a person (with
	// its message's UpdatedUTC), "" when none.
	SMS             map[SendState]int
	SMSLastError    string
	SMSLastErrorUTC time.Time
	// FirstSeenFailing counts the jobs whose new-job pipeline has failed
	// and not completed since; FirstSeenLastError is the newest of their
	// errors, of the job FirstSeenLastErrorJob.
	FirstSeenFailing      int
	FirstSeenLastError    string
	FirstSeenLastErrorJob string
	// InvitesPending counts the triage invites queued and not sent (nor
	// dismissed by a person); InvitesFailed those of them given up on
	// (Failed), which wait for a person.
	InvitesPending, InvitesFailed int
	// SMSOldestWaitingUTC and InvitesOldestWaitingUTC are when the oldest
	// message, and triage invite, not sent yet (Queued or Sending) was
	// queued; zero when none waits. A row waiting out an endpoint that is
	// not taking posts uses no attempt and fails nothing: its wait shows
	// here.
	SMSOldestWaitingUTC     time.Time
	InvitesOldestWaitingUTC time.Time
	// EmailsFailed counts the new-job emails whose receipt is Failed (§7:
	// moved to MAIL_FAILED_FOLDER after their last attempt), which wait for
	// a person (not those a person dismissed); EmailLastFailed is the newest of them (by its receipt's
	// UpdatedUTC: Subject, ReceivedUTC, LastError, Attempts, MovedTo …).
	EmailsFailed    int
	EmailLastFailed EmailReceipt
	// EmailsRejected counts the emails refused unread as not Prime's
	// (EmailRejected, moved to MAIL_FAILED_FOLDER): junk, which needs
	// nobody.
	EmailsRejected int
	// SyncQueueRecentJobs counts the jobs with an ethSyncQueue item queued
	// at or after OverviewQuery.SyncQueuedSince: within the drains' grace,
	// their hand-offs are kept for a later pass when Prime has nothing yet
	// (§7, §9). 0 when SyncQueuedSince is zero.
	SyncQueueRecentJobs int
	// PlanDates counts optimoRoutePlan's dates by PlanStatus.
	PlanDates []PlanDates
	// OrdersFailing counts the orders whose last write OptimoRoute refused
	// (ErrorText); OrderLastError is the newest refusal, of OrderLastErrorNo.
	OrdersFailing    int
	OrderLastError   string
	OrderLastErrorNo string
	// PlanLastError is the newest ErrorText of a plan date, of
	// PlanLastErrorDate ("" when none).
	PlanLastError     string
	PlanLastErrorDate string
}

// PlanDates is how many dates are in one PlanStatus, and the earliest.
type PlanDates struct {
	Status   string
	Dates    int
	Earliest string
}

// OverviewQuery is what an Overview's figures that depend on the reader's
// settings are read with.
type OverviewQuery struct {
	// SyncQueuedSince is where SyncQueueRecentJobs starts: now less the
	// drains' SYNC_DRAIN_EMPTY_GRACE. Zero counts nothing.
	SyncQueuedSince time.Time
}

// Status reads the Overview.
type Status interface {
	// StatusOverview reads every figure of the Overview. It only reads.
	StatusOverview(ctx context.Context, q OverviewQuery) (Overview, error)
}
