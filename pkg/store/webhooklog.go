package store

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"
)

// Defaults of spPrimeGetWebhookLogUnprocessed (§3).
const (
	// DefaultTop is how many unprocessed rows one claim returns.
	DefaultTop = 50
	// MaxAttempts is the attempt cap: a row that failed this many times is not
	// retried (§3, §10.6: the service's cap must equal the proc's default).
	MaxAttempts = 5
	// MaxStatusLen is the length processStatus is truncated to (§3).
	MaxStatusLen = 500
)

// WebhookLogRow is one row of ethPrimeWebhookLog: a webhook as received (§2)
// and its processing state (§3). Zero times are NULL.
type WebhookLogRow struct {
	ID              int64
	ReceivedUTC     time.Time
	EventAction     string
	JobID           string // the job's GUID once known; empty is NULL
	Payload         string
	Headers         string
	RemoteIP        string
	IsAuthenticated bool
	ProcessedUTC    time.Time
	ProcessAttempts int
	ProcessStatus   string

	// PublishedUTC is when the row was last published to JetStream; NULL
	// means the relay still has to publish it (a primeflow addition, sql/README.md).
	PublishedUTC time.Time
	// ReplayCount counts resets for replay; it makes each replay's message id new.
	ReplayCount int
}

// Processed reports whether the row is no longer queued.
func (r WebhookLogRow) Processed() bool { return !r.ProcessedUTC.IsZero() }

// Capped reports whether the row stays unprocessed because it failed
// MaxAttempts times (§3 attempt cap).
func (r WebhookLogRow) Capped() bool { return !r.Processed() && r.ProcessAttempts >= MaxAttempts }

// NewWebhookLogRow is what ingest stores for one webhook (§2).
type NewWebhookLogRow struct {
	ReceivedUTC     time.Time
	EventAction     string
	JobID           string
	Payload         string
	Headers         string
	RemoteIP        string
	IsAuthenticated bool
}

// LogState selects rows by processing state.
type LogState int

// Row states for LogFilter.
const (
	AnyState    LogState = iota
	Unprocessed          // queued: not processed, under the attempt cap
	Capped               // not processed, at or over the attempt cap
	Processed
)

// LogFilter selects log rows for listing and replay. Zero fields do not filter.
type LogFilter struct {
	IDs    []int64
	Action string
	JobID  string    // in lower case, as the adapters keep a job's GUID
	From   time.Time // receivedUTC >= From
	To     time.Time // receivedUTC < To
	State  LogState
	// Unpublished selects rows the relay has still to publish.
	Unpublished bool
	Limit       int // rows returned by ListWebhookLog, oldest first; 0 means 100
	// Newest makes ListWebhookLog return the newest rows, newest first.
	Newest bool
}

