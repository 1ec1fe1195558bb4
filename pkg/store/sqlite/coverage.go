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

// ListJobCoverage reads the jobs Prime created since a time, with when each
// path first saw them (spPrimeflowJobCoverage).
func (s *Store) ListJobCoverage(ctx context.Context, since time.Time) ([]store.JobCoverage, error) {
	return queryAll(ctx, s.r(), "job coverage", `SELECT j.jobId, j.jobNumber, j.createdAt,
			f.firstSeenUTC, f.via, fl.eventAction,
			(SELECT l.receivedUTC FROM ethPrimeWebhookLog AS l WHERE l.jobId = j.jobId ORDER BY l.receivedUTC, l.id LIMIT 1),
			(SELECT l.eventAction FROM ethPrimeWebhookLog AS l WHERE l.jobId = j.jobId ORDER BY l.receivedUTC, l.id LIMIT 1),
			(SELECT MIN(COALESCE(r.receivedDateTime, r.registeredUTC)) FROM PrimeEmailJobRegistered AS r WHERE r.primeJobId = j.jobId),
			b.firstSeenUTC
		FROM primeJobs AS j
		LEFT JOIN primeflowJobFirstSeen AS f ON f.jobId = j.jobId
		LEFT JOIN ethPrimeWebhookLog AS fl ON fl.id = f.logId
		LEFT JOIN primeflowBackstopSeen AS b ON b.jobId = j.jobId
		WHERE j.createdAt >= ?1 OR (j.createdAt IS NULL AND f.firstSeenUTC >= ?1)
		ORDER BY COALESCE(j.createdAt, f.firstSeenUTC), j.jobId`,
		func(sc sqlrows.Scanner) (store.JobCoverage, error) {
			var c store.JobCoverage
			err := sc.Scan(&c.JobID, scanString{&c.JobNumber}, scanTime{&c.CreatedAt}, scanTime{&c.FirstSeenUTC}, scanString{&c.Via},
				scanString{&c.FirstAction}, scanTime{&c.Webhook}, scanString{&c.WebhookAction}, scanTime{&c.Email}, scanTime{&c.Backstop})
			return c, err
		}, formatTime(since))
}

// WebhookActionCoverage is §7.1's coverage query (spPrimeflowWebhookActionCoverage).
func (s *Store) WebhookActionCoverage(ctx context.Context, since time.Time) ([]store.ActionCoverage, error) {
	return queryAll(ctx, s.r(), "webhook action coverage", `SELECT eventAction, COUNT(*), MIN(receivedUTC), MAX(receivedUTC)
		FROM ethPrimeWebhookLog
		WHERE ?1 IS NULL OR receivedUTC >= ?1
		GROUP BY eventAction
		ORDER BY MAX(receivedUTC) DESC`,
		func(sc sqlrows.Scanner) (store.ActionCoverage, error) {
			var a store.ActionCoverage
			err := sc.Scan(scanString{&a.Action}, &a.Events, scanTime{&a.FirstSeen}, scanTime{&a.LastSeen})
			return a, err
		}, nullTime(since))
}

// CountEmailReceipts counts the receipts of the emails received since a
// time, by outcome (spPrimeflowCountEmailReceipts).
func (s *Store) CountEmailReceipts(ctx context.Context, since time.Time) (map[string]int, error) {
	counts, err := sqlrows.Counts(ctx, s.r(), `SELECT outcome, COUNT(*) FROM PrimeEmailJobRegistered
		WHERE COALESCE(receivedDateTime, registeredUTC) >= ? GROUP BY outcome`, formatTime(since))
	if err != nil {
		return nil, fmt.Errorf("sqlite: count email receipts: %w", err)
	}
	return counts, nil
}

// GetSweepWatermark reads a sweep's watermark (spPrimeflowGetSweepWatermark).
func (s *Store) GetSweepWatermark(ctx context.Context, name string) (time.Time, bool, error) {
	return queryOne(ctx, s.r(), "get sweep watermark", `SELECT watermarkUTC FROM primeflowSweepWatermark WHERE name = ?`,
		func(sc sqlrows.Scanner) (time.Time, error) {
			var t time.Time
			err := sc.Scan(scanTime{&t})
			return t, err
		}, name)
}

// SetSweepWatermark moves a sweep's watermark (spPrimeflowSetSweepWatermark).
func (s *Store) SetSweepWatermark(ctx context.Context, name string, watermark time.Time) error {
	if _, err := s.w().ExecContext(ctx, `INSERT INTO primeflowSweepWatermark (name, watermarkUTC, updatedUTC) VALUES (?1, ?2, ?3)
		ON CONFLICT (name) DO UPDATE SET watermarkUTC = ?2, updatedUTC = ?3`,
		name, formatTime(watermark), formatTime(time.Now())); err != nil {
		return fmt.Errorf("sqlite: set sweep watermark: %w", err)
	}
	return nil
}

// RecordBackstopSeen records the jobs a backstop sweep listed, the first
// time only (spPrimeflowRecordBackstopSeen).
func (s *Store) RecordBackstopSeen(ctx context.Context, jobIDs []string, at time.Time) (int, error) {
	if len(jobIDs) == 0 {
		return 0, nil
	}
	lower := make([]string, len(jobIDs))
	for i, id := range jobIDs {
		lower[i] = strings.ToLower(id)
	}
	ids, err := json.Marshal(lower)
	if err != nil {
		return 0, err
	}
	res, err := s.w().ExecContext(ctx, `INSERT INTO primeflowBackstopSeen (jobId, firstSeenUTC)
		SELECT DISTINCT value, ? FROM json_each(?) WHERE value <> ''
		ON CONFLICT (jobId) DO NOTHING`, formatTime(at), string(ids))
	if err != nil {
		return 0, fmt.Errorf("sqlite: record backstop seen: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}
