package store

import (
	"context"
	"time"
)

// Plan statuses: optimoRoutePlan.PlanStatus (§8, §8.4). A date is queued for
// planning while it is PlanNotPlanned; the other values say how its last plan
// run went.
const (
	// PlanNotPlanned queues the date: an order of the date was created,
	// changed or deleted (spOptimoRoutePlanUpsert).
	PlanNotPlanned = "NotPlanned"
	// PlanPlanning: a plan run is planning the date.
	PlanPlanning = "Planning"
	// PlanPlanningCompleted: OptimoRoute finished planning the date.
	PlanPlanningCompleted = "PlanningCompleted"
	// PlanRoutesCompleted: the routes were read back into optimoRouteOrder.
	PlanRoutesCompleted = "RoutesCompleted"
	// PlanCancelled: the plan was stopped in OptimoRoute (status C).
	PlanCancelled = "C:Cancelled by the user"
	// PlanErrorOccurred: OptimoRoute's plan ended in error (status E).
	PlanErrorOccurred = "E:Error occurred"
	// PlanUnknownError: OptimoRoute answered a status it does not document.
	PlanUnknownError = "Unknown Error"
)

// PlanRequestFailed is the status of a date whose start_planning request
// failed: E:<code> (§8.4), the code being OptimoRoute's (ERR_OPT_RUNNING …).
func PlanRequestFailed(code string) string { return "E:" + code }

// DateLayout is how plan and order dates are written: OptimoRoute's
// YYYY-MM-DD, a day of the account's time zone.
const DateLayout = time.DateOnly

// OptimoPlan is a row of optimoRoutePlan: one date and how its planning went.
type OptimoPlan struct {
	// PlanDate is the day, YYYY-MM-DD.
	PlanDate   string
	PlanStatus string
	// PlanningID is OptimoRoute's id of the date's latest plan; 0 when the
	// date has none since it was last queued.
	PlanningID int64
	// ErrorText is the last failure in full; PlanStatus holds its short form.
	ErrorText string
	// QueuedUTC is when the date was last marked NotPlanned.
	QueuedUTC time.Time
	// StartedUTC is when the date last moved to Planning.
	StartedUTC time.Time
	// FinishedUTC is when the date last reached a status past Planning.
	FinishedUTC time.Time
	UpdatedUTC  time.Time
}

// PlanStatusWrite is one spOptimoRoutePlanSetStatus call.
type PlanStatusWrite struct {
	PlanDate string
	Status   string
	// OnlyIfStatus makes the write conditional: it happens only while the
	// date is still in that status (§8.4). Empty writes unconditionally.
	OnlyIfStatus string
	// PlanningID, when not 0, is stored with the status.
	PlanningID int64
	// ErrorText is stored with the status; empty clears it.
	ErrorText string
}

// Order states: optimoRouteOrder.state, what OptimoRoute holds.
const (
	// OrderActive: OptimoRoute holds the order as recorded.
	OrderActive = "Active"
	// OrderDeleted: OptimoRoute does not hold the order: it was deleted, or
	// never written.
	OrderDeleted = "Deleted"
)

// OptimoOrder is a row of optimoRouteOrder: an OptimoRoute order, the
// appointment or work order it was made from, and what the routes say of it.
type OptimoOrder struct {
	OrderNo string
	// AppointmentID or WorkOrderID names the record the order was made from.
	AppointmentID string
	WorkOrderID   string
	JobID         string
	// Version is the source record's version last handled: written,
	// deleted, or refused (then ErrorText says why). The queues compare it
	// with the mirror (§5.2).
	Version int64
	// OrderDate is the order's day as OptimoRoute holds it, YYYY-MM-DD.
	OrderDate string
	// Duration is the service time in minutes.
	Duration int
	// TimeFrom and TimeTo are the time window, "HH:MM" local.
	TimeFrom, TimeTo string
	Address          string
	// AssignedTo is the driver's external id the order was pinned to.
	AssignedTo string
	State      string
	// ErrorText is why Version was not written as an order; empty when it was.
	ErrorText string
	// OptimoID is OptimoRoute's own id of the order.
	OptimoID string
	// ScheduledUTC, DriverSerial and DriverName are read back from the
	// routes of the order's date; zero when the order is on no route.
	ScheduledUTC time.Time
	DriverSerial string
	DriverName   string
	// RoutesUTC is when the routes of the order's date were last read back.
	RoutesUTC time.Time
	// RefreshedUTC is when the order refresh last found the order.
	RefreshedUTC time.Time
	CreatedUTC   time.Time
	UpdatedUTC   time.Time
}

// OrderSchedule is one order's place in the routes of its date.
type OrderSchedule struct {
	OrderNo      string
	ScheduledUTC time.Time
	DriverSerial string
	DriverName   string
}

// QueuedJob is the job of a queued appointment or work order, as mirrored:
// what an order's location is made from. Found is false when primeJobs has
// no row for it.
type QueuedJob struct {
	Found        bool
	JobNumber    string
	AddressLine1 string
	AddressLine2 string
	Suburb       string
	State        string
	Postcode     string
}

