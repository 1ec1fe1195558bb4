package prime

import (
	"context"
	"fmt"
)

// Priority is the class of a Prime call. When calls wait for Prime's
// budget, a call of a higher class goes out before one of a lower class,
// whenever each started waiting; within a class, the one that has waited
// longer goes first. A call carries its class in its context (WithPriority).
type Priority int

// The classes, highest first.
const (
	// PriorityMakesafe is make-safe work: the create-allocation events and
	// the re-check ladder's rungs (§5.5, §6), where minutes matter.
	PriorityMakesafe Priority = iota
	// PriorityEvent is the other webhook events, and the ensure-job a child
	// event asks for (§4.3). It is the class of a call that names none.
	PriorityEvent
	// PriorityDrain is the ethSyncQueue drains and the mail intake.
	PriorityDrain
	// PrioritySweep is the sweeps (the appointment sweep of §8.1) and the
	// jobs-by-date backstop: they get what the others leave.
	PrioritySweep
)

// Priorities lists every class, highest first.
func Priorities() []Priority {
	return []Priority{PriorityMakesafe, PriorityEvent, PriorityDrain, PrioritySweep}
}

// String is the class as the metrics label it: makesafe, event, drain,
// sweep.
func (p Priority) String() string {
	switch p {
	case PriorityMakesafe:
		return "makesafe"
	case PriorityEvent:
		return "event"
	case PriorityDrain:
		return "drain"
	case PrioritySweep:
		return "sweep"
	}
	return fmt.Sprintf("Priority(%d)", int(p))
}

// ParsePriority reads a class from its String form, for a class that
// travels in a message (an ensure-job request, say).
func ParsePriority(s string) (Priority, error) {
	for _, p := range Priorities() {
		if p.String() == s {
			return p, nil
		}
	}
	return PriorityEvent, fmt.Errorf("prime: priority %q: want makesafe, event, drain or sweep", s)
}

func (p Priority) valid() bool { return p >= PriorityMakesafe && p <= PrioritySweep }

// priorityKey is the context key of WithPriority.
type priorityKey struct{}

// WithPriority gives ctx's Prime calls the class p. A class that is not
// one of the constants is taken as PriorityEvent.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

// PriorityOf is the class of ctx's calls: PriorityEvent unless WithPriority
// set another.
func PriorityOf(ctx context.Context) Priority {
	if p, ok := ctx.Value(priorityKey{}).(Priority); ok && p.valid() {
		return p
	}
	return PriorityEvent
}

// callerKey is the context key of WithCaller.
type callerKey struct{}

// caller names who makes a call and what for.
type caller struct{ name, purpose string }

// unnamed labels a call whose context names no caller or purpose.
const unnamed = "unnamed"

// WithCaller names who makes ctx's Prime calls (the service: "resolver",
// "child-mirror") and what for ("identify", "contact-sync", "sweep"), as
// the labels caller and purpose of prime_client_calls_total and in each
// request's User-Agent. Both are metric labels: a few fixed words, never
// an id. Unset, both are "unnamed".
func WithCaller(ctx context.Context, name, purpose string) context.Context {
	return context.WithValue(ctx, callerKey{}, caller{name: name, purpose: purpose})
}

func callerOf(ctx context.Context) caller {
	c, _ := ctx.Value(callerKey{}).(caller)
	if c.name == "" {
		c.name = unnamed
	}
	if c.purpose == "" {
		c.purpose = unnamed
	}
	return c
}
