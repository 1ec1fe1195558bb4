package optimocreate

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// This file is the one place that decides what OptimoRoute order a Prime
// appointment or work order becomes (sql/README.md, "OptimoRoute", says why
// each field is read the way it is).

// orderType is the OptimoRoute type of every order: a task at the job's site.
const orderType = "T"

// cancelledStatuses are the appointment and work-order statuses that mean
// the visit is off, compared without regard to case.
var cancelledStatuses = []string{"cancelled", "canceled", "deleted"}

func cancelled(status string) bool {
	s := strings.ToLower(strings.TrimSpace(status))
	for _, c := range cancelledStatuses {
		if s == c {
			return true
		}
	}
	return false
}

// mapping is how sources become orders.
type mapping struct {
	// zone is the OptimoRoute account's time zone: dates and windows are
	// its local days and clock times.
	zone *time.Location
	// duration is the service time of an order: Prime's appointment gives a
	// window, not how long the visit takes.
	duration time.Duration
	// assignDrivers pins an order to the driver whose OptimoRoute external id
	// is the Prime user the visit is assigned to.
	assignDrivers bool
}

// verb is what to do with an order.
type verb int

const (
	// write the order (create or replace it, SYNC).
	write verb = iota
	// remove the order from OptimoRoute, if it is there.
	remove
	// refuse: the source cannot be an order; record why, change nothing.
	refuse
)

// decision is what to do for one queued source.
type decision struct {
	verb  verb
	order optimoroute.Order // for write
	// row is what to record once the verb is done: the order as written for
	// write; the source and version for remove and refuse.
	row    store.OptimoOrder
	reason string // for remove and refuse
	// prev is the date the source's active order had, "" when it had none:
	// a write that moves the order, or a removal, marks it too (§8).
	prev string
}

// source is what the two queues have in common.
type source struct {
	orderNo       string
	appointmentID string
	workOrderID   string
	jobID         string
	version       int64
	status        string
	gone          bool
	start, end    time.Time
	assignedID    string
	notes         string
	job           store.QueuedJob
	order         store.OptimoOrder // the order made so far
	what          string            // "appointment" or "work order", for reasons
}

// fromAppointment reads an appointment queue item. The order number is the
// appointment's GUID: unique, and the same every time the appointment is
// written again.
func fromAppointment(it store.AppointmentQueueItem) source {
	return source{
		orderNo: it.AppointmentID, appointmentID: it.AppointmentID, jobID: it.JobID, version: it.Version,
		status: it.Status, gone: it.Gone, start: it.StartDate, end: it.EndDate, assignedID: it.AssignedID,
		notes: joinNotes(it.Description, it.Notes), job: it.Job, order: it.Order, what: "appointment",
	}
}

// workOrderAttributes are the work-order attributes orders are made from.
// Assumed names (external-apis.md lists no work-order shape): startDate and
// endDate as Prime timestamps, assignedId, description.
type workOrderAttributes struct {
	StartDate   prime.Time `json:"startDate"`
	EndDate     prime.Time `json:"endDate"`
	AssignedID  string     `json:"assignedId"`
	Description string     `json:"description"`
}

// fromWorkOrder reads a work-order queue item; its dates are in its
// attributes. Unreadable attributes leave it without a start, so it is
// refused with the reason.
func fromWorkOrder(it store.WorkOrderQueueItem) (source, error) {
	s := source{
		orderNo: it.WorkOrderID, workOrderID: it.WorkOrderID, jobID: it.JobID, version: it.Version,
		status: it.Status, gone: it.Gone, job: it.Job, order: it.Order, what: "work order",
	}
	if it.Gone || it.Attributes == "" {
		return s, nil
	}
	var a workOrderAttributes
	if err := json.Unmarshal([]byte(it.Attributes), &a); err != nil {
		return s, fmt.Errorf("work order %s: attributes: %w", it.WorkOrderID, err)
	}
	s.start, s.end, s.assignedID, s.notes = a.StartDate.Time, a.EndDate.Time, a.AssignedID, a.Description
	return s, nil
}

