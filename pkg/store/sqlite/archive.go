package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// archived is what an ArchiveTable's rows are in SQLite: their id column,
// the columns its scan reads, and the condition of a row finished before a
// time, every ? of it that time; keep, when set, is what the table keeps of
// the rows a delete takes, written in the delete's transaction: an INSERT …
// SELECT … FROM the table WHERE …, which the delete's condition completes.
type archived struct {
	id, columns, finished, keep string
}

var archiveTables = map[store.ArchiveTable]archived{
	store.ArchiveWebhookLog: {"id", logColumns, `processedUTC IS NOT NULL AND processedUTC < ? AND receivedUTC < ?`, ""},
	// An archived message's dedupe key stays used (QueueSMS).
	// A dismissed one is done from its dismissal (UpdatedUTC).
	store.ArchiveSMS: {"ID", smsColumns, `(State IN ('` + string(store.SendSent) + `', '` + string(store.SendLogged) + `')
		AND SentUTC < ? OR State = '` + string(store.SendDismissed) + `' AND UpdatedUTC < ?)`, `INSERT INTO smsArchivedDedupeKey (DedupeKey, SmsQueueID, ArchivedUTC)
		SELECT DedupeKey, ID, strftime('%Y-%m-%d %H:%M:%f', 'now') FROM smsQueue WHERE DedupeKey IS NOT NULL`},
	store.ArchiveTriageInvites: {"id", inviteColumns, `(state IN ('` + string(store.SendSent) + `', '` + string(store.SendLogged) + `')
		AND sentUTC < ? OR state = '` + string(store.SendDismissed) + `' AND updatedUTC < ?) AND statusLeftUTC IS NOT NULL`, ""},
	// A receipt's message moved out of the folder before T: processed, or
	// refused unread (Rejected), or failed and dismissed before T.
	store.ArchiveEmailReceipts: {"id", emailColumns, `movedUTC < ? AND (outcome = '` + store.EmailProcessed + `' AND movedTo = '` + store.EmailProcessed + `'
		OR outcome = '` + store.EmailRejected + `' OR outcome = '` + store.EmailDismissed + `' AND updatedUTC < ?)`, ""},
}

// before is the condition's arguments: before, once a ?.
func (a archived) before(t time.Time) []any {
	args := make([]any, strings.Count(a.finished, "?"))
	for i := range args {
		args[i] = formatTime(t)
	}
	return args
}

func archiveTable(t store.ArchiveTable) (archived, error) {
	a, ok := archiveTables[t]
	if !ok {
		return a, fmt.Errorf("sqlite: %q is not a table the archive holds", t)
	}
	return a, nil
}

// CountArchivable counts each table's rows finished before before.
func (s *Store) CountArchivable(ctx context.Context, before time.Time) (map[store.ArchiveTable]int, error) {
	out := map[store.ArchiveTable]int{}
	for _, t := range store.ArchiveTables() {
		a := archiveTables[t]
		var n int
		if err := s.r().QueryRowContext(ctx, `SELECT COUNT(*) FROM `+string(t)+` WHERE `+a.finished, a.before(before)...).Scan(&n); err != nil {
			return nil, fmt.Errorf("sqlite: count archivable %s: %w", t, err)
		}
		out[t] = n
	}
	return out, nil
}

// listArchivable reads a page of t's finished rows with scan.
func listArchivable[T any](ctx context.Context, s *Store, t store.ArchiveTable, scan func(sqlrows.Scanner) (T, error),
	before time.Time, afterID int64, limit int) ([]T, error) {
	a := archiveTables[t]
	limit = min(max(limit, 1), store.MaxArchiveBatch)
	return queryAll(ctx, s.r(), "list archivable "+string(t), `SELECT `+a.columns+` FROM `+string(t)+`
		WHERE `+a.id+` > ? AND `+a.finished+` ORDER BY `+a.id+` LIMIT ?`, scan, append(append([]any{afterID}, a.before(before)...), limit)...)
}

