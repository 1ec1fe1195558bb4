package store

import (
	"context"
	"time"
)

// JobCoverage is one job of the coverage report (§7.1 "Compare coverage
// for a week"): when each path first saw it. A zero time is a path that
// never did.
type JobCoverage struct {
	JobID     string
	JobNumber string
	// CreatedAt is Prime's createdAt of the job.
	CreatedAt time.Time
	// FirstSeenUTC and Via are primeflow's first-sight claim: when, and
	// which path made it (zero and empty when primeflow made none: the job
	// was mirrored by another writer). FirstAction is the eventAction of
	// the log row that claimed it, when a webhook did.
	FirstSeenUTC time.Time
	Via          string
	FirstAction  string
	// Webhook is the receivedUTC of the job's first webhook log row, and
	// WebhookAction that row's eventAction.
	Webhook       time.Time
	WebhookAction string
	// Email is the receivedDateTime of the job's first new-job email.
	Email time.Time
	// Backstop is when the jobs-by-date sweep first listed the job.
	Backstop time.Time
}

// ActionCoverage is one line of §7.1's coverage check: the webhook events
// of an eventAction, and when the first and the last arrived.
type ActionCoverage struct {
	Action    string
	Events    int
	FirstSeen time.Time
	LastSeen  time.Time
}

// Coverage is what the coverage report reads.
type Coverage interface {
	// ListJobCoverage returns every job Prime created at or after since (a
	// job without createdAt counts from its first sight), oldest first
	// (spPrimeflowJobCoverage).
	ListJobCoverage(ctx context.Context, since time.Time) ([]JobCoverage, error)
	// WebhookActionCoverage is §7.1's coverage query over the log rows
	// received at or after since (zero: the whole log), the latest
	// action first (spPrimeflowWebhookActionCoverage).
	WebhookActionCoverage(ctx context.Context, since time.Time) ([]ActionCoverage, error)
	// CountEmailReceipts counts the receipts of the emails received at or
	// after since (their receivedDateTime, else when the receipt was
	// written) by Outcome; an outcome no receipt has is left out
	// (spPrimeflowCountEmailReceipts).
	CountEmailReceipts(ctx context.Context, since time.Time) (map[string]int, error)
}

// Sweeps is what the scheduled sweeps keep: the watermark they resume from,
// and the backstop's sightings for the coverage report.
type Sweeps interface {
	// GetSweepWatermark returns a sweep's watermark; found is false before
	// its first sweep that finished.
	GetSweepWatermark(ctx context.Context, name string) (watermark time.Time, found bool, err error)
	// SetSweepWatermark moves a sweep's watermark.
	SetSweepWatermark(ctx context.Context, name string, watermark time.Time) error
	// RecordBackstopSeen records the jobs a backstop sweep listed, each the
	// first time only, and returns how many were new.
	RecordBackstopSeen(ctx context.Context, jobIDs []string, at time.Time) (int, error)
}
