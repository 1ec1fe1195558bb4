package consume_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/consume"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

const stream = "CONSUME_TEST"

func setup(t *testing.T) jetstream.JetStream {
	t.Helper()
	_, js := natstest.Connect(t, natstest.Server(t))
	_, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: stream, Subjects: []string{"t.>"}})
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// run consumes with h until the test ends.
func run(t *testing.T, js jetstream.JetStream, spec consume.Spec, h consume.Handler) {
	t.Helper()
	spec.Consumer.Stream = stream
	if spec.Consumer.Durable == "" {
		spec.Consumer.Durable = "test"
	}
	apply(t, js, spec.Consumer)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- consume.Run(ctx, js, spec, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), h)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("consume.Run: %v", err)
		}
	})
}

// apply makes the consumer, as the operators' step does.
func apply(t *testing.T, js jetstream.JetStream, c events.Consumer) {
	t.Helper()
	if _, err := events.ApplyConsumer(context.Background(), js, c); err != nil {
		t.Fatal(err)
	}
}

func publish(t *testing.T, js jetstream.JetStream, subject string, n int) {
	t.Helper()
	for i := range n {
		if _, err := js.Publish(context.Background(), subject, fmt.Appendf(nil, "%d", i)); err != nil {
			t.Fatal(err)
		}
	}
}

func wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func delivered(msg jetstream.Msg) uint64 {
	md, _ := msg.Metadata()
	return md.NumDelivered
}

func TestOutcomes(t *testing.T) {
	is := is.New(t)
	js := setup(t)
	var mu sync.Mutex
	seen := map[string][]uint64{} // subject → delivery counts seen
	run(t, js, consume.Spec{Backoff: retry.Backoff{50 * time.Millisecond}},
		func(_ context.Context, msg jetstream.Msg) error {
			mu.Lock()
			seen[msg.Subject()] = append(seen[msg.Subject()], delivered(msg))
			n := len(seen[msg.Subject()])
			mu.Unlock()
			switch msg.Subject() {
			case "t.retry":
				if n < 3 {
					return consume.Retry(errors.New("rate limited"), 20*time.Millisecond)
				}
			case "t.error":
				if n < 2 {
					return errors.New("prime is down")
				}
			case "t.drop":
				return consume.Drop(errors.New("never going to work"))
			}
			return nil
		})
	for _, s := range []string{"t.ack", "t.retry", "t.error", "t.drop"} {
		publish(t, js, s, 1)
	}
	count := func(s string) int { mu.Lock(); defer mu.Unlock(); return len(seen[s]) }
	wait(t, "every message settled", func() bool {
		return count("t.ack") == 1 && count("t.retry") == 3 && count("t.error") == 2 && count("t.drop") == 1
	})
	time.Sleep(200 * time.Millisecond)           // long enough for a wrong redelivery of ack or drop
	is.Equal(count("t.ack"), 1)                  // acked once, not redelivered
	is.Equal(count("t.drop"), 1)                 // dropped, never redelivered
	is.Equal(seen["t.retry"], []uint64{1, 2, 3}) // retried until it worked
	is.Equal(seen["t.error"], []uint64{1, 2})    // an error redelivers with backoff
}

