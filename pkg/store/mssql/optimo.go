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

	"github.com/ethosbuilding/primeflow/pkg/store"
)

// The procedures behind the Optimo and WorkOrders methods (sql/mssql/040_optimo.sql).
const (
	procOptimoGetAppointmentQueue = "dbo.spOptimoRouteGetAppointmentQueue"
	procOptimoGetWorkOrderQueue   = "dbo.spOptimoRouteGetWorkOrderQueue"
	procOptimoUpsertOrder         = "dbo.spOptimoRouteUpsertOrder"
	procOptimoRecordOrderFailure  = "dbo.spOptimoRouteRecordOrderFailure"
	procOptimoGetOrder            = "dbo.spOptimoRouteGetOrder"
	procOptimoPlanUpsert          = "dbo.spOptimoRoutePlanUpsert"
	procOptimoPlanGetQueue        = "dbo.spOptimoRoutePlanGetQueue"
	procOptimoPlanSetStatus       = "dbo.spOptimoRoutePlanSetStatus"
	procOptimoPlanGet             = "dbo.spOptimoRoutePlanGet"
	procOptimoPlanGetPlanning     = "dbo.spOptimoRoutePlanGetPlanningQueue"
	procOptimoGetRoutesRefresh    = "dbo.spOptimoRouteGetRoutesRefreshQueue"
	procOptimoClearSchedules      = "dbo.spOptimoRouteClearSchedules"
	procOptimoSetOrderSchedule    = "dbo.spOptimoRouteSetOrderSchedule"
	procOptimoGetOrderRefresh     = "dbo.spOptimoRouteGetOrderRefreshQueue"
	procOptimoSetOrderRefreshed   = "dbo.spOptimoRouteSetOrderRefreshed"
	procSaveWorkOrder             = "dbo.spPrimeSaveWorkOrder"
)

// scanDate reads a DATE column as YYYY-MM-DD; NULL is "".
type scanDate struct{ s *string }

func (sd scanDate) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		*sd.s = ""
	case time.Time:
		*sd.s = v.Format(store.DateLayout)
	default:
		return fmt.Errorf("mssql: date column holds %T", v)
	}
	return nil
}

// scanNullInt64 reads a nullable integer column; NULL is 0.
type scanNullInt64 struct{ n *int64 }

func (si scanNullInt64) Scan(v any) error {
	var n sql.NullInt64
	if err := n.Scan(v); err != nil {
		return err
	}
	*si.n = n.Int64
	return nil
}

// byName points each column a procedure returns at its destination; a
// missing or unknown column is an error, so a procedure that drifts from
// the Go side fails loudly.
func byName(what string, cols []string, dest map[string]any) ([]any, error) {
	out := make([]any, len(cols))
	left := maps.Clone(dest)
	for i, c := range cols {
		d, ok := left[c]
		if !ok {
			return nil, fmt.Errorf("mssql: %s: unexpected column %q", what, c)
		}
		out[i] = d
		delete(left, c)
	}
	if len(left) > 0 {
		return nil, fmt.Errorf("mssql: %s: columns missing: %s", what, strings.Join(slices.Sorted(maps.Keys(left)), ", "))
	}
	return out, nil
}

// queryEach calls proc and hands each row's scan targets, made by dest, to
// rows.Scan; dest returns the value's column map and a func that keeps it.
func (s *Store) queryEach(ctx context.Context, what, proc string, args []any, row func() (map[string]any, func())) error {
	rs, err := s.q().QueryContext(ctx, proc, args...)
	if err != nil {
		return fmt.Errorf("mssql: %s: %w", what, err)
	}
	defer rs.Close()
	cols, err := rs.Columns()
	if err != nil {
		return fmt.Errorf("mssql: %s: %w", what, err)
	}
	for rs.Next() {
		m, keep := row()
		dest, err := byName(what, cols, m)
		if err != nil {
			return err
		}
		if err := rs.Scan(dest...); err != nil {
			return fmt.Errorf("mssql: %s: %w", what, err)
		}
		keep()
	}
	if err := rs.Err(); err != nil {
		return fmt.Errorf("mssql: %s: %w", what, err)
	}
	return nil
}