func joinNotes(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "\n")
}

// decide maps one queued source to what to do with its order. from is the
// start of the account's today: a source without an active order that
// starts before it is not made an order.
func (m mapping) decide(s source, from time.Time) decision {
	row := store.OptimoOrder{OrderNo: s.orderNo, AppointmentID: s.appointmentID, WorkOrderID: s.workOrderID,
		JobID: s.jobID, Version: s.version, OrderDate: s.order.OrderDate}
	prev := ""
	if s.order.State == store.OrderActive {
		prev = s.order.OrderDate
	}
	off := func(reason string) decision {
		if s.gone {
			// The mirror no longer has the source: keep the version the
			// order was made from.
			row.Version = s.order.Version
		}
		if s.order.State == store.OrderActive {
			return decision{verb: remove, row: row, reason: reason, prev: prev}
		}
		return decision{verb: refuse, row: row, reason: reason}
	}
	switch {
	case s.gone:
		return off(s.what + " is no longer in the mirror")
	case cancelled(s.status):
		return off(s.what + " is " + strings.ToLower(s.status))
	case s.start.IsZero():
		return off(s.what + " has no start date")
	case s.start.Before(from) && s.order.State != store.OrderActive:
		return decision{verb: refuse, row: row, reason: s.what + " is in the past"}
	}
	address := addressOf(s.job)
	if address == "" {
		// The job, not the source, is missing something: record no version,
		// so the source is offered again on every run until the job's
		// address arrives (the job's own version does not queue it).
		row.Version = 0
		return decision{verb: refuse, row: row, reason: "job " + s.jobID + " has no address in the mirror; retried on every run"}
	}

	start := s.start.In(m.zone)
	end := s.end.In(m.zone)
	if !s.end.After(s.start) {
		end = start.Add(m.duration)
	}
	to := end.Format("15:04")
	if end.YearDay() != start.YearDay() || end.Year() != start.Year() {
		to = "23:59" // the window ends with the day the visit starts on
	}
	o := optimoroute.Order{
		Operation:   optimoroute.OrderSync,
		OrderNo:     s.orderNo,
		Type:        orderType,
		Date:        start.Format(store.DateLayout),
		Duration:    int(m.duration / time.Minute),
		TimeWindows: []optimoroute.TimeWindow{{From: start.Format("15:04"), To: to}},
		Location: &optimoroute.Location{
			LocationName:       s.job.JobNumber,
			Address:            address,
			AcceptPartialMatch: true,
		},
		Notes: s.notes,
	}
	if m.assignDrivers && s.assignedID != "" {
		o.AssignedTo = &optimoroute.Driver{ExternalID: s.assignedID}
	}
	row.OrderDate, row.Duration, row.TimeFrom, row.TimeTo = o.Date, o.Duration, o.TimeWindows[0].From, to
	row.Address, row.State = address, store.OrderActive
	if o.AssignedTo != nil {
		row.AssignedTo = o.AssignedTo.ExternalID
	}
	return decision{verb: write, order: o, row: row, prev: prev}
}

// addressOf is the job's site address as OptimoRoute geocodes it:
// "line 1, line 2, suburb state postcode".
func addressOf(j store.QueuedJob) string {
	if !j.Found || strings.TrimSpace(j.AddressLine1) == "" {
		return ""
	}
	parts := []string{strings.TrimSpace(j.AddressLine1)}
	if l2 := strings.TrimSpace(j.AddressLine2); l2 != "" {
		parts = append(parts, l2)
	}
	if place := strings.TrimSpace(strings.Join(strings.Fields(j.Suburb+" "+j.State+" "+j.Postcode), " ")); place != "" {
		parts = append(parts, place)
	}
	return strings.Join(parts, ", ")
}
