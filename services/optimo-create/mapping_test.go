package optimocreate

import (
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

func TestDecide(t *testing.T) {
	mel, err := time.LoadLocation("Australia/Melbourne")
	if err != nil {
		t.Fatal(err)
	}
	m := mapping{zone: mel, duration: 45 * time.Minute, assignDrivers: true}
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, mel)
	job := store.QueuedJob{Found: true, JobNumber: "J1", AddressLine1: "1 A St", Suburb: "Carlton", State: "VIC", Postcode: "3053"}
	active := store.OptimoOrder{OrderNo: "x", State: store.OrderActive, OrderDate: "2026-03-05", Version: 1}
	base := func() source {
		return source{orderNo: "x", appointmentID: "x", version: 2, status: "Scheduled", what: "appointment",
			start: time.Date(2026, 3, 9, 22, 0, 0, 0, time.UTC), end: time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC),
			assignedID: "user-1", job: job}
	}
	for _, tc := range []struct {
		name     string
		edit     func(*source)
		m        func(*mapping)
		verb     verb
		date     string
		window   optimoroute.TimeWindow
		assigned string
		prev     string
	}{
		// 22:00 UTC on 9 March is 09:00 on 10 March in Melbourne (AEDT, UTC+11).
		{name: "summer time", verb: write, date: "2026-03-10", window: optimoroute.TimeWindow{From: "09:00", To: "11:00"}, assigned: "user-1"},
		{name: "standard time", verb: write, date: "2026-06-10", window: optimoroute.TimeWindow{From: "09:00", To: "11:00"}, assigned: "user-1",
			edit: func(s *source) {
				s.start, s.end = time.Date(2026, 6, 9, 23, 0, 0, 0, time.UTC), time.Date(2026, 6, 10, 1, 0, 0, 0, time.UTC)
			}},
		{name: "window past midnight ends with the day", verb: write, date: "2026-03-10", window: optimoroute.TimeWindow{From: "22:00", To: "23:59"}, assigned: "user-1",
			edit: func(s *source) { s.start, s.end = s.start.Add(13*time.Hour), s.start.Add(16*time.Hour) }},
		{name: "no end: the window is the duration", verb: write, date: "2026-03-10", window: optimoroute.TimeWindow{From: "09:00", To: "09:45"}, assigned: "user-1",
			edit: func(s *source) { s.end = time.Time{} }},
		{name: "drivers left to planning", verb: write, date: "2026-03-10", window: optimoroute.TimeWindow{From: "09:00", To: "11:00"},
			m: func(m *mapping) { m.assignDrivers = false }},
		{name: "moved order remembers its day", verb: write, date: "2026-03-10", window: optimoroute.TimeWindow{From: "09:00", To: "11:00"}, assigned: "user-1", prev: "2026-03-05",
			edit: func(s *source) { s.order = active }},
		{name: "cancelled with an order", verb: remove, prev: "2026-03-05", edit: func(s *source) { s.status, s.order = " CANCELLED ", active }},
		{name: "cancelled without one", verb: refuse, edit: func(s *source) { s.status = "Canceled" }},
		{name: "gone", verb: remove, prev: "2026-03-05", edit: func(s *source) { s.gone, s.order = true, active }},
		{name: "no start", verb: refuse, edit: func(s *source) { s.start = time.Time{} }},
		{name: "past without an order", verb: refuse, edit: func(s *source) { s.start = from.Add(-time.Hour) }},
		{name: "no address", verb: refuse, edit: func(s *source) { s.job.AddressLine1 = " " }},
		{name: "job not mirrored", verb: refuse, edit: func(s *source) { s.job = store.QueuedJob{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			s := base()
			if tc.edit != nil {
				tc.edit(&s)
			}
			mm := m
			if tc.m != nil {
				tc.m(&mm)
			}
			d := mm.decide(s, from)
			is.Equal(d.verb, tc.verb) // what to do
			is.Equal(d.prev, tc.prev) // the day the active order had
			if tc.verb != write {
				is.True(d.reason != "") // a reason is recorded
				return
			}
			is.Equal(d.order.Date, tc.date)                                    // the local day
			is.Equal(d.order.TimeWindows, []optimoroute.TimeWindow{tc.window}) // the local window
			is.Equal(d.order.Duration, 45)                                     // the configured length
			is.Equal(d.order.Location.Address, "1 A St, Carlton VIC 3053")
			if tc.assigned == "" {
				is.True(d.order.AssignedTo == nil) // no driver pinned
			} else {
				is.Equal(d.order.AssignedTo.ExternalID, tc.assigned) // pinned to the assigned user
			}
			is.Equal(d.row.OrderDate, tc.date) // the row records what was sent
			is.Equal(d.row.Version, int64(2))
			is.Equal(d.row.State, store.OrderActive)
		})
	}
}