func TestKeyOrdersMessagesOfOneKey(t *testing.T) {
	is := is.New(t)
	js := setup(t)
	const keys, perKey = 8, 25
	var mu sync.Mutex
	got := map[string][]string{}
	var inFlight [keys]atomic.Int32
	var overlap atomic.Bool
	var handled atomic.Int32
	run(t, js, consume.Spec{
		Workers: 4,
		Key:     func(m jetstream.Msg) string { return m.Subject() },
	}, func(_ context.Context, msg jetstream.Msg) error {
		var k int
		fmt.Sscanf(msg.Subject(), "t.k%d", &k)
		if inFlight[k].Add(1) > 1 {
			overlap.Store(true)
		}
		time.Sleep(time.Millisecond)
		mu.Lock()
		got[msg.Subject()] = append(got[msg.Subject()], string(msg.Data()))
		mu.Unlock()
		inFlight[k].Add(-1)
		handled.Add(1)
		return nil
	})
	for i := range perKey {
		for k := range keys {
			if _, err := js.Publish(context.Background(), fmt.Sprintf("t.k%d", k), fmt.Appendf(nil, "%02d", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	wait(t, "all handled", func() bool { return handled.Load() == keys*perKey })
	is.True(!overlap.Load()) // never two messages of one key at once
	for k := range keys {
		want := make([]string, perKey)
		for i := range want {
			want[i] = fmt.Sprintf("%02d", i)
		}
		is.Equal(got[fmt.Sprintf("t.k%d", k)], want) // each key in stream order
	}
}

func TestLongHandlerIsNotRedelivered(t *testing.T) {
	t.Parallel() // its time is AckWaits slept through
	is := is.New(t)
	js := setup(t)
	var calls atomic.Int32
	release := make(chan struct{})
	const ackWait = 1500 * time.Millisecond // heartbeats every ackWait/3: 1s of room for a stalled process
	run(t, js, consume.Spec{Consumer: events.Consumer{AckWait: ackWait}}, func(ctx context.Context, _ jetstream.Msg) error {
		calls.Add(1)
		<-release
		return nil
	})
	publish(t, js, "t.slow", 1)
	wait(t, "handler started", func() bool { return calls.Load() == 1 })
	time.Sleep(2 * ackWait) // over two AckWaits: heartbeats keep it ours
	close(release)
	time.Sleep(100 * time.Millisecond)
	is.Equal(calls.Load(), int32(1)) // handled once
}

// TestStoppedConsumerHandsBackWhatItFetched: messages a stopping consumer
// had fetched but not handled go to the next instance at once, not after
// the server's AckWait.
func TestStoppedConsumerHandsBackWhatItFetched(t *testing.T) {
	is := is.New(t)
	js := setup(t)
	const n = 50
	publish(t, js, "t.x", n)
	spec := consume.Spec{Consumer: events.Consumer{Stream: stream, Durable: "handover", AckWait: time.Hour}, Workers: 1}
	apply(t, js, spec.Consumer)
	started := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		var once sync.Once
		done <- consume.Run(ctx, js, spec, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), func(ctx context.Context, _ jetstream.Msg) error {
			once.Do(func() { close(started) })
			<-ctx.Done() // the first message is in hand when the process stops
			return ctx.Err()
		})
	}()
	<-started
	cancel()
	is.NoErr(<-done)

	var handled atomic.Int32
	run(t, js, consume.Spec{Consumer: events.Consumer{Durable: "handover", AckWait: time.Hour}, Workers: 4}, func(context.Context, jetstream.Msg) error {
		handled.Add(1)
		return nil
	})
	wait(t, "every message taken by the next instance", func() bool { return handled.Load() == n }) // well before an hour's AckWait
}

// TestWaitingMessagesAreKeptAlive: messages fetched and waiting for a
// worker — queued behind a slow one of their key, or prefetched while every
// worker is busy — are kept alive as well as the one in hand: each is handled
// once, in order, however long it waits.
func TestWaitingMessagesAreKeptAlive(t *testing.T) {
	t.Parallel() // its time is AckWaits slept through
	for _, tc := range []struct {
		name string
		key  func(jetstream.Msg) string
	}{
		{"queued in a key's lane", func(m jetstream.Msg) string { return m.Subject() }},
		{"prefetched for a busy worker", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			js := setup(t)
			const ackWait = 1500 * time.Millisecond // heartbeats every ackWait/3: 1s of room for a stalled process on a loaded machine
			var mu sync.Mutex
			var got []string // body#delivery, in the order handled
			run(t, js, consume.Spec{Consumer: events.Consumer{AckWait: ackWait}, Workers: 1, Key: tc.key}, func(_ context.Context, msg jetstream.Msg) error {
				mu.Lock()
				got = append(got, fmt.Sprintf("%s#%d", msg.Data(), delivered(msg)))
				mu.Unlock()
				time.Sleep(2 * ackWait) // each message waits on the one before it for longer than AckWait
				return nil
			})
			publish(t, js, "t.lane", 3)
			handled := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }
			wait(t, "three messages handled", func() bool { return handled() >= 3 })
			time.Sleep(4 * ackWait) // the last one settles, and a wrong redelivery would arrive
			mu.Lock()
			defer mu.Unlock()
			is.Equal(got, []string{"0#1", "1#1", "2#1"}) // each handled once, first delivery, in stream order
		})
	}
}

