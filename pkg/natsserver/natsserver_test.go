package natsserver_test

import (
	"net"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/natsserver"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go"
)

// TestMaxPayload: the embedded server takes messages up to MaxPayload (a
// webhook at ingest's body limit plus its headers), unless told otherwise.
func TestMaxPayload(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  int32
		want int64
	}{
		{"default", 0, int64(natsserver.MaxPayload)},
		{"configured", 64 << 10, 64 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			srv, err := natsserver.Start(natsserver.Config{Listen: "127.0.0.1:-1", StoreDir: t.TempDir(), MaxPayload: tc.set})
			is.NoErr(err) // started
			defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
			nc, err := nats.Connect(srv.ClientURL())
			is.NoErr(err)
			defer nc.Close()
			is.Equal(nc.MaxPayload(), tc.want) // what the server tells its clients
		})
	}
}

// TestAddressInUse: a listen address that is taken is an error at once that
// says so, not a wait for a server that never becomes ready.
func TestAddressInUse(t *testing.T) {
	is := is.New(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	is.NoErr(err)
	defer taken.Close()
	_, err = natsserver.Start(natsserver.Config{Listen: taken.Addr().String(), StoreDir: t.TempDir()})
	is.True(err != nil)                                              // refused
	is.True(strings.Contains(err.Error(), "address already in use")) // saying why
	is.True(strings.Contains(err.Error(), taken.Addr().String()))    // and where
}
