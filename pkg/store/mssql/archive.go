package mssql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
)

// The procedures behind the Archive methods (sql/mssql/080_archive.sql).
const (
	procArchiveCount             = "dbo.spPrimeflowArchiveCount"
	procArchiveListWebhookLog    = "dbo.spPrimeflowArchiveListWebhookLog"
	procArchiveListSMS           = "dbo.spPrimeflowArchiveListSMS"
	procArchiveListTriageInvites = "dbo.spPrimeflowArchiveListTriageInvites"
	procArchiveListEmailReceipts = "dbo.spPrimeflowArchiveListEmailReceipts"
	procArchiveDelete            = "dbo.spPrimeflowArchiveDelete"
	procRestoreWebhookLog        = "dbo.spPrimeflowRestoreWebhookLog"
)

// CountArchivable counts each table's finished rows (spPrimeflowArchiveCount).
func (s *Store) CountArchivable(ctx context.Context, before time.Time) (map[store.ArchiveTable]int, error) {
	var log, sms, invites, receipts int
	if err := s.q().QueryRowContext(ctx, procArchiveCount, sql.Named("Before", sqlTime(before))).
		Scan(&log, &sms, &invites, &receipts); err != nil {
		return nil, fmt.Errorf("mssql: count archivable: %w", err)
	}
	return map[store.ArchiveTable]int{store.ArchiveWebhookLog: log, store.ArchiveSMS: sms,
		store.ArchiveTriageInvites: invites, store.ArchiveEmailReceipts: receipts}, nil
}

// pageArgs are the list procedures' parameters.
func pageArgs(before time.Time, afterID int64, limit int) []any {
	return []any{sql.Named("Before", sqlTime(before)), sql.Named("AfterID", afterID),
		sql.Named("Top", min(max(limit, 1), store.MaxArchiveBatch))}
}

// ListArchivableWebhookLog returns a page of the log's finished rows
// (spPrimeflowArchiveListWebhookLog).
func (s *Store) ListArchivableWebhookLog(ctx context.Context, before time.Time, afterID int64, limit int) ([]store.WebhookLogRow, error) {
	return s.queryLogs(ctx, "list archivable webhook log", procArchiveListWebhookLog, pageArgs(before, afterID, limit)...)
}

// ListArchivableSMS returns a page of smsQueue's finished rows (spPrimeflowArchiveListSMS).
func (s *Store) ListArchivableSMS(ctx context.Context, before time.Time, afterID int64, limit int) ([]store.SMSMessage, error) {
	return queryAll(ctx, s.q(), "list archivable sms", procArchiveListSMS, scanSMS, pageArgs(before, afterID, limit)...)
}

// ListArchivableTriageInvites returns a page of ethTriageInviteQueue's
// finished rows (spPrimeflowArchiveListTriageInvites).
func (s *Store) ListArchivableTriageInvites(ctx context.Context, before time.Time, afterID int64, limit int) ([]store.TriageInvite, error) {
	return queryAll(ctx, s.q(), "list archivable triage invites", procArchiveListTriageInvites, scanInvite, pageArgs(before, afterID, limit)...)
}

// ListArchivableEmailReceipts returns a page of PrimeEmailJobRegistered's
// finished rows (spPrimeflowArchiveListEmailReceipts).
func (s *Store) ListArchivableEmailReceipts(ctx context.Context, before time.Time, afterID int64, limit int) ([]store.EmailReceipt, error) {
	return queryAll(ctx, s.q(), "list archivable email receipts", procArchiveListEmailReceipts, scanReceipt, pageArgs(before, afterID, limit)...)
}

// DeleteArchived deletes the rows still finished before before (spPrimeflowArchiveDelete).
func (s *Store) DeleteArchived(ctx context.Context, table store.ArchiveTable, before time.Time, ids []int64) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	if len(ids) > store.MaxArchiveBatch {
		return 0, fmt.Errorf("mssql: delete archived %s: %d ids, more than %d a call", table, len(ids), store.MaxArchiveBatch)
	}
	var n int
	if err := s.q().QueryRowContext(ctx, procArchiveDelete, sql.Named("Table", string(table)),
		sql.Named("IDs", idList(ids)), sql.Named("Before", sqlTime(before))).Scan(&n); err != nil {
		return 0, fmt.Errorf("mssql: delete archived %s: %w", table, err)
	}
	return n, nil
}

// RestoreWebhookLog puts each row back unless the log holds its id
// (spPrimeflowRestoreWebhookLog), then queues those it put back for replay
// (spPrimeflowResetWebhookLog), in one transaction (store.RestoreRows).
func (s *Store) RestoreWebhookLog(ctx context.Context, rows []store.WebhookLogRow) ([]int64, error) {
	var restored []int64
	err := s.inTx(ctx, func(tx *Store) error {
		var err error
		restored, err = store.RestoreRows(ctx, tx, rows, func(r store.WebhookLogRow) (bool, error) {
			args, err := insertLogArgs(store.NewWebhookLogRow{ReceivedUTC: r.ReceivedUTC, EventAction: r.EventAction, JobID: r.JobID,
				Payload: r.Payload, Headers: r.Headers, RemoteIP: r.RemoteIP, IsAuthenticated: r.IsAuthenticated})
			if err != nil {
				return false, err
			}
			args = append(args, sql.Named("ID", r.ID), sql.Named("ProcessedUTC", sqlTime(r.ProcessedUTC)),
				sql.Named("ProcessAttempts", r.ProcessAttempts), sql.Named("ProcessStatus", sqlString(statusParam(r.ProcessStatus))),
				sql.Named("PublishedUTC", sqlTime(r.PublishedUTC)), sql.Named("ReplayCount", r.ReplayCount))
			var put bool
			err = tx.q().QueryRowContext(ctx, procRestoreWebhookLog, anys(args)...).Scan(&put)
			return put, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mssql: restore webhook log: %w", err)
	}
	return restored, nil
}
