package mssql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/ethosbuilding/primeflow/pkg/store"
	mssql "github.com/microsoft/go-mssqldb"
)

// The procedures behind the WebhookLog methods (sql/mssql/001_webhook_log.sql).
const (
	procInsertWebhookLog           = "dbo.spPrimeInsertWebhookLog"
	procGetWebhookLogUnprocessed   = "dbo.spPrimeGetWebhookLogUnprocessed"
	procSetWebhookLogProcessed     = "dbo.spPrimeSetWebhookLogProcessed"
	procIncrementWebhookLogAttempt = "dbo.spPrimeIncrementWebhookLogAttempt"
	procGetWebhookLog              = "dbo.spPrimeflowGetWebhookLog"
	procGetWebhookLogUnpublished   = "dbo.spPrimeflowGetWebhookLogUnpublished"
	procSetWebhookLogPublished     = "dbo.spPrimeflowSetWebhookLogPublished"
	procListWebhookLog             = "dbo.spPrimeflowListWebhookLog"
	procCountWebhookLog            = "dbo.spPrimeflowCountWebhookLog"
	procResetWebhookLog            = "dbo.spPrimeflowResetWebhookLog"
	idListType                     = "dbo.primeflowIdList"
	defaultListLimit               = 100
	insertBatchRows                = 250 // 7 parameters a row, under SQL Server's 2,100 a request
	insertParamsPerRow             = 7
)

// logDest points each column a procedure returns at its field of r. The
// procedures name their columns; a missing or unknown one is an error, so a
// procedure that drifts from the table fails loudly.
func logDest(r *store.WebhookLogRow, cols []string) ([]any, error) {
	byName := map[string]any{
		"id":              &r.ID,
		"receivedUTC":     scanTime{&r.ReceivedUTC},
		"eventAction":     scanString{&r.EventAction},
		"jobId":           scanGUID{&r.JobID},
		"payload":         scanString{&r.Payload},
		"headers":         scanString{&r.Headers},
		"remoteIP":        scanString{&r.RemoteIP},
		"isAuthenticated": &r.IsAuthenticated,
		"processedUTC":    scanTime{&r.ProcessedUTC},
		"processAttempts": &r.ProcessAttempts,
		"processStatus":   scanString{&r.ProcessStatus},
		"publishedUTC":    scanTime{&r.PublishedUTC},
		"replayCount":     &r.ReplayCount,
	}
	dest := make([]any, len(cols))
	for i, c := range cols {
		d, ok := byName[c]
		if !ok {
			return nil, fmt.Errorf("mssql: unexpected webhook log column %q", c)
		}
		dest[i] = d
		delete(byName, c)
	}
	if len(byName) > 0 {
		return nil, fmt.Errorf("mssql: webhook log columns missing: %s", strings.Join(slices.Sorted(maps.Keys(byName)), ", "))
	}
	return dest, nil
}