func orderColumns(o *store.OptimoOrder, duration *int64) map[string]any {
	return map[string]any{
		"orderNo": &o.OrderNo, "appointmentId": scanGUID{&o.AppointmentID}, "workOrderId": scanGUID{&o.WorkOrderID},
		"jobId": scanGUID{&o.JobID}, "version": scanNullInt64{&o.Version}, "orderDate": scanDate{&o.OrderDate},
		"duration": scanNullInt64{duration}, "timeFrom": scanString{&o.TimeFrom}, "timeTo": scanString{&o.TimeTo},
		"address": scanString{&o.Address}, "assignedTo": scanString{&o.AssignedTo}, "state": &o.State,
		"errorText": scanString{&o.ErrorText}, "optimoId": scanString{&o.OptimoID},
		"scheduledUTC": scanTime{&o.ScheduledUTC}, "driverSerial": scanString{&o.DriverSerial},
		"driverName": scanString{&o.DriverName}, "routesUTC": scanTime{&o.RoutesUTC},
		"refreshedUTC": scanTime{&o.RefreshedUTC}, "createdUTC": scanTime{&o.CreatedUTC},
		"updatedUTC": scanTime{&o.UpdatedUTC},
	}
}

func (s *Store) queryOrders(ctx context.Context, what, proc string, args ...any) ([]store.OptimoOrder, error) {
	var out []store.OptimoOrder
	err := s.queryEach(ctx, what, proc, args, func() (map[string]any, func()) {
		var o store.OptimoOrder
		var duration int64
		return orderColumns(&o, &duration), func() {
			o.Duration = int(duration)
			out = append(out, o)
		}
	})
	return out, err
}

// GetOrder reads one order (spOptimoRouteGetOrder).
func (s *Store) GetOrder(ctx context.Context, orderNo string) (store.OptimoOrder, bool, error) {
	orders, err := s.queryOrders(ctx, "get order", procOptimoGetOrder, sql.Named("OrderNo", orderNo))
	if err != nil || len(orders) == 0 {
		return store.OptimoOrder{}, false, err
	}
	return orders[0], true, nil
}

// sourceArgs are the GUIDs naming an order's source.
func sourceArgs(o store.OptimoOrder) ([]any, error) {
	var args []any
	for _, p := range []struct{ name, value string }{
		{"AppointmentId", o.AppointmentID}, {"WorkOrderId", o.WorkOrderID}, {"JobId", o.JobID},
	} {
		v, err := guidParam(p.value)
		if err != nil {
			return nil, err
		}
		args = append(args, sql.Named(p.name, v))
	}
	return args, nil
}

// UpsertOrder records a written or deleted order and marks its dates
// (spOptimoRouteUpsertOrder → spOptimoRoutePlanUpsert).
func (s *Store) UpsertOrder(ctx context.Context, o store.OptimoOrder) error {
	if o.OrderNo == "" || (o.State != store.OrderActive && o.State != store.OrderDeleted) {
		return fmt.Errorf("mssql: upsert order %q: want an order number and state Active or Deleted, got %q", o.OrderNo, o.State)
	}
	args, err := sourceArgs(o)
	if err != nil {
		return err
	}
	date, err := dateParam(o.OrderDate)
	if err != nil {
		return err
	}
	args = append(args,
		sql.Named("OrderNo", o.OrderNo), sql.Named("State", o.State), sql.Named("Version", o.Version),
		sql.Named("OrderDate", date), sql.Named("Duration", sqlInt64(int64(o.Duration))),
		sql.Named("TimeFrom", sqlString(o.TimeFrom)), sql.Named("TimeTo", sqlString(o.TimeTo)),
		sql.Named("Address", sqlString(o.Address)), sql.Named("AssignedTo", sqlString(o.AssignedTo)),
		sql.Named("ErrorText", sqlString(o.ErrorText)), sql.Named("OptimoId", sqlString(o.OptimoID)))
	if _, err := s.q().ExecContext(ctx, procOptimoUpsertOrder, args...); err != nil {
		return fmt.Errorf("mssql: upsert order %s: %w", o.OrderNo, err)
	}
	return nil
}

