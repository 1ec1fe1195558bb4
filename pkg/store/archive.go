package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ArchiveTable names a table whose finished rows primectl archive retires:
// the webhook log and the queues whose rows no mirror reads once they are
// done. Each method of Archive says what "finished before" means in it.
type ArchiveTable string

// The tables an archive holds, in the order it writes them.
const (
	// ArchiveWebhookLog: rows processed, received and processed before T.
	ArchiveWebhookLog ArchiveTable = "ethPrimeWebhookLog"
	// ArchiveSMS: messages Sent or Logged before T, or Dismissed before T
	// (Failed ones wait for a person and stay).
	ArchiveSMS ArchiveTable = "smsQueue"
	// ArchiveTriageInvites: invites Sent or Logged, or Dismissed, before T
	// whose status change is over (StatusLeftUTC): an open invite is what
	// stops a replayed or repeated event inviting the customer twice, so it
	// stays.
	ArchiveTriageInvites ArchiveTable = "ethTriageInviteQueue"
	// ArchiveEmailReceipts: receipts whose message was moved out of
	// MAIL_FOLDER before T and that are done: Processed (and moved to the
	// processed folder), Rejected (refused unread, junk), or Dismissed
	// before T (Failed ones wait for a person and stay; a receipt still in
	// MAIL_FOLDER is the mail intake's).
	ArchiveEmailReceipts ArchiveTable = "PrimeEmailJobRegistered"
)

// ArchiveTables lists every ArchiveTable, in the order an archive holds them.
func ArchiveTables() []ArchiveTable {
	return []ArchiveTable{ArchiveWebhookLog, ArchiveSMS, ArchiveTriageInvites, ArchiveEmailReceipts}
}

// MaxArchiveBatch bounds the rows one Archive call lists, deletes or
// restores, and so the length of its transaction.
const MaxArchiveBatch = 1000

// Archive retires the finished rows of the ArchiveTables into an archive
// file and back (primectl archive, replay --from-archive). Every list and
// delete goes by id, oldest first, at most MaxArchiveBatch rows a call; a
// delete is one short transaction, so ingest's inserts wait for none but
// the batch in hand.
type Archive interface {
	// CountArchivable counts each table's rows finished before before.
	CountArchivable(ctx context.Context, before time.Time) (map[ArchiveTable]int, error)
	// ListArchivableWebhookLog returns up to limit rows of the log
	// finished before before with an id above afterID, oldest first.
	ListArchivableWebhookLog(ctx context.Context, before time.Time, afterID int64, limit int) ([]WebhookLogRow, error)
	// ListArchivableSMS is ListArchivableWebhookLog for smsQueue.
	ListArchivableSMS(ctx context.Context, before time.Time, afterID int64, limit int) ([]SMSMessage, error)
	// ListArchivableTriageInvites is ListArchivableWebhookLog for
	// ethTriageInviteQueue.
	ListArchivableTriageInvites(ctx context.Context, before time.Time, afterID int64, limit int) ([]TriageInvite, error)
	// ListArchivableEmailReceipts is ListArchivableWebhookLog for
	// PrimeEmailJobRegistered.
	ListArchivableEmailReceipts(ctx context.Context, before time.Time, afterID int64, limit int) ([]EmailReceipt, error)
	// DeleteArchived deletes, in one transaction, the rows of table with
	// these ids that are still finished before before, and returns how
	// many: a row changed since it was archived (a log row reset for
	// replay, an email moved back into the folder) stays.
	DeleteArchived(ctx context.Context, table ArchiveTable, before time.Time, ids []int64) (int, error)
	// RestoreWebhookLog puts archived log rows back under their own ids,
	// queued for replay as ResetWebhookLog queues a row (not processed, no
	// attempts, not published, ReplayCount + 1), in one transaction. A row
	// whose id the log holds is left as it is. It returns the ids it
	// restored. A row's id is what a replay's effects are keyed by (the
	// Client WIP trigger's source ethPrimeWebhookLog:{id}, §5.1 step 5), so
	// a restored row replays as the row it was.
	RestoreWebhookLog(ctx context.Context, rows []WebhookLogRow) ([]int64, error)
}

// Matches reports whether f selects r, as ListWebhookLog selects rows (but
// for Limit and Newest): an archived row is chosen for replay with the
// filters replay takes.
func (f LogFilter) Matches(r WebhookLogRow) bool {
	// Both backends keep times to the millisecond, a filter's too.
	from, to := f.From.Truncate(time.Millisecond), f.To.Truncate(time.Millisecond)
	switch {
	case len(f.IDs) > 0 && !slices.Contains(f.IDs, r.ID),
		f.Action != "" && r.EventAction != f.Action,
		f.JobID != "" && !strings.EqualFold(r.JobID, f.JobID),
		!f.From.IsZero() && r.ReceivedUTC.Before(from),
		!f.To.IsZero() && !r.ReceivedUTC.Before(to),
		f.Unpublished && !r.PublishedUTC.IsZero():
		return false
	}
	switch f.State {
	case Unprocessed:
		return !r.Processed() && !r.Capped()
	case Capped:
		return r.Capped()
	case Processed:
		return r.Processed()
	}
	return true
}

// RestoreRows is RestoreWebhookLog's rule, for an adapter to run in its
// transaction tx: each row put back by put (false when the log holds its
// id), then those put back queued for replay by tx's ResetWebhookLog. It
// returns the ids put back.
func RestoreRows(ctx context.Context, tx WebhookLog, rows []WebhookLogRow, put func(WebhookLogRow) (bool, error)) ([]int64, error) {
	if len(rows) > MaxArchiveBatch {
		return nil, fmt.Errorf("%d rows, more than %d a call", len(rows), MaxArchiveBatch)
	}
	var restored []int64
	for _, r := range rows {
		ok, err := put(r)
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", r.ID, err)
		}
		if ok {
			restored = append(restored, r.ID)
		}
	}
	if len(restored) == 0 {
		return nil, nil
	}
	if _, err := tx.ResetWebhookLog(ctx, LogFilter{IDs: restored}); err != nil {
		return nil, err
	}
	return restored, nil
}