// queryLogs calls a procedure that returns webhook log rows.
func (s *Store) queryLogs(ctx context.Context, what, proc string, args ...any) ([]store.WebhookLogRow, error) {
	rs, err := s.q().QueryContext(ctx, proc, args...)
	if err != nil {
		return nil, fmt.Errorf("mssql: %s: %w", what, err)
	}
	defer rs.Close()
	cols, err := rs.Columns()
	if err != nil {
		return nil, fmt.Errorf("mssql: %s: %w", what, err)
	}
	var out []store.WebhookLogRow
	for rs.Next() {
		var r store.WebhookLogRow
		dest, err := logDest(&r, cols)
		if err != nil {
			return nil, err
		}
		if err := rs.Scan(dest...); err != nil {
			return nil, fmt.Errorf("mssql: %s: %w", what, err)
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("mssql: %s: %w", what, err)
	}
	return out, nil
}

// insertLogArgs are spPrimeInsertWebhookLog's parameters for one row. A zero
// ReceivedUTC is NULL, which the procedure stamps with the server's clock.
func insertLogArgs(r store.NewWebhookLogRow) ([]sql.NamedArg, error) {
	jobID, err := guidParam(r.JobID)
	if err != nil {
		return nil, err
	}
	return []sql.NamedArg{
		sql.Named("ReceivedUTC", sqlTime(r.ReceivedUTC)),
		sql.Named("EventAction", sqlString(r.EventAction)),
		sql.Named("JobId", jobID),
		sql.Named("Payload", r.Payload),
		sql.Named("Headers", sqlString(r.Headers)),
		sql.Named("RemoteIP", sqlString(r.RemoteIP)),
		sql.Named("IsAuthenticated", r.IsAuthenticated),
	}, nil
}

func anys(named []sql.NamedArg) []any {
	out := make([]any, len(named))
	for i, n := range named {
		out[i] = n
	}
	return out
}

// InsertWebhookLog inserts one row (spPrimeInsertWebhookLog).
func (s *Store) InsertWebhookLog(ctx context.Context, row store.NewWebhookLogRow) (int64, error) {
	args, err := insertLogArgs(row)
	if err != nil {
		return 0, err
	}
	var id int64
	if err := s.q().QueryRowContext(ctx, procInsertWebhookLog, anys(args)...).Scan(&id); err != nil {
		return 0, fmt.Errorf("mssql: insert webhook log: %w", err)
	}
	return id, nil
}

// InsertWebhookLogs inserts rows in one transaction. Each row still goes
// through spPrimeInsertWebhookLog, but up to insertBatchRows of those calls
// travel in one request, each answering with its own result set: one round
// trip and one commit for a burst of webhooks (sql/README.md says why this
// and not a table-valued parameter).
func (s *Store) InsertWebhookLogs(ctx context.Context, rows []store.NewWebhookLogRow) ([]int64, error) {
	ids := make([]int64, 0, len(rows))
	if len(rows) == 0 {
		return ids, nil
	}
	err := s.inTx(ctx, func(tx *Store) error {
		for chunk := range slices.Chunk(rows, insertBatchRows) {
			got, err := tx.insertBatch(ctx, chunk)
			if err != nil {
				return err
			}
			ids = append(ids, got...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("mssql: insert webhook logs: %w", err)
	}
	return ids, nil
}

// insertBatch sends one EXEC of spPrimeInsertWebhookLog a row in one request
// and reads the ids back, one result set each, in row order.
func (s *Store) insertBatch(ctx context.Context, rows []store.NewWebhookLogRow) ([]int64, error) {
	var text strings.Builder
	args := make([]any, 0, len(rows)*insertParamsPerRow)
	for _, row := range rows {
		named, err := insertLogArgs(row)
		if err != nil {
			return nil, err
		}
		text.WriteString("EXEC " + procInsertWebhookLog)
		for i, n := range named {
			args = append(args, n.Value)
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(&text, "%s @%s = @p%d", sep, n.Name, len(args))
		}
		text.WriteString(";\n")
	}
	rs, err := s.q().QueryContext(ctx, text.String(), args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	ids := make([]int64, len(rows))
	for i := range ids {
		if i > 0 && !rs.NextResultSet() {
			return nil, noID(rs, i)
		}
		if !rs.Next() {
			return nil, noID(rs, i)
		}
		if err := rs.Scan(&ids[i]); err != nil {
			return nil, err
		}
		// go-mssqldb sees the next result set only once this one has been
		// read to its end.
		if rs.Next() {
			return nil, fmt.Errorf("row %d of the batch returned more than one id", i+1)
		}
	}
	return ids, rs.Err()
}

func noID(rs *sql.Rows, i int) error {
	if err := rs.Err(); err != nil {
		return err
	}
	return fmt.Errorf("row %d of the batch returned no id", i+1)
}

// GetWebhookLog returns one row.
func (s *Store) GetWebhookLog(ctx context.Context, id int64) (store.WebhookLogRow, error) {
	rows, err := s.queryLogs(ctx, "get webhook log", procGetWebhookLog, sql.Named("ID", id))
	if err != nil {
		return store.WebhookLogRow{}, err
	}
	if len(rows) == 0 {
		return store.WebhookLogRow{}, fmt.Errorf("webhook log %d: %w", id, store.ErrNotFound)
	}
	return rows[0], nil
}

// GetWebhookLogUnprocessed returns the oldest queued rows (spPrimeGetWebhookLogUnprocessed).
func (s *Store) GetWebhookLogUnprocessed(ctx context.Context, top, maxAttempts int) ([]store.WebhookLogRow, error) {
	if top <= 0 {
		top = store.DefaultTop
	}
	if maxAttempts <= 0 {
		maxAttempts = store.MaxAttempts
	}
	return s.queryLogs(ctx, "get unprocessed webhook log", procGetWebhookLogUnprocessed,
		sql.Named("Top", top), sql.Named("MaxAttempts", maxAttempts))
}

// statusParam cuts a processStatus to MaxStatusLen characters (§3) the way
// NVARCHAR(500) counts them, in UTF-16 code units, so the procedure's own
// LEFT(…, 500) never splits a character outside the Basic Multilingual Plane.
func statusParam(s string) string {
	s = store.TruncateStatus(s)
	units := 0
	for i, r := range s {
		n := max(utf16.RuneLen(r), 1) // invalid UTF-8 goes as U+FFFD, one unit
		if units+n > store.MaxStatusLen {
			return s[:i]
		}
		units += n
	}
	return s
}

// processArgs are the parameters spPrimeSetWebhookLogProcessed and
// spPrimeIncrementWebhookLogAttempt share.
func processArgs(id int64, jobID, status string) ([]any, error) {
	job, err := guidParam(jobID)
	if err != nil {
		return nil, err
	}
	return []any{sql.Named("ID", id), sql.Named("JobId", job), sql.Named("ProcessStatus", statusParam(status))}, nil
}

// SetWebhookLogProcessed stamps a row processed (spPrimeSetWebhookLogProcessed).
func (s *Store) SetWebhookLogProcessed(ctx context.Context, id int64, jobID, status string) error {
	args, err := processArgs(id, jobID, status)
	if err != nil {
		return err
	}
	var updated int64
	if err := s.q().QueryRowContext(ctx, procSetWebhookLogProcessed, args...).Scan(&updated); err != nil {
		return fmt.Errorf("mssql: set webhook log processed: %w", err)
	}
	if updated == 0 {
		return fmt.Errorf("webhook log %d: %w", id, store.ErrNotFound)
	}
	return nil
}

// SetWebhookLogProcessedIfUnprocessed stamps a row processed only while it
// is unprocessed: spPrimeSetWebhookLogProcessed with @OnlyIfUnprocessed = 1,
// whose UPDATE checks and writes in one statement. Inside a transaction the
// row stays locked to its commit, so two runs of one event cannot both write.
func (s *Store) SetWebhookLogProcessedIfUnprocessed(ctx context.Context, id int64, jobID, status string) (bool, error) {
	args, err := processArgs(id, jobID, status)
	if err != nil {
		return false, err
	}
	var updated int64
	args = append(args, sql.Named("OnlyIfUnprocessed", true))
	if err := s.q().QueryRowContext(ctx, procSetWebhookLogProcessed, args...).Scan(&updated); err != nil {
		return false, fmt.Errorf("mssql: set webhook log processed if unprocessed: %w", err)
	}
	if updated > 0 {
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
	args, err := processArgs(id, jobID, status)
	if err != nil {
		return 0, err
	}
	var attempts int
	args = append(args, sql.Named("OnlyIfUnprocessed", true))
	err = s.q().QueryRowContext(ctx, procIncrementWebhookLogAttempt, args...).Scan(&attempts)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, store.AttemptNotRecorded(ctx, s, id)
	}
	if err != nil {
		return 0, fmt.Errorf("mssql: increment webhook log attempt: %w", err)
	}
	return attempts, nil
}

// GetWebhookLogUnpublished returns rows the relay still has to publish; a
// limit of 0 or less returns none.
func (s *Store) GetWebhookLogUnpublished(ctx context.Context, afterID int64, receivedBefore time.Time, limit int) ([]store.WebhookLogRow, error) {
	if limit <= 0 {
		return nil, nil
	}
	return s.queryLogs(ctx, "get unpublished webhook log", procGetWebhookLogUnpublished,
		sql.Named("AfterID", afterID), sql.Named("ReceivedBefore", sqlTime(receivedBefore)), sql.Named("Top", limit))
}

// SetWebhookLogPublished records that rows were published.
func (s *Store) SetWebhookLogPublished(ctx context.Context, ids []int64, at time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.q().ExecContext(ctx, procSetWebhookLogPublished,
		sql.Named("IDs", idList(ids)), sql.Named("PublishedUTC", sqlTime(at)))
	if err != nil {
		return fmt.Errorf("mssql: set webhook log published: %w", err)
	}
	return nil
}

// ResetWebhookLog queues the selected rows again for replay.
func (s *Store) ResetWebhookLog(ctx context.Context, f store.LogFilter) (int, error) {
	args, none := filterArgs(f)
	if none {
		return 0, nil
	}
	var n int
	if err := s.q().QueryRowContext(ctx, procResetWebhookLog, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("mssql: reset webhook log: %w", err)
	}
	return n, nil
}

// ListWebhookLog returns the selected rows, oldest first.
func (s *Store) ListWebhookLog(ctx context.Context, f store.LogFilter) ([]store.WebhookLogRow, error) {
	args, none := filterArgs(f)
	if none {
		return nil, nil
	}
	limit := f.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	return s.queryLogs(ctx, "list webhook log", procListWebhookLog, append(args, sql.Named("Top", limit), sql.Named("Newest", f.Newest))...)
}

// CountWebhookLog counts the selected rows.
func (s *Store) CountWebhookLog(ctx context.Context, f store.LogFilter) (int, error) {
	args, none := filterArgs(f)
	if none {
		return 0, nil
	}
	var n int
	if err := s.q().QueryRowContext(ctx, procCountWebhookLog, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("mssql: count webhook log: %w", err)
	}
	return n, nil
}

// filterArgs are a LogFilter as the parameters of the filter procedures
// (fnPrimeflowWebhookLogFilter). none reports a filter no row can match: a
// JobID that is not a GUID, which no UNIQUEIDENTIFIER equals.
func filterArgs(f store.LogFilter) (args []any, none bool) {
	jobID, err := guidParam(f.JobID)
	if err != nil {
		return nil, true
	}
	return []any{
		sql.Named("IDs", idList(f.IDs)),
		sql.Named("EventAction", sqlString(f.Action)),
		sql.Named("JobId", jobID),
		sql.Named("FromUTC", sqlTime(f.From)),
		sql.Named("ToUTC", sqlTime(f.To)),
		sql.Named("State", filterState(f.State)),
		sql.Named("MaxAttempts", store.MaxAttempts),
		sql.Named("Unpublished", f.Unpublished),
	}, false
}

// filterState is a LogState as the filter procedures' @State code.
func filterState(s store.LogState) int {
	switch s {
	case store.Unprocessed:
		return 1
	case store.Capped:
		return 2
	case store.Processed:
		return 3
	default:
		return 0
	}
}

// idRow is one row of dbo.primeflowIdList.
type idRow struct{ ID int64 }

// idList is ids, without repeats, as a dbo.primeflowIdList parameter.
func idList(ids []int64) mssql.TVP {
	rows := make([]idRow, 0, len(ids))
	seen := make(map[int64]bool, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			rows = append(rows, idRow{id})
		}
	}
	return mssql.TVP{TypeName: idListType, Value: rows}
}
