package outbox_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/outbox"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestSendThenSweepPublishesEachMessageOnce(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	ns := natstest.Server(t)
	_, js := natstest.Connect(t, ns)
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db"))
	is.NoErr(err)
	defer st.Close()
	p := &outbox.Publisher{JS: js, Store: st, Log: slog.New(slog.DiscardHandler)}

	msgs, err := st.InsertOutbox(ctx, []store.OutboxMessage{
		outbox.Message("prime.job.firstseen", "firstseen:a", []byte(`{"jobId":"a"}`)),
		outbox.Message("prime.job.firstseen", "firstseen:b", []byte(`{"jobId":"b"}`)),
	})
	is.NoErr(err)
	is.NoErr(p.Send(ctx, msgs[:1])) // the stage publishes its first message; the second is "lost"
	is.NoErr(p.Sweep(ctx, 0))       // the sweeper finds the second
	is.NoErr(p.Sweep(ctx, 0))       // and a second sweep finds nothing

	left, err := st.GetOutboxUnpublished(ctx, 0, time.Now().Add(time.Minute), 10)
	is.NoErr(err)
	is.Equal(len(left), 0) // everything recorded as published

	// A message published twice (bookkeeping lost) is kept once by JetStream.
	is.NoErr(p.Send(ctx, msgs))
	s, err := js.Stream(ctx, "PRIME_JOB")
	is.NoErr(err)
	info, err := s.Info(ctx)
	is.NoErr(err)
	is.Equal(info.State.Msgs, uint64(2)) // one message per outbox row
	m, err := s.GetLastMsgForSubject(ctx, "prime.job.firstseen")
	is.NoErr(err)
	is.Equal(m.Header.Get(jetstream.MsgIDHeader), "firstseen:b") // with its Nats-Msg-Id
}

// A sweeper with Subjects publishes only those: a message on another
// subject is another service's, which its own sweeper publishes, and is
// neither published nor counted as a failure here.
func TestSweepPublishesOnlyItsSubjects(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	_, js := natstest.Connect(t, natstest.Server(t))
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db"))
	is.NoErr(err)
	defer st.Close()
	_, err = st.InsertOutbox(ctx, []store.OutboxMessage{
		outbox.Message(events.SubjectJobFirstSeen, "firstseen:a", []byte(`{"jobId":"a"}`)),
		outbox.Message(events.SubjectOptimoCreate, "create:a", []byte(`{"source":"child-mirror"}`)),
	})
	is.NoErr(err)
	reg := prometheus.NewRegistry()
	jobMirror, err := outbox.NewSweeper(js, st, slog.New(slog.DiscardHandler), reg, events.RoleJobMirror.Publishes...)
	is.NoErr(err)
	is.NoErr(jobMirror.Sweep(ctx, 0)) // job-mirror's sweep
	left, err := st.GetOutboxUnpublished(ctx, 0, time.Now().Add(time.Minute), 10)
	is.NoErr(err)
	is.Equal(len(left), 1)                                // its own published
	is.Equal(left[0].Subject, events.SubjectOptimoCreate) // child-mirror's left to child-mirror
	for _, r := range []string{outbox.ReasonRejected, outbox.ReasonError, outbox.ReasonDisconnected} {
		is.Equal(testutil.ToFloat64(jobMirror.Failures.WithLabelValues(r)), 0.0) // and no failure counted
	}

	childMirror, err := outbox.NewSweeper(js, st, slog.New(slog.DiscardHandler), reg, events.RoleChildMirror.Publishes...)
	is.NoErr(err)
	is.NoErr(childMirror.Sweep(ctx, 0))
	left, err = st.GetOutboxUnpublished(ctx, 0, time.Now().Add(time.Minute), 10)
	is.NoErr(err)
	is.Equal(len(left), 0) // which publishes it
}

// A process's sweeper needs an interval to sweep by: Swept refuses none.
func TestSweptNeedsAnInterval(t *testing.T) {
	for _, every := range []time.Duration{0, -time.Second} {
		_, err := outbox.Swept(nil, service.Deps{}, every, events.Role{})
		is.New(t).True(errors.Is(err, outbox.ErrSweepInterval)) // refused, before anything is built
	}
}
