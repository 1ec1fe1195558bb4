package mssql

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/golang-sql/civil"
	"github.com/matryer/is"
)

// fitsOptimo is fits, plus the DATE parameters of the OptimoRoute scripts
// and NULL integers.
func fitsOptimo(p procParam, v any) bool {
	switch v := v.(type) {
	case civil.Date:
		return p.typ == "DATE"
	case sql.NullTime:
		if p.typ == "DATE" {
			return !v.Valid
		}
	case sql.NullInt64:
		return !v.Valid && (p.typ == "BIGINT" || p.typ == "INT")
	}
	return fits(p, v)
}

// Every Optimo and WorkOrders method calls a procedure of 040_optimo.sql
// with parameters that exist, with values of fitting types, leaving out no
// required one; and every procedure of that script is called.
func TestOptimoCallsMatchTheProcedures(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, rec := recording(t)

	const appt = "A1A1A1A1-0000-4000-8000-000000000001"
	const job = "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"
	now := time.Now()
	full := store.OptimoOrder{OrderNo: appt, AppointmentID: appt, JobID: job, Version: 3, OrderDate: "2026-03-10",
		Duration: 120, TimeFrom: "09:00", TimeTo: "11:00", Address: "1 Test St", AssignedTo: "drv-1",
		State: store.OrderActive, OptimoID: "opt-1"}
	var errs []error
	try := func(err error) { errs = append(errs, err) }
	_, err := s.GetAppointmentQueue(ctx, now, "", 500)
	try(err)
	_, err = s.GetAppointmentQueue(ctx, now, appt, 500)
	try(err)
	_, err = s.GetWorkOrderQueue(ctx, "", 500)
	try(err)
	_, err = s.GetWorkOrderQueue(ctx, appt, 500)
	try(err)
	try(s.UpsertOrder(ctx, full))
	try(s.UpsertOrder(ctx, store.OptimoOrder{OrderNo: "bare", State: store.OrderDeleted}))
	try(s.RecordOrderFailure(ctx, store.OptimoOrder{OrderNo: appt, AppointmentID: appt, Version: 4, ErrorText: "refused"}))
	_, _, err = s.GetOrder(ctx, appt)
	try(err)
	try(s.PlanUpsert(ctx, "2026-03-10"))
	_, err = s.GetPlanQueue(ctx)
	try(err)
	_, err = s.SetPlanStatus(ctx, store.PlanStatusWrite{PlanDate: "2026-03-10", Status: store.PlanPlanningCompleted,
		OnlyIfStatus: store.PlanPlanning, PlanningID: 7, ErrorText: "x"})
	try(err)
	_, err = s.SetPlanStatus(ctx, store.PlanStatusWrite{PlanDate: "2026-03-10", Status: store.PlanRequestFailed("ERR_INTERNAL")})
	try(err)
	_, _, err = s.GetPlan(ctx, "2026-03-10")
	try(err)
	_, err = s.GetPlanningQueue(ctx)
	try(err)
	_, err = s.GetRoutesRefreshQueue(ctx)
	try(err)
	try(s.SaveRoutes(ctx, "2026-03-10", []store.OrderSchedule{{OrderNo: appt, ScheduledUTC: now, DriverSerial: "1", DriverName: "One"}}, now))
	// SaveRoutes stops at the first failure: call the second half directly.
	try(s.inTx(ctx, func(tx *Store) error {
		_, err := tx.q().ExecContext(ctx, procOptimoSetOrderSchedule, sql.Named("OrderNo", appt),
			sql.Named("PlanDate", civil.DateOf(now)), sql.Named("ScheduledUTC", sqlTime(now)))
		return err
	}))
	_, err = s.GetOrderRefreshQueue(ctx, 500)
	try(err)
	try(s.SetOrderRefreshed(ctx, appt, true, "opt-1", now))
	try(s.SetOrderRefreshed(ctx, appt, false, "", now))
	_, err = s.SaveWorkOrder(ctx, store.WorkOrder{WorkOrderID: appt, JobID: job, Status: "Issued", Version: 2,
		CreatedAt: now, UpdatedAt: now, Attributes: "{}"})
	try(err)
	for _, err := range errs {
		is.True(errors.Is(err, errRecorded)) // every method reached the database
	}

	is.True(checkCalls(t, rec, scriptModules(t, "040_optimo.sql"), fitsOptimo, nil) > 0) // the script has procedures
}

// Arguments that cannot be right never reach the database.
func TestOptimoRefusesImpossibleArguments(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		call func(s *Store) error
	}{
		{"order without a state", func(s *Store) error { return s.UpsertOrder(ctx, store.OptimoOrder{OrderNo: "x"}) }},
		{"order with a bad date", func(s *Store) error {
			return s.UpsertOrder(ctx, store.OptimoOrder{OrderNo: "x", State: store.OrderActive, OrderDate: "10/03/2026"})
		}},
		{"order from a source that is not a GUID", func(s *Store) error {
			return s.UpsertOrder(ctx, store.OptimoOrder{OrderNo: "x", State: store.OrderActive, AppointmentID: "259047"})
		}},
		{"plan date that is not a date", func(s *Store) error { return s.PlanUpsert(ctx, "tomorrow") }},
		{"status without a date", func(s *Store) error {
			_, err := s.SetPlanStatus(ctx, store.PlanStatusWrite{Status: store.PlanPlanning})
			return err
		}},
		{"work order that is not a GUID", func(s *Store) error {
			_, err := s.SaveWorkOrder(ctx, store.WorkOrder{WorkOrderID: "WO-1"})
			return err
		}},
		{"appointment queue after a key that is not a GUID", func(s *Store) error {
			_, err := s.GetAppointmentQueue(ctx, time.Now(), "259047", 500)
			return err
		}},
		{"work-order queue after a key that is not a GUID", func(s *Store) error {
			_, err := s.GetWorkOrderQueue(ctx, "WO-1", 500)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			s, rec := recording(t)
			err := tc.call(s)
			is.True(err != nil && !errors.Is(err, errRecorded)) // refused here
			is.Equal(len(rec.take()), 0)                        // nothing was sent
		})
	}
}

// The OptimoRoute procedures the spec names (§8, §8.4) exist under its names,
// spOptimoRoutePlanSetStatus with its parameters first and @OnlyIfStatus
// defaulting to NULL (unconditional).
func TestOptimoSpecProcedures(t *testing.T) {
	mods := modules(t, loaded(t))
	for _, name := range []string{"spOptimoRouteUpsertOrder", "spOptimoRoutePlanUpsert", "spOptimoRoutePlanGetQueue", "spOptimoRoutePlanSetStatus"} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			m, ok := mods[name]
			is.True(ok)                   // the procedure exists
			is.Equal(m.kind, "PROCEDURE") // as a procedure
		})
	}
	is := is.New(t)
	m := mods["spOptimoRoutePlanSetStatus"]
	is.True(len(m.params) >= 3)
	is.Equal([]string{m.params[0].name, m.params[1].name, m.params[2].name}, []string{"PlanDate", "Status", "OnlyIfStatus"}) // the spec's parameters, in order
	is.Equal(strings.ToUpper(m.params[2].def), "NULL")                                                                       // @OnlyIfStatus = NULL
	for _, p := range m.params[3:] {
		is.True(p.optional()) // what primeflow adds can be left out
	}
}