// RecordOrderFailure records a source version that was not written
// (spOptimoRouteRecordOrderFailure).
func (s *Store) RecordOrderFailure(ctx context.Context, o store.OptimoOrder) error {
	if o.OrderNo == "" {
		return errors.New("mssql: record order failure: no order number")
	}
	args, err := sourceArgs(o)
	if err != nil {
		return err
	}
	args = append(args, sql.Named("OrderNo", o.OrderNo), sql.Named("Version", o.Version),
		sql.Named("ErrorText", o.ErrorText))
	if _, err := s.q().ExecContext(ctx, procOptimoRecordOrderFailure, args...); err != nil {
		return fmt.Errorf("mssql: record order failure %s: %w", o.OrderNo, err)
	}
	return nil
}

// PlanUpsert marks a date NotPlanned (spOptimoRoutePlanUpsert).
func (s *Store) PlanUpsert(ctx context.Context, planDate string) error {
	date, err := dateParam(planDate)
	if err != nil || planDate == "" {
		return fmt.Errorf("mssql: plan upsert %q: want a YYYY-MM-DD date", planDate)
	}
	if _, err := s.q().ExecContext(ctx, procOptimoPlanUpsert, sql.Named("PlanDate", date)); err != nil {
		return fmt.Errorf("mssql: plan upsert %s: %w", planDate, err)
	}
	return nil
}

func (s *Store) queryDates(ctx context.Context, what, proc string) ([]string, error) {
	var out []string
	err := s.queryEach(ctx, what, proc, nil, func() (map[string]any, func()) {
		var d string
		return map[string]any{"PlanDate": scanDate{&d}}, func() { out = append(out, d) }
	})
	return out, err
}

// GetPlanQueue returns every NotPlanned date (spOptimoRoutePlanGetQueue).
func (s *Store) GetPlanQueue(ctx context.Context) ([]string, error) {
	return s.queryDates(ctx, "get plan queue", procOptimoPlanGetQueue)
}

// GetRoutesRefreshQueue returns the PlanningCompleted dates
// (spOptimoRouteGetRoutesRefreshQueue).
func (s *Store) GetRoutesRefreshQueue(ctx context.Context) ([]string, error) {
	return s.queryDates(ctx, "get routes refresh queue", procOptimoGetRoutesRefresh)
}

// SetPlanStatus writes a date's status, guarded by OnlyIfStatus
// (spOptimoRoutePlanSetStatus, §8.4).
func (s *Store) SetPlanStatus(ctx context.Context, w store.PlanStatusWrite) (bool, error) {
	date, err := dateParam(w.PlanDate)
	if err != nil || w.PlanDate == "" || w.Status == "" {
		return false, fmt.Errorf("mssql: set plan status: want a YYYY-MM-DD date and a status, got %q %q", w.PlanDate, w.Status)
	}
	var written bool
	err = s.q().QueryRowContext(ctx, procOptimoPlanSetStatus,
		sql.Named("PlanDate", date), sql.Named("Status", w.Status), sql.Named("OnlyIfStatus", sqlString(w.OnlyIfStatus)),
		sql.Named("PlanningId", sqlInt64(w.PlanningID)), sql.Named("ErrorText", sqlString(w.ErrorText))).Scan(&written)
	if err != nil {
		return false, fmt.Errorf("mssql: set plan status %s %s: %w", w.PlanDate, w.Status, err)
	}
	return written, nil
}

func (s *Store) queryPlans(ctx context.Context, what, proc string, args ...any) ([]store.OptimoPlan, error) {
	var out []store.OptimoPlan
	err := s.queryEach(ctx, what, proc, args, func() (map[string]any, func()) {
		var p store.OptimoPlan
		return map[string]any{
			"PlanDate": scanDate{&p.PlanDate}, "PlanStatus": &p.PlanStatus, "PlanningId": scanNullInt64{&p.PlanningID},
			"ErrorText": scanString{&p.ErrorText}, "QueuedUTC": scanTime{&p.QueuedUTC},
			"StartedUTC": scanTime{&p.StartedUTC}, "FinishedUTC": scanTime{&p.FinishedUTC},
			"UpdatedUTC": scanTime{&p.UpdatedUTC},
		}, func() { out = append(out, p) }
	})
	return out, err
}