// TestRedeliveredCopyOfAHeldMessageIsNotHandled: when the server delivers a
// message again while the consumer still holds it (queued or in hand), the
// copy is not handled a second time.
func TestRedeliveredCopyOfAHeldMessageIsNotHandled(t *testing.T) {
	t.Parallel() // its time is AckWaits slept through
	for _, tc := range []struct {
		name    string
		workers int
		key     func(jetstream.Msg) string
	}{
		{"keyed", 1, func(m jetstream.Msg) string { return m.Subject() }},
		{"shared", 4, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			js := setup(t)
			ctx := context.Background()
			const ackWait = 1500 * time.Millisecond // heartbeats every ackWait/3: 1s of room for a stalled process
			// The consumer as Run makes it: an earlier holder of the durable
			// takes the message first and never acks it.
			cons, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
				Durable: "dup", AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait,
				MaxAckPending: 1024, MaxDeliver: -1, FilterSubject: "t.dup",
			})
			is.NoErr(err)
			publish(t, js, "t.dup", 1)
			// Fetch waits for it: on a loaded machine the message may not be
			// pending yet when the publish returns.
			batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
			is.NoErr(err)
			first := <-batch.Messages()
			is.True(first != nil) // the earlier holder has it

			var calls atomic.Int32
			release := make(chan struct{})
			run(t, js, consume.Spec{Consumer: events.Consumer{Durable: "dup", Subjects: []string{"t.dup"}, AckWait: ackWait}, Workers: tc.workers, Key: tc.key},
				func(context.Context, jetstream.Msg) error {
					calls.Add(1)
					<-release
					return nil
				})
			wait(t, "the redelivery in hand", func() bool { return calls.Load() == 1 }) // after the first holder's AckWait
			// The earlier holder hands its delivery back: the server delivers
			// the message once more, to the consumer that holds it.
			is.NoErr(first.Nak())
			time.Sleep(3 * ackWait)
			close(release)
			time.Sleep(3 * ackWait)
			is.Equal(calls.Load(), int32(1)) // the copy was not handled
			info, err := cons.Info(ctx)
			is.NoErr(err)
			is.Equal(info.NumAckPending, 0) // and the message is settled
		})
	}
}

// TestRunWaitsForTheOperatorsStep: a consumer the operators' step has not
// made, or one not as defined (a push consumer, delivering where its maker
// chose), is waited for, the wait naming the command that makes it; once
// it is made as defined, its messages are handled.
func TestRunWaitsForTheOperatorsStep(t *testing.T) {
	is := is.New(t)
	js := setup(t)
	ctx := context.Background()
	c := events.Consumer{Stream: stream, Durable: "unmade", Subjects: []string{"t.unmade"}}
	publish(t, js, "t.unmade", 1)
	push := c.Config()
	push.DeliverSubject = "elsewhere"
	_, err := js.CreateOrUpdateConsumer(ctx, stream, push)
	is.NoErr(err) // someone made it otherwise

	logs := &flowtest.Buffer{}
	handled := make(chan struct{}, 1)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- consume.Run(rctx, js, consume.Spec{Consumer: c}, slog.New(slog.NewTextHandler(logs, nil)), prometheus.NewRegistry(),
			func(context.Context, jetstream.Msg) error {
				handled <- struct{}{}
				return nil
			})
	}()
	flowtest.Eventually(t, "the wait for the operators' step logged", func() bool {
		return strings.Contains(logs.String(), "is a push consumer (deliver_subject)") &&
			strings.Contains(logs.String(), events.ApplyCommand)
	})
	is.NoErr(js.DeleteConsumer(ctx, stream, c.Durable))
	flowtest.Eventually(t, "the missing consumer named", func() bool {
		return strings.Contains(logs.String(), "consumer "+stream+"/unmade is missing")
	})
	select {
	case <-handled:
		t.Fatal("a message was handled from a consumer not as defined")
	default:
	}
	apply(t, js, c) // the operators' step
	<-handled
	stop()
	is.NoErr(<-done)
}