// WebhookLog is the log of received webhooks, which is also the work queue (§3).
type WebhookLog interface {
	// InsertWebhookLog inserts one row and returns its id (spPrimeInsertWebhookLog).
	InsertWebhookLog(ctx context.Context, row NewWebhookLogRow) (int64, error)
	// InsertWebhookLogs inserts rows in one transaction and returns their ids
	// in order: a bulk load (a backlog, an import) in one durable commit.
	InsertWebhookLogs(ctx context.Context, rows []NewWebhookLogRow) ([]int64, error)
	// GetWebhookLog returns one row, or ErrNotFound.
	GetWebhookLog(ctx context.Context, id int64) (WebhookLogRow, error)
	// GetWebhookLogUnprocessed returns the oldest unprocessed rows under the
	// attempt cap (spPrimeGetWebhookLogUnprocessed); top and maxAttempts of 0
	// mean DefaultTop and MaxAttempts.
	GetWebhookLogUnprocessed(ctx context.Context, top, maxAttempts int) ([]WebhookLogRow, error)
	// SetWebhookLogProcessed stamps the row processed with status, and writes
	// jobID only when it is not empty (spPrimeSetWebhookLogProcessed).
	SetWebhookLogProcessed(ctx context.Context, id int64, jobID, status string) error
	// SetWebhookLogProcessedIfUnprocessed is SetWebhookLogProcessed on a row
	// still queued only (spPrimeSetWebhookLogProcessed @OnlyIfUnprocessed = 1):
	// written is false, and nothing changes, when the row is already
	// processed. A stage commits through it, so a second run of one event
	// rolls back instead of committing its effects twice; a row reset for
	// replay is queued again and is written as usual.
	SetWebhookLogProcessedIfUnprocessed(ctx context.Context, id int64, jobID, status string) (written bool, err error)
	// IncrementWebhookLogAttempt records a failed attempt and its error and
	// leaves the row queued; jobID is written only when not empty
	// (spPrimeIncrementWebhookLogAttempt @OnlyIfUnprocessed = 1). It returns
	// the attempts so far, or ErrAlreadyProcessed, with nothing written,
	// when the row is processed: a run of its event that fails after
	// another run finished it must not mark it failed.
	IncrementWebhookLogAttempt(ctx context.Context, id int64, jobID, status string) (int, error)

	// GetWebhookLogUnpublished returns rows never published (or reset for
	// replay) with an id above afterID that were received before the given
	// time, oldest first: the relay pages on with the last id it saw, so a
	// row it cannot publish does not come back on every page.
	GetWebhookLogUnpublished(ctx context.Context, afterID int64, receivedBefore time.Time, limit int) ([]WebhookLogRow, error)
	// SetWebhookLogPublished records that rows were published.
	SetWebhookLogPublished(ctx context.Context, ids []int64, at time.Time) error
	// ResetWebhookLog queues the selected rows again for replay: not processed,
	// no attempts, not published, ReplayCount + 1. It returns how many rows it reset.
	ResetWebhookLog(ctx context.Context, f LogFilter) (int, error)
	// ListWebhookLog returns the selected rows, oldest first (newest first
	// with f.Newest), at most f.Limit.
	ListWebhookLog(ctx context.Context, f LogFilter) ([]WebhookLogRow, error)
	// CountWebhookLog counts the selected rows.
	CountWebhookLog(ctx context.Context, f LogFilter) (int, error)
}

// JobReferences is the numeric job reference map, ethPrimeJobReference (§4.1).
type JobReferences interface {
	// GetJobIDByReference returns the job GUID a numeric reference maps to;
	// found is false when the reference is unknown (spPrimeGetJobIDbyReference).
	GetJobIDByReference(ctx context.Context, numericReference int64) (jobID string, found bool, err error)
	// SaveJobReference maps a numeric reference to a job when it is not mapped
	// yet and reports whether it inserted; a reference mapped to a different
	// job is ErrReferenceConflict (spPrimeSaveJobReference).
	SaveJobReference(ctx context.Context, numericReference int64, jobID string) (inserted bool, err error)
}

// TruncateStatus cuts a processStatus to MaxStatusLen characters (§3),
// never splitting a UTF-8 sequence.
func TruncateStatus(s string) string { return Truncate(s, MaxStatusLen) }

// Truncate cuts s to max characters, never splitting a UTF-8 sequence.
func Truncate(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	n := 0
	for i := range s {
		if n == max {
			return s[:i]
		}
		n++
	}
	return s
}

// AttemptNotRecorded is what an adapter's IncrementWebhookLogAttempt
// returns when its guarded update wrote nothing: no such row
// (ErrNotFound), or one already processed (ErrAlreadyProcessed).
func AttemptNotRecorded(ctx context.Context, logs interface {
	GetWebhookLog(ctx context.Context, id int64) (WebhookLogRow, error)
}, id int64) error {
	row, err := logs.GetWebhookLog(ctx, id)
	switch {
	case err != nil:
		return err
	case row.Processed():
		return fmt.Errorf("webhook log %d: %w", id, ErrAlreadyProcessed)
	}
	return fmt.Errorf("webhook log %d: the failed attempt was not recorded", id)
}
