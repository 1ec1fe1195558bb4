// Package coalesce runs a job once for a burst of requests: requests that
// arrive while no run is pending start one; requests that arrive during a run
// cause exactly one more run, which starts after them. No request is left
// without a run that starts after it, and a burst never queues more than one.
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
	every   time.Duration
	pending chan struct{} // holds one token while a run is owed
}

// New returns a Loop for job. every, when above zero, also requests a run
// that often, the schedule that covers requests lost before they arrived.
func New(job func(ctx context.Context), every time.Duration) *Loop {
	return &Loop{job: job, every: every, pending: make(chan struct{}, 1)}
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
	var tick <-chan time.Time
	if l.every > 0 {
		t := time.NewTicker(l.every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
			l.Request()
		case <-l.pending:
			// Taking the token before the run is what makes a request that
			// arrives during the run owe the next one.
			l.job(ctx)
		}
	}
}
