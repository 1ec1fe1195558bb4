// Package coalesce runs a job once for a burst of requests: requests that
// arrive while no run is pending start one; requests that arrive during a run
// cause exactly one more run, which starts after them. No request is left
// without a run that starts after it, and a burst never queues more than one.
//
// With a Window, a run starts that long after the request that owed it, so
// that requests spread over the window share it even when a run is quicker
// than the gap between two of them (a plan run with nothing queued).
//
// It is how optimo-create and optimo-plan turn a stream of "please run"
// messages (a webhook's hand-off, a portal's booking) into runs: the
// consumer acks each request and calls Request; one loop runs while requests
// are pending.
package coalesce

import (
	"context"
	"time"
)

// Loop runs a job on request, one run at a time.
type Loop struct {
	job     func(ctx context.Context)
	next    Schedule
	pending chan struct{} // holds one token while a run is owed
	window  time.Duration
	after   func(time.Duration) <-chan time.Time // time.After; a test's clock
}

// Option configures a Loop.
type Option func(*Loop)

// Window makes a run start d after the request that owed it: the requests
// made meanwhile (and the schedule's) are served by that run. Zero, the
// default, starts it at once.
func Window(d time.Duration) Option { return func(l *Loop) { l.window = max(d, 0) } }

// Schedule says when the next scheduled run is due, given the time now; the
// zero Time schedules no more.
type Schedule func(now time.Time) time.Time

// Every is the Schedule of a run every d; d of zero or less is nil, no
// schedule.
func Every(d time.Duration) Schedule {
	if d <= 0 {
		return nil
	}
	return func(now time.Time) time.Time { return now.Add(d) }
}

// New returns a Loop for job that also requests a run at each time next
// gives (the schedule that covers requests lost before they arrived): the
// first after Run starts, then each after the one before came. A nil next
// schedules nothing.
func New(job func(ctx context.Context), next Schedule, opts ...Option) *Loop {
	l := &Loop{job: job, next: next, pending: make(chan struct{}, 1), after: time.After}
	for _, o := range opts {
		o(l)
	}
	return l
}

// Request asks for a run that starts after this call. It never blocks: if a
// run is already owed, that run serves this request too.
func (l *Loop) Request() {
	select {
	case l.pending <- struct{}{}:
	default:
	}
}

// Run runs the job whenever a run is owed, until ctx ends; a run in progress
// is given ctx and finishes before Run returns. Run returns nil.
func (l *Loop) Run(ctx context.Context) error {
	var (
		timer *time.Timer
		tick  <-chan time.Time
	)
	schedule := func() {
		if l.next == nil {
			return
		}
		at := l.next(time.Now())
		if at.IsZero() {
			tick = nil
			return
		}
		if timer == nil {
			timer = time.NewTimer(time.Until(at))
		} else {
			timer.Reset(time.Until(at))
		}
		tick = timer.C
	}
	schedule()
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
			l.Request()
			schedule()
		case <-l.pending:
			if l.window > 0 {
				select {
				case <-ctx.Done():
					return nil
				case <-l.after(l.window):
				}
				// The requests of the window are this run's.
				select {
				case <-l.pending:
				default:
				}
			}
			// Taking the token before the run is what makes a request that
			// arrives during the run owe the next one.
			l.job(ctx)
		}
	}
}
