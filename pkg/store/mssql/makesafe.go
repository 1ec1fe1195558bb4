package mssql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
)

// The procedures behind the Makesafe methods (sql/mssql/031_makesafe.sql,
// 032_callers.sql).
const (
	procMakesafeDetect       = "dbo.spMakesafeUpsertPhoneCallFromPrimeJob"
	procMakesafeGetPhoneCall = "dbo.spMakesafeGetPhoneCall"
	procMakesafeListChecks   = "dbo.spMakesafeListAllocationChecks"
	procMakesafeCheckFired   = "dbo.spMakesafeSetAllocationCheckFired"
	procMakesafeDueChecks    = "dbo.spMakesafeListDueAllocationChecks"
)

// UpsertMakeSafePhoneCallFromJob calls spMakesafeUpsertPhoneCallFromPrimeJob,
// which owns the whole rule; the ladder's offsets go as whole seconds.
func (s *Store) UpsertMakeSafePhoneCallFromJob(ctx context.Context, d store.MakesafeDetection) (store.MakesafeOutcome, error) {
	var out store.MakesafeOutcome
	job, err := parseGUID(d.JobID)
	if err != nil {
		return out, err
	}
	offsets := make([]int64, len(d.Checks))
	for i, c := range d.Checks {
		offsets[i] = int64(c / time.Second)
	}
	rows, err := s.q().QueryContext(ctx, procMakesafeDetect,
		sql.Named("JobId", job), sql.Named("QueueMakeAllocationChecks", d.QueueChecks),
		sql.Named("CheckOffsets", idList(offsets)), sql.Named("ChecksFromUTC", sqlTime(d.ChecksFrom)),
		sql.Named("NowUTC", sqlTime(d.Now)),
		sql.Named("SMSRecipient", sqlString(d.SMSRecipient)))
	if err != nil {
		return out, fmt.Errorf("mssql: upsert make-safe phone call: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		return out, fmt.Errorf("mssql: upsert make-safe phone call: no outcome: %w", errors.Join(rows.Err(), sql.ErrNoRows))
	}
	var phoneCallID, smsID sql.NullInt64
	if err := rows.Scan(&out.JobFound, scanString{&out.JobNumber}, scanTime{&out.JobCreatedUTC},
		&out.OutsideBusinessHours, &out.HasMakeSafe, &phoneCallID, &out.Raised, &smsID); err != nil {
		return out, fmt.Errorf("mssql: upsert make-safe phone call: %w", err)
	}
	out.PhoneCallID, out.SMSID = phoneCallID.Int64, smsID.Int64
	// go-mssqldb sees the next result set only once this one is read to its end.
	if rows.Next() {
		return out, errors.New("mssql: upsert make-safe phone call: more than one outcome row")
	}
	if rows.NextResultSet() {
		checks, err := scanChecks(rows)
		if err != nil {
			return out, fmt.Errorf("mssql: upsert make-safe phone call: %w", err)
		}
		out.Checks = checks
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("mssql: upsert make-safe phone call: %w", err)
	}
	return out, nil
}

// scanChecks reads rungs: PrimeJobID, Rung, DueUTC, QueuedUTC, and FiredUTC
// and Outcome when the result has them.
func scanChecks(rows *sql.Rows) ([]store.MakesafeCheck, error) {
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []store.MakesafeCheck
	for rows.Next() {
		var c store.MakesafeCheck
		dest := []any{scanGUID{&c.PrimeJobID}, &c.Rung, scanTime{&c.DueUTC}, scanTime{&c.QueuedUTC}}
		if len(cols) == 6 {
			dest = append(dest, scanTime{&c.FiredUTC}, scanString{&c.Outcome})
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// GetMakesafePhoneCall returns the job's phone call (spMakesafeGetPhoneCall).
func (s *Store) GetMakesafePhoneCall(ctx context.Context, jobID string) (store.MakesafePhoneCall, bool, error) {
	var c store.MakesafePhoneCall
	job, err := parseGUID(jobID)
	if err != nil {
		return c, false, err
	}
	var smsID sql.NullInt64
	err = s.q().QueryRowContext(ctx, procMakesafeGetPhoneCall, sql.Named("JobId", job)).Scan(&c.ID,
		scanGUID{&c.PrimeJobID}, scanString{&c.JobNumber}, scanTime{&c.JobCreatedUTC}, scanTime{&c.RaisedUTC},
		scanString{&c.State}, &smsID)
	if errors.Is(err, sql.ErrNoRows) {
		return c, false, nil
	}
	if err != nil {
		return c, false, fmt.Errorf("mssql: get make-safe phone call: %w", err)
	}
	c.SMSID = smsID.Int64
	return c, true, nil
}

// ListMakesafeChecks returns the job's rungs (spMakesafeListAllocationChecks).
func (s *Store) ListMakesafeChecks(ctx context.Context, jobID string) ([]store.MakesafeCheck, error) {
	job, err := parseGUID(jobID)
	if err != nil {
		return nil, err
	}
	return s.listChecks(ctx, "list make-safe checks", procMakesafeListChecks, sql.Named("JobId", job))
}

// listChecks calls a procedure that returns rungs; what names it in errors.
func (s *Store) listChecks(ctx context.Context, what, proc string, args ...any) ([]store.MakesafeCheck, error) {
	rows, err := s.q().QueryContext(ctx, proc, args...)
	if err != nil {
		return nil, fmt.Errorf("mssql: %s: %w", what, err)
	}
	defer rows.Close()
	out, err := scanChecks(rows)
	if err != nil {
		return nil, fmt.Errorf("mssql: %s: %w", what, err)
	}
	return out, nil
}

// SetMakesafeCheckFired records that a rung ran (spMakesafeSetAllocationCheckFired).
func (s *Store) SetMakesafeCheckFired(ctx context.Context, jobID string, rung int, outcome string, at time.Time) error {
	job, err := parseGUID(jobID)
	if err != nil {
		return err
	}
	return s.callUpdating(ctx, "set make-safe check fired", fmt.Sprintf("job %s rung %d", jobID, rung),
		procMakesafeCheckFired, sql.Named("JobId", job), sql.Named("Rung", rung),
		sql.Named("Outcome", statusParam(outcome)), sql.Named("FiredUTC", sqlTime(at)))
}

// ListDueMakesafeChecks returns rungs not fired and due before dueBefore
// (spMakesafeListDueAllocationChecks).
func (s *Store) ListDueMakesafeChecks(ctx context.Context, dueBefore time.Time, limit int) ([]store.MakesafeCheck, error) {
	if limit <= 0 {
		return nil, nil
	}
	return s.listChecks(ctx, "list due make-safe checks", procMakesafeDueChecks,
		sql.Named("DueBefore", sqlTime(dueBefore)), sql.Named("Top", limit))
}
