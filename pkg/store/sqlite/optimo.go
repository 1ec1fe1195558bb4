package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// optMaxErrorText is how much of an error optimoRouteOrder and optimoRoutePlan
// keep, as the SQL Server columns do.
const optMaxErrorText = 1000

func optErrorText(s string) any {
	if r := []rune(s); len(r) > optMaxErrorText {
		s = string(r[:optMaxErrorText])
	}
	return nullString(s)
}

// optGUID stores a GUID in its canonical lower-case text; "" is NULL.
func optGUID(s string) any { return nullString(strings.ToLower(s)) }

func optNullInt(n int64) any {
	if n == 0 {
		return nil
	}
	return n
}

// scanOptInt reads a nullable integer column; NULL is 0.
type scanOptInt struct{ n *int64 }

func (si scanOptInt) Scan(v any) error {
	var n sql.NullInt64
	if err := n.Scan(v); err != nil {
		return err
	}
	*si.n = n.Int64
	return nil
}

// orderColumns are the columns of optimoRouteOrder in the order orderDest
// scans them.
const orderColumns = `orderNo, appointmentId, workOrderId, jobId, version, orderDate, duration, timeFrom, timeTo,
	address, assignedTo, state, errorText, optimoId, scheduledUTC, driverSerial, driverName, routesUTC,
	refreshedUTC, createdUTC, updatedUTC`

func orderDest(o *store.OptimoOrder, duration *int64) []any {
	return []any{&o.OrderNo, scanString{&o.AppointmentID}, scanString{&o.WorkOrderID}, scanString{&o.JobID},
		scanOptInt{&o.Version}, scanString{&o.OrderDate}, scanOptInt{duration}, scanString{&o.TimeFrom},
		scanString{&o.TimeTo}, scanString{&o.Address}, scanString{&o.AssignedTo}, &o.State, scanString{&o.ErrorText},
		scanString{&o.OptimoID}, scanTime{&o.ScheduledUTC}, scanString{&o.DriverSerial}, scanString{&o.DriverName},
		scanTime{&o.RoutesUTC}, scanTime{&o.RefreshedUTC}, scanTime{&o.CreatedUTC}, scanTime{&o.UpdatedUTC}}
}

func (s *Store) queryOrders(ctx context.Context, what, query string, args ...any) ([]store.OptimoOrder, error) {
	return queryAll(ctx, s.r(), what, query, func(sc sqlrows.Scanner) (store.OptimoOrder, error) {
		var o store.OptimoOrder
		var duration int64
		err := sc.Scan(orderDest(&o, &duration)...)
		o.Duration = int(duration)
		return o, err
	}, args...)
}

// GetOrder reads one order.
func (s *Store) GetOrder(ctx context.Context, orderNo string) (store.OptimoOrder, bool, error) {
	orders, err := s.queryOrders(ctx, "get order", `SELECT `+orderColumns+` FROM optimoRouteOrder WHERE orderNo = ?`, orderNo)
	if err != nil || len(orders) == 0 {
		return store.OptimoOrder{}, false, err
	}
	return orders[0], true, nil
}

