package outbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/outbox"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
	"github.com/matryer/is"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// sweepRig is a publisher over a fresh store, with its log and its failure
// counter at hand.
type sweepRig struct {
	t     *testing.T
	store *sqlite.Store
	pub   *outbox.Publisher
	logs  *bytes.Buffer
	reg   *prometheus.Registry
}

func newSweepRig(t *testing.T, js jetstream.JetStream, page int) *sweepRig {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := prometheus.NewRegistry()
	failures, err := outbox.RegisterFailures(reg)
	if err != nil {
		t.Fatal(err)
	}
	logs := &bytes.Buffer{}
	return &sweepRig{t: t, store: st, logs: logs, reg: reg, pub: &outbox.Publisher{
		JS: js, Store: st, Log: slog.New(slog.NewTextHandler(logs, nil)), Page: page, Failures: failures}}
}

// insert writes messages as a stage does, without publishing them: what a
// sweep finds after the publish that followed the commit failed.
func (r *sweepRig) insert(msgs ...store.OutboxMessage) []int64 {
	r.t.Helper()
	got, err := r.store.InsertOutbox(context.Background(), msgs)
	if err != nil {
		r.t.Fatal(err)
	}
	ids := make([]int64, len(got))
	for i, m := range got {
		ids[i] = m.ID
	}
	return ids
}

func (r *sweepRig) unpublished() map[int64]bool {
	r.t.Helper()
	left, err := r.store.GetOutboxUnpublished(context.Background(), 0, time.Now().Add(time.Minute), 1000)
	if err != nil {
		r.t.Fatal(err)
	}
	ids := map[int64]bool{}
	for _, m := range left {
		ids[m.ID] = true
	}
	return ids
}

func (r *sweepRig) failures(reason string) float64 {
	return flowtest.Counter(r.t, r.reg, "primeflow_outbox_sweep_failures_total", map[string]string{"reason": reason})
}

func firstSeen(job string) store.OutboxMessage {
	return outbox.Message(events.SubjectJobFirstSeen, events.FirstSeenMsgID(job), []byte(`{"jobId":"`+job+`"}`))
}

// TestARefusedMessageDoesNotHoldBackTheRest: messages NATS refuses for good
// (one over the server's max_payload, one on a subject no stream takes) fill
// a sweep's first page; the messages behind them are published all the
// same, and the refused ones are counted, logged and tried again every sweep.
func TestARefusedMessageDoesNotHoldBackTheRest(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	const maxPayload = 8 << 10
	ns := natstest.ServerWithMaxPayload(t, maxPayload)
	_, js := natstest.Connect(t, ns)
	r := newSweepRig(t, js, 2)
	huge := firstSeen("huge")
	huge.Data = []byte(`{"jobId":"huge","pad":"` + strings.Repeat("a", maxPayload) + `"}`)
	ids := r.insert(huge, outbox.Message("nostream.x", "nostream:1", []byte(`{}`)),
		firstSeen("a"), firstSeen("b"), firstSeen("c"))

	s, err := js.Stream(ctx, events.StreamJob)
	is.NoErr(err)
	for sweep := 1; sweep <= 2; sweep++ {
		start := time.Now()
		is.NoErr(r.pub.Sweep(ctx, 0))                                         // a message's refusal does not fail the sweep (§3.1)
		is.True(time.Since(start) < 2*time.Second)                            // and costs no publish timeout
		is.Equal(r.unpublished(), map[int64]bool{ids[0]: true, ids[1]: true}) // the refused ones wait, the others are recorded
		info, err := s.Info(ctx)
		is.NoErr(err)
		is.Equal(info.State.Msgs, uint64(3))                          // the messages behind them went out, once
		is.Equal(r.failures(outbox.ReasonRejected), float64(2*sweep)) // counted, each sweep
	}
	is.Equal(r.failures(outbox.ReasonDisconnected)+r.failures(outbox.ReasonError), 0.0) // NATS was never taken for down
	logs := r.logs.String()
	is.True(strings.Contains(logs, fmt.Sprintf("id=%d", ids[0])))                         // logged with the message id
	is.True(strings.Contains(logs, "maximum payload exceeded"))                           // and why
	is.True(strings.Contains(logs, fmt.Sprintf("failedIds=\"[%d %d]\"", ids[0], ids[1]))) // the sweep says which wait
}

// TestSweepStopsAtOnceWhenNATSIsDown: while the connection is down, a sweep
// stops at its first message instead of trying every one.
func TestSweepStopsAtOnceWhenNATSIsDown(t *testing.T) {
	is := is.New(t)
	ns := natstest.Server(t)
	nc, js := natstest.Connect(t, ns)
	r := newSweepRig(t, js, 2)
	ids := r.insert(firstSeen("a"), firstSeen("b"), firstSeen("c"))
	natstest.Stop(ns)
	flowtest.Eventually(t, "the client sees NATS gone", func() bool { return !nc.IsConnected() })

	err := r.pub.Sweep(context.Background(), 0)
	is.True(errors.Is(err, outbox.ErrDisconnected))            // the sweep stops, saying why
	is.Equal(r.failures(outbox.ReasonDisconnected), 1.0)       // at its first message
	is.Equal(r.failures(outbox.ReasonRejected), 0.0)           // none taken for refused
	is.Equal(len(r.unpublished()), len(ids))                   // every message waits
	is.True(strings.Contains(err.Error(), fmt.Sprint(ids[0]))) // the error names the message
}

// TestSweepStopsWhenJetStreamDoesNotAnswer: connected to a server without
// JetStream, every publish finds no responders; the sweep asks once whether
// a stream takes the subject, and stops instead of skipping every message.
func TestSweepStopsWhenJetStreamDoesNotAnswer(t *testing.T) {
	is := is.New(t)
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1})
	is.NoErr(err)
	go ns.Start()
	t.Cleanup(func() { natstest.Stop(ns) })
	is.True(ns.ReadyForConnections(10 * time.Second)) // the server is up
	nc, err := nats.Connect(ns.ClientURL())
	is.NoErr(err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	is.NoErr(err)
	r := newSweepRig(t, js, 2)
	r.insert(firstSeen("a"), firstSeen("b"), firstSeen("c"))

	start := time.Now()
	err = r.pub.Sweep(context.Background(), 0)
	is.True(errors.Is(err, jetstream.ErrNoStreamResponse)) // the sweep stops
	is.True(time.Since(start) < 2*time.Second)             // without waiting on each message
	is.Equal(r.failures(outbox.ReasonError), 1.0)          // at its first message
	is.Equal(r.failures(outbox.ReasonRejected), 0.0)       // none taken for refused
	is.Equal(len(r.unpublished()), 3)                      // every message waits
}
