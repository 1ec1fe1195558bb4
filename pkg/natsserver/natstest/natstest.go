// Package natstest starts a real embedded nats-server with JetStream for a
// test, with the project's streams applied.
package natstest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/natsauth"
	"github.com/ethosbuilding/primeflow/pkg/natsserver"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Server starts a server on a free port with its store in a temp dir; it is
// shut down when the test ends.
func Server(t testing.TB) *server.Server {
	t.Helper()
	return ServerAt(t, "127.0.0.1:-1", t.TempDir())
}

// ServerAt starts a server on listen with its store in dir, for tests that
// stop a server and start it again on the same port and data.
func ServerAt(t testing.TB, listen, dir string) *server.Server {
	t.Helper()
	return start(t, natsserver.Config{Listen: listen, StoreDir: dir})
}

// ServerWithMaxPayload starts a server like Server that accepts messages of
// at most maxPayload bytes, headers included.
func ServerWithMaxPayload(t testing.TB, maxPayload int32) *server.Server {
	t.Helper()
	return start(t, natsserver.Config{Listen: "127.0.0.1:-1", StoreDir: t.TempDir(), MaxPayload: maxPayload})
}

func start(t testing.TB, cfg natsserver.Config) *server.Server {
	t.Helper()
	srv, err := natsserver.Start(cfg)
	if err != nil {
		t.Fatalf("start nats-server: %v", err)
	}
	t.Cleanup(func() { Stop(srv) })
	return srv
}

// Stop shuts a server down and waits for it. Stopping twice is harmless.
func Stop(srv *server.Server) {
	srv.Shutdown()
	srv.WaitForShutdown()
}

// Connect connects to srv, applies the project's streams and returns the
// connection and its JetStream context; the connection closes when the test ends.
func Connect(t testing.TB, srv *server.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect to nats-server: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := events.EnsureStreams(ctx, js, 0); err != nil {
		t.Fatalf("ensure streams: %v", err)
	}
	return nc, js
}

// CLI is the nats CLI that `make test` builds and names in NATS_CLI, for
// tests that prove the command line works with what primeflow makes. Without
// it the test is skipped, except in CI (CI set), where it fails.
func CLI(t testing.TB) string {
	t.Helper()
	cli := os.Getenv("NATS_CLI")
	if cli == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("NATS_CLI is not set: run the tests through `make test`, which builds the nats CLI")
		}
		t.Skip("SKIPPED: NATS_CLI is not set (make test builds the nats CLI and sets it)")
	}
	return cli
}

// ServerWithUsers starts a server on a free port whose users are compose's
// (pkg/natsauth: a user a service role, the portals' and the operators'),
// each with its own name as its password: a process connects as its role
// and is refused anything else. The streams are not applied.
func ServerWithUsers(t testing.TB) *server.Server {
	t.Helper()
	dir := t.TempDir()
	users, err := natsauth.Config()
	if err != nil {
		t.Fatal(err)
	}
	var conf strings.Builder
	for _, r := range natsauth.Roles() {
		fmt.Fprintf(&conf, "%s: %q\n", natsauth.PasswordVar(r.Name), r.Name)
	}
	fmt.Fprintf(&conf, "%s: %q\n", natsauth.PasswordVar(natsauth.Operators), natsauth.Operators)
	// The users follow the variables in one file: an included file does
	// not see the variables of the file that includes it.
	fmt.Fprintf(&conf, "listen: \"127.0.0.1:-1\"\nmax_payload: %d\njetstream { store_dir: %q }\n%s",
		natsserver.MaxPayload, filepath.Join(dir, "jetstream"), users)
	if err := os.WriteFile(filepath.Join(dir, "server.conf"), []byte(conf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(filepath.Join(dir, "server.conf"))
	if err != nil {
		t.Fatalf("nats-server refuses pkg/natsauth's users: %v", err)
	}
	opts.NoLog, opts.NoSigs = true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() { Stop(srv) })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server with users: not ready")
	}
	return srv
}