// UpsertOrder records a written or deleted order and marks its dates
// (spOptimoRouteUpsertOrder → spOptimoRoutePlanUpsert).
func (s *Store) UpsertOrder(ctx context.Context, o store.OptimoOrder) error {
	if o.OrderNo == "" || (o.State != store.OrderActive && o.State != store.OrderDeleted) {
		return fmt.Errorf("sqlite: upsert order %q: want an order number and state Active or Deleted, got %q", o.OrderNo, o.State)
	}
	err := s.inTx(ctx, func(tx *Store) error {
		var prevState, prevDate string
		err := tx.tx.QueryRowContext(ctx, `SELECT state, orderDate FROM optimoRouteOrder WHERE orderNo = ?`, o.OrderNo).
			Scan(&prevState, scanString{&prevDate})
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		now := formatTime(time.Now())
		// The read-back columns hold while the order stays active on its date.
		_, err = tx.tx.ExecContext(ctx, `INSERT INTO optimoRouteOrder
			(orderNo, appointmentId, workOrderId, jobId, version, orderDate, duration, timeFrom, timeTo, address,
			 assignedTo, state, errorText, optimoId, createdUTC, updatedUTC)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (orderNo) DO UPDATE SET
				appointmentId = excluded.appointmentId, workOrderId = excluded.workOrderId, jobId = excluded.jobId,
				version = excluded.version, orderDate = excluded.orderDate, duration = excluded.duration,
				timeFrom = excluded.timeFrom, timeTo = excluded.timeTo, address = excluded.address,
				assignedTo = excluded.assignedTo, state = excluded.state, errorText = excluded.errorText,
				optimoId = COALESCE(excluded.optimoId, optimoRouteOrder.optimoId),
				scheduledUTC = CASE WHEN `+keepsReadBack+` THEN scheduledUTC END,
				driverSerial = CASE WHEN `+keepsReadBack+` THEN driverSerial END,
				driverName = CASE WHEN `+keepsReadBack+` THEN driverName END,
				routesUTC = CASE WHEN `+keepsReadBack+` THEN routesUTC END,
				refreshedUTC = CASE WHEN `+keepsReadBack+` THEN refreshedUTC END,
				updatedUTC = excluded.updatedUTC`,
			o.OrderNo, optGUID(o.AppointmentID), optGUID(o.WorkOrderID), optGUID(o.JobID), o.Version,
			nullString(o.OrderDate), optNullInt(int64(o.Duration)), nullString(o.TimeFrom), nullString(o.TimeTo),
			nullString(o.Address), nullString(o.AssignedTo), o.State, optErrorText(o.ErrorText), nullString(o.OptimoID), now, now)
		if err != nil {
			return err
		}
		for _, date := range datesToMark(prevState, prevDate, o) {
			if err := tx.planUpsert(ctx, date); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: upsert order %s: %w", o.OrderNo, err)
	}
	return nil
}

// keepsReadBack is true in an upsert that leaves the order active on the
// date it had.
const keepsReadBack = `excluded.state = 'Active' AND optimoRouteOrder.state = 'Active' AND optimoRouteOrder.orderDate = excluded.orderDate`

// datesToMark are the dates an order write queues for planning (§8): the
// order's date when it is active, and the date it had when it was active
// there before and is not now.
func datesToMark(prevState, prevDate string, o store.OptimoOrder) []string {
	var dates []string
	if o.State == store.OrderActive && o.OrderDate != "" {
		dates = append(dates, o.OrderDate)
	}
	if prevState == store.OrderActive && prevDate != "" && (o.State != store.OrderActive || prevDate != o.OrderDate) {
		dates = append(dates, prevDate)
	}
	return dates
}

// RecordOrderFailure records a source version that was not written.
func (s *Store) RecordOrderFailure(ctx context.Context, o store.OptimoOrder) error {
	if o.OrderNo == "" {
		return errors.New("sqlite: record order failure: no order number")
	}
	now := formatTime(time.Now())
	_, err := s.w().ExecContext(ctx, `INSERT INTO optimoRouteOrder
		(orderNo, appointmentId, workOrderId, jobId, version, state, errorText, createdUTC, updatedUTC)
		VALUES (?, ?, ?, ?, ?, 'Deleted', ?, ?, ?)
		ON CONFLICT (orderNo) DO UPDATE SET
			appointmentId = COALESCE(excluded.appointmentId, optimoRouteOrder.appointmentId),
			workOrderId = COALESCE(excluded.workOrderId, optimoRouteOrder.workOrderId),
			jobId = COALESCE(excluded.jobId, optimoRouteOrder.jobId),
			version = excluded.version, errorText = excluded.errorText, updatedUTC = excluded.updatedUTC`,
		o.OrderNo, optGUID(o.AppointmentID), optGUID(o.WorkOrderID), optGUID(o.JobID), o.Version,
		optErrorText(o.ErrorText), now, now)
	if err != nil {
		return fmt.Errorf("sqlite: record order failure %s: %w", o.OrderNo, err)
	}
	return nil
}

// PlanUpsert marks a date NotPlanned (spOptimoRoutePlanUpsert).
func (s *Store) PlanUpsert(ctx context.Context, planDate string) error {
	if err := s.planUpsert(ctx, planDate); err != nil {
		return fmt.Errorf("sqlite: plan upsert %s: %w", planDate, err)
	}
	return nil
}

func (s *Store) planUpsert(ctx context.Context, planDate string) error {
	if _, err := time.Parse(store.DateLayout, planDate); err != nil {
		return fmt.Errorf("plan date %q: want YYYY-MM-DD", planDate)
	}
	now := formatTime(time.Now())
	_, err := s.w().ExecContext(ctx, `INSERT INTO optimoRoutePlan (PlanDate, PlanStatus, QueuedUTC, UpdatedUTC)
		VALUES (?, 'NotPlanned', ?, ?)
		ON CONFLICT (PlanDate) DO UPDATE SET PlanStatus = 'NotPlanned', PlanningId = NULL, ErrorText = NULL,
			QueuedUTC = excluded.QueuedUTC, UpdatedUTC = excluded.UpdatedUTC`, planDate, now, now)
	return err
}

// GetPlanQueue returns every NotPlanned date (spOptimoRoutePlanGetQueue).
func (s *Store) GetPlanQueue(ctx context.Context) ([]string, error) {
	return s.planDates(ctx, "get plan queue", store.PlanNotPlanned)
}

// GetRoutesRefreshQueue returns the PlanningCompleted dates.
func (s *Store) GetRoutesRefreshQueue(ctx context.Context) ([]string, error) {
	return s.planDates(ctx, "get routes refresh queue", store.PlanPlanningCompleted)
}

func (s *Store) planDates(ctx context.Context, what, status string) ([]string, error) {
	return queryAll(ctx, s.r(), what, `SELECT PlanDate FROM optimoRoutePlan WHERE PlanStatus = ? ORDER BY PlanDate`,
		sqlrows.Text, status)
}

// SetPlanStatus writes a date's status, guarded by OnlyIfStatus (§8.4).
func (s *Store) SetPlanStatus(ctx context.Context, w store.PlanStatusWrite) (bool, error) {
	if _, err := time.Parse(store.DateLayout, w.PlanDate); err != nil || w.Status == "" {
		return false, fmt.Errorf("sqlite: set plan status: want a YYYY-MM-DD date and a status, got %q %q", w.PlanDate, w.Status)
	}
	now := formatTime(time.Now())
	var written bool
	err := s.inTx(ctx, func(tx *Store) error {
		res, err := tx.tx.ExecContext(ctx, `UPDATE optimoRoutePlan SET
				StartedUTC = CASE WHEN ?1 = 'Planning' AND PlanStatus <> 'Planning' THEN ?2 ELSE StartedUTC END,
				FinishedUTC = CASE WHEN ?1 NOT IN ('NotPlanned', 'Planning') THEN ?2 ELSE FinishedUTC END,
				PlanStatus = ?1, PlanningId = COALESCE(?3, PlanningId), ErrorText = ?4, UpdatedUTC = ?2
			WHERE PlanDate = ?5 AND (?6 IS NULL OR PlanStatus = ?6)`,
			w.Status, now, optNullInt(w.PlanningID), optErrorText(w.ErrorText), w.PlanDate, nullString(w.OnlyIfStatus))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil || n > 0 || w.OnlyIfStatus != "" {
			written = n > 0
			return err
		}
		_, err = tx.tx.ExecContext(ctx, `INSERT INTO optimoRoutePlan
			(PlanDate, PlanStatus, PlanningId, ErrorText, StartedUTC, FinishedUTC, UpdatedUTC)
			VALUES (?1, ?2, ?3, ?4, CASE WHEN ?2 = 'Planning' THEN ?5 END,
				CASE WHEN ?2 NOT IN ('NotPlanned', 'Planning') THEN ?5 END, ?5)`,
			w.PlanDate, w.Status, optNullInt(w.PlanningID), optErrorText(w.ErrorText), now)
		written = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("sqlite: set plan status %s %s: %w", w.PlanDate, w.Status, err)
	}
	return written, nil
}

const planColumns = `PlanDate, PlanStatus, PlanningId, ErrorText, QueuedUTC, StartedUTC, FinishedUTC, UpdatedUTC`

func (s *Store) queryPlans(ctx context.Context, what, query string, args ...any) ([]store.OptimoPlan, error) {
	return queryAll(ctx, s.r(), what, query, func(sc sqlrows.Scanner) (store.OptimoPlan, error) {
		var p store.OptimoPlan
		err := sc.Scan(&p.PlanDate, &p.PlanStatus, scanOptInt{&p.PlanningID}, scanString{&p.ErrorText},
			scanTime{&p.QueuedUTC}, scanTime{&p.StartedUTC}, scanTime{&p.FinishedUTC}, scanTime{&p.UpdatedUTC})
		return p, err
	}, args...)
}

// GetPlan reads one date's row.
func (s *Store) GetPlan(ctx context.Context, planDate string) (store.OptimoPlan, bool, error) {
	plans, err := s.queryPlans(ctx, "get plan", `SELECT `+planColumns+` FROM optimoRoutePlan WHERE PlanDate = ?`, planDate)
	if err != nil || len(plans) == 0 {
		return store.OptimoPlan{}, false, err
	}
	return plans[0], true, nil
}

// GetPlanningQueue returns the dates in Planning.
func (s *Store) GetPlanningQueue(ctx context.Context) ([]store.OptimoPlan, error) {
	return s.queryPlans(ctx, "get planning queue", `SELECT `+planColumns+` FROM optimoRoutePlan
		WHERE PlanStatus = 'Planning' ORDER BY PlanDate`)
}

// SaveRoutes stores the schedules read back for a date.
func (s *Store) SaveRoutes(ctx context.Context, planDate string, schedules []store.OrderSchedule, at time.Time) error {
	err := s.inTx(ctx, func(tx *Store) error {
		if _, err := tx.tx.ExecContext(ctx, `UPDATE optimoRouteOrder
			SET scheduledUTC = NULL, driverSerial = NULL, driverName = NULL, routesUTC = ?
			WHERE orderDate = ?`, formatTime(at), planDate); err != nil {
			return err
		}
		for _, sc := range schedules {
			if _, err := tx.tx.ExecContext(ctx, `UPDATE optimoRouteOrder
				SET scheduledUTC = ?, driverSerial = ?, driverName = ?
				WHERE orderNo = ? AND orderDate = ?`,
				nullTime(sc.ScheduledUTC), nullString(sc.DriverSerial), nullString(sc.DriverName), sc.OrderNo, planDate); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: save routes %s: %w", planDate, err)
	}
	return nil
}

// GetOrderRefreshQueue returns the active orders the latest routes left
// unscheduled and that were not refreshed since.
func (s *Store) GetOrderRefreshQueue(ctx context.Context, limit int) ([]store.OptimoOrder, error) {
	if limit <= 0 {
		return nil, nil
	}
	return s.queryOrders(ctx, "get order refresh queue", `SELECT `+optPrefixed("o.", orderColumns)+`
		FROM optimoRouteOrder o JOIN optimoRoutePlan p ON p.PlanDate = o.orderDate
		WHERE o.state = 'Active' AND p.PlanStatus = 'RoutesCompleted' AND o.routesUTC IS NOT NULL
		  AND o.scheduledUTC IS NULL AND (o.refreshedUTC IS NULL OR o.refreshedUTC < o.routesUTC)
		ORDER BY o.orderNo LIMIT ?`, limit)
}

// optPrefixed qualifies every column of a list with a table alias.
func optPrefixed(alias, columns string) string {
	cols := strings.Split(columns, ",")
	for i, c := range cols {
		cols[i] = alias + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}

// SetOrderRefreshed records what the order refresh found.
func (s *Store) SetOrderRefreshed(ctx context.Context, orderNo string, found bool, optimoID string, at time.Time) error {
	query := `UPDATE optimoRouteOrder SET refreshedUTC = ?1, optimoId = COALESCE(?2, optimoId), updatedUTC = ?3
		WHERE orderNo = ?4`
	if !found {
		query = `UPDATE optimoRouteOrder SET state = 'Deleted', version = NULL, errorText = 'not found in OptimoRoute',
			scheduledUTC = NULL, driverSerial = NULL, driverName = NULL, refreshedUTC = ?1,
			optimoId = COALESCE(?2, optimoId), updatedUTC = ?3
		WHERE orderNo = ?4`
	}
	if _, err := s.w().ExecContext(ctx, query, formatTime(at), nullString(optimoID), formatTime(time.Now()), orderNo); err != nil {
		return fmt.Errorf("sqlite: set order refreshed %s: %w", orderNo, err)
	}
	return nil
}

// queueOrderColumns are the order's columns a queue returns with each item.
const queueOrderColumns = `o.orderNo, o.version, o.orderDate, o.state, o.errorText, o.optimoId`

// queueJobColumns are the job's columns a queue returns with each item.
const queueJobColumns = `j.jobId IS NOT NULL, j.jobNumber, j.addressLine1, j.addressLine2, j.suburb, j.state, j.postcode`

func queueDest(job *store.QueuedJob, o *store.OptimoOrder) []any {
	return []any{&job.Found, scanString{&job.JobNumber}, scanString{&job.AddressLine1}, scanString{&job.AddressLine2},
		scanString{&job.Suburb}, scanString{&job.State}, scanString{&job.Postcode},
		scanString{&o.OrderNo}, scanOptInt{&o.Version}, scanString{&o.OrderDate}, scanString{&o.State},
		scanString{&o.ErrorText}, scanString{&o.OptimoID}}
}

// GetAppointmentQueue returns the appointments whose order is not up to
// date (spOptimoRouteGetAppointmentQueue, §5.2), after the id after. Ids are
// lower-case text, and "" sorts before every one of them: the start.
func (s *Store) GetAppointmentQueue(ctx context.Context, fromUTC time.Time, after string, limit int) ([]store.AppointmentQueueItem, error) {
	if limit <= 0 {
		return nil, nil
	}
	return queryAll(ctx, s.r(), "get appointment queue", `SELECT * FROM (
		SELECT a.appointmentId, a.jobId, a.startDate, a.endDate, a.status, a.version, a.assignedId,
			a.description, a.notes, 0 AS gone, `+queueJobColumns+`, `+queueOrderColumns+`
		FROM primeAppointments a
		LEFT JOIN primeJobs j ON j.jobId = a.jobId
		LEFT JOIN optimoRouteOrder o ON o.appointmentId = a.appointmentId
		WHERE (o.orderNo IS NULL OR o.version IS NULL OR o.version <> COALESCE(a.version, 0))
		  AND (a.startDate >= ? OR o.state = 'Active')
		UNION ALL
		SELECT o.appointmentId, o.jobId, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1,
			0, NULL, NULL, NULL, NULL, NULL, NULL, `+queueOrderColumns+`
		FROM optimoRouteOrder o
		WHERE o.appointmentId IS NOT NULL AND o.state = 'Active'
		  AND NOT EXISTS (SELECT 1 FROM primeAppointments a WHERE a.appointmentId = o.appointmentId)
	) WHERE appointmentId > ? ORDER BY appointmentId LIMIT ?`, func(sc sqlrows.Scanner) (store.AppointmentQueueItem, error) {
		var it store.AppointmentQueueItem
		err := sc.Scan(append([]any{&it.AppointmentID, scanString{&it.JobID}, scanTime{&it.StartDate}, scanTime{&it.EndDate},
			scanString{&it.Status}, scanOptInt{&it.Version}, scanString{&it.AssignedID}, scanString{&it.Description},
			scanString{&it.Notes}, &it.Gone}, queueDest(&it.Job, &it.Order)...)...)
		return it, err
	}, formatTime(fromUTC), strings.ToLower(after), limit)
}

// GetWorkOrderQueue returns the work orders whose order is not up to date,
// after the id after ("" from the start, as for appointments).
func (s *Store) GetWorkOrderQueue(ctx context.Context, after string, limit int) ([]store.WorkOrderQueueItem, error) {
	if limit <= 0 {
		return nil, nil
	}
	return queryAll(ctx, s.r(), "get work order queue", `SELECT * FROM (
		SELECT w.workOrderId, w.jobId, w.status, w.version, w.attributes, 0 AS gone,
			`+queueJobColumns+`, `+queueOrderColumns+`
		FROM primeWorkOrders w
		LEFT JOIN primeJobs j ON j.jobId = w.jobId
		LEFT JOIN optimoRouteOrder o ON o.workOrderId = w.workOrderId
		WHERE o.orderNo IS NULL OR o.version IS NULL OR o.version <> COALESCE(w.version, 0)
		UNION ALL
		SELECT o.workOrderId, o.jobId, NULL, NULL, NULL, 1,
			0, NULL, NULL, NULL, NULL, NULL, NULL, `+queueOrderColumns+`
		FROM optimoRouteOrder o
		WHERE o.workOrderId IS NOT NULL AND o.state = 'Active'
		  AND NOT EXISTS (SELECT 1 FROM primeWorkOrders w WHERE w.workOrderId = o.workOrderId)
	) WHERE workOrderId > ? ORDER BY workOrderId LIMIT ?`, func(sc sqlrows.Scanner) (store.WorkOrderQueueItem, error) {
		var it store.WorkOrderQueueItem
		err := sc.Scan(append([]any{&it.WorkOrderID, scanString{&it.JobID}, scanString{&it.Status}, scanOptInt{&it.Version},
			scanString{&it.Attributes}, &it.Gone}, queueDest(&it.Job, &it.Order)...)...)
		return it, err
	}, strings.ToLower(after), limit)
}

// SaveWorkOrder upserts a work order unless the stored row is newer.
func (s *Store) SaveWorkOrder(ctx context.Context, w store.WorkOrder) (bool, error) {
	if w.WorkOrderID == "" {
		return false, errors.New("sqlite: save work order: no id")
	}
	res, err := s.w().ExecContext(ctx, `INSERT INTO primeWorkOrders
		(workOrderId, jobId, status, version, createdAt, updatedAt, attributes, syncedUTC)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (workOrderId) DO UPDATE SET
			jobId = excluded.jobId, status = excluded.status, version = excluded.version,
			createdAt = excluded.createdAt, updatedAt = excluded.updatedAt, attributes = excluded.attributes,
			syncedUTC = excluded.syncedUTC
		WHERE primeWorkOrders.version IS NULL OR excluded.version IS NULL OR primeWorkOrders.version <= excluded.version`,
		optGUID(w.WorkOrderID), optGUID(w.JobID), nullString(w.Status), w.Version, nullTime(w.CreatedAt),
		nullTime(w.UpdatedAt), nullString(w.Attributes), formatTime(time.Now()))
	if err != nil {
		return false, fmt.Errorf("sqlite: save work order: %w", err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}
