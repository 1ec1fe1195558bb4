package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/consume"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/outbox"
	"github.com/ethosbuilding/primeflow/pkg/pipeline"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go"
)

const action = "create-estimate"

// env is a stage on a real nats-server and SQLite store, fed resolved
// events the way the resolver publishes them.
type env struct {
	*flowtest.Env
	stage *pipeline.Stage
	done  chan *nats.Msg // the events.Done announced for the test's row
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{Env: flowtest.New(t, flowtest.Options{}), done: make(chan *nats.Msg, 64)}
	e.stage = &pipeline.Stage{Store: e.Store, NC: e.NC, Log: e.Deps.Log, Caller: "child-mirror",
		Outbox: &outbox.Publisher{JS: e.JS, Store: e.Store, Log: e.Deps.Log}}
	return e
}

// row inserts a log row, as ingest does, and listens for its events.Done.
func (e *env) row() int64 {
	e.T.Helper()
	id, err := e.Store.InsertWebhookLog(context.Background(), store.NewWebhookLogRow{
		ReceivedUTC: time.Now().UTC(), EventAction: action, Payload: `{"eventAction":"` + action + `"}`, IsAuthenticated: true,
	})
	if err != nil {
		e.T.Fatal(err)
	}
	sub, err := e.NC.ChanSubscribe(events.DoneSubject(id), e.done)
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(func() { sub.Unsubscribe() })
	return id
}

// dispatch publishes the resolved event of a row under a new message id, as
// the resolver does for each hand-over (a lane timeout's among them).
func (e *env) dispatch(logID int64, try int) {
	e.T.Helper()
	data, err := json.Marshal(events.Resolved{LogID: logID, Action: action})
	if err != nil {
		e.T.Fatal(err)
	}
	m := nats.NewMsg(events.ResolvedSubject(action))
	m.Data = data
	m.Header.Set(events.HeaderLogID, fmt.Sprint(logID))
	m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("resolved:%d:test:%d", logID, try))
	if _, err := e.JS.PublishMsg(context.Background(), m); err != nil {
		e.T.Fatal(err)
	}
}

// consume runs the stage with work until the returned stop is called or the
// test ends.
func (e *env) consume(work pipeline.Work) (stop func()) {
	c := e.Consumer(events.Consumer{Stream: events.StreamResolved, Durable: "stage-test", AckWait: time.Hour})
	return e.Run("stage", runner(func(ctx context.Context) error {
		return consume.Run(ctx, e.JS, consume.Spec{Consumer: c},
			e.Deps.Log, e.Deps.Metrics, e.stage.Handler(work))
	}))
}

// announced waits for the next events.Done.
func (e *env) announced() events.Done {
	e.T.Helper()
	select {
	case m := <-e.done:
		var d events.Done
		if err := json.Unmarshal(m.Data, &d); err != nil {
			e.T.Fatal(err)
		}
		return d
	case <-time.After(10 * time.Second):
		e.T.Fatal("no events.Done announced")
		return events.Done{}
	}
}

// ackPending is how many messages the stage's consumer holds unacked.
func (e *env) ackPending() int {
	e.T.Helper()
	info, err := e.JS.Consumer(context.Background(), events.StreamResolved, "stage-test")
	if err != nil {
		e.T.Fatal(err)
	}
	ci, err := info.Info(context.Background())
	if err != nil {
		e.T.Fatal(err)
	}
	return ci.NumAckPending
}

// handOffs counts the messages stages handed on to optimo-create.
func (e *env) handOffs() uint64 {
	e.T.Helper()
	s, err := e.JS.Stream(context.Background(), events.StreamOptimo)
	if err != nil {
		e.T.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		e.T.Fatal(err)
	}
	return info.State.Msgs
}

type runner func(ctx context.Context) error

func (f runner) Run(ctx context.Context) error { return f(ctx) }

