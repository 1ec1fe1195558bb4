package events

// The webhook event actions (eventAction) that have a handler (§5). Ingest
// stores and publishes every event whatever its action (§2); the resolver
// finishes the row of an action not listed here as "No handler for
// '<action>'" (§3).
//
// To add an action:
//   - name it here and list it in Actions (the resolver's metrics label it
//     from that list);
//   - give the resolver a case in its identify switch: what the event refers
//     to (§4), or a payload fault;
//   - give the stage that handles it a handler and ResolvedSubject(action) in
//     its consumer's subjects (child-mirror: Actions and its work switch);
//   - teach primesim's actionShape the property Prime puts its GUID under,
//     so flowtest.Env.Fire can send it.
const (
	// ActionChangeJobStatus: a job's status changed (§5.1, job-mirror).
	ActionChangeJobStatus = "change-job-status"
	// ActionCreateAppointment and ActionCompleteAppointment: an appointment
	// was made or completed (§5.2, child-mirror).
	ActionCreateAppointment   = "create-appointment"
	ActionCompleteAppointment = "complete-appointment"
	// ActionChangeCustomFormStatus: a site form's status changed (§5.3,
	// child-mirror).
	ActionChangeCustomFormStatus = "change-custom-form-status"
	// ActionCreateEstimate: an estimate was made (§5.4, child-mirror).
	ActionCreateEstimate = "create-estimate"
	// ActionCreateAllocation: an allocation was made (§5.5, child-mirror).
	ActionCreateAllocation = "create-allocation"
)

// Actions lists every action with a handler, in §5's order. The slice is
// the caller's own.
func Actions() []string {
	return []string{
		ActionChangeJobStatus, ActionCreateAppointment, ActionCompleteAppointment,
		ActionChangeCustomFormStatus, ActionCreateEstimate, ActionCreateAllocation,
	}
}

// The JSON:API types of the Prime records a Resolved event carries in
// Fetched (Resource.Type).
const (
	ResourceJobs         = "jobs"
	ResourceAppointments = "appointments"
	ResourceAllocations  = "allocations"
)
