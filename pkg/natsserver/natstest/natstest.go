// Package natstest starts a real embedded nats-server with JetStream for a
// test, with the project's streams and consumers applied (events.Apply, the
// operators' step).
package natstest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/natsauth"
	"github.com/ethosbuilding/primeflow/pkg/natsserver"
	"github.com/ethosbuilding/primeflow/pkg/proctest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Server starts a server on a free port with its store in a temp dir, the
// project's streams and consumers applied as the operators' step leaves a
// deployment (events.Apply); it is shut down when the test ends.
func Server(t testing.TB) *server.Server {
	t.Helper()
	return ServerAt(t, "127.0.0.1:-1", t.TempDir())
}

// EmptyServer starts a server like Server with nothing applied: what the
// operators' step starts from.
func EmptyServer(t testing.TB) *server.Server {
	t.Helper()
	return start(t, natsserver.Config{Listen: "127.0.0.1:-1", StoreDir: t.TempDir()}, false)
}

// ServerAt starts a server like Server on listen with its store in dir,
// for tests that stop a server and start it again on the same port and
// data.
func ServerAt(t testing.TB, listen, dir string) *server.Server {
	t.Helper()
	return start(t, natsserver.Config{Listen: listen, StoreDir: dir}, true)
}

// ServerWithMaxPayload starts a server like Server that accepts messages of
// at most maxPayload bytes, headers included.
func ServerWithMaxPayload(t testing.TB, maxPayload int32) *server.Server {
	t.Helper()
	return start(t, natsserver.Config{Listen: "127.0.0.1:-1", StoreDir: t.TempDir(), MaxPayload: maxPayload}, true)
}

func start(t testing.TB, cfg natsserver.Config, apply bool) *server.Server {
	t.Helper()
	srv, err := natsserver.Start(cfg)
	if err != nil {
		t.Fatalf("start nats-server: %v", err)
	}
	t.Cleanup(func() { Stop(srv) })
	if apply {
		nc, _ := connect(t, srv.ClientURL(), 0)
		nc.Close()
	}
	return srv
}

// Stop shuts a server down and waits for it. Stopping twice is harmless.
func Stop(srv *server.Server) {
	srv.Shutdown()
	srv.WaitForShutdown()
}

// Connect connects to srv, applies the project's streams and consumers and
// returns the connection and its JetStream context; the connection closes
// when the test ends.
func Connect(t testing.TB, srv *server.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return connect(t, srv.ClientURL(), 0)
}

