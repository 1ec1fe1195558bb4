package optimocreate_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/lock"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
	"github.com/ethosbuilding/primeflow/pkg/optimosim"
	"github.com/ethosbuilding/primeflow/pkg/store"
	optimocreate "github.com/ethosbuilding/primeflow/services/optimo-create"
	"github.com/matryer/is"
	_ "modernc.org/sqlite" // the fixture that removes a mirror row
)

// Mirrored appointments become orders: one create_or_update_orders call for
// the queue, each order recorded with the version it was made from, its date
// marked NotPlanned, and optimo-plan asked to plan.
func TestAppointmentsBecomeOrders(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.job(jobID, true)
	one := e.appointment(apptOne, jobID, day(1, 9, 0), 3)
	two := e.appointment(apptTwo, jobID, day(2, 13, 30), 1)
	c := e.creator(testConfig())

	res, err := c.Create(e.ctx)
	is.NoErr(err)
	is.Equal(res.Written, 2)                                                          // both appointments are orders
	is.Equal(e.calls(optimoroute.OpCreateOrUpdateOrders), 1)                          // written in one call
	is.Equal(res.Dates, []string{localDate(one.StartDate), localDate(two.StartDate)}) // on their local dates

	o, ok := e.simOrder(apptOne)
	is.True(ok)                                                                     // OptimoRoute holds the order
	is.Equal(o.Date, localDate(one.StartDate))                                      // on the appointment's day in Melbourne
	is.Equal(o.Type, "T")                                                           // a task
	is.Equal(o.Duration, 60)                                                        // of the configured length
	is.Equal(o.TimeWindows, []optimoroute.TimeWindow{{From: "09:00", To: "11:00"}}) // in the appointment's window
	is.Equal(o.Location.Address, "12 Lygon St, Unit 3, Carlton VIC 3053")           // at the job's address
	is.Equal(o.Location.LocationName, "J012345")
	is.Equal(o.AssignedTo.ExternalID, userID) // with the assigned user
	is.Equal(o.Notes, "Site inspection\nDog on site")

	row := e.order(apptOne)
	is.Equal(row.State, store.OrderActive) // recorded
	is.Equal(row.Version, int64(3))        // with the version it was made from
	is.Equal(row.AppointmentID, apptOne)
	is.Equal(row.OrderDate, o.Date)
	is.True(row.OptimoID != "")                          // and OptimoRoute's id
	is.Equal(e.planStatus(o.Date), store.PlanNotPlanned) // its date is queued for planning

	reqs := e.planRequests()
	is.Equal(len(reqs), 1)                        // optimo-plan is asked to plan
	is.Equal(reqs[0].Source, optimocreate.Source) // by optimo-create

	res, err = c.Create(e.ctx)
	is.NoErr(err)
	is.Equal(res.Written+res.Deleted+res.Refused, 0)         // a second run finds nothing to do
	is.Equal(e.calls(optimoroute.OpCreateOrUpdateOrders), 1) // and calls nothing
}

// A new version of an appointment rewrites its order; a move marks both
// dates.
func TestChangedAppointmentRewritesItsOrder(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.job(jobID, true)
	first := e.appointment(apptOne, jobID, day(1, 9, 0), 1)
	c := e.creator(testConfig())
	_, err := c.Create(e.ctx)
	is.NoErr(err)
	oldDate := localDate(first.StartDate)
	setStatus(t, e, oldDate, store.PlanRoutesCompleted)

	moved := e.appointment(apptOne, jobID, day(3, 14, 0), 2)
	res, err := c.Create(e.ctx)
	is.NoErr(err)
	is.Equal(res.Written, 1)
	o, _ := e.simOrder(apptOne)
	is.Equal(o.Date, localDate(moved.StartDate))                             // the order moved
	is.Equal(e.order(apptOne).Version, int64(2))                             // made from the new version
	is.Equal(e.planStatus(oldDate), store.PlanNotPlanned)                    // the day it left is replanned
	is.Equal(e.planStatus(localDate(moved.StartDate)), store.PlanNotPlanned) // and the day it went to
	is.Equal(res.Dates, []string{oldDate, localDate(moved.StartDate)})
}

