package events

import "slices"

// The webhook event actions (eventAction) that have a handler (§5). Ingest
// stores and publishes every event whatever its action (§2); the resolver
// finishes the row of an action not listed here as "No handler for
// '<action>'" (§3); it stays replayable once a handler exists.
//
// To add an action:
//   - name it here and list it in Actions (the resolver's metrics label it
//     from that list, and ActionLabel gives it a label of its own);
//   - give the resolver a case in its identify switch: what the event refers
//     to (§4), or a payload fault;
//   - give the stage that handles it a handler and ResolvedSubject(action) in
//     its consumer's subjects in roles.go (ConsumerJobMirror, or childActions
//     for child-mirror, whose Actions and work switch take it too), and
//     regenerate compose/nats/users.conf (go test ./pkg/natsauth -run
//     TestUsersConf -update);
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

// handled is Actions, read by ActionLabel on every webhook.
var handled = Actions()

// Metric labels for eventActions that are not in Actions.
const (
	// LabelOther is any eventAction no stage handles: made-up or new ones
	// share it, so they cannot add a series each.
	LabelOther = "_other"
	// LabelUnread is a webhook refused before its body was read (401, 413,
	// a body that could not be read): its eventAction is not known.
	LabelUnread = "_unread"
)

// ActionLabel is the metric label of an eventAction: the action itself when
// a stage handles it, ActionNone when there is none, LabelOther otherwise.
// A metric's action label takes only these values, however many actions
// arrive.
func ActionLabel(action string) string {
	switch {
	case action == "":
		return ActionNone
	case slices.Contains(handled, action):
		return action
	default:
		return LabelOther
	}
}

// The JSON:API types of the Prime records a Resolved event carries in
// Fetched (Resource.Type).
const (
	ResourceJobs         = "jobs"
	ResourceAppointments = "appointments"
	ResourceAllocations  = "allocations"
)
