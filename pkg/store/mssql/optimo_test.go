package mssql

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"slices"
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
	rec := &recorder{}
	db := sql.OpenDB(rec)
	defer db.Close()
	s := &Store{db: db}

	const appt = "A1A1A1A1-0000-4000-8000-000000000001"
	const job = "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"
	now := time.Now()
	full := store.OptimoOrder{OrderNo: appt, AppointmentID: appt, JobID: job, Version: 3, OrderDate: "2026-03-10",
		Duration: 120, TimeFrom: "09:00", TimeTo: "11:00", Address: "1 Test St", AssignedTo: "drv-1",
		State: store.OrderActive, OptimoID: "opt-1"}
	var errs []error
	try := func(err error) { errs = append(errs, err) }
	_, err := s.GetAppointmentQueue(ctx, now, 500)
	try(err)
	_, err = s.GetWorkOrderQueue(ctx, 500)
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

	mods := modules(t, loaded(t))
	called := map[string]bool{}
	for _, c := range calls(t, rec.take()) {
		t.Run(c.proc, func(t *testing.T) {
			is := is.New(t)
			m, ok := mods[c.proc]
			is.True(ok) // the procedure exists in sql/mssql
			params := map[string]procParam{}
			for _, p := range m.params {
				params[p.name] = p
			}
			for name, v := range c.args {
				p, ok := params[name]
				if !ok {
					t.Logf("@%s is not a parameter of %s", name, c.proc)
				}
				is.True(ok) // every argument names a parameter
				if !fitsOptimo(p, v) {
					t.Logf("@%s %s gets %T %v", name, p.typ, v, v)
				}
				is.True(fitsOptimo(p, v)) // with a value of a fitting type
			}
			for _, p := range m.params {
				_, given := c.args[p.name]
				is.True(given || p.optional()) // no required parameter is left out
			}
		})
		called[c.proc] = true
	}
	var procs []string
	for _, sc := range loaded(t) {
		if sc.name != "040_optimo.sql" {
			continue
		}
		for name, m := range modules(t, []script{sc}) {
			if m.kind == "PROCEDURE" {
				procs = append(procs, name)
			}
		}
	}
	is.True(len(procs) > 0)                                                         // the script was found
	is.Equal(slices.Sorted(maps.Keys(called)), slices.Sorted(slices.Values(procs))) // every procedure is called, none is missing
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			rec := &recorder{}
			db := sql.OpenDB(rec)
			defer db.Close()
			err := tc.call(&Store{db: db})
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