// Cancelled and deleted appointments delete their orders, which marks the
// date; a cancelled appointment that never had an order calls nothing.
func TestCancelledAndDeletedAppointmentsDeleteOrders(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(e *env, a store.Appointment)
	}{
		{"cancelled", func(e *env, a store.Appointment) {
			a.Status, a.Version = "Cancelled", a.Version+1
			e.appointment(a.AppointmentID, a.JobID, a.StartDate, a.Version, func(x *store.Appointment) { *x = a })
		}},
		{"marked deleted", func(e *env, a store.Appointment) {
			a.Status, a.Version = "deleted", a.Version+1
			e.appointment(a.AppointmentID, a.JobID, a.StartDate, a.Version, func(x *store.Appointment) { *x = a })
		}},
		{"gone from the mirror", func(e *env, a store.Appointment) {
			removeAppointment(e, a.AppointmentID)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t)
			e.job(jobID, true)
			a := e.appointment(apptOne, jobID, day(1, 9, 0), 1)
			c := e.creator(testConfig())
			_, err := c.Create(e.ctx)
			is.NoErr(err)
			date := localDate(a.StartDate)
			setStatus(t, e, date, store.PlanRoutesCompleted)

			tc.change(e, a)
			res, err := c.Create(e.ctx)
			is.NoErr(err)
			is.Equal(res.Deleted, 1) // the order is deleted
			_, held := e.simOrder(apptOne)
			is.True(!held)                                       // from OptimoRoute
			is.Equal(e.order(apptOne).State, store.OrderDeleted) // and recorded so
			is.True(e.order(apptOne).ErrorText != "")            // with the reason
			is.Equal(e.planStatus(date), store.PlanNotPlanned)   // its date is replanned

			res, err = c.Create(e.ctx)
			is.NoErr(err)
			is.Equal(res.Written+res.Deleted+res.Refused, 0) // and it is done with
			is.Equal(e.calls(optimoroute.OpDeleteOrders), 1) // one delete in all
		})
	}
	t.Run("cancelled before it was an order", func(t *testing.T) {
		is := is.New(t)
		e := newEnv(t)
		e.job(jobID, true)
		e.appointment(apptOne, jobID, day(1, 9, 0), 1, func(a *store.Appointment) { a.Status = "Cancelled" })
		c := e.creator(testConfig())
		res, err := c.Create(e.ctx)
		is.NoErr(err)
		is.Equal(res.Refused, 1)                         // recorded as not an order
		is.Equal(e.calls(optimoroute.OpDeleteOrders), 0) // nothing to delete
		is.Equal(e.calls(optimoroute.OpCreateOrUpdateOrders), 0)
		is.Equal(e.order(apptOne).State, store.OrderDeleted)
	})
}