// TestShutdownHandsTheEventBackWithoutAnAttempt: a run cut short by the
// consumer stopping is not one of the row's five attempts (§3); the event
// goes back to JetStream and the next consumer finishes it.
func TestShutdownHandsTheEventBackWithoutAnAttempt(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	id := e.row()
	started := make(chan struct{})
	stop := e.consume(func(ctx context.Context, _ events.Resolved) (pipeline.Finish, error) {
		close(started)
		<-ctx.Done() // a call to Prime in flight when the process stops
		return pipeline.Finish{}, fmt.Errorf("get estimates: %w", ctx.Err())
	})
	e.dispatch(id, 1)
	<-started
	stop()
	row := e.Row(id)
	is.Equal(row.ProcessAttempts, 0) // no attempt recorded
	is.True(!row.Processed())        // and the row still queued
	is.Equal(row.ProcessStatus, "")  // with no error written

	var runs atomic.Int32
	e.consume(func(context.Context, events.Resolved) (pipeline.Finish, error) {
		runs.Add(1)
		return pipeline.Finish{}, nil
	})
	row = e.WaitProcessed(id)        // handed back at once, not after the hour's AckWait
	is.Equal(row.ProcessAttempts, 0) // processed with no attempt against it
	is.Equal(runs.Load(), int32(1))  // the next consumer ran it once
}

// TestASecondRunOfAnEventCommitsNothing: two runs of one event — the
// resolver re-dispatches it after a lane timeout under a new message id —
// commit once. The run that finds the row processed rolls back: no writes,
// no hand-offs, no After steps, and the event is done.
func TestASecondRunOfAnEventCommitsNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		// stuck holds the first run until the second has committed.
		stuck bool
	}{
		{name: "the second run after the first committed"},
		{name: "a stuck first run that finishes after the second committed", stuck: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t)
			id := e.row()
			release := make(chan struct{})
			var runs, writes, afters atomic.Int32
			e.consume(func(_ context.Context, ev events.Resolved) (pipeline.Finish, error) {
				n := runs.Add(1)
				if tc.stuck && n == 1 {
					<-release
				}
				return pipeline.Finish{
					Status: fmt.Sprintf("Processed by run %d", n),
					Write: func(context.Context, store.Store) error {
						writes.Add(1)
						return nil
					},
					Outbox: []store.OutboxMessage{{Subject: events.SubjectOptimoCreate, MsgID: fmt.Sprintf("stage-test:%d:%d", ev.LogID, n), Data: []byte("{}")}},
					After:  func(context.Context) { afters.Add(1) },
				}, nil
			}) // Workers 8: a stuck run does not hold up the next

			e.dispatch(id, 1)
			if tc.stuck {
				flowtest.Eventually(t, "the first run stuck", func() bool { return runs.Load() == 1 })
				e.dispatch(id, 2)
			}
			is.Equal(e.announced().Outcome, events.OutcomeProcessed) // one run committed
			first := e.Row(id)
			if tc.stuck {
				close(release)
			} else {
				e.dispatch(id, 2)
			}
			is.Equal(e.announced(), events.Done{LogID: id, Outcome: events.OutcomeProcessed}) // the other run: done, as processed
			flowtest.Eventually(t, "both messages acked", func() bool { return e.ackPending() == 0 })

			row := e.Row(id)
			is.Equal(row.ProcessedUTC, first.ProcessedUTC)   // stamped once
			is.Equal(row.ProcessStatus, first.ProcessStatus) // by the run that committed
			is.Equal(row.ProcessAttempts, 0)                 // neither run counted as a failure
			is.Equal(runs.Load(), int32(2))                  // both ran
			is.Equal(writes.Load(), int32(1))                // one run's writes
			is.Equal(afters.Load(), int32(1))                // one run's After steps
			is.Equal(e.handOffs(), uint64(1))                // one run's hand-off
		})
	}
}

