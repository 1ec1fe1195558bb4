package prime

import (
	"sync/atomic"
	"time"
)

// waiter is one call waiting for its turn at the budget.
type waiter struct {
	prio  Priority
	since time.Time
	seq   uint64        // arrival order, for calls that arrived at one instant
	woken chan struct{} // a signal to look again; holds one
	// boost, when set, is the class of the highest of the calls that wait
	// for this one's answer (coalescing): it competes in that class.
	boost *atomic.Int32
}

func (w *waiter) wake() {
	select {
	case w.woken <- struct{}{}:
	default:
	}
}

// queue holds the calls waiting for the budget. They are few (a process's
// workers), so it is a slice searched in full.
type queue struct {
	waiters []*waiter
	seq     uint64
}

func (q *queue) add(p Priority, now time.Time) *waiter {
	q.seq++
	w := &waiter{prio: p, since: now, seq: q.seq, woken: make(chan struct{}, 1)}
	q.waiters = append(q.waiters, w)
	return w
}

func (q *queue) remove(w *waiter) {
	for i, x := range q.waiters {
		if x == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			return
		}
	}
}

// class is the class a waiter competes in at now. A call below
// PriorityEvent that has waited aging moves up a class, and another each
// time it has waited as long again, but never above PriorityEvent: so a
// sweep gets what the webhooks leave and is still never starved for good,
// while make-safe work always goes first. aging 0 keeps every class.
func (w *waiter) class(now time.Time, aging time.Duration) Priority {
	p := w.prio
	if w.boost != nil {
		p = min(p, Priority(w.boost.Load()))
	}
	if p <= PriorityEvent || aging <= 0 {
		return p
	}
	return max(PriorityEvent, p-Priority(now.Sub(w.since)/aging))
}

// before reports whether a goes before b at now: the higher class first,
// then the one waiting longer.
func before(a, b *waiter, now time.Time, aging time.Duration) bool {
	ca, cb := a.class(now, aging), b.class(now, aging)
	if ca != cb {
		return ca < cb
	}
	if !a.since.Equal(b.since) {
		return a.since.Before(b.since)
	}
	return a.seq < b.seq
}

// first is the waiter whose turn it is at now, nil when none waits.
func (q *queue) first(now time.Time, aging time.Duration) *waiter {
	var f *waiter
	for _, w := range q.waiters {
		if f == nil || before(w, f, now, aging) {
			f = w
		}
	}
	return f
}

// ahead counts the waiters that go before w at now.
func (q *queue) ahead(w *waiter, now time.Time, aging time.Duration) int {
	n := 0
	for _, x := range q.waiters {
		if x != w && before(x, w, now, aging) {
			n++
		}
	}
	return n
}

func (q *queue) wakeAll() {
	for _, w := range q.waiters {
		w.wake()
	}
}
