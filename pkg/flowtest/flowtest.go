// Package flowtest is the end-to-end test harness of the pipeline: a real
// embedded nats-server with the streams, SQLite in a temp dir, the Prime
// simulator over HTTP and a Prime client for it. Tests add the services they
// exercise with Run, and feed events the way ingest does with Publish or
// Fire.
package flowtest

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/metrics"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/groupcommit"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Env is one pipeline under test.
type Env struct {
	T      testing.TB
	NATS   *server.Server
	NC     *nats.Conn
	JS     jetstream.JetStream
	Store  store.Store
	Sim    *primesim.Sim
	SimURL string
	Prime  *prime.Client
	Deps   service.Deps
	// Logs holds everything the services logged.
	Logs *Buffer

	natsURL  string // NATS_URL for a service's Main
	replicas int    // and NATS_STREAM_REPLICAS
	prime    *primeServer
}

// Options tune an Env.
type Options struct {
	// PrimeConfig adjusts the client's configuration (by default the budget
	// is lifted so tests are not paced at 60 calls a minute, and while
	// Prime does not answer it is tried again every second).
	PrimeConfig func(*prime.Config)
	// Sim are the simulator's options (default: an empty simulator).
	Sim primesim.Options
	// StoreDir keeps the database in a given directory, for tests that
	// restart the pipeline on the same data.
	StoreDir string
	// NATSAddr and NATSDir run the server on a given address and store dir,
	// for tests that restart it.
	NATSAddr, NATSDir string
	// Cluster, when set, is the NATS the pipeline runs on (the streams with
	// a replica on each node) in place of a server of its own; NATS is then
	// its first node.
	Cluster *natstest.Cluster
}

// New starts an Env; everything stops when the test ends.
func New(t testing.TB, opts Options) *Env {
	t.Helper()
	e := &Env{T: t, Logs: &Buffer{}}
	switch {
	case opts.Cluster != nil:
		e.NATS, e.natsURL, e.replicas = opts.Cluster.Nodes[0], opts.Cluster.URL(), len(opts.Cluster.Nodes)
		e.NC, e.JS = opts.Cluster.Connect(t)
	case opts.NATSAddr != "":
		e.NATS = natstest.ServerAt(t, opts.NATSAddr, opts.NATSDir)
	default:
		e.NATS = natstest.Server(t)
	}
	if e.natsURL == "" {
		e.natsURL = e.NATS.ClientURL()
		e.NC, e.JS = natstest.Connect(t, e.NATS)
	}
	dir := opts.StoreDir
	if dir == "" {
		dir = t.TempDir()
	}
	db, err := sqlite.Open(context.Background(), filepath.Join(dir, "primeflow.db"))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	st := groupcommit.New(db, nil) // as the services run
	t.Cleanup(func() { st.Close() })
	e.Store = st

	sim, err := primesim.New(opts.Sim)
	if err != nil {
		t.Fatalf("prime simulator: %v", err)
	}
	e.prime = startPrimeServer(t, sim)
	e.Sim, e.SimURL = sim, "http://"+e.prime.addr
	cfg := sim.ClientConfig(e.SimURL)
	cfg.RatePerMinute = 1_000_000
	cfg.RateBurst = 1000
	cfg.MaxConcurrent = 32
	// While Prime does not answer, a probe every second, not a ladder
	// growing to a minute: a test's outage ends within a second of Prime's.
	cfg.OutageBackoff = retry.Backoff{time.Second}
	if opts.PrimeConfig != nil {
		opts.PrimeConfig(&cfg)
	}
	log := slog.New(slog.NewTextHandler(e.Logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	pc, err := prime.New(cfg, prime.WithLogger(log))
	if err != nil {
		t.Fatalf("prime client: %v", err)
	}
	e.Prime = pc
	e.Deps = service.Deps{Log: log, NC: e.NC, JS: e.JS, Store: st, Metrics: metrics.NewRegistry()}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("service logs:\n%s", e.Logs.String())
		}
	})
	return e
}

