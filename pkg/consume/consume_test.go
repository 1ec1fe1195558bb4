package consume_test

import (
	"cmp"
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
	"github.com/nats-io/nats.go"
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

// kinds runs test for a pull consumer and for a push one (delivered to
// deliver.<durable> in the queue group <durable>), which read alike: of
// makes a consumer the kind the subtest is about.
func kinds(t *testing.T, test func(t *testing.T, of func(events.Consumer) events.Consumer)) {
	t.Run("pull", func(t *testing.T) { test(t, func(c events.Consumer) events.Consumer { return c }) })
	t.Run("push", func(t *testing.T) {
		test(t, func(c events.Consumer) events.Consumer {
			durable := cmp.Or(c.Durable, "test")
			c.DeliverSubject, c.DeliverGroup = "deliver."+durable, durable
			return c
		})
	})
}

func delivered(msg jetstream.Msg) uint64 {
	md, _ := msg.Metadata()
	return md.NumDelivered
}

func TestOutcomes(t *testing.T) { kinds(t, testOutcomes) }

func testOutcomes(t *testing.T, of func(events.Consumer) events.Consumer) {
	is := is.New(t)
	js := setup(t)
	var mu sync.Mutex
	seen := map[string][]uint64{} // subject → delivery counts seen
	run(t, js, consume.Spec{Consumer: of(events.Consumer{}), Backoff: retry.Backoff{50 * time.Millisecond}},
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

func TestKeyOrdersMessagesOfOneKey(t *testing.T) { kinds(t, testKeyOrdersMessagesOfOneKey) }

func testKeyOrdersMessagesOfOneKey(t *testing.T, of func(events.Consumer) events.Consumer) {
	is := is.New(t)
	js := setup(t)
	const keys, perKey = 8, 25
	var mu sync.Mutex
	got := map[string][]string{}
	var inFlight [keys]atomic.Int32
	var overlap atomic.Bool
	var handled atomic.Int32
	run(t, js, consume.Spec{
		Consumer: of(events.Consumer{}),
		Workers:  4,
		Key:      func(m jetstream.Msg) string { return m.Subject() },
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
	kinds(t, testLongHandlerIsNotRedelivered)
}

func testLongHandlerIsNotRedelivered(t *testing.T, of func(events.Consumer) events.Consumer) {
	t.Parallel()
	is := is.New(t)
	js := setup(t)
	var calls atomic.Int32
	release := make(chan struct{})
	const ackWait = 1500 * time.Millisecond // heartbeats every ackWait/3: 1s of room for a stalled process
	run(t, js, consume.Spec{Consumer: of(events.Consumer{AckWait: ackWait})}, func(ctx context.Context, _ jetstream.Msg) error {
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
// the server's AckWait. A push consumer's are those its connection had
// received: one the server was still sending as it unsubscribed reaches
// no one and waits for AckWait (JetStream counts it delivered), so the
// stop waits here until all have arrived.
func TestStoppedConsumerHandsBackWhatItFetched(t *testing.T) {
	kinds(t, testStoppedConsumerHandsBackWhatItFetched)
}

func testStoppedConsumerHandsBackWhatItFetched(t *testing.T, of func(events.Consumer) events.Consumer) {
	is := is.New(t)
	js := setup(t)
	const n = 50
	publish(t, js, "t.x", n)
	spec := consume.Spec{Consumer: of(events.Consumer{Stream: stream, Durable: "handover", AckWait: time.Hour}), Workers: 1}
	apply(t, js, spec.Consumer)
	nc, err := nats.Connect(js.Conn().ConnectedUrl())
	is.NoErr(err)
	t.Cleanup(nc.Close)
	first, err := jetstream.New(nc)
	is.NoErr(err)
	started := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		var once sync.Once
		done <- consume.Run(ctx, first, spec, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), func(ctx context.Context, _ jetstream.Msg) error {
			once.Do(func() { close(started) })
			<-ctx.Done() // the first message is in hand when the process stops
			return ctx.Err()
		})
	}()
	<-started
	if spec.Consumer.Push() {
		wait(t, "every message received by the first instance", func() bool { return nc.Stats().InMsgs >= n+1 }) // and the consumer's info
	}
	cancel()
	is.NoErr(<-done)

	var handled atomic.Int32
	run(t, js, consume.Spec{Consumer: of(events.Consumer{Durable: "handover", AckWait: time.Hour}), Workers: 4}, func(context.Context, jetstream.Msg) error {
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

// TestPushConsumerTakesOnlyItsDeliveries: a push consumer's deliver subject
// is one any user's reply subject may name (nats-server checks none), so a
// server's answer (a pub-ack) or another consumer's message pulled with it
// as the reply arrives there too; neither is handled, each is counted
// foreign, and the consumer's own deliveries are handled.
func TestPushConsumerTakesOnlyItsDeliveries(t *testing.T) {
	is := is.New(t)
	js := setup(t)
	ctx := context.Background()
	c := events.Consumer{Stream: stream, Durable: "pushed", Subjects: []string{"t.own"}, DeliverSubject: "deliver.pushed", DeliverGroup: "pushed"}
	other := events.Consumer{Stream: stream, Durable: "other", Subjects: []string{"t.other"}}
	apply(t, js, c)
	apply(t, js, other)
	reg := prometheus.NewRegistry()
	var mu sync.Mutex
	var got []string
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- consume.Run(rctx, js, consume.Spec{Consumer: c}, slog.New(slog.DiscardHandler), reg, func(_ context.Context, msg jetstream.Msg) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, msg.Subject()+" "+string(msg.Data()))
			return nil
		})
	}()
	foreign := func() float64 {
		mfs, err := reg.Gather()
		is.NoErr(err)
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if mf.GetName() == "primeflow_consumer_messages_total" && l.GetName() == "result" && l.GetValue() == "foreign" {
						return m.GetCounter().GetValue()
					}
				}
			}
		}
		return -1
	}
	_, err := js.Publish(ctx, "t.own", []byte("own"))
	is.NoErr(err)
	wait(t, "its own delivery handled", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 1 })

	nc := js.Conn()
	is.NoErr(nc.PublishMsg(&nats.Msg{Subject: "t.other", Reply: c.DeliverSubject, Data: []byte("a pub-ack")}))
	is.NoErr(nc.PublishMsg(&nats.Msg{Subject: "$JS.API.CONSUMER.MSG.NEXT." + stream + ".other", Reply: c.DeliverSubject, Data: []byte(`{"batch":1}`)}))
	wait(t, "the pub-ack and the other consumer's message counted foreign", func() bool { return foreign() == 2 })
	mu.Lock()
	is.Equal(got, []string{"t.own own"}) // and neither handled
	mu.Unlock()
	stop()
	is.NoErr(<-done)
}

// TestPushConsumerMadeAgainIsReadOn: a push consumer deleted and made
// again by the operators' step (as `streams apply` does when it turns a
// pull consumer into one) is read on by the running reader.
func TestPushConsumerMadeAgainIsReadOn(t *testing.T) {
	is := is.New(t)
	js := setup(t)
	c := events.Consumer{Stream: stream, Durable: "again", Subjects: []string{"t.again"}, DeliverSubject: "deliver.again", DeliverGroup: "again"}
	var handled atomic.Int32
	run(t, js, consume.Spec{Consumer: c}, func(context.Context, jetstream.Msg) error {
		handled.Add(1)
		return nil
	})
	publish(t, js, "t.again", 1)
	wait(t, "the first handled", func() bool { return handled.Load() == 1 })
	is.NoErr(js.DeleteConsumer(context.Background(), stream, c.Durable))
	publish(t, js, "t.again", 1)
	apply(t, js, c) // made again: it delivers the stream from its first
	wait(t, "both handled by the new consumer", func() bool { return handled.Load() == 3 })
}
