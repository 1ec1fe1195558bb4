package consume_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/consume"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// TestFindingTheConsumerRidesOutALostQuorum: a service starts while the
// cluster has no quorum, as during a node's outage. Finding its consumer
// is tried again until the cluster answers (or a node that still holds
// the consumer's state answers for it, and the service reads on), and
// the messages are then handled, instead of the process exiting on
// "context deadline exceeded" (job-mirror, the resolver and makesafe did
// in the chaos runs, when they made their consumers).
func TestFindingTheConsumerRidesOutALostQuorum(t *testing.T) {
	kinds(t, testFindingTheConsumerRidesOutALostQuorum)
}

func testFindingTheConsumerRidesOutALostQuorum(t *testing.T, of func(events.Consumer) events.Consumer) {
	is := is.New(t)
	c := natstest.NewCluster(t, 3)
	_, js := c.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{"t.>"}, Replicas: 3})
	is.NoErr(err)
	publish(t, js, "t.a", 1)
	late := of(events.Consumer{Stream: stream, Durable: "late"})
	apply(t, js, late)
	c.Stop(1)
	c.Stop(2)

	logs := &flowtest.Buffer{}
	reg := prometheus.NewRegistry()
	handled := make(chan struct{}, 1)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- consume.Run(rctx, js, consume.Spec{Consumer: late}, slog.New(slog.NewTextHandler(logs, nil)),
			reg, func(context.Context, jetstream.Msg) error {
				handled <- struct{}{}
				return nil
			})
	}()
	flowtest.Eventually(t, "the consumer to be tried again, or found and read", func() bool {
		select {
		case err := <-done:
			t.Fatalf("consume.Run returned while the cluster had no quorum: %v", err)
		default:
		}
		mfs, err := reg.Gather()
		return err == nil && len(mfs) > 0 || strings.Contains(logs.String(), "JetStream did not answer for the consumer; trying again")
	})
	c.Restart(1)

	select {
	case <-handled: // found once the cluster answers, and consuming
	case err := <-done:
		t.Fatalf("consume.Run returned: %v", err)
	case <-ctx.Done():
		t.Fatal("the message was not handled")
	}
	stop()
	is.NoErr(<-done) // and it stops with its context
}
