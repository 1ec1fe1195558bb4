// Package pipeline is the life of a webhook log row across the services:
// the payload faults of §4.2, and the Stage that finishes a row — stamps it
// processed with its effects in one transaction, or records a failed
// attempt — and tells the resolver's lane how it went (events.Done). It is
// not the new-job pipeline of §6: that is the newjob-pipeline service.
//
// A stage's handler for an action (events.Actions) is a Work: it reads what
// it needs (Prime, the mirror) and returns a Finish — Write for the writes
// that commit with the row's stamp, Outbox for the hand-offs published after
// the commit (outbox.Publisher.InTx), After for the best-effort steps — or
// an error: a *PayloadFault, a retry.Waiter (the event waits, no attempt
// counted), or any other failure (an attempt counted). Stage.Handler makes
// it the consume.Handler of the stage's consumer on
// events.ResolvedSubject(action).
package pipeline

import (
	"errors"
	"fmt"
)

// FaultKind is one of the three payload faults of §4.2 step 4.
type FaultKind string

// The payload faults (PrimeWebhookPayloadFault).
const (
	// MissingIdentifier: the payload has no identifier of the kind needed.
	MissingIdentifier FaultKind = "MissingIdentifier"
	// WrongEntityType: something was identified, but not the entity expected.
	WrongEntityType FaultKind = "WrongEntityType"
	// UnknownIdentifier: neither the mirror nor Prime can resolve the GUID.
	UnknownIdentifier FaultKind = "UnknownIdentifier"
)

// ErrPayload matches every *PayloadFault (errors.Is).
var ErrPayload = errors.New("payload fault")

// PayloadFault is PrimeWebhookPayloadException: the payload's shape is not
// what the parser expects. It fails the event like any error, but is logged
// with the payload and apart from other failures, because the fix is a
// parser change followed by a replay of the stored row (§4.2, §9) — but for
// UnknownIdentifier, which is logged as what it most often is: a record
// Prime does not have (yet, or any more), not a fault of the parser.
type PayloadFault struct {
	Kind   FaultKind
	Action string
	Detail string
}

func (f *PayloadFault) Error() string {
	return fmt.Sprintf("payload fault %s (%s): %s", f.Kind, f.Action, f.Detail)
}

// Is makes errors.Is(err, ErrPayload) true.
func (f *PayloadFault) Is(target error) bool { return target == ErrPayload }

// Fault makes a payload fault.
func Fault(kind FaultKind, action, format string, args ...any) *PayloadFault {
	return &PayloadFault{Kind: kind, Action: action, Detail: fmt.Sprintf(format, args...)}
}
