package mssql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/ethosbuilding/primeflow/pkg/store"
)

const procStatusOverview = "dbo.spPrimeflowStatusOverview"

// StatusOverview reads the Overview in one call (spPrimeflowStatusOverview),
// its result sets in the procedure's order.
func (s *Store) StatusOverview(ctx context.Context, oq store.OverviewQuery) (store.Overview, error) {
	o := store.Overview{SMS: store.SendCounts()}
	rows, err := s.q().QueryContext(ctx, procStatusOverview, sql.Named("MaxAttempts", store.MaxAttempts),
		sql.Named("SyncQueuedSince", sqlTime(oq.SyncQueuedSince)))
	if err != nil {
		return o, fmt.Errorf("mssql: status overview: %w", err)
	}
	defer rows.Close()
	var firstSeenJob string
	sets := []func() error{
		func() error {
			return rows.Scan(&o.Unprocessed, &o.Capped, &o.Processed, &o.Unpublished, &o.OutboxUnpublished, scanTime{&o.OutboxOldestUTC},
				&o.FirstSeenFailing, &o.InvitesPending, &o.OrdersFailing, &o.InvitesFailed, &o.EmailsFailed, &o.SyncQueueRecentJobs,
				scanTime{&o.SMSOldestWaitingUTC}, scanTime{&o.InvitesOldestWaitingUTC}, &o.EmailsRejected)
		},
		func() error {
			r := &o.OldestUnprocessed
			return rows.Scan(&r.ID, scanTime{&r.ReceivedUTC}, scanString{&r.EventAction}, &r.ProcessAttempts)
		},
		func() error {
			var r store.WebhookLogRow
			err := rows.Scan(&r.ID, scanTime{&r.ReceivedUTC}, scanString{&r.EventAction}, &r.ProcessAttempts, scanString{&r.ProcessStatus})
			o.Failing = append(o.Failing, r)
			return err
		},
		func() error {
			var state string
			var n int
			err := rows.Scan(&state, &n)
			o.SMS[store.SendState(state)] = n
			return err
		},
		func() error { return rows.Scan(scanString{&o.SMSLastError}, scanTime{&o.SMSLastErrorUTC}) },
		func() error { return rows.Scan(scanGUID{&firstSeenJob}, scanString{&o.FirstSeenLastError}) },
		func() error {
			var p store.PlanDates
			err := rows.Scan(&p.Status, &p.Dates, scanDate{&p.Earliest})
			o.PlanDates = append(o.PlanDates, p)
			return err
		},
		func() error { return rows.Scan(&o.OrderLastErrorNo, scanString{&o.OrderLastError}) },
		func() error { return rows.Scan(scanDate{&o.PlanLastErrorDate}, scanString{&o.PlanLastError}) },
		func() error {
			var err error
			o.EmailLastFailed, _, err = scanEmail(rows)
			return err
		},
	}
	for i, scan := range sets {
		if i > 0 && !rows.NextResultSet() {
			return o, fmt.Errorf("mssql: status overview: %w", errors.Join(rows.Err(), fmt.Errorf("result set %d of %d missing", i+1, len(sets))))
		}
		for rows.Next() {
			if err := scan(); err != nil {
				return o, fmt.Errorf("mssql: status overview: result set %d: %w", i+1, err)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return o, fmt.Errorf("mssql: status overview: %w", err)
	}
	o.FirstSeenLastErrorJob = firstSeenJob
	return o, nil
}
