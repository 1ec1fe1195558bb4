package events_test

import (
	"context"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go/jetstream"
)

// A key's watch wakes at every write published to the key — a create, a
// write the stream refuses, a purge — with no consumer made; told that a
// read found nothing new, it wakes again, for a write not yet stored.
func TestWatchKeyWakesAtEveryWrite(t *testing.T) {
	is := is.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := natstest.Server(t)
	nc, js := natstest.Connect(t, srv)
	kv, err := js.KeyValue(ctx, events.BucketLocks)
	is.NoErr(err)
	w, err := events.WatchKey(nc, events.BucketLocks, "k")
	is.NoErr(err)
	defer w.Stop()
	is.NoErr(nc.Flush()) // the subscription is the server's
	woken := func(what string) {
		t.Helper()
		select {
		case <-w.C():
		case <-ctx.Done():
			t.Fatalf("no wake for %s", what)
		}
	}

	_, err = kv.Create(ctx, "k", []byte("a"))
	is.NoErr(err)
	woken("a create")
	_, err = kv.Create(ctx, "k", []byte("b"))
	is.True(events.IsKVConflict(err)) // refused: the key exists
	woken("a refused create")         // seen all the same: a watcher reads the key to know
	w.Unchanged()
	woken("a read again after one that found nothing new")
	is.NoErr(kv.Purge(ctx, "k"))
	woken("a purge")
	_, err = kv.Get(ctx, "k")
	is.Equal(err, jetstream.ErrKeyNotFound)

	s, err := js.Stream(ctx, events.StreamLocks)
	is.NoErr(err)
	info, err := s.Info(ctx)
	is.NoErr(err)
	is.Equal(info.State.Consumers, 0) // and no consumer was made
}
