package natsserver_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
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

// TestMonitoring: MonitorListen serves nats-server's monitoring endpoints,
// /jsz among them (what prometheus-nats-exporter reads); without it there
// is no monitoring port.
func TestMonitoring(t *testing.T) {
	t.Run("served", func(t *testing.T) {
		is := is.New(t)
		srv, err := natsserver.Start(natsserver.Config{Listen: "127.0.0.1:-1", StoreDir: t.TempDir(), MonitorListen: "127.0.0.1:-1"})
		is.NoErr(err) // started
		defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
		addr := srv.MonitorAddr()
		is.True(addr != nil) // a monitoring port
		resp, err := http.Get(fmt.Sprintf("http://%s/jsz", addr))
		is.NoErr(err)
		defer resp.Body.Close()
		is.Equal(resp.StatusCode, http.StatusOK) // /jsz answers
		var jsz struct {
			Config *struct {
				StoreDir string `json:"store_dir"`
			} `json:"config"`
		}
		is.NoErr(json.NewDecoder(resp.Body).Decode(&jsz))
		is.True(jsz.Config != nil) // with JetStream's state
	})
	t.Run("not asked for", func(t *testing.T) {
		is := is.New(t)
		srv, err := natsserver.Start(natsserver.Config{Listen: "127.0.0.1:-1", StoreDir: t.TempDir()})
		is.NoErr(err)
		defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
		is.True(srv.MonitorAddr() == nil) // no monitoring port
	})
	t.Run("refused", func(t *testing.T) {
		taken, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer taken.Close()
		for _, tc := range []struct{ listen, want string }{
			{taken.Addr().String(), "address already in use"},
			{"127.0.0.1:0", "the port -1 for a free one: port 0"},
			{"127.0.0.1", "missing port"},
		} {
			is := is.New(t)
			_, err := natsserver.Start(natsserver.Config{Listen: "127.0.0.1:-1", StoreDir: t.TempDir(), MonitorListen: tc.listen})
			is.True(err != nil)                                           // refused
			is.True(strings.Contains(err.Error(), tc.want))               // saying why
			is.True(strings.Contains(err.Error(), "NATS_MONITOR_LISTEN")) // naming the variable
		}
	})
}