// ListArchivableWebhookLog returns a page of the log's finished rows.
func (s *Store) ListArchivableWebhookLog(ctx context.Context, before time.Time, afterID int64, limit int) ([]store.WebhookLogRow, error) {
	return listArchivable(ctx, s, store.ArchiveWebhookLog, scanLog, before, afterID, limit)
}

// ListArchivableSMS returns a page of smsQueue's finished rows.
func (s *Store) ListArchivableSMS(ctx context.Context, before time.Time, afterID int64, limit int) ([]store.SMSMessage, error) {
	return listArchivable(ctx, s, store.ArchiveSMS, scanSMS, before, afterID, limit)
}

// ListArchivableTriageInvites returns a page of ethTriageInviteQueue's finished rows.
func (s *Store) ListArchivableTriageInvites(ctx context.Context, before time.Time, afterID int64, limit int) ([]store.TriageInvite, error) {
	return listArchivable(ctx, s, store.ArchiveTriageInvites, scanInvite, before, afterID, limit)
}

// ListArchivableEmailReceipts returns a page of PrimeEmailJobRegistered's finished rows.
func (s *Store) ListArchivableEmailReceipts(ctx context.Context, before time.Time, afterID int64, limit int) ([]store.EmailReceipt, error) {
	return listArchivable(ctx, s, store.ArchiveEmailReceipts, scanEmail, before, afterID, limit)
}

// DeleteArchived deletes the rows with these ids still finished before
// before, in one statement (the ids as one JSON array).
func (s *Store) DeleteArchived(ctx context.Context, table store.ArchiveTable, before time.Time, ids []int64) (int, error) {
	a, err := archiveTable(table)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	if len(ids) > store.MaxArchiveBatch {
		return 0, fmt.Errorf("sqlite: delete archived %s: %d ids, more than %d a call", table, len(ids), store.MaxArchiveBatch)
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return 0, err
	}
	where, args := a.id+` IN (SELECT value FROM json_each(?)) AND `+a.finished, append([]any{string(list)}, a.before(before)...)
	var n int64
	err = s.inTx(ctx, func(tx *Store) error {
		if a.keep != "" {
			if _, err := tx.w().ExecContext(ctx, a.keep+` AND `+where+` ON CONFLICT DO NOTHING`, args...); err != nil {
				return err
			}
		}
		var err error
		n, err = tx.execCount(ctx, `DELETE FROM `+string(table)+` WHERE `+where, args...)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: delete archived %s: %w", table, err)
	}
	return int(n), nil
}

// RestoreWebhookLog inserts each row under its id unless the log holds it,
// then queues those it inserted for replay (store.RestoreRows).
func (s *Store) RestoreWebhookLog(ctx context.Context, rows []store.WebhookLogRow) ([]int64, error) {
	var restored []int64
	err := s.inTx(ctx, func(tx *Store) error {
		var err error
		restored, err = store.RestoreRows(ctx, tx, rows, func(r store.WebhookLogRow) (bool, error) {
			res, err := tx.w().ExecContext(ctx, `INSERT INTO ethPrimeWebhookLog (`+logColumns+`)
				VALUES (`+placeholders(13)+`) ON CONFLICT (id) DO NOTHING`,
				r.ID, formatTime(r.ReceivedUTC), nullString(r.EventAction), nullString(strings.ToLower(r.JobID)), r.Payload,
				nullString(r.Headers), nullString(r.RemoteIP), r.IsAuthenticated, nullTime(r.ProcessedUTC), r.ProcessAttempts,
				nullString(store.TruncateStatus(r.ProcessStatus)), nullTime(r.PublishedUTC), r.ReplayCount)
			if err != nil {
				return false, err
			}
			n, err := res.RowsAffected()
			return n == 1, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: restore webhook log: %w", err)
	}
	return restored, nil
}