// AppointmentQueueItem is an appointment whose order is not up to date
// (spOptimoRouteGetAppointmentQueue).
type AppointmentQueueItem struct {
	AppointmentID string
	JobID         string
	StartDate     time.Time
	EndDate       time.Time
	Status        string
	Version       int64
	AssignedID    string
	Description   string
	Notes         string
	// Gone: the appointment is no longer in primeAppointments while its
	// order is active; only AppointmentID, JobID and Order are set.
	Gone bool
	Job  QueuedJob
	// Order is the order made from the appointment so far; OrderNo is empty
	// when there is none.
	Order OptimoOrder
}

// WorkOrderQueueItem is a work order whose order is not up to date
// (spOptimoRouteGetWorkOrderQueue).
type WorkOrderQueueItem struct {
	WorkOrderID string
	JobID       string
	Status      string
	Version     int64
	// Attributes is Prime's attributes object: the work order's dates are
	// read from it.
	Attributes string
	// Gone: the work order is no longer in primeWorkOrders while its order
	// is active; only WorkOrderID, JobID and Order are set.
	Gone  bool
	Job   QueuedJob
	Order OptimoOrder
}

// Optimo is OptimoRoute's side of the store: orders, plan dates and the
// queues derived from them (§8; bodies in sql/README.md).
type Optimo interface {
	// GetAppointmentQueue returns, in appointment id order, up to limit of
	// the appointments whose order is missing or made from another version
	// (§5.2: primeAppointments compared with optimoRouteOrder by version),
	// limited to those starting at or after fromUTC unless their order is
	// active, and the appointments gone from the mirror whose order is
	// still active; only those whose id sorts after after ("" from the
	// start). A caller reads the queue a page at a time, after the last id
	// of the page before: handling a source does not always take it out
	// of the queue. The order is the backend's (SQL Server sorts GUIDs its
	// own way): after is meant to be an id the queue returned.
	GetAppointmentQueue(ctx context.Context, fromUTC time.Time, after string, limit int) ([]AppointmentQueueItem, error)
	// GetWorkOrderQueue is the same for primeWorkOrders, in work order id
	// order.
	GetWorkOrderQueue(ctx context.Context, after string, limit int) ([]WorkOrderQueueItem, error)

	// UpsertOrder records an order whose OptimoRoute copy was just written
	// or deleted (spOptimoRouteUpsertOrder) and marks for replanning, with
	// spOptimoRoutePlanUpsert, the order's date when it is active and the
	// date it had when it was active before: creating, changing, moving or
	// deleting an order marks its date (§8). The read-back columns are kept
	// while the date stays, and cleared when it changes.
	UpsertOrder(ctx context.Context, o OptimoOrder) error
	// RecordOrderFailure records that version o.Version of the order's
	// source was not written, with o.ErrorText, leaving what OptimoRoute
	// holds as recorded and marking no date. Only OrderNo, the source ids,
	// Version and ErrorText are read; a new row is OrderDeleted.
	RecordOrderFailure(ctx context.Context, o OptimoOrder) error
	// GetOrder returns an order; found is false when there is no row.
	GetOrder(ctx context.Context, orderNo string) (o OptimoOrder, found bool, err error)

	// PlanUpsert marks a date NotPlanned, queueing it for planning
	// (spOptimoRoutePlanUpsert); it forgets the date's planning id and error.
	PlanUpsert(ctx context.Context, planDate string) error
	// GetPlanQueue returns every NotPlanned date, earliest first
	// (spOptimoRoutePlanGetQueue).
	GetPlanQueue(ctx context.Context) ([]string, error)
	// SetPlanStatus writes a date's status (spOptimoRoutePlanSetStatus
	// @PlanDate, @Status, @OnlyIfStatus): with OnlyIfStatus, only while the
	// date is still in it (§8.4). It reports whether it wrote. An
	// unconditional write of a date with no row creates the row.
	SetPlanStatus(ctx context.Context, w PlanStatusWrite) (written bool, err error)
	// GetPlan returns a date's row; found is false when there is none.
	GetPlan(ctx context.Context, planDate string) (p OptimoPlan, found bool, err error)
	// GetPlanningQueue returns the dates in Planning, earliest first: the
	// status poll's queue.
	GetPlanningQueue(ctx context.Context) ([]OptimoPlan, error)
	// GetRoutesRefreshQueue returns the PlanningCompleted dates, earliest
	// first: the dates whose routes are to be read back.
	GetRoutesRefreshQueue(ctx context.Context) ([]string, error)
	// SaveRoutes stores the routes read back for a date in one transaction:
	// each scheduled order's time and driver, and no schedule for the date's
	// other orders; every order of the date gets RoutesUTC = at. Schedules of
	// orders unknown here are ignored.
	SaveRoutes(ctx context.Context, planDate string, schedules []OrderSchedule, at time.Time) error
	// GetOrderRefreshQueue returns active orders that the latest routes of
	// their RoutesCompleted date left unscheduled and that were not
	// refreshed since that plan finished, oldest order number first.
	GetOrderRefreshQueue(ctx context.Context, limit int) ([]OptimoOrder, error)
	// SetOrderRefreshed records an order refresh: found stamps RefreshedUTC
	// (and OptimoID when given); not found records the order as deleted with
	// no version, so the source's queue writes it again.
	SetOrderRefreshed(ctx context.Context, orderNo string, found bool, optimoID string, at time.Time) error
}