// TestASecondRunThatFailsLeavesTheRowProcessed: a run of an event that
// fails after another run processed its row records no attempt and does not
// mark the row failed; it announces the row processed.
func TestASecondRunThatFailsLeavesTheRowProcessed(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	id := e.row()
	var runs atomic.Int32
	e.consume(func(context.Context, events.Resolved) (pipeline.Finish, error) {
		if runs.Add(1) == 1 {
			return pipeline.Finish{}, nil
		}
		return pipeline.Finish{}, errors.New("prime answered 503")
	})
	e.dispatch(id, 1)
	is.Equal(e.announced().Outcome, events.OutcomeProcessed) // the first run committed
	first := e.Row(id)
	e.dispatch(id, 2)
	is.Equal(e.announced(), events.Done{LogID: id, Outcome: events.OutcomeProcessed}) // the failing run: done, as processed
	row := e.Row(id)
	is.Equal(row.ProcessAttempts, 0)                 // no attempt recorded
	is.Equal(row.ProcessStatus, first.ProcessStatus) // nor its error
	is.Equal(row.ProcessedUTC, first.ProcessedUTC)   // still processed
}

// TestAReplayedRowIsProcessedAgain: a row reset by primectl replay is queued
// again, and the stage commits its event as it did the first time (§9).
func TestAReplayedRowIsProcessedAgain(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	id := e.row()
	var runs, afters atomic.Int32
	e.consume(func(_ context.Context, ev events.Resolved) (pipeline.Finish, error) {
		n := runs.Add(1)
		return pipeline.Finish{
			Status: fmt.Sprintf("Processed by run %d", n),
			Outbox: []store.OutboxMessage{{Subject: events.SubjectOptimoCreate, MsgID: fmt.Sprintf("stage-test:%d:%d", ev.LogID, n), Data: []byte("{}")}},
			After:  func(context.Context) { afters.Add(1) },
		}, nil
	})
	e.dispatch(id, 1)
	is.Equal(e.announced().Outcome, events.OutcomeProcessed) // the first run committed
	n, err := e.Store.ResetWebhookLog(context.Background(), store.LogFilter{IDs: []int64{id}})
	is.NoErr(err)
	is.Equal(n, 1) // reset for replay
	e.dispatch(id, 2)
	is.Equal(e.announced().Outcome, events.OutcomeProcessed) // the replay finished
	row := e.Row(id)
	is.True(row.Processed())                          // processed again
	is.Equal(row.ProcessStatus, "Processed by run 2") // by the replay's commit
	is.Equal(afters.Load(), int32(2))                 // with its After steps
	is.Equal(e.handOffs(), uint64(2))                 // and its hand-off
}

// TestAFailureIsAnAttempt: work that fails for its own reasons still counts
// an attempt (§9); handing back on shutdown does not swallow real failures.
func TestAFailureIsAnAttempt(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	id := e.row()
	e.consume(func(context.Context, events.Resolved) (pipeline.Finish, error) {
		return pipeline.Finish{}, errors.New("prime answered 503")
	})
	e.dispatch(id, 1)
	d := e.announced()
	is.Equal(d.Outcome, events.OutcomeFailed) // announced as a failed attempt
	is.Equal(d.Attempts, 1)                   // the first
	is.Equal(d.Error, "prime answered 503")   // with its error
	row := e.Row(id)
	is.Equal(row.ProcessAttempts, 1)                                // and recorded on the row
	is.Equal(row.ProcessStatus, "child-mirror: prime answered 503") // naming the service that met it
}

// The service a recorded error names is read back, and only a service's.
func TestFailedBy(t *testing.T) {
	services := []string{"resolver", "child-mirror"}
	for _, tc := range []struct{ recorded, service, err string }{
		{pipeline.RecordedError("resolver", "payload fault MissingIdentifier (create-appointment): no id"), "resolver", "payload fault MissingIdentifier (create-appointment): no id"},
		{pipeline.RecordedError("child-mirror", "child-mirror: prime: 503"), "child-mirror", "prime: 503"}, // named once
		{pipeline.RecordedError("", "prime: 503"), "", "prime: 503"},                                       // nobody named
		{"prime: 503", "", "prime: 503"}, // not a service
		{"resolver:no space", "", "resolver:no space"},
	} {
		t.Run(tc.recorded, func(t *testing.T) {
			is := is.New(t)
			service, err := pipeline.FailedBy(tc.recorded, services)
			is.Equal(service, tc.service) // the service named
			is.Equal(err, tc.err)         // and the error without it
		})
	}
}

