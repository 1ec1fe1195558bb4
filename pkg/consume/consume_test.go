package consume_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/consume"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
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
	spec.Stream = stream
	if spec.Durable == "" {
		spec.Durable = "test"
	}
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
	run(t, js, consume.Spec{Backoff: func(uint64) time.Duration { return 50 * time.Millisecond }},
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
	is := is.New(t)
	js := setup(t)
	var calls atomic.Int32
	release := make(chan struct{})
	run(t, js, consume.Spec{AckWait: 300 * time.Millisecond}, func(ctx context.Context, _ jetstream.Msg) error {
		calls.Add(1)
		<-release
		return nil
	})
	publish(t, js, "t.slow", 1)
	wait(t, "handler started", func() bool { return calls.Load() == 1 })
	time.Sleep(time.Second) // over three AckWaits: heartbeats keep it ours
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
	spec := consume.Spec{Stream: stream, Durable: "handover", Workers: 1, AckWait: time.Hour}
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
	run(t, js, consume.Spec{Durable: "handover", Workers: 4, AckWait: time.Hour}, func(context.Context, jetstream.Msg) error {
		handled.Add(1)
		return nil
	})
	wait(t, "every message taken by the next instance", func() bool { return handled.Load() == n }) // well before an hour's AckWait
}
