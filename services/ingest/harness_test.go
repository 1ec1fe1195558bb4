package ingest_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/metrics"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/opshttp"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/groupcommit"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
	"github.com/ethosbuilding/primeflow/services/ingest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	apiKey    = "5b0e1f6c-2a7d-4c1e-9f3b-8d6a4e2c1b70"
	adminUser = "ops"
	adminPass = "s3cret-admin"
)

var admin = opshttp.Credentials{User: adminUser, Password: adminPass}

// harness is ingest running for real: an embedded nats-server, SQLite in a
// temp dir, and the HTTP server on a free port.
type harness struct {
	t     testing.TB
	url   string
	store store.Store
	nats  *server.Server
	nc    *nats.Conn
	js    jetstream.JetStream
	logs  *flowtest.Buffer
	// router is the HTTP surface under test, for the route walk.
	router *service.Router
	// stop stops ingest and returns what its Run returned; it runs once,
	// at the latest when the test ends.
	stop func() error
}

// option changes what ingest is built with, or ingest itself before it
// starts.
type option func(*setup)

type setup struct {
	cfg     *ingest.Config
	deps    *service.Deps
	prepare []func(*ingest.Ingest)
}

func withStore(wrap func(store.Store) store.Store) option {
	return func(s *setup) { s.deps.Store = wrap(s.deps.Store) }
}

func withConfig(f func(*ingest.Config)) option {
	return func(s *setup) { f(s.cfg) }
}

// withRelayPage sets how many rows the relay reads at a time.
func withRelayPage(n int) option {
	return func(s *setup) {
		s.prepare = append(s.prepare, func(in *ingest.Ingest) { in.SetRelayPage(n) })
	}
}

// withJetStream wraps the JetStream ingest publishes through.
func withJetStream(wrap func(jetstream.JetStream) jetstream.JetStream) option {
	return func(s *setup) {
		s.prepare = append(s.prepare, func(in *ingest.Ingest) { in.WrapJetStream(wrap) })
	}
}

func start(t testing.TB, opts ...option) *harness {
	t.Helper()
	return startOn(t, natstest.Server(t), opts...)
}

func startOn(t testing.TB, ns *server.Server, opts ...option) *harness {
	t.Helper()
	nc, js := natstest.Connect(t, ns)
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "primeflow.db"))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	st := groupcommit.New(db, nil) // as service.Open gives it to ingest
	t.Cleanup(func() { st.Close() })
	h := &harness{t: t, store: st, nats: ns, nc: nc, js: js, logs: &flowtest.Buffer{}}

	cfg := ingest.DefaultConfig()
	cfg.APIKey, cfg.MaxBodyBytes = apiKey, 64<<10
	cfg.RelayInterval, cfg.RelayGrace, cfg.PublishTimeout = time.Hour, 0, time.Second
	d := service.Deps{Log: slog.New(slog.NewTextHandler(h.logs, nil)), NC: nc, JS: js, Store: st, Metrics: metrics.NewRegistry()}
	su := setup{cfg: &cfg, deps: &d}
	for _, o := range opts {
		o(&su)
	}
	r := service.NewRouter(admin)
	h.router = r
	in, err := ingest.New(cfg, d, r)
	if err != nil {
		t.Fatalf("new ingest: %v", err)
	}
	for _, p := range su.prepare {
		p(in)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.url = "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- service.Run(ctx, &http.Server{Handler: r.Handler(d)}, ln, in) }()
	var once sync.Once
	var stopErr error
	h.stop = func() error {
		once.Do(func() { cancel(); stopErr = <-done })
		return stopErr
	}
	t.Cleanup(func() {
		if err := h.stop(); err != nil {
			t.Errorf("ingest stopped with: %v", err)
		}
	})
	h.waitHealthy()
	return h
}

func (h *harness) waitHealthy() {
	h.t.Helper()
	flowtest.Eventually(h.t, "ingest healthy", func() bool {
		req, _ := http.NewRequest(http.MethodGet, h.url+"/healthz", nil)
		req.SetBasicAuth(adminUser, adminPass)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
}

// post sends a webhook the way Prime does.
func (h *harness) post(body string, header ...string) *http.Response {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url+ingest.WebhookPath, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("post webhook: %v", err)
	}
	h.t.Cleanup(func() { res.Body.Close() })
	return res
}

// rows counts the log rows.
func (h *harness) rows() int {
	h.t.Helper()
	n, err := h.store.CountWebhookLog(context.Background(), store.LogFilter{})
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

// streamMsgs counts the messages in PRIME_WEBHOOK.
func (h *harness) streamMsgs() uint64 {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := h.js.Stream(ctx, "PRIME_WEBHOOK")
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	return info.State.Msgs
}

// metric is the value of one sample on ingest's /metrics, given as its name
// and labels as exposed (primeflow_x{reason="y"}), or "" when absent.
func (h *harness) metric(sample string) string {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, h.url+"/metrics", nil)
	req.SetBasicAuth(adminUser, adminPass)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("scrape metrics: %v", err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatalf("read metrics: %v", err)
	}
	for line := range strings.Lines(string(body)) {
		if value, ok := strings.CutPrefix(strings.TrimSpace(line), sample+" "); ok {
			return value
		}
	}
	return ""
}