// Run runs r until the test ends (or until the returned stop is called);
// a Run that fails fails the test.
func (e *Env) Run(name string, r service.Runner) (stop func()) {
	e.T.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.Run(ctx); err != nil && ctx.Err() == nil {
			e.T.Errorf("%s stopped: %v", name, err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	e.T.Cleanup(stop)
	return stop
}

// Consumer makes a consumer of the test's own, as the operators' step makes
// the services' (events.Apply already has), and returns it for a
// consume.Spec.
func (e *Env) Consumer(c events.Consumer) events.Consumer {
	e.T.Helper()
	if _, err := events.ApplyConsumer(context.Background(), e.JS, c); err != nil {
		e.T.Fatalf("consumer %s: %v", c.Durable, err)
	}
	return c
}

// Pulling reports whether a reader of the consumer is waiting for its
// messages: the consumer exists from the start (the operators' step), so
// this, not its existence, says the service reads it.
func (e *Env) Pulling(stream, durable string) bool {
	c, err := e.JS.Consumer(context.Background(), stream, durable)
	return err == nil && c.CachedInfo().NumWaiting > 0
}

// Publish stores a webhook the way ingest does — a log row, then its
// message on prime.webhook.<action> — and returns the row's id.
func (e *Env) Publish(action, body string) int64 {
	e.T.Helper()
	ctx := context.Background()
	id, err := e.Store.InsertWebhookLog(ctx, store.NewWebhookLogRow{
		ReceivedUTC: time.Now().UTC(), EventAction: action, Payload: body, IsAuthenticated: true,
	})
	if err != nil {
		e.T.Fatalf("insert log row: %v", err)
	}
	if _, err := e.JS.PublishMsg(ctx, events.NewWebhookMsg(id, 0, action, body)); err != nil {
		e.T.Fatalf("publish webhook: %v", err)
	}
	return id
}

// Fire publishes the webhook Prime would send for action about the record
// id (a job, appointment, allocation … of the simulator), and returns the
// log row's id.
func (e *Env) Fire(action, id string) int64 {
	e.T.Helper()
	body, err := e.Sim.WebhookBody(action, id)
	if err != nil {
		e.T.Fatalf("webhook: %v", err)
	}
	return e.Publish(action, string(body))
}

// Published returns the bodies of the messages a stream holds on subject,
// oldest first.
func (e *Env) Published(stream, subject string) [][]byte {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := e.JS.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		e.T.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		e.T.Fatal(err)
	}
	var out [][]byte
	for range info.NumPending {
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			e.T.Fatal(err)
		}
		out = append(out, msg.Data())
	}
	return out
}

// Row reads a log row.
func (e *Env) Row(id int64) store.WebhookLogRow {
	e.T.Helper()
	row, err := e.Store.GetWebhookLog(context.Background(), id)
	if err != nil {
		e.T.Fatalf("log row %d: %v", id, err)
	}
	return row
}

// WaitProcessed waits for a row to be processed and returns it.
func (e *Env) WaitProcessed(id int64) store.WebhookLogRow {
	e.T.Helper()
	return e.WaitRow(id, "processed", store.WebhookLogRow.Processed)
}

// WaitRow waits until cond holds for a row.
func (e *Env) WaitRow(id int64, what string, cond func(store.WebhookLogRow) bool) store.WebhookLogRow {
	e.T.Helper()
	var row store.WebhookLogRow
	Eventually(e.T, "row "+what, func() bool {
		r, err := e.Store.GetWebhookLog(context.Background(), id)
		row = r
		return err == nil && cond(r)
	})
	return row
}

// Eventually waits up to 20s for cond, polling every 5ms; it fails the test
// if cond never holds.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Poll(t, 20*time.Second, 5*time.Millisecond, what, cond)
}

// Poll calls cond every interval until it holds, failing the test if it
// does not within d. A short interval catches a state that does not last.
func Poll(t testing.TB, d, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(interval)
	}
}

// FreeAddr is a loopback address with a port free at the time of the call,
// for a server the test starts by address (HTTP_ADDR, NATS_LISTEN …).
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// PostWebhook posts body to a running ingest's webhook URL with the API key
// Prime sends, as Prime does, and fails the test unless it answers 200.
func PostWebhook(t testing.TB, client *http.Client, url, apiKey, body string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("API-Key", apiKey)
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("webhook answered %d", res.StatusCode)
	}
}

// MostInAnyWindow is the most of the times ts within any window of length
// w: at most 60 Prime calls in any minute, say.
func MostInAnyWindow(ts []time.Time, w time.Duration) int {
	ts = slices.Clone(ts)
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	most := 0
	for i, j := 0, 0; j < len(ts); j++ {
		for ts[j].Sub(ts[i]) >= w {
			i++
		}
		most = max(most, j-i+1)
	}
	return most
}

// Buffer collects log output from many goroutines.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