// removeAppointment deletes a mirror row directly, as no service does: the
// fixture for an appointment gone from the mirror.
func removeAppointment(e *env, id string) {
	e.t.Helper()
	db, err := sql.Open("sqlite", "file:"+e.dbPath())
	if err != nil {
		e.t.Fatalf("open: %v", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(e.ctx, `DELETE FROM primeAppointments WHERE appointmentId = ?`, id); err != nil {
		e.t.Fatalf("delete appointment: %v", err)
	}
}

func setStatus(t *testing.T, e *env, date, status string) {
	t.Helper()
	if _, err := e.store.SetPlanStatus(e.ctx, store.PlanStatusWrite{PlanDate: date, Status: status}); err != nil {
		t.Fatalf("set status: %v", err)
	}
}

// An order OptimoRoute refuses is recorded with its error and the version,
// marks no date, and is not sent again until the appointment changes.
func TestRefusedOrderIsRecorded(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.job(jobID, true)
	a := e.appointment(apptOne, jobID, day(1, 9, 0), 1)
	e.appointment(apptTwo, jobID, day(1, 10, 0), 1)
	e.sim.FailOrder(apptOne, string(optimoroute.ErrLocGeocoding))
	c := e.creator(testConfig())

	res, err := c.Create(e.ctx)
	is.NoErr(err)
	is.Equal(res.Written, 1) // the other order is written
	is.Equal(res.Refused, 1) // this one is refused
	row := e.order(apptOne)
	is.True(strings.Contains(row.ErrorText, "ERR_LOC_GEOCODING")) // with OptimoRoute's code
	is.Equal(row.Version, int64(1))                               // for this version
	is.Equal(row.State, store.OrderDeleted)                       // OptimoRoute holds nothing

	_, err = c.Create(e.ctx)
	is.NoErr(err)
	is.Equal(e.calls(optimoroute.OpCreateOrUpdateOrders), 1) // not sent again

	e.sim.FailOrder(apptOne, "")
	e.appointment(apptOne, jobID, a.StartDate, 2, func(x *store.Appointment) { x.Notes = "new gate code" })
	res, err = c.Create(e.ctx)
	is.NoErr(err)
	is.Equal(res.Written, 1) // the next version is
	is.Equal(e.order(apptOne).State, store.OrderActive)
	is.Equal(e.order(apptOne).ErrorText, "")
}

// Appointments that cannot be orders are recorded with the reason and call
// nothing: past ones never reach the queue, ones without an address are
// refused.
func TestAppointmentsThatAreNotOrders(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.job(jobID, true)
	e.job(bareJob, false)
	e.appointment(apptPast, jobID, day(-1, 9, 0), 1)
	e.appointment(apptOne, bareJob, day(1, 9, 0), 1)
	e.appointment(apptTwo, jobID, day(1, 9, 0), 1, func(a *store.Appointment) { a.StartDate, a.EndDate = time.Time{}, time.Time{} })
	c := e.creator(testConfig())

	res, err := c.Create(e.ctx)
	is.NoErr(err)
	is.Equal(res.Refused, 1)                                            // only the one without an address is queued
	is.True(strings.Contains(e.order(apptOne).ErrorText, "no address")) // and says why
	is.Equal(e.calls(optimoroute.OpCreateOrUpdateOrders), 0)            // nothing was sent
	_, found, err := e.store.GetOrder(e.ctx, apptPast)
	is.NoErr(err)
	is.True(!found) // the past appointment was not considered

	e.job(bareJob, true) // the job's address arrives; the appointment is unchanged
	res, err = c.Create(e.ctx)
	is.NoErr(err)
	is.Equal(res.Written, 1) // the appointment becomes an order
	o, ok := e.simOrder(apptOne)
	is.True(ok)
	is.Equal(o.Location.Address, "12 Lygon St, Unit 3, Carlton VIC 3053")
}

// Work orders become orders from the dates in their attributes.
func TestWorkOrdersBecomeOrders(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.job(jobID, true)
	start := day(2, 7, 30)
	attrs, _ := json.Marshal(map[string]string{"startDate": start.Format("2006-01-02 15:04:05"),
		"endDate": start.Add(3 * time.Hour).Format("2006-01-02 15:04:05"), "description": "Replace gutter"})
	_, err := e.store.SaveWorkOrder(e.ctx, store.WorkOrder{WorkOrderID: workOne, JobID: jobID, Status: "Issued", Version: 1, Attributes: string(attrs)})
	is.NoErr(err)
	_, err = e.store.SaveWorkOrder(e.ctx, store.WorkOrder{WorkOrderID: workTwo, JobID: jobID, Status: "Issued", Version: 1, Attributes: `{}`})
	is.NoErr(err)
	c := e.creator(testConfig())

	res, err := c.Create(e.ctx)
	is.NoErr(err)
	is.Equal(res.Written, 1) // the work order with a start
	is.Equal(res.Refused, 1) // and the one without, recorded
	o, ok := e.simOrder(workOne)
	is.True(ok)
	is.Equal(o.Date, localDate(start))
	is.Equal(o.TimeWindows, []optimoroute.TimeWindow{{From: "07:30", To: "10:30"}})
	is.Equal(o.Notes, "Replace gutter")
	is.Equal(e.order(workOne).WorkOrderID, workOne)
	is.True(strings.Contains(e.order(workTwo).ErrorText, "no start date"))
}

// Sources that stay queued after a run handled them (an appointment or work
// order whose job has no address is offered again on every run) do not hold
// back the ones after them: one run reads each queue once, page after page,
// however many of them fill its first pages.
func TestStuckSourcesDoNotHoldTheQueue(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.job(jobID, true)
	e.job(bareJob, false)
	start := day(1, 9, 0)
	attrs, _ := json.Marshal(map[string]string{"startDate": start.Format("2006-01-02 15:04:05")})
	workOrder := func(id, job string) {
		_, err := e.store.SaveWorkOrder(e.ctx, store.WorkOrder{WorkOrderID: id, JobID: job, Status: "Issued",
			Version: 1, Attributes: string(attrs)})
		is.NoErr(err)
	}
	for i := 1; i <= 3; i++ {
		e.appointment(fmt.Sprintf("00000000-0000-4000-8000-%012d", i), bareJob, start, 1)
		workOrder(fmt.Sprintf("00000000-0000-4000-9000-%012d", i), bareJob)
	}
	const lastAppt, lastWork = "ffffffff-0000-4000-8000-000000000001", "ffffffff-0000-4000-9000-000000000001"
	e.appointment(lastAppt, jobID, start, 1)
	workOrder(lastWork, jobID)
	cfg := testConfig()
	cfg.Batch = 2 // the address-less sources fill the first page of each queue, and more
	c := e.creator(cfg)

	res, err := c.Create(e.ctx)
	is.NoErr(err)
	is.Equal(res.Written, 2)                                       // the sources after the address-less ones are orders in the same run
	is.Equal(res.Refused, 6)                                       // and every address-less source is refused once
	is.Equal(e.order(lastAppt).State, store.OrderActive)           // the appointment's
	is.Equal(e.order(lastWork).State, store.OrderActive)           // and the work order's
	is.Equal(e.planStatus(localDate(start)), store.PlanNotPlanned) // and their date is queued for planning
	_, ok := e.simOrder(lastAppt)
	is.True(ok) // OptimoRoute holds them
	_, ok = e.simOrder(lastWork)
	is.True(ok)

	res, err = c.Create(e.ctx)
	is.NoErr(err)
	is.Equal(res.Refused, 6) // the next run offers the address-less sources again, once each
	is.Equal(res.Written, 0) // and writes nothing twice
}

// A call that fails as a whole records nothing and ends the run; the
// appointments stay queued and the next run writes them.
func TestFailedCallLeavesTheQueue(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.job(jobID, true)
	e.appointment(apptOne, jobID, day(1, 9, 0), 1)
	e.sim.InjectFault(optimosim.Fault{Operation: optimoroute.OpCreateOrUpdateOrders, Code: string(optimoroute.ErrInternal)})
	c := e.creator(testConfig())

	_, err := c.Create(e.ctx)
	is.True(errors.Is(err, optimoroute.ErrInternal)) // the run fails with OptimoRoute's code
	_, found, err := e.store.GetOrder(e.ctx, apptOne)
	is.NoErr(err)
	is.True(!found)                    // nothing is recorded
	is.Equal(len(e.planRequests()), 0) // and nothing changed, so no plan is asked for

	res, err := c.Create(e.ctx)
	is.NoErr(err)
	is.Equal(res.Written, 1) // the next run writes it
}

// A busy lock makes the run wait; giving up is an error that leaves the
// lock alone.
func TestBusyLock(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.job(jobID, true)
	e.appointment(apptOne, jobID, day(1, 9, 0), 1)
	holder, err := lock.New(e.ctx, e.js, lock.Config{TTL: time.Minute, Wait: time.Minute}, e.log)
	is.NoErr(err)
	lk, err := holder.Take(e.ctx, lock.KeyOptimoCreate)
	is.NoErr(err)
	cfg := testConfig()
	cfg.Lock.Wait = time.Second
	c := e.creator(cfg)

	_, err = c.Create(e.ctx)
	is.True(errors.Is(err, lock.ErrBusy))                    // it gives up
	is.Equal(e.calls(optimoroute.OpCreateOrUpdateOrders), 0) // having done nothing
	is.NoErr(lk.Release(e.ctx))                              // the holder's lock was left alone

	res, err := c.Create(e.ctx)
	is.NoErr(err)
	is.Equal(res.Written, 1) // once free, the run goes ahead
}

// The service consumes create requests: a request makes the orders and
// hands over to optimo-plan.
func TestRequestRunsTheQueue(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	e.job(jobID, true)
	e.appointment(apptOne, jobID, day(1, 9, 0), 1)
	c := e.creator(testConfig())
	ctx, stop := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()

	_, js := natstest.Connect(t, e.srv)
	data, _ := json.Marshal(events.CreateRequested{Source: "child-mirror", Reason: "create-appointment"})
	_, err := js.Publish(e.ctx, events.SubjectOptimoCreate, data)
	is.NoErr(err)
	e.waitFor("the order", func() bool { _, ok := e.simOrder(apptOne); return ok })
	e.waitFor("the plan request", func() bool { return len(e.planRequests()) == 1 })
	stop()
	is.NoErr(<-done)
}
