// Package ensurejob is the caller's side of job-mirror's "ensure job
// mirrored" request (EnsureJobMirroredAsync, §4.3): a handler about to write
// a child row asks job-mirror to make sure the child's job is in primeJobs,
// and job-mirror runs the new-job pipeline when the job is new. It keeps
// callers free of job-mirror's service code (a Prime job's primeJobs row is
// mapped in pkg/mirror, mirror.Job).
//
// job-mirror not answering (a restart, a deploy) is not a failure of the
// caller's event: the event waits and runs again without an attempt counted
// (§9), so that an outage does not cap the child events that arrive during
// it (§3) and lose what only they ask for, such as make-safe detection
// (§10.5).
package ensurejob

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/pipeline"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/nats-io/nats.go"
)

// DefaultTimeout bounds a request whose context has no deadline.
const DefaultTimeout = 30 * time.Second

// MinWait and MaxWait bound how long an event waits when job-mirror did
// not answer. Ensure asks for MinWait, the least any wait lasts; a Caller for
// how long job-mirror has gone unanswered, within these bounds, so the events
// that wait back off as an outage goes on and run again within MaxWait of its
// end.
const (
	MinWait = retry.MinWait
	MaxWait = 30 * time.Second
)

// service names job-mirror in a *pipeline.UnavailableError.
const service = "job-mirror"

// Ensure asks job-mirror to make sure a job is mirrored, on subject (one
// of events.SubjectEnsureJob…: the path the caller's role asks by), and
// returns its reply. Errors:
//   - a *prime.RateLimitedError when Prime's rate limit stopped job-mirror,
//     a *prime.UnavailableError when Prime did not answer it (a 5xx or no
//     answer that is not the job's), and a *pipeline.UnavailableError
//     (waiting MinWait) when job-mirror
//     did not answer — no responders, the request's deadline, the
//     connection closed or draining: either way the caller's event waits
//     and no attempt is counted (pipeline.Stage treats them so);
//   - one matching prime.ErrNotFound when Prime has no such job;
//   - any other error when job-mirror answered that it failed or refused
//     the request, or the request was not sent: the caller's event fails
//     an attempt.
func Ensure(ctx context.Context, nc *nats.Conn, subject string, req events.EnsureJobRequest) (events.EnsureJobReply, error) {
	reply, _, err := ask(ctx, nc, subject, req)
	return reply, err
}

// ask is Ensure, and also reports whether job-mirror answered.
func ask(ctx context.Context, nc *nats.Conn, subject string, req events.EnsureJobRequest) (events.EnsureJobReply, bool, error) {
	if req.JobID == "" && req.NumericRef <= 0 {
		return events.EnsureJobReply{}, false, errors.New("ensure job: no job id and no numeric reference")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	reply, err := events.Request[events.EnsureJobReply](ctx, nc, subject, req)
	if err != nil {
		err = fmt.Errorf("ensure job %s: %w", describe(req), err)
		if unanswered(err) {
			return events.EnsureJobReply{}, false, &pipeline.UnavailableError{Service: service, Wait: MinWait, Err: err}
		}
		// A micro error or a reply that is not one: job-mirror answered.
		return events.EnsureJobReply{}, ctx.Err() == nil, err
	}
	return reply, true, ReplyError(reply)
}

// unanswered reports whether a request failed for want of an answer
// rather than with one.
func unanswered(err error) bool {
	for _, target := range []error{
		nats.ErrNoResponders, nats.ErrTimeout, context.DeadlineExceeded,
		nats.ErrConnectionClosed, nats.ErrConnectionDraining, nats.ErrDisconnected, nats.ErrReconnectBufExceeded,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// Caller asks job-mirror on behalf of a stage's events. Each request is
// bounded by Timeout. While job-mirror does not answer, the wait of the
// events (the *pipeline.UnavailableError Ensure returns) is how long it
// has gone unanswered, from MinWait to MaxWait, so that the events
// waiting through a long outage back off instead of asking every second;
// the start and the end of an outage are logged. NC, Timeout and Log are
// required.
type Caller struct {
	NC      *nats.Conn
	Timeout time.Duration
	Log     *slog.Logger

	mu sync.Mutex
	// since and last are the first and the latest unanswered request of
	// an outage; since is zero while job-mirror answers.
	since, last time.Time
}

// Ensure is the package's Ensure within c.Timeout. A request cut short by
// ctx itself (a shutdown, the caller's own deadline) is not an outage of
// job-mirror: its error is not a *pipeline.UnavailableError.
func (c *Caller) Ensure(ctx context.Context, subject string, req events.EnsureJobRequest) (events.EnsureJobReply, error) {
	rctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	reply, answered, err := ask(rctx, c.NC, subject, req)
	var unavailable *pipeline.UnavailableError
	switch {
	case ctx.Err() != nil:
		if errors.As(err, &unavailable) {
			err = unavailable.Err
		}
	case errors.As(err, &unavailable):
		unavailable.Wait = c.unanswered(err)
	case answered:
		c.answered()
	}
	return reply, err
}

// Unanswered is how long job-mirror has gone unanswered: 0 while it answers.
func (c *Caller) Unanswered() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if !c.ongoing(now) {
		return 0
	}
	return now.Sub(c.since)
}

// ongoing reports whether an outage is going on. An event waiting for
// job-mirror asks again within Timeout and MaxWait; when no request has
// gone unanswered for twice that, no event is waiting any more, and the
// outage, whose end no answer told, is taken as over. c.mu is held.
func (c *Caller) ongoing(now time.Time) bool {
	return !c.since.IsZero() && now.Sub(c.last) <= 2*(c.Timeout+MaxWait)
}

// unanswered notes a request job-mirror did not answer and returns how
// long the event waits.
func (c *Caller) unanswered(cause error) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if !c.ongoing(now) {
		c.since = now
		c.Log.Warn("job-mirror is not answering ensure-job requests: the events that need it wait, no attempt counted", "err", cause)
	}
	c.last = now
	return min(max(now.Sub(c.since), MinWait), MaxWait)
}

// answered notes that job-mirror answered, ending an outage.
func (c *Caller) answered() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.since.IsZero() {
		c.Log.Info("job-mirror answers ensure-job requests again", "unansweredFrom", c.since, "lastUnanswered", c.last)
		c.since = time.Time{}
	}
}

// ReplyError is the error a reply reports, as Ensure returns it; nil when
// the job is mirrored.
func ReplyError(r events.EnsureJobReply) error {
	switch {
	case r.PrimeUnavailable:
		return &prime.UnavailableError{Endpoint: "job-mirror ensure", Wait: time.Duration(r.RetryAfterMS) * time.Millisecond,
			Err: fmt.Errorf("ensure job: job-mirror: %s", r.Error)}
	case r.RetryAfterMS > 0:
		return &prime.RateLimitedError{Wait: time.Duration(r.RetryAfterMS) * time.Millisecond, Endpoint: "job-mirror ensure"}
	case r.NotFound:
		return fmt.Errorf("ensure job: %w", prime.ErrNotFound)
	case r.Error != "":
		return fmt.Errorf("ensure job: job-mirror: %s", r.Error)
	}
	return nil
}

func describe(req events.EnsureJobRequest) string {
	if req.JobID != "" {
		return req.JobID
	}
	return fmt.Sprintf("ref %d", req.NumericRef)
}
