package mssql

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// ListJobCoverage reads the jobs Prime created since a time, with when each
// path first saw them (spPrimeflowJobCoverage).
func (s *Store) ListJobCoverage(ctx context.Context, since time.Time) ([]store.JobCoverage, error) {
	return queryAll(ctx, s.q(), "job coverage", procJobCoverage, func(sc sqlrows.Scanner) (store.JobCoverage, error) {
		var c store.JobCoverage
		err := sc.Scan(scanGUID{&c.JobID}, scanString{&c.JobNumber}, scanTime{&c.CreatedAt}, scanTime{&c.FirstSeenUTC}, scanString{&c.Via},
			scanString{&c.FirstAction}, scanTime{&c.Webhook}, scanString{&c.WebhookAction}, scanTime{&c.Email}, scanTime{&c.Backstop})
		return c, err
	}, sql.Named("SinceUTC", since.UTC().Truncate(time.Millisecond)))
}

// WebhookActionCoverage is §7.1's coverage query (spPrimeflowWebhookActionCoverage).
func (s *Store) WebhookActionCoverage(ctx context.Context, since time.Time) ([]store.ActionCoverage, error) {
	return queryAll(ctx, s.q(), "webhook action coverage", procWebhookActionCoverage, func(sc sqlrows.Scanner) (store.ActionCoverage, error) {
		var a store.ActionCoverage
		err := sc.Scan(scanString{&a.Action}, &a.Events, scanTime{&a.FirstSeen}, scanTime{&a.LastSeen})
		return a, err
	}, sql.Named("SinceUTC", sqlTime(since)))
}

// CountEmailReceipts counts the receipts of the emails received since a
// time, by outcome (spPrimeflowCountEmailReceipts).
func (s *Store) CountEmailReceipts(ctx context.Context, since time.Time) (map[string]int, error) {
	counts, err := sqlrows.Counts(ctx, s.q(), procCountEmailReceipts, sql.Named("SinceUTC", since.UTC().Truncate(time.Millisecond)))
	if err != nil {
		return nil, fmt.Errorf("mssql: count email receipts: %w", err)
	}
	return counts, nil
}

// GetSweepWatermark reads a sweep's watermark (spPrimeflowGetSweepWatermark).
func (s *Store) GetSweepWatermark(ctx context.Context, name string) (time.Time, bool, error) {
	var t time.Time
	err := s.q().QueryRowContext(ctx, procGetSweepWatermark, sql.Named("Name", name)).Scan(scanTime{&t})
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("mssql: get sweep watermark: %w", err)
	}
	return t, true, nil
}

// SetSweepWatermark moves a sweep's watermark (spPrimeflowSetSweepWatermark).
func (s *Store) SetSweepWatermark(ctx context.Context, name string, watermark time.Time) error {
	if _, err := s.q().ExecContext(ctx, procSetSweepWatermark, sql.Named("Name", name),
		sql.Named("WatermarkUTC", watermark.UTC().Truncate(time.Millisecond))); err != nil {
		return fmt.Errorf("mssql: set sweep watermark: %w", err)
	}
	return nil
}

// RecordBackstopSeen records the jobs a backstop sweep listed, the first
// time only (spPrimeflowRecordBackstopSeen, the ids as one JSON array).
func (s *Store) RecordBackstopSeen(ctx context.Context, jobIDs []string, at time.Time) (int, error) {
	var ids []string
	for _, id := range jobIDs {
		if isGUID(id) {
			ids = append(ids, strings.ToLower(id))
		}
	}
	if len(ids) == 0 {
		return 0, nil
	}
	b, err := json.Marshal(ids)
	if err != nil {
		return 0, err
	}
	var n int
	if err := s.q().QueryRowContext(ctx, procRecordBackstopSeen, sql.Named("JobIds", string(b)),
		sql.Named("SeenUTC", at.UTC().Truncate(time.Millisecond))).Scan(&n); err != nil {
		return 0, fmt.Errorf("mssql: record backstop seen: %w", err)
	}
	return n, nil
}