// connect connects to url and applies the project's streams and consumers
// with replicas (0: the files' own), trying again while a new cluster
// refuses them.
func connect(t testing.TB, url string, replicas int) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect to nats-server: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		_, err := events.Apply(ctx, js, replicas)
		if err == nil {
			return nc, js
		}
		if ctx.Err() != nil {
			t.Fatalf("apply streams and consumers: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Cluster is a JetStream cluster of embedded servers routed to each other
// on free ports of 127.0.0.1, for tests that stop and start nodes.
type Cluster struct {
	t     testing.TB
	Nodes []*server.Server
	opts  []*server.Options
}

// NewCluster starts n nodes, each with its store in a temp dir, and returns
// once the cluster has a meta leader; the nodes are shut down when the test
// ends.
func NewCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	var routes []*url.URL
	ports := make([]int, n)
	for i := range ports {
		port, err := proctest.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = port
		routes = append(routes, &url.URL{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", port)})
	}
	for i, port := range ports {
		c.opts = append(c.opts, &server.Options{
			ServerName: fmt.Sprintf("node-%d", i+1),
			Host:       "127.0.0.1",
			Port:       -1,
			JetStream:  true,
			StoreDir:   t.TempDir(),
			NoSigs:     true,
			NoLog:      true,
			MaxPayload: natsserver.MaxPayload,
			Cluster:    server.ClusterOpts{Name: "natstest", Host: "127.0.0.1", Port: port},
			Routes:     routes,
		})
		c.Nodes = append(c.Nodes, nil)
		c.start(i)
	}
	t.Cleanup(func() {
		for _, n := range c.Nodes {
			Stop(n)
		}
	})
	for _, n := range c.Nodes {
		if !n.ReadyForConnections(30 * time.Second) {
			t.Fatalf("nats-server %s: not ready for connections", n.Name())
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for !c.hasMetaLeader() {
		if time.Now().After(deadline) {
			t.Fatal("the JetStream cluster elected no meta leader in 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return c
}

func (c *Cluster) start(i int) {
	c.t.Helper()
	srv, err := server.NewServer(c.opts[i])
	if err != nil {
		c.t.Fatalf("nats-server %s: %v", c.opts[i].ServerName, err)
	}
	srv.Start()
	c.Nodes[i] = srv
	// The first start picks a client port; a restart keeps it.
	for srv.Addr() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	c.opts[i].Port = srv.Addr().(*net.TCPAddr).Port
}

func (c *Cluster) hasMetaLeader() bool {
	for _, n := range c.Nodes {
		if n.Running() && n.JetStreamIsLeader() {
			return true
		}
	}
	return false
}

// Stop shuts node i down.
func (c *Cluster) Stop(i int) { Stop(c.Nodes[i]) }

// Restart starts node i again on its ports and its store, and waits until
// it accepts connections.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	Stop(c.Nodes[i])
	c.start(i)
	if !c.Nodes[i].ReadyForConnections(30 * time.Second) {
		c.t.Fatalf("nats-server %s: not ready for connections after a restart", c.Nodes[i].Name())
	}
}

// URL is every node's client URL, comma-separated, as NATS_URL takes them.
func (c *Cluster) URL() string {
	var urls []string
	for _, o := range c.opts {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", o.Port))
	}
	return strings.Join(urls, ",")
}

// Connect connects to the cluster, applies the project's streams and
// consumers with a replica on every node and returns the connection and its JetStream
// context; the connection closes when the test ends.
func (c *Cluster) Connect(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return connect(t, c.URL(), len(c.Nodes))
}

// StreamLeader is the index of the node that leads stream's replicas now.
func (c *Cluster) StreamLeader(js jetstream.JetStream, stream string) int {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		s, err := js.Stream(ctx, stream)
		if err == nil && s.CachedInfo().Cluster != nil {
			for i, n := range c.Nodes {
				if n.Name() == s.CachedInfo().Cluster.Leader {
					return i
				}
			}
		}
		if ctx.Err() != nil {
			c.t.Fatalf("stream %s: no leader: %v", stream, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Follower is the index of a running node that leads neither the cluster
// (its meta leader) nor stream's replicas: stopped along with the others,
// it leaves a node that cannot answer for the stream at all.
func (c *Cluster) Follower(js jetstream.JetStream, stream string) int {
	c.t.Helper()
	leader := c.StreamLeader(js, stream)
	for i, n := range c.Nodes {
		if i != leader && n.Running() && !n.JetStreamIsLeader() {
			return i
		}
	}
	c.t.Fatalf("no node follows both the cluster and stream %s", stream)
	return -1
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
// (pkg/natsauth: a user a service role, the portals' and the operators'
// two),
// each with its own name as its password: a process connects as its role
// and is refused anything else. The streams are not applied:
// ApplyAsOperators applies them, as the operators' step does.
func ServerWithUsers(t testing.TB) *server.Server {
	t.Helper()
	dir := t.TempDir()
	users, err := natsauth.Config()
	if err != nil {
		t.Fatal(err)
	}
	var conf strings.Builder
	for _, u := range natsauth.Users() {
		fmt.Fprintf(&conf, "%s: %q\n", natsauth.PasswordVar(u), u)
	}
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

// ApplyAsOperators applies the project's streams and consumers on a server
// of ServerWithUsers as the operators' step does: logged in as the
// operators' user, with its inbox prefix.
func ApplyAsOperators(t testing.TB, srv *server.Server) {
	t.Helper()
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo(natsauth.Operators, natsauth.Operators),
		nats.CustomInboxPrefix(events.InboxPrefix(natsauth.Operators)))
	if err != nil {
		t.Fatalf("connect as %s: %v", natsauth.Operators, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := events.Apply(ctx, js, 0); err != nil {
		t.Fatalf("apply streams and consumers as %s: %v", natsauth.Operators, err)
	}
}
