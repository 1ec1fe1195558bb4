package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// StatusOverview reads the Overview, one query a figure.
func (s *Store) StatusOverview(ctx context.Context, oq store.OverviewQuery) (store.Overview, error) {
	var o store.Overview
	q := s.r()
	row := func(what, query string, args []any, dest ...any) error {
		err := q.QueryRowContext(ctx, query, args...).Scan(dest...)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: status overview: %s: %w", what, err)
		}
		return nil
	}
	capped := store.MaxAttempts
	if err := row("webhook log", `SELECT
		COUNT(CASE WHEN processedUTC IS NULL AND processAttempts < ? THEN 1 END),
		COUNT(CASE WHEN processedUTC IS NULL AND processAttempts >= ? THEN 1 END),
		COUNT(processedUTC),
		COUNT(CASE WHEN publishedUTC IS NULL THEN 1 END)
		FROM ethPrimeWebhookLog`, []any{capped, capped}, &o.Unprocessed, &o.Capped, &o.Processed, &o.Unpublished); err != nil {
		return o, err
	}
	if err := row("oldest unprocessed", `SELECT id, receivedUTC, eventAction, processAttempts FROM ethPrimeWebhookLog
		WHERE processedUTC IS NULL AND processAttempts < ? ORDER BY id LIMIT 1`, []any{capped},
		&o.OldestUnprocessed.ID, scanTime{&o.OldestUnprocessed.ReceivedUTC}, scanString{&o.OldestUnprocessed.EventAction},
		&o.OldestUnprocessed.ProcessAttempts); err != nil {
		return o, err
	}
	failing, err := queryAll(ctx, q, "status overview: failing", `SELECT l.id, l.receivedUTC, l.eventAction, l.processAttempts, l.processStatus
		FROM ethPrimeWebhookLog AS l
		WHERE l.id IN (SELECT MAX(id) FROM ethPrimeWebhookLog
		               WHERE processedUTC IS NULL AND processAttempts > 0 GROUP BY COALESCE(eventAction, ''))
		ORDER BY l.eventAction`, func(sc sqlrows.Scanner) (store.WebhookLogRow, error) {
		var r store.WebhookLogRow
		err := sc.Scan(&r.ID, scanTime{&r.ReceivedUTC}, scanString{&r.EventAction}, &r.ProcessAttempts, scanString{&r.ProcessStatus})
		return r, err
	})
	if err != nil {
		return o, err
	}
	o.Failing = failing
	if err := row("outbox", `SELECT COUNT(*), MIN(createdUTC) FROM primeflowOutbox WHERE publishedUTC IS NULL`, nil,
		&o.OutboxUnpublished, scanTime{&o.OutboxOldestUTC}); err != nil {
		return o, err
	}
	if o.SMS, err = s.CountSMS(ctx); err != nil {
		return o, err
	}
	if err := row("sms last error", `SELECT LastError, UpdatedUTC FROM smsQueue WHERE LastError IS NOT NULL AND State NOT IN (?, ?)
		ORDER BY UpdatedUTC DESC, ID DESC LIMIT 1`, []any{string(store.SendSent), string(store.SendDismissed)},
		scanString{&o.SMSLastError}, scanTime{&o.SMSLastErrorUTC}); err != nil {
		return o, err
	}
	if err := row("first sight", `SELECT COUNT(*) FROM primeflowJobFirstSeen WHERE pipelineCompletedUTC IS NULL AND pipelineAttempts > 0`, nil,
		&o.FirstSeenFailing); err != nil {
		return o, err
	}
	if err := row("first sight last error", `SELECT jobId, pipelineStatus FROM primeflowJobFirstSeen
		WHERE pipelineCompletedUTC IS NULL AND pipelineAttempts > 0 ORDER BY firstSeenUTC DESC LIMIT 1`, nil,
		&o.FirstSeenLastErrorJob, scanString{&o.FirstSeenLastError}); err != nil {
		return o, err
	}
	if err := row("triage invites", `SELECT COUNT(*), COUNT(CASE WHEN state = ? THEN 1 END) FROM ethTriageInviteQueue
		WHERE sentUTC IS NULL AND state <> ?`, []any{string(store.SendFailed), string(store.SendDismissed)},
		&o.InvitesPending, &o.InvitesFailed); err != nil {
		return o, err
	}
	if o.SMSOldestWaitingUTC, _, err = s.OldestSMSWaiting(ctx); err != nil {
		return o, err
	}
	if o.InvitesOldestWaitingUTC, _, err = s.OldestTriageInviteWaiting(ctx); err != nil {
		return o, err
	}
	if err := row("emails failed", `SELECT COUNT(CASE WHEN outcome = ? THEN 1 END), COUNT(CASE WHEN outcome = ? THEN 1 END)
		FROM PrimeEmailJobRegistered`, []any{store.EmailFailed, store.EmailRejected}, &o.EmailsFailed, &o.EmailsRejected); err != nil {
		return o, err
	}
	last, _, err := queryOne(ctx, q, "status overview: newest failed email", `SELECT `+emailColumns+`
		FROM PrimeEmailJobRegistered WHERE outcome = ? ORDER BY updatedUTC DESC, id DESC LIMIT 1`, scanEmail, store.EmailFailed)
	if err != nil {
		return o, err
	}
	o.EmailLastFailed = last
	if !oq.SyncQueuedSince.IsZero() {
		if err := row("sync queue", `SELECT COUNT(DISTINCT jobId) FROM ethSyncQueue WHERE queuedUTC >= ?`,
			[]any{formatTime(oq.SyncQueuedSince)}, &o.SyncQueueRecentJobs); err != nil {
			return o, err
		}
	}
	plans, err := queryAll(ctx, q, "status overview: plan dates", `SELECT PlanStatus, COUNT(*), MIN(PlanDate) FROM optimoRoutePlan
		GROUP BY PlanStatus ORDER BY PlanStatus`, func(sc sqlrows.Scanner) (store.PlanDates, error) {
		var p store.PlanDates
		err := sc.Scan(&p.Status, &p.Dates, &p.Earliest)
		return p, err
	})
	if err != nil {
		return o, err
	}
	o.PlanDates = plans
	if err := row("orders", `SELECT COUNT(*) FROM optimoRouteOrder WHERE errorText IS NOT NULL`, nil, &o.OrdersFailing); err != nil {
		return o, err
	}
	if err := row("orders last error", `SELECT orderNo, errorText FROM optimoRouteOrder WHERE errorText IS NOT NULL
		ORDER BY updatedUTC DESC, orderNo LIMIT 1`, nil, &o.OrderLastErrorNo, scanString{&o.OrderLastError}); err != nil {
		return o, err
	}
	if err := row("plans last error", `SELECT PlanDate, ErrorText FROM optimoRoutePlan WHERE ErrorText IS NOT NULL
		ORDER BY UpdatedUTC DESC, PlanDate LIMIT 1`, nil, &o.PlanLastErrorDate, scanString{&o.PlanLastError}); err != nil {
		return o, err
	}
	return o, nil
}
