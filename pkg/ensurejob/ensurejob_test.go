package ensurejob_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/ensurejob"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/pipeline"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go"
)

func TestReplyError(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply events.EnsureJobReply
		check func(error) bool
	}{
		{"mirrored", events.EnsureJobReply{JobID: "x", WasMirrored: true}, func(err error) bool { return err == nil }},
		{"rate limited", events.EnsureJobReply{RetryAfterMS: 1500}, func(err error) bool {
			var limited *prime.RateLimitedError
			return errors.As(err, &limited) && limited.RetryAfter() == 1500*time.Millisecond && errors.Is(err, prime.ErrRateLimited)
		}},
		{"not found", events.EnsureJobReply{NotFound: true}, func(err error) bool { return errors.Is(err, prime.ErrNotFound) }},
		{"failed", events.EnsureJobReply{Error: "database is locked"}, func(err error) bool {
			return err != nil && !errors.Is(err, prime.ErrNotFound) && !errors.Is(err, prime.ErrRateLimited)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			is.True(tc.check(ensurejob.ReplyError(tc.reply))) // the reply's kind of failure, as an error
		})
	}
}

func TestEnsureWithNoJobMirror(t *testing.T) {
	is := is.New(t)
	nc, _ := natstest.Connect(t, natstest.Server(t))
	_, err := ensurejob.Ensure(context.Background(), nc, events.SubjectEnsureJobEvent, events.EnsureJobRequest{JobID: "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"})
	is.True(errors.Is(err, nats.ErrNoResponders))    // nobody answers
	is.True(errors.Is(err, pipeline.ErrUnavailable)) // which makes the event wait (§9)
	is.Equal(retry.Delay(err), ensurejob.MinWait)    // a while
	is.True(!errors.Is(err, prime.ErrRateLimited))   // not Prime's rate limit
	_, err = ensurejob.Ensure(context.Background(), nc, events.SubjectEnsureJobEvent, events.EnsureJobRequest{})
	is.True(err != nil && !errors.Is(err, pipeline.ErrUnavailable)) // a request must name a job
}

// TestCaller: what a Caller makes of job-mirror's answers, and of none.
func TestCaller(t *testing.T) {
	req := events.EnsureJobRequest{JobID: "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"}
	caller := func(t *testing.T) *ensurejob.Caller {
		nc, _ := natstest.Connect(t, natstest.Server(t))
		return &ensurejob.Caller{NC: nc, Timeout: 200 * time.Millisecond, Log: slog.New(slog.DiscardHandler)}
	}
	// answer plays job-mirror's endpoint: it answers reply, or nothing when
	// reply is nil.
	answer := func(t *testing.T, c *ensurejob.Caller, reply *events.EnsureJobReply) {
		sub, err := c.NC.Subscribe(events.SubjectEnsureJobEvent, func(m *nats.Msg) {
			if reply != nil {
				b, _ := json.Marshal(reply)
				m.Respond(b)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sub.Unsubscribe() })
	}

	t.Run("no responders: the wait grows with the outage", func(t *testing.T) {
		is := is.New(t)
		c := caller(t)
		_, err := c.Ensure(context.Background(), events.SubjectEnsureJobEvent, req)
		is.True(errors.Is(err, nats.ErrNoResponders)) // nobody answers
		is.Equal(retry.Delay(err), ensurejob.MinWait) // at first the event waits the least
		time.Sleep(ensurejob.MinWait + 100*time.Millisecond)
		_, err = c.Ensure(context.Background(), events.SubjectEnsureJobEvent, req)
		is.True(retry.Delay(err) > ensurejob.MinWait)  // then as long as job-mirror has not answered
		is.True(retry.Delay(err) <= ensurejob.MaxWait) // within the bound
		is.True(c.Unanswered() > ensurejob.MinWait)    // the outage, seen
	})
	t.Run("no answer by the request's deadline", func(t *testing.T) {
		is := is.New(t)
		c := caller(t)
		answer(t, c, nil)
		_, err := c.Ensure(context.Background(), events.SubjectEnsureJobEvent, req)
		is.True(errors.Is(err, context.DeadlineExceeded)) // job-mirror did not answer in time
		is.True(errors.Is(err, pipeline.ErrUnavailable))  // the event waits
		is.True(c.Unanswered() > 0)                       // and the outage is seen
	})
	t.Run("cut short by the caller", func(t *testing.T) {
		is := is.New(t)
		c := caller(t)
		answer(t, c, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := c.Ensure(ctx, events.SubjectEnsureJobEvent, req)
		is.True(errors.Is(err, context.DeadlineExceeded)) // the caller's own deadline (a shutdown's cancel alike)
		is.True(!errors.Is(err, pipeline.ErrUnavailable)) // is no outage of job-mirror
		is.Equal(c.Unanswered(), time.Duration(0))        // nor seen as one
	})
	t.Run("an answer that is an error ends the outage", func(t *testing.T) {
		is := is.New(t)
		c := caller(t)
		_, err := c.Ensure(context.Background(), events.SubjectEnsureJobEvent, req)
		is.True(errors.Is(err, pipeline.ErrUnavailable)) // job-mirror down
		answer(t, c, &events.EnsureJobReply{Error: "database is locked"})
		_, err = c.Ensure(context.Background(), events.SubjectEnsureJobEvent, req)
		is.True(err != nil && !errors.Is(err, pipeline.ErrUnavailable)) // job-mirror's failure: an attempt, as before
		is.Equal(c.Unanswered(), time.Duration(0))                      // job-mirror answers again
	})
}

// A request goes on the subject of the caller's path and names the job,
// nothing more: the class of job-mirror's Prime call and the path it
// records are job-mirror's to derive from the subject, not the caller's to
// say, whatever the caller's context holds.
func TestEnsureNamesTheJobOnly(t *testing.T) {
	is := is.New(t)
	nc, _ := natstest.Connect(t, natstest.Server(t))
	asked := make(chan *nats.Msg, 1)
	sub, err := nc.Subscribe(events.SubjectEnsureJobEmail, func(m *nats.Msg) {
		asked <- m
		m.Respond([]byte(`{"wasMirrored":true}`))
	})
	is.NoErr(err)
	t.Cleanup(func() { sub.Unsubscribe() })
	req := events.EnsureJobRequest{JobID: "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10", NumericRef: 2410965}
	ctx := prime.WithEventTime(prime.WithPriority(context.Background(), prime.PriorityMakesafe), time.Now())
	_, err = ensurejob.Ensure(ctx, nc, events.SubjectEnsureJobEmail, req)
	is.NoErr(err)
	got := <-asked
	is.Equal(got.Subject, events.SubjectEnsureJobEmail) // on the path's subject
	var body map[string]any
	is.NoErr(json.Unmarshal(got.Data, &body))
	is.Equal(body, map[string]any{"jobId": req.JobID, "numericRef": 2410965.0}) // the job, and nothing about it
}
