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
// of an event of action: the event's class (Priority), and the caller and
// the action as the metrics' caller and purpose.
func ForEvent(ctx context.Context, caller, action string) context.Context {
	return prime.WithCaller(prime.WithPriority(ctx, Priority(action)), caller, action)
}
