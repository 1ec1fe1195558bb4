package instance_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/instance"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
	"github.com/matryer/is"
)

// A database is paired with the NATS whose PRIME_WEBHOOK its resolver
// started on; another NATS, or the stream made anew, is told apart, and a
// restart of the server is not.
func TestPairing(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "primeflow.db"))
	is.NoErr(err)
	defer st.Close()
	dir := t.TempDir()
	srv := natstest.ServerAt(t, "127.0.0.1:-1", dir)
	_, js := natstest.Connect(t, srv)

	p, err := instance.Check(ctx, js, st)
	is.NoErr(err)
	is.True(!p.Known() && p.Same()) // never paired: nothing to tell apart
	is.True(p.NATS != "")           // the NATS names its stream all the same

	previous, err := instance.Pair(ctx, js, st)
	is.NoErr(err)
	is.Equal(previous, "") // the first pairing
	p, err = instance.Check(ctx, js, st)
	is.NoErr(err)
	is.True(p.Known() && p.Same()) // one instance
	previous, err = instance.Pair(ctx, js, st)
	is.NoErr(err)
	is.Equal(previous, "") // paired already: nothing changes

	// The same server restarted on its store: the same stream.
	listen := srv.Addr().String()
	natstest.Stop(srv)
	srv = natstest.ServerAt(t, listen, dir)
	_, js = natstest.Connect(t, srv)
	p, err = instance.Check(ctx, js, st)
	is.NoErr(err)
	is.True(p.Same()) // a restart keeps the stream's creation time

	// Another instance's NATS.
	_, other := natstest.Connect(t, natstest.Server(t))
	p, err = instance.Check(ctx, other, st)
	is.NoErr(err)
	is.True(p.Known() && !p.Same()) // told apart

	// The stream made anew, and the resolver starting on it again.
	is.NoErr(js.DeleteStream(ctx, events.StreamWebhook))
	_, err = events.Apply(ctx, js, 0) // the operators' step makes it again
	is.NoErr(err)
	p, err = instance.Check(ctx, js, st)
	is.NoErr(err)
	is.True(!p.Same()) // a new stream is another NATS as far as the database can tell
	was := p.Database
	previous, err = instance.Pair(ctx, js, st)
	is.NoErr(err)
	is.Equal(previous, was) // the pairing it replaced, for the resolver's warning
	p, err = instance.Check(ctx, js, st)
	is.NoErr(err)
	is.True(p.Same()) // paired again
}

// In a cluster every node names the stream alike, and a new stream leader
// does too: the pairing holds for the deployment of separate services.
func TestPairingInACluster(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "primeflow.db"))
	is.NoErr(err)
	defer st.Close()
	c := natstest.NewCluster(t, 3)
	_, js := c.Connect(t)
	_, err = instance.Pair(ctx, js, st)
	is.NoErr(err)
	c.Restart(c.StreamLeader(js, events.StreamWebhook))
	_ = c.StreamLeader(js, events.StreamWebhook) // a leader again
	p, err := instance.Check(ctx, js, st)
	is.NoErr(err)
	is.True(p.Known() && p.Same()) // the same stream after its leader moved
}