// GetPlan reads one date's row (spOptimoRoutePlanGet).
func (s *Store) GetPlan(ctx context.Context, planDate string) (store.OptimoPlan, bool, error) {
	date, err := dateParam(planDate)
	if err != nil || planDate == "" {
		return store.OptimoPlan{}, false, fmt.Errorf("mssql: get plan %q: want a YYYY-MM-DD date", planDate)
	}
	plans, err := s.queryPlans(ctx, "get plan", procOptimoPlanGet, sql.Named("PlanDate", date))
	if err != nil || len(plans) == 0 {
		return store.OptimoPlan{}, false, err
	}
	return plans[0], true, nil
}

// GetPlanningQueue returns the dates in Planning (spOptimoRoutePlanGetPlanningQueue).
func (s *Store) GetPlanningQueue(ctx context.Context) ([]store.OptimoPlan, error) {
	return s.queryPlans(ctx, "get planning queue", procOptimoPlanGetPlanning)
}

// SaveRoutes stores the schedules read back for a date, in one transaction
// (spOptimoRouteClearSchedules, then spOptimoRouteSetOrderSchedule a stop).
func (s *Store) SaveRoutes(ctx context.Context, planDate string, schedules []store.OrderSchedule, at time.Time) error {
	date, err := dateParam(planDate)
	if err != nil || planDate == "" {
		return fmt.Errorf("mssql: save routes %q: want a YYYY-MM-DD date", planDate)
	}
	err = s.inTx(ctx, func(tx *Store) error {
		if _, err := tx.q().ExecContext(ctx, procOptimoClearSchedules,
			sql.Named("PlanDate", date), sql.Named("RoutesUTC", sqlTime(at))); err != nil {
			return err
		}
		for _, sc := range schedules {
			if _, err := tx.q().ExecContext(ctx, procOptimoSetOrderSchedule,
				sql.Named("OrderNo", sc.OrderNo), sql.Named("PlanDate", date),
				sql.Named("ScheduledUTC", sqlTime(sc.ScheduledUTC)), sql.Named("DriverSerial", sqlString(sc.DriverSerial)),
				sql.Named("DriverName", sqlString(sc.DriverName))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("mssql: save routes %s: %w", planDate, err)
	}
	return nil
}

// GetOrderRefreshQueue returns the active orders the latest routes left
// unscheduled (spOptimoRouteGetOrderRefreshQueue).
func (s *Store) GetOrderRefreshQueue(ctx context.Context, limit int) ([]store.OptimoOrder, error) {
	if limit <= 0 {
		return nil, nil
	}
	return s.queryOrders(ctx, "get order refresh queue", procOptimoGetOrderRefresh, sql.Named("Top", limit))
}

// SetOrderRefreshed records what the order refresh found
// (spOptimoRouteSetOrderRefreshed).
func (s *Store) SetOrderRefreshed(ctx context.Context, orderNo string, found bool, optimoID string, at time.Time) error {
	if _, err := s.q().ExecContext(ctx, procOptimoSetOrderRefreshed, sql.Named("OrderNo", orderNo),
		sql.Named("Found", found), sql.Named("RefreshedUTC", sqlTime(at)), sql.Named("OptimoId", sqlString(optimoID))); err != nil {
		return fmt.Errorf("mssql: set order refreshed %s: %w", orderNo, err)
	}
	return nil
}

// queueColumns are the job and order columns every queue row carries.
func queueColumns(job *store.QueuedJob, o *store.OptimoOrder, m map[string]any) map[string]any {
	maps.Copy(m, map[string]any{
		"jobFound": &job.Found, "jobNumber": scanString{&job.JobNumber}, "addressLine1": scanString{&job.AddressLine1},
		"addressLine2": scanString{&job.AddressLine2}, "suburb": scanString{&job.Suburb},
		"jobState": scanString{&job.State}, "postcode": scanString{&job.Postcode},
		"orderNo": scanString{&o.OrderNo}, "orderVersion": scanNullInt64{&o.Version}, "orderDate": scanDate{&o.OrderDate},
		"orderState": scanString{&o.State}, "orderErrorText": scanString{&o.ErrorText},
		"orderOptimoId": scanString{&o.OptimoID},
	})
	return m
}

// GetAppointmentQueue returns the appointments whose order is not up to
// date (spOptimoRouteGetAppointmentQueue, §5.2), after the id after in
// SQL Server's uniqueidentifier order; "" is NULL, the start.
func (s *Store) GetAppointmentQueue(ctx context.Context, fromUTC time.Time, after string, limit int) ([]store.AppointmentQueueItem, error) {
	if limit <= 0 {
		return nil, nil
	}
	afterID, err := guidParam(after)
	if err != nil {
		return nil, err
	}
	var out []store.AppointmentQueueItem
	err = s.queryEach(ctx, "get appointment queue", procOptimoGetAppointmentQueue,
		[]any{sql.Named("FromUTC", sqlTime(fromUTC)), sql.Named("Top", limit), sql.Named("AfterAppointmentId", afterID)},
		func() (map[string]any, func()) {
			var it store.AppointmentQueueItem
			return queueColumns(&it.Job, &it.Order, map[string]any{
				"appointmentId": scanGUID{&it.AppointmentID}, "jobId": scanGUID{&it.JobID},
				"startDate": scanTime{&it.StartDate}, "endDate": scanTime{&it.EndDate}, "status": scanString{&it.Status},
				"version": scanNullInt64{&it.Version}, "assignedId": scanGUID{&it.AssignedID},
				"description": scanString{&it.Description}, "notes": scanString{&it.Notes}, "gone": &it.Gone,
			}), func() { out = append(out, it) }
		})
	return out, err
}

// GetWorkOrderQueue returns the work orders whose order is not up to date
// (spOptimoRouteGetWorkOrderQueue), after the id after as for appointments.
func (s *Store) GetWorkOrderQueue(ctx context.Context, after string, limit int) ([]store.WorkOrderQueueItem, error) {
	if limit <= 0 {
		return nil, nil
	}
	afterID, err := guidParam(after)
	if err != nil {
		return nil, err
	}
	var out []store.WorkOrderQueueItem
	err = s.queryEach(ctx, "get work order queue", procOptimoGetWorkOrderQueue,
		[]any{sql.Named("Top", limit), sql.Named("AfterWorkOrderId", afterID)}, func() (map[string]any, func()) {
			var it store.WorkOrderQueueItem
			return queueColumns(&it.Job, &it.Order, map[string]any{
				"workOrderId": scanGUID{&it.WorkOrderID}, "jobId": scanGUID{&it.JobID}, "status": scanString{&it.Status},
				"version": scanNullInt64{&it.Version}, "attributes": scanString{&it.Attributes}, "gone": &it.Gone,
			}), func() { out = append(out, it) }
		})
	return out, err
}

// SaveWorkOrder upserts a work order unless the stored row is newer
// (spPrimeSaveWorkOrder).
func (s *Store) SaveWorkOrder(ctx context.Context, w store.WorkOrder) (bool, error) {
	id, err := parseGUID(w.WorkOrderID)
	if err != nil {
		return false, err
	}
	job, err := guidParam(w.JobID)
	if err != nil {
		return false, err
	}
	var saved bool
	err = s.q().QueryRowContext(ctx, procSaveWorkOrder, sql.Named("WorkOrderId", id), sql.Named("JobId", job),
		sql.Named("Status", sqlString(w.Status)), sql.Named("Version", w.Version),
		sql.Named("CreatedAt", sqlTime(w.CreatedAt)), sql.Named("UpdatedAt", sqlTime(w.UpdatedAt)),
		sql.Named("Attributes", sqlString(w.Attributes))).Scan(&saved)
	if err != nil {
		return false, fmt.Errorf("mssql: save work order: %w", err)
	}
	return saved, nil
}
