package pipeline

import (
	"context"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/prime"
)

// Priority is the class of the Prime calls made for an event of action:
// make-safe work for create-allocation (§5.5: the moment a Make Safe
// allocation is learnt of, which detection waits for), the events' class
// for the rest.
func Priority(action string) prime.Priority {
	if action == events.ActionCreateAllocation {
		return prime.PriorityMakesafe
	}
	return prime.PriorityEvent
}

// ForEvent is ctx for the Prime calls caller (the service) makes on behalf
// of ev: the event's class (Priority), the caller and the action as the
// metrics' caller and purpose, and when the event reached us, so that an
// answer Prime gave since serves it (prime.WithEventTime).
func ForEvent(ctx context.Context, caller string, ev events.Resolved) context.Context {
	ctx = prime.WithCaller(prime.WithPriority(ctx, Priority(ev.Action)), caller, ev.Action)
	if !ev.ReceivedUTC.IsZero() {
		ctx = prime.WithEventTime(ctx, ev.ReceivedUTC)
	}
	return ctx
}
