package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

const (
	dayOne   = "2026-03-10"
	dayTwo   = "2026-03-11"
	apptA    = "a1a1a1a1-0000-4000-8000-000000000001"
	apptB    = "a1a1a1a1-0000-4000-8000-000000000002"
	apptC    = "a1a1a1a1-0000-4000-8000-000000000003"
	apptD    = "a1a1a1a1-0000-4000-8000-000000000004"
	apptGone = "a1a1a1a1-0000-4000-8000-0000000000ff"
	workA    = "b2b2b2b2-0000-4000-8000-000000000001"
	workB    = "b2b2b2b2-0000-4000-8000-000000000002"
	workC    = "b2b2b2b2-0000-4000-8000-000000000003"
)

func activeOrder(no, date string) store.OptimoOrder {
	return store.OptimoOrder{OrderNo: no, AppointmentID: no, JobID: jobA, Version: 1, OrderDate: date,
		Duration: 90, TimeFrom: "09:00", TimeTo: "11:00", Address: "1 Test St, Carlton VIC 3053", State: store.OrderActive}
}

func planStatus(t *testing.T, s store.Store, date string) string {
	t.Helper()
	p, found, err := s.GetPlan(context.Background(), date)
	if err != nil {
		t.Fatalf("get plan %s: %v", date, err)
	}
	if !found {
		return ""
	}
	return p.PlanStatus
}

func setStatus(t *testing.T, s store.Store, date, status string) {
	t.Helper()
	if _, err := s.SetPlanStatus(context.Background(), store.PlanStatusWrite{PlanDate: date, Status: status}); err != nil {
		t.Fatalf("set %s %s: %v", date, status, err)
	}
}

