package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

const logColumns = `id, receivedUTC, eventAction, jobId, payload, headers, remoteIP, isAuthenticated,
	processedUTC, processAttempts, processStatus, publishedUTC, replayCount`

func scanLog(sc sqlrows.Scanner) (store.WebhookLogRow, error) {
	var r store.WebhookLogRow
	err := sc.Scan(&r.ID, scanTime{&r.ReceivedUTC}, scanString{&r.EventAction}, scanString{&r.JobID},
		&r.Payload, scanString{&r.Headers}, scanString{&r.RemoteIP}, &r.IsAuthenticated,
		scanTime{&r.ProcessedUTC}, &r.ProcessAttempts, scanString{&r.ProcessStatus},
		scanTime{&r.PublishedUTC}, &r.ReplayCount)
	return r, err
}

func (s *Store) queryLogs(ctx context.Context, what, query string, args ...any) ([]store.WebhookLogRow, error) {
	return queryAll(ctx, s.r(), what, query, scanLog, args...)
}

// The statements every event runs, prepared once (see prepare).
var (
	insertLogSQL = prepare(`INSERT INTO ethPrimeWebhookLog
	(receivedUTC, eventAction, jobId, payload, headers, remoteIP, isAuthenticated)
	VALUES (?, ?, ?, ?, ?, ?, ?)`)
	getLogSQL       = prepare(`SELECT ` + logColumns + ` FROM ethPrimeWebhookLog WHERE id = ?`)
	setProcessedSQL = prepare(`UPDATE ethPrimeWebhookLog
		SET processedUTC = ?, processStatus = ?, jobId = COALESCE(?, jobId) WHERE id = ?`)
	incrementAttemptSQL = prepare(`UPDATE ethPrimeWebhookLog
		SET processAttempts = processAttempts + 1, processStatus = ?, jobId = COALESCE(?, jobId)
		WHERE id = ? AND processedUTC IS NULL RETURNING processAttempts`)
	// setPublishedSQL takes the ids as one JSON array: one statement for any
	// number of rows, never over SQLite's limit on parameters.
	setPublishedSQL  = prepare(`UPDATE ethPrimeWebhookLog SET publishedUTC = ? WHERE id IN (SELECT value FROM json_each(?))`)
	getReferenceSQL  = prepare(`SELECT jobId FROM ethPrimeJobReference WHERE numericReference = ?`)
	saveReferenceSQL = prepare(`INSERT INTO ethPrimeJobReference (numericReference, jobId, firstSeenUTC) VALUES (?, ?, ?)`)
)

func insertLogArgs(r store.NewWebhookLogRow) []any {
	return []any{formatTime(r.ReceivedUTC), nullString(r.EventAction), nullString(r.JobID),
		r.Payload, nullString(r.Headers), nullString(r.RemoteIP), r.IsAuthenticated}
}

// InsertWebhookLog inserts one row (spPrimeInsertWebhookLog).
func (s *Store) InsertWebhookLog(ctx context.Context, row store.NewWebhookLogRow) (int64, error) {
	id, err := insertRow(ctx, s.w(), insertLogSQL, insertLogArgs(row)...)
	if err != nil {
		return 0, fmt.Errorf("sqlite: insert webhook log: %w", err)
	}
	return id, nil
}

// insertChunk bounds the rows of one multi-row INSERT (7 parameters a row,
// well under SQLite's limit of 32,766).
const insertChunk = 128

// InsertWebhookLogs inserts rows in one transaction, many rows a statement.
func (s *Store) InsertWebhookLogs(ctx context.Context, rows []store.NewWebhookLogRow) ([]int64, error) {
	ids := make([]int64, 0, len(rows))
	err := s.inTx(ctx, func(tx *Store) error {
		for len(rows) > 0 {
			chunk := rows[:min(len(rows), insertChunk)]
			rows = rows[len(chunk):]
			args := make([]any, 0, 7*len(chunk))
			for _, r := range chunk {
				args = append(args, insertLogArgs(r)...)
			}
			q := `INSERT INTO ethPrimeWebhookLog
				(receivedUTC, eventAction, jobId, payload, headers, remoteIP, isAuthenticated) VALUES ` +
				strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?), ", len(chunk)), ", ") + ` RETURNING id`
			res, err := tx.tx.QueryContext(ctx, q, args...)
			if err != nil {
				return err
			}
			first := len(ids)
			for res.Next() {
				var id int64
				if err := res.Scan(&id); err != nil {
					res.Close()
					return err
				}
				ids = append(ids, id)
			}
			if err := errors.Join(res.Err(), res.Close()); err != nil {
				return err
			}
			if len(ids)-first != len(chunk) {
				return fmt.Errorf("inserted %d rows, got %d ids", len(chunk), len(ids)-first)
			}
		}
		// RETURNING gives no order guarantee; rowids of one INSERT ascend in
		// VALUES order, so sorting restores it.
		slices.Sort(ids)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: insert webhook logs: %w", err)
	}
	return ids, nil
}

