package store

import "context"

// Mirror tables of the Prime entities, as spPrimeIdentifyGuid names them
// (§4.2). When a new action needs a new entity type, add its table here and
// to the proc: a longer list costs the expected case nothing.
const (
	TableJobs            = "primeJobs"
	TableAppointments    = "primeAppointments"
	TableAppointmentType = "primeAppointmentType"
	TableStatuses        = "primeStatuses"
	TableUsers           = "primeUsers"
	TableContacts        = "primeContacts"
	TableAllocations     = "primeAllocations"
	TableSiteForms       = "primeSiteForms"
	TableEstimates       = "primeEstimates"
	TableWorkOrders      = "primeWorkOrders"
	TableAttachment      = "primeAttachment"
	TableNotifications   = "primeNotifications"
	TableSchedule        = "primeSchedule"
	TableScheduleItem    = "primeScheduleItem"
	TableFilterTags      = "primeFilterTags"
	TablePerils          = "primePerils"
)

// IdentifyTables lists, in probe order, the sixteen tables IdentifyGuid
// sweeps, with each table's GUID key column.
var IdentifyTables = []struct{ Table, Key string }{
	{TableJobs, "jobId"},
	{TableAppointments, "appointmentId"},
	{TableAppointmentType, "appointmentTypeId"},
	{TableStatuses, "statusId"},
	{TableUsers, "userId"},
	{TableContacts, "contactId"},
	{TableAllocations, "allocationId"},
	{TableSiteForms, "siteFormId"},
	{TableEstimates, "estimateId"},
	{TableWorkOrders, "workOrderId"},
	{TableAttachment, "attachmentId"},
	{TableNotifications, "notificationId"},
	{TableSchedule, "scheduleId"},
	{TableScheduleItem, "scheduleItemId"},
	{TableFilterTags, "filterTagId"},
	{TablePerils, "perilId"},
}

// Identify finds which mirror tables hold a GUID (§4.2).
type Identify interface {
	// IdentifyGuid returns the mirror tables the GUID is found in
	// (spPrimeIdentifyGuid @Id, @ExpectedEntity). With expected set, the
	// expected table is probed first and the full sweep runs only when that
	// probe misses; expected must be one of IdentifyTables or empty.
	IdentifyGuid(ctx context.Context, id, expected string) ([]string, error)
}