// TestAPayloadFaultIsLoggedWithItsPayload: a payload fault is logged with
// the row's payload, apart from other failures, so the parser can be fixed
// from the log (§9: "logged with the payload"); a record neither the
// mirror nor Prime has (UnknownIdentifier) is said to be that, a warning,
// and not blamed on the parser. Each line names its attempt.
func TestAPayloadFaultIsLoggedWithItsPayload(t *testing.T) {
	for _, tc := range []struct {
		kind         pipeline.FaultKind
		says, level  string
		blamesParser bool
	}{
		{pipeline.MissingIdentifier, "payload fault: fix the parser, then replay the row", "level=ERROR", true},
		{pipeline.WrongEntityType, "payload fault: fix the parser, then replay the row", "level=ERROR", true},
		{pipeline.UnknownIdentifier, "is not in the mirror or in Prime", "level=WARN", false},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t)
			id := e.row()
			e.consume(func(context.Context, events.Resolved) (pipeline.Finish, error) {
				return pipeline.Finish{}, pipeline.Fault(tc.kind, action, "no job")
			})
			e.dispatch(id, 1)
			is.Equal(e.announced().Outcome, events.OutcomeFailed) // an attempt, like any failure
			e.dispatch(id, 2)
			is.Equal(e.announced().Attempts, 2) // and another
			var lines []string
			for l := range strings.Lines(e.Logs.String()) {
				if strings.Contains(l, tc.says) {
					lines = append(lines, l)
				}
			}
			is.Equal(len(lines), 2)                                                        // each fault logged
			is.True(strings.Contains(lines[0], tc.level))                                  // at its level
			is.True(strings.Contains(lines[0], "attempt=1 of=5"))                          // naming its attempt
			is.True(strings.Contains(lines[1], "attempt=2 of=5"))                          // each
			is.True(strings.Contains(lines[0], `eventAction\":`))                          // the first with the payload, which the error does not hold
			is.True(!strings.Contains(lines[1], "eventAction"))                            // the next without it, it is in the log already
			is.True(strings.Contains(lines[1], "payload.bytes="))                          // but its size
			is.True(strings.Contains(lines[1], "payload.sha256="))                         // and hash, to tell it is the same payload
			is.Equal(strings.Contains(e.Logs.String(), "fix the parser"), tc.blamesParser) // the parser blamed only for its own faults
		})
	}
}

// TestAnUnavailableServiceMakesTheEventWait: work that could not reach a
// service it needs (job-mirror's ensure-job endpoint had no responder) is
// no failure of the event (§9): the stage announces a wait, as for Prime's
// rate limit, and leaves the row as it was — no attempt, no error.
func TestAnUnavailableServiceMakesTheEventWait(t *testing.T) {
	is := is.New(t)
	e := newEnv(t)
	id := e.row()
	e.consume(func(context.Context, events.Resolved) (pipeline.Finish, error) {
		return pipeline.Finish{}, &pipeline.UnavailableError{Service: "job-mirror", Wait: 1500 * time.Millisecond,
			Err: fmt.Errorf("ensure job: %w", nats.ErrNoResponders)}
	})
	e.dispatch(id, 1)
	is.Equal(e.announced(), events.Done{LogID: id, Outcome: events.OutcomeWait, RetryAfterMS: 1500, Wait: pipeline.WaitUnavailable}) // the lane waits, as for a rate limit, for job-mirror
	flowtest.Eventually(t, "the message acked", func() bool { return e.ackPending() == 0 })
	row := e.Row(id)
	is.Equal(row.ProcessAttempts, 0) // no attempt recorded
	is.True(!row.Processed())        // the row still queued
	is.Equal(row.ProcessStatus, "")  // with no error written
}