// GetWebhookLog returns one row.
func (s *Store) GetWebhookLog(ctx context.Context, id int64) (store.WebhookLogRow, error) {
	r, err := scanLog(s.r().QueryRowContext(ctx, getLogSQL, id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("webhook log %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("sqlite: get webhook log: %w", err)
	}
	return r, nil
}

// GetWebhookLogUnprocessed returns the oldest queued rows (spPrimeGetWebhookLogUnprocessed).
func (s *Store) GetWebhookLogUnprocessed(ctx context.Context, top, maxAttempts int) ([]store.WebhookLogRow, error) {
	if top <= 0 {
		top = store.DefaultTop
	}
	if maxAttempts <= 0 {
		maxAttempts = store.MaxAttempts
	}
	return s.queryLogs(ctx, "get webhook log unprocessed", `SELECT `+logColumns+` FROM ethPrimeWebhookLog
		WHERE processedUTC IS NULL AND processAttempts < ? ORDER BY id LIMIT ?`, maxAttempts, top)
}

// SetWebhookLogProcessed stamps a row processed (spPrimeSetWebhookLogProcessed).
func (s *Store) SetWebhookLogProcessed(ctx context.Context, id int64, jobID, status string) error {
	res, err := s.w().ExecContext(ctx, setProcessedSQL, formatTime(time.Now()), store.TruncateStatus(status), nullString(jobID), id)
	return affectedOne(res, err, "set webhook log processed", fmt.Sprintf("webhook log %d", id))
}

// setProcessedIfUnprocessedSQL is setProcessedSQL guarded on the row being
// still queued, in the same statement, so the check and the write are one.
var setProcessedIfUnprocessedSQL = prepare(`UPDATE ethPrimeWebhookLog
	SET processedUTC = ?, processStatus = ?, jobId = COALESCE(?, jobId) WHERE id = ? AND processedUTC IS NULL`)

// SetWebhookLogProcessedIfUnprocessed stamps a row processed only while it
// is unprocessed (spPrimeSetWebhookLogProcessed @OnlyIfUnprocessed = 1).
func (s *Store) SetWebhookLogProcessedIfUnprocessed(ctx context.Context, id int64, jobID, status string) (bool, error) {
	res, err := s.w().ExecContext(ctx, setProcessedIfUnprocessedSQL, formatTime(time.Now()), store.TruncateStatus(status), nullString(jobID), id)
	if err != nil {
		return false, fmt.Errorf("sqlite: set webhook log processed if unprocessed: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("sqlite: set webhook log processed if unprocessed: %w", err)
	}
	if n > 0 {
		return true, nil
	}
	// Nothing written: already processed, or no such row.
	if _, err := s.GetWebhookLog(ctx, id); err != nil {
		return false, err
	}
	return false, nil
}

// IncrementWebhookLogAttempt records a failed attempt (spPrimeIncrementWebhookLogAttempt).
func (s *Store) IncrementWebhookLogAttempt(ctx context.Context, id int64, jobID, status string) (int, error) {
	var attempts int
	err := s.w().QueryRowContext(ctx, incrementAttemptSQL, store.TruncateStatus(status), nullString(jobID), id).Scan(&attempts)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, store.AttemptNotRecorded(ctx, s, id)
	}
	if err != nil {
		return 0, fmt.Errorf("sqlite: increment webhook log attempt: %w", err)
	}
	return attempts, nil
}

// GetWebhookLogUnpublished returns rows the relay still has to publish.
func (s *Store) GetWebhookLogUnpublished(ctx context.Context, afterID int64, receivedBefore time.Time, limit int) ([]store.WebhookLogRow, error) {
	return s.queryLogs(ctx, "get webhook log unpublished", `SELECT `+logColumns+` FROM ethPrimeWebhookLog
		WHERE publishedUTC IS NULL AND id > ? AND receivedUTC < ? ORDER BY id LIMIT ?`, afterID, formatTime(receivedBefore), limit)
}

// SetWebhookLogPublished records that rows were published.
func (s *Store) SetWebhookLogPublished(ctx context.Context, ids []int64, at time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return err
	}
	if _, err := s.w().ExecContext(ctx, setPublishedSQL, formatTime(at), string(list)); err != nil {
		return fmt.Errorf("sqlite: set webhook log published: %w", err)
	}
	return nil
}

// ResetWebhookLog queues the selected rows again for replay.
func (s *Store) ResetWebhookLog(ctx context.Context, f store.LogFilter) (int, error) {
	where, args := logWhere(f)
	res, err := s.w().ExecContext(ctx, `UPDATE ethPrimeWebhookLog
		SET processedUTC = NULL, processAttempts = 0, publishedUTC = NULL, replayCount = replayCount + 1,
		    processStatus = 'Queued for replay'`+where, args...)
	if err != nil {
		return 0, fmt.Errorf("sqlite: reset webhook log: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// ListWebhookLog returns the selected rows, oldest first.
func (s *Store) ListWebhookLog(ctx context.Context, f store.LogFilter) ([]store.WebhookLogRow, error) {
	where, args := logWhere(f)
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	order := " ORDER BY id"
	if f.Newest {
		order = " ORDER BY id DESC"
	}
	return s.queryLogs(ctx, "list webhook log", `SELECT `+logColumns+` FROM ethPrimeWebhookLog`+where+order+` LIMIT ?`, append(args, limit)...)
}

// CountWebhookLog counts the selected rows.
func (s *Store) CountWebhookLog(ctx context.Context, f store.LogFilter) (int, error) {
	where, args := logWhere(f)
	var n int
	if err := s.r().QueryRowContext(ctx, `SELECT COUNT(*) FROM ethPrimeWebhookLog`+where, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: count webhook log: %w", err)
	}
	return n, nil
}

func logWhere(f store.LogFilter) (string, []any) {
	var conds []string
	var args []any
	if len(f.IDs) > 0 {
		conds = append(conds, "id IN ("+placeholders(len(f.IDs))+")")
		for _, id := range f.IDs {
			args = append(args, id)
		}
	}
	if f.Action != "" {
		conds = append(conds, "eventAction = ?")
		args = append(args, f.Action)
	}
	if f.JobID != "" {
		conds = append(conds, "jobId = ?")
		args = append(args, f.JobID)
	}
	if !f.From.IsZero() {
		conds = append(conds, "receivedUTC >= ?")
		args = append(args, formatTime(f.From))
	}
	if !f.To.IsZero() {
		conds = append(conds, "receivedUTC < ?")
		args = append(args, formatTime(f.To))
	}
	if f.Unpublished {
		conds = append(conds, "publishedUTC IS NULL")
	}
	switch f.State {
	case store.Unprocessed:
		conds = append(conds, "processedUTC IS NULL AND processAttempts < ?")
		args = append(args, store.MaxAttempts)
	case store.Capped:
		conds = append(conds, "processedUTC IS NULL AND processAttempts >= ?")
		args = append(args, store.MaxAttempts)
	case store.Processed:
		conds = append(conds, "processedUTC IS NOT NULL")
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// GetJobIDByReference reads the numeric reference map (spPrimeGetJobIDbyReference).
func (s *Store) GetJobIDByReference(ctx context.Context, numericReference int64) (string, bool, error) {
	return queryOne(ctx, s.r(), "get job id by reference", getReferenceSQL, sqlrows.Text, numericReference)
}

// SaveJobReference maps a reference when absent (spPrimeSaveJobReference).
func (s *Store) SaveJobReference(ctx context.Context, numericReference int64, jobID string) (bool, error) {
	jobID = strings.ToLower(jobID)
	var inserted bool
	err := s.inTx(ctx, func(tx *Store) error {
		var existing string
		err := tx.r().QueryRowContext(ctx, getReferenceSQL, numericReference).Scan(&existing)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			_, err = tx.w().ExecContext(ctx, saveReferenceSQL, numericReference, jobID, formatTime(time.Now()))
			inserted = err == nil
			return err
		case err != nil:
			return err
		case existing != jobID:
			return fmt.Errorf("reference %d is mapped to job %s, not %s: %w", numericReference, existing, jobID, store.ErrReferenceConflict)
		default:
			return nil
		}
	})
	if err != nil && !errors.Is(err, store.ErrReferenceConflict) {
		return false, fmt.Errorf("sqlite: save job reference: %w", err)
	}
	return inserted, err
}