func testOptimo(t *testing.T, open Opener) {
	ctx := context.Background()

	t.Run("an order write queues its date", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		is.NoErr(s.UpsertOrder(ctx, activeOrder(apptA, dayTwo)))
		is.NoErr(s.UpsertOrder(ctx, activeOrder(apptB, dayOne)))
		q, err := s.GetPlanQueue(ctx)
		is.NoErr(err)
		is.Equal(q, []string{dayOne, dayTwo}) // every NotPlanned date, earliest first

		o, found, err := s.GetOrder(ctx, apptA)
		is.NoErr(err)
		is.True(found)
		want := activeOrder(apptA, dayTwo)
		is.Equal(o.AppointmentID, want.AppointmentID) // the columns are kept
		is.Equal(o.JobID, want.JobID)
		is.Equal(o.OrderDate, dayTwo)
		is.Equal(o.Duration, 90)
		is.Equal(o.TimeFrom, "09:00")
		is.Equal(o.TimeTo, "11:00")
		is.Equal(o.Address, want.Address)
		is.Equal(o.State, store.OrderActive)
		is.Equal(o.Version, int64(1))
		is.True(!o.CreatedUTC.IsZero()) // stamped

		_, found, err = s.GetOrder(ctx, "no-such-order")
		is.NoErr(err)
		is.True(!found) // a missing order
	})

	t.Run("moving an order queues both dates and deleting queues the date it had", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		is.NoErr(s.UpsertOrder(ctx, activeOrder(apptA, dayOne)))
		setStatus(t, s, dayOne, store.PlanRoutesCompleted)

		moved := activeOrder(apptA, dayTwo)
		moved.Version = 2
		is.NoErr(s.UpsertOrder(ctx, moved))
		is.Equal(planStatus(t, s, dayOne), store.PlanNotPlanned) // the day it left
		is.Equal(planStatus(t, s, dayTwo), store.PlanNotPlanned) // and the day it went to

		setStatus(t, s, dayOne, store.PlanRoutesCompleted)
		setStatus(t, s, dayTwo, store.PlanRoutesCompleted)
		gone := moved
		gone.State, gone.Version = store.OrderDeleted, 3
		is.NoErr(s.UpsertOrder(ctx, gone))
		is.Equal(planStatus(t, s, dayTwo), store.PlanNotPlanned)      // deleting marks its date
		is.Equal(planStatus(t, s, dayOne), store.PlanRoutesCompleted) // and no other

		setStatus(t, s, dayTwo, store.PlanRoutesCompleted)
		gone.Version = 4
		is.NoErr(s.UpsertOrder(ctx, gone))
		is.Equal(planStatus(t, s, dayTwo), store.PlanRoutesCompleted) // recording a deleted order again changes nothing

		err := s.UpsertOrder(ctx, store.OptimoOrder{OrderNo: apptB, State: "Gone"})
		is.True(err != nil) // only Active and Deleted are states
	})

	t.Run("a failure records the version and marks nothing", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		is.NoErr(s.RecordOrderFailure(ctx, store.OptimoOrder{OrderNo: apptA, AppointmentID: apptA, JobID: jobA,
			Version: 5, ErrorText: "ERR_LOC_GEOCODING: no such street"}))
		o, found, err := s.GetOrder(ctx, apptA)
		is.NoErr(err)
		is.True(found)
		is.Equal(o.State, store.OrderDeleted) // OptimoRoute holds nothing
		is.Equal(o.Version, int64(5))         // the version is handled
		is.Equal(o.ErrorText, "ERR_LOC_GEOCODING: no such street")
		q, err := s.GetPlanQueue(ctx)
		is.NoErr(err)
		is.Equal(len(q), 0) // no date is queued

		is.NoErr(s.UpsertOrder(ctx, activeOrder(apptB, dayOne)))
		setStatus(t, s, dayOne, store.PlanRoutesCompleted)
		is.NoErr(s.RecordOrderFailure(ctx, store.OptimoOrder{OrderNo: apptB, Version: 2, ErrorText: "refused"}))
		o, _, err = s.GetOrder(ctx, apptB)
		is.NoErr(err)
		is.Equal(o.State, store.OrderActive) // the order OptimoRoute holds stays recorded
		is.Equal(o.OrderDate, dayOne)
		is.Equal(o.AppointmentID, apptB) // and its source
		is.Equal(o.Version, int64(2))
		is.Equal(planStatus(t, s, dayOne), store.PlanRoutesCompleted) // its date is not queued again
	})

	t.Run("guarded status writes", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			current string // "" is no row
			write   store.PlanStatusWrite
			written bool
			want    string
		}{
			{"poll result over Planning", store.PlanPlanning,
				store.PlanStatusWrite{Status: store.PlanPlanningCompleted, OnlyIfStatus: store.PlanPlanning}, true, store.PlanPlanningCompleted},
			{"poll result over a re-queued date (§8.4)", store.PlanNotPlanned,
				store.PlanStatusWrite{Status: store.PlanPlanningCompleted, OnlyIfStatus: store.PlanPlanning}, false, store.PlanNotPlanned},
			{"cancelled over Planning", store.PlanPlanning,
				store.PlanStatusWrite{Status: store.PlanCancelled, OnlyIfStatus: store.PlanPlanning}, true, store.PlanCancelled},
			{"error over a re-queued date", store.PlanNotPlanned,
				store.PlanStatusWrite{Status: store.PlanErrorOccurred, OnlyIfStatus: store.PlanPlanning}, false, store.PlanNotPlanned},
			{"routes over PlanningCompleted", store.PlanPlanningCompleted,
				store.PlanStatusWrite{Status: store.PlanRoutesCompleted, OnlyIfStatus: store.PlanPlanningCompleted}, true, store.PlanRoutesCompleted},
			{"routes over a re-queued date", store.PlanNotPlanned,
				store.PlanStatusWrite{Status: store.PlanRoutesCompleted, OnlyIfStatus: store.PlanPlanningCompleted}, false, store.PlanNotPlanned},
			{"failed request, unguarded", store.PlanNotPlanned,
				store.PlanStatusWrite{Status: store.PlanRequestFailed("ERR_OPT_RUNNING")}, true, "E:ERR_OPT_RUNNING"},
			{"unguarded write of a new date", "",
				store.PlanStatusWrite{Status: store.PlanRequestFailed("ERR_INTERNAL")}, true, "E:ERR_INTERNAL"},
			{"guarded write of a new date", "",
				store.PlanStatusWrite{Status: store.PlanPlanning, OnlyIfStatus: store.PlanNotPlanned}, false, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				is := is.New(t)
				s := open(t)
				if tc.current != "" {
					setStatus(t, s, dayOne, tc.current)
				}
				tc.write.PlanDate = dayOne
				written, err := s.SetPlanStatus(ctx, tc.write)
				is.NoErr(err)
				is.Equal(written, tc.written)               // written only in the state observed
				is.Equal(planStatus(t, s, dayOne), tc.want) // the status after the write
			})
		}
	})

	t.Run("the re-queue race (§8.4)", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		is.NoErr(s.UpsertOrder(ctx, activeOrder(apptA, dayOne)))
		written, err := s.SetPlanStatus(ctx, store.PlanStatusWrite{PlanDate: dayOne, Status: store.PlanPlanning, OnlyIfStatus: store.PlanNotPlanned})
		is.NoErr(err)
		is.True(written) // 1. a plan run moves the date to Planning
		written, err = s.SetPlanStatus(ctx, store.PlanStatusWrite{PlanDate: dayOne, Status: store.PlanPlanning, OnlyIfStatus: store.PlanPlanning, PlanningID: 77})
		is.NoErr(err)
		is.True(written) // and records its planning id
		p, _, err := s.GetPlan(ctx, dayOne)
		is.NoErr(err)
		is.Equal(p.PlanningID, int64(77))
		is.True(!p.StartedUTC.IsZero()) // the start is stamped

		is.NoErr(s.UpsertOrder(ctx, activeOrder(apptB, dayOne))) // 2. an order is created for the date
		written, err = s.SetPlanStatus(ctx, store.PlanStatusWrite{PlanDate: dayOne, Status: store.PlanPlanningCompleted, OnlyIfStatus: store.PlanPlanning})
		is.NoErr(err)
		is.True(!written) // 3. the run's result does not overwrite it
		q, err := s.GetPlanQueue(ctx)
		is.NoErr(err)
		is.Equal(q, []string{dayOne}) // the date is still queued
		p, _, err = s.GetPlan(ctx, dayOne)
		is.NoErr(err)
		is.Equal(p.PlanningID, int64(0)) // and forgets the plan that no longer covers it
	})

	t.Run("planning and routes queues", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		setStatus(t, s, dayOne, store.PlanPlanning)
		setStatus(t, s, dayTwo, store.PlanPlanningCompleted)
		planning, err := s.GetPlanningQueue(ctx)
		is.NoErr(err)
		is.Equal(len(planning), 1)
		is.Equal(planning[0].PlanDate, dayOne) // the dates in Planning
		routes, err := s.GetRoutesRefreshQueue(ctx)
		is.NoErr(err)
		is.Equal(routes, []string{dayTwo}) // the PlanningCompleted dates

		written, err := s.SetPlanStatus(ctx, store.PlanStatusWrite{PlanDate: dayOne, Status: store.PlanErrorOccurred,
			OnlyIfStatus: store.PlanPlanning, ErrorText: "planning 9 ended in E"})
		is.NoErr(err)
		is.True(written)
		p, _, err := s.GetPlan(ctx, dayOne)
		is.NoErr(err)
		is.Equal(p.ErrorText, "planning 9 ended in E") // the error is kept with the status
		is.True(!p.FinishedUTC.IsZero())               // and the end stamped
	})

	t.Run("routes read-back and order refresh", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		is.NoErr(s.UpsertOrder(ctx, activeOrder(apptA, dayOne)))
		is.NoErr(s.UpsertOrder(ctx, activeOrder(apptB, dayOne)))
		is.NoErr(s.UpsertOrder(ctx, activeOrder(apptC, dayTwo)))
		at := time.Date(2026, 3, 9, 22, 0, 0, 0, time.UTC)
		sched := time.Date(2026, 3, 9, 23, 15, 0, 0, time.UTC)
		is.NoErr(s.SaveRoutes(ctx, dayOne, []store.OrderSchedule{
			{OrderNo: apptA, ScheduledUTC: sched, DriverSerial: "7", DriverName: "Driver Seven"},
			{OrderNo: "not-ours", ScheduledUTC: sched, DriverSerial: "7"},
		}, at))
		a, _, err := s.GetOrder(ctx, apptA)
		is.NoErr(err)
		is.True(a.ScheduledUTC.Equal(sched)) // the scheduled time
		is.Equal(a.DriverSerial, "7")        // and driver are stored
		is.Equal(a.DriverName, "Driver Seven")
		is.True(a.RoutesUTC.Equal(at))
		b, _, err := s.GetOrder(ctx, apptB)
		is.NoErr(err)
		is.True(b.ScheduledUTC.IsZero()) // an order on no route has no schedule
		is.True(b.RoutesUTC.Equal(at))
		c, _, err := s.GetOrder(ctx, apptC)
		is.NoErr(err)
		is.True(c.RoutesUTC.IsZero()) // other dates are left alone

		q, err := s.GetOrderRefreshQueue(ctx, 10)
		is.NoErr(err)
		is.Equal(len(q), 0) // nothing to refresh until the date's routes are complete
		setStatus(t, s, dayOne, store.PlanRoutesCompleted)
		q, err = s.GetOrderRefreshQueue(ctx, 10)
		is.NoErr(err)
		is.Equal(len(q), 1)
		is.Equal(q[0].OrderNo, apptB) // the order the routes left out

		is.NoErr(s.SetOrderRefreshed(ctx, apptB, true, "opt-22", at.Add(time.Minute)))
		q, err = s.GetOrderRefreshQueue(ctx, 10)
		is.NoErr(err)
		is.Equal(len(q), 0) // refreshed since the routes
		b, _, err = s.GetOrder(ctx, apptB)
		is.NoErr(err)
		is.Equal(b.OptimoID, "opt-22")

		is.NoErr(s.SaveRoutes(ctx, dayOne, nil, at.Add(2*time.Minute)))
		q, err = s.GetOrderRefreshQueue(ctx, 10)
		is.NoErr(err)
		is.Equal(len(q), 2) // newer routes that leave both out
		is.NoErr(s.SetOrderRefreshed(ctx, apptA, false, "", at.Add(3*time.Minute)))
		a, _, err = s.GetOrder(ctx, apptA)
		is.NoErr(err)
		is.Equal(a.State, store.OrderDeleted) // an order OptimoRoute lost
		is.Equal(a.Version, int64(0))         // is made again from its source
	})

	t.Run("an order write keeps the read-back while its date stays", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		is.NoErr(s.UpsertOrder(ctx, activeOrder(apptA, dayOne)))
		sched := time.Date(2026, 3, 9, 23, 15, 0, 0, time.UTC)
		is.NoErr(s.SaveRoutes(ctx, dayOne, []store.OrderSchedule{{OrderNo: apptA, ScheduledUTC: sched, DriverSerial: "2"}}, sched))
		same := activeOrder(apptA, dayOne)
		same.Version, same.Duration = 2, 60
		is.NoErr(s.UpsertOrder(ctx, same))
		a, _, err := s.GetOrder(ctx, apptA)
		is.NoErr(err)
		is.Equal(a.DriverSerial, "2") // same date: the schedule stays until the next read-back
		is.Equal(a.Duration, 60)
		moved := activeOrder(apptA, dayTwo)
		moved.Version = 3
		is.NoErr(s.UpsertOrder(ctx, moved))
		a, _, err = s.GetOrder(ctx, apptA)
		is.NoErr(err)
		is.Equal(a.DriverSerial, "")     // another date: the schedule is gone
		is.True(a.ScheduledUTC.IsZero()) // with its time
	})

	t.Run("appointment queue compares versions", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		from := time.Date(2026, 3, 9, 13, 0, 0, 0, time.UTC)
		_, err := s.UpsertJob(ctx, store.Job{JobID: jobA, JobNumber: "J000123", AddressLine1: "1 Test St",
			Suburb: "Carlton", State: "VIC", Postcode: "3053", Version: 1})
		is.NoErr(err)
		appt := func(id string, start time.Time, version int64) {
			_, err := s.SaveAppointment(ctx, store.Appointment{AppointmentID: id, JobID: jobA, StartDate: start,
				EndDate: start.Add(2 * time.Hour), Status: "Scheduled", Version: version, Description: "Inspection"})
			is.NoErr(err)
		}
		appt(apptA, from.Add(time.Hour), 1)     // new, no order
		appt(apptB, from.Add(24*time.Hour), 2)  // order of an older version
		appt(apptC, from.Add(2*time.Hour), 3)   // order of this version
		appt(apptD, from.Add(-24*time.Hour), 1) // in the past, no order
		older := activeOrder(apptB, dayTwo)
		is.NoErr(s.UpsertOrder(ctx, older))
		current := activeOrder(apptC, dayOne)
		current.Version = 3
		is.NoErr(s.UpsertOrder(ctx, current))
		is.NoErr(s.UpsertOrder(ctx, activeOrder(apptGone, dayOne))) // its appointment is not mirrored

		q, err := s.GetAppointmentQueue(ctx, from, "", 100)
		is.NoErr(err)
		byID := map[string]store.AppointmentQueueItem{}
		for _, it := range q {
			byID[it.AppointmentID] = it
		}
		is.Equal(len(q), 3) // the new, the outdated and the gone
		a, ok := byID[apptA]
		is.True(ok)                   // an appointment without an order
		is.Equal(a.Order.OrderNo, "") // has none
		is.Equal(a.Version, int64(1))
		is.Equal(a.JobID, jobA)
		is.True(a.StartDate.Equal(from.Add(time.Hour)))
		is.Equal(a.Status, "Scheduled")
		is.Equal(a.Description, "Inspection")
		is.True(a.Job.Found) // with its job's address
		is.Equal(a.Job.JobNumber, "J000123")
		is.Equal(a.Job.Suburb, "Carlton")
		is.Equal(a.Job.Postcode, "3053")
		b, ok := byID[apptB]
		is.True(ok)                                // an order of an older version
		is.Equal(b.Order.OrderNo, apptB)           // comes with the order
		is.Equal(b.Order.Version, int64(1))        // and the version it was made from
		is.Equal(b.Order.OrderDate, dayTwo)        // and its date
		is.Equal(b.Order.State, store.OrderActive) // and state
		g, ok := byID[apptGone]
		is.True(ok)     // an active order whose appointment is gone
		is.True(g.Gone) // says so

		q, err = s.GetAppointmentQueue(ctx, from, "", 1)
		is.NoErr(err)
		is.Equal(len(q), 1) // the limit holds
	})

	t.Run("work-order queue compares versions", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		saved, err := s.SaveWorkOrder(ctx, store.WorkOrder{WorkOrderID: workA, JobID: jobA, Status: "Issued", Version: 2,
			Attributes: `{"startDate":"2026-03-10 23:00:00"}`})
		is.NoErr(err)
		is.True(saved)
		saved, err = s.SaveWorkOrder(ctx, store.WorkOrder{WorkOrderID: workA, Version: 1})
		is.NoErr(err)
		is.True(!saved) // an older version does not roll the mirror back
		_, err = s.SaveWorkOrder(ctx, store.WorkOrder{WorkOrderID: workB, JobID: jobA, Version: 4})
		is.NoErr(err)
		done := store.OptimoOrder{OrderNo: workB, WorkOrderID: workB, JobID: jobA, Version: 4, OrderDate: dayOne,
			State: store.OrderActive}
		is.NoErr(s.UpsertOrder(ctx, done))

		q, err := s.GetWorkOrderQueue(ctx, "", 100)
		is.NoErr(err)
		is.Equal(len(q), 1) // only the work order without an order of its version
		is.Equal(q[0].WorkOrderID, workA)
		is.Equal(q[0].Version, int64(2))
		is.Equal(q[0].Status, "Issued")
		is.Equal(q[0].Attributes, `{"startDate":"2026-03-10 23:00:00"}`) // with its attributes
		is.True(!q[0].Job.Found)                                         // the job is not mirrored here
	})

	// A source can stay queued after it is handled (its job has no
	// address), so the queues are read a page at a time after a key: each
	// page holds the rows after the key, in the queue's order, up to the
	// limit, from both of its parts (queued sources and gone ones).
	t.Run("queues are read after a key", func(t *testing.T) {
		from := time.Date(2026, 3, 9, 13, 0, 0, 0, time.UTC)
		for _, tc := range []struct {
			name string
			ids  []string // the queued rows, sorted
			fill func(is *is.I, s store.Store)
			read func(s store.Store, after string, limit int) ([]string, error)
		}{
			{"appointments", []string{apptA, apptB, apptC, apptD}, func(is *is.I, s store.Store) {
				for _, id := range []string{apptA, apptC, apptD} {
					_, err := s.SaveAppointment(ctx, store.Appointment{AppointmentID: id, JobID: jobA,
						StartDate: from.Add(time.Hour), Status: "Scheduled", Version: 1})
					is.NoErr(err)
				}
				is.NoErr(s.UpsertOrder(ctx, activeOrder(apptB, dayOne))) // gone, between the others
			}, func(s store.Store, after string, limit int) ([]string, error) {
				q, err := s.GetAppointmentQueue(ctx, from, after, limit)
				ids := make([]string, len(q))
				for i, it := range q {
					ids[i] = it.AppointmentID
				}
				return ids, err
			}},
			{"work orders", []string{workA, workB, workC}, func(is *is.I, s store.Store) {
				for _, id := range []string{workA, workC} {
					_, err := s.SaveWorkOrder(ctx, store.WorkOrder{WorkOrderID: id, JobID: jobA, Version: 1})
					is.NoErr(err)
				}
				is.NoErr(s.UpsertOrder(ctx, store.OptimoOrder{OrderNo: workB, WorkOrderID: workB, JobID: jobA,
					Version: 1, OrderDate: dayOne, State: store.OrderActive})) // gone, between the others
			}, func(s store.Store, after string, limit int) ([]string, error) {
				q, err := s.GetWorkOrderQueue(ctx, after, limit)
				ids := make([]string, len(q))
				for i, it := range q {
					ids[i] = it.WorkOrderID
				}
				return ids, err
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				is := is.New(t)
				s := open(t)
				tc.fill(is, s)
				all, err := tc.read(s, "", 100)
				is.NoErr(err)
				is.Equal(slices.Sorted(slices.Values(all)), tc.ids) // every row once

				rest, err := tc.read(s, all[0], 100)
				is.NoErr(err)
				is.Equal(rest, all[1:]) // the rows strictly after the key, in order
				rest, err = tc.read(s, all[0], 2)
				is.NoErr(err)
				is.Equal(rest, all[1:3]) // up to the limit
				rest, err = tc.read(s, all[len(all)-1], 100)
				is.NoErr(err)
				is.Equal(len(rest), 0) // none after the last

				var walked []string
				for after := ""; len(walked) <= len(all); { // bounded: pages that ignored the key would repeat rows
					page, err := tc.read(s, after, 1)
					is.NoErr(err)
					if len(page) == 0 {
						break
					}
					walked = append(walked, page...)
					after = page[len(page)-1]
				}
				is.Equal(walked, all) // page by page, every row once
			})
		}
	})
}
