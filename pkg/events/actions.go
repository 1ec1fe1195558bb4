package events

import "slices"

// Prime's webhook eventActions that a stage handles (§5). Anything else is
// stored, published on its own subject and finished by the resolver as "No
// handler for '<action>'" (§3); it stays replayable once a handler exists.
const (
	ActionChangeJobStatus        = "change-job-status"
	ActionCreateAppointment      = "create-appointment"
	ActionCompleteAppointment    = "complete-appointment"
	ActionChangeCustomFormStatus = "change-custom-form-status"
	ActionCreateEstimate         = "create-estimate"
	ActionCreateAllocation       = "create-allocation"
)

// Actions lists every eventAction a stage handles.
var Actions = []string{
	ActionChangeJobStatus, ActionCreateAppointment, ActionCompleteAppointment,
	ActionChangeCustomFormStatus, ActionCreateEstimate, ActionCreateAllocation,
}

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
	case slices.Contains(Actions, action):
		return action
	default:
		return LabelOther
	}
}
