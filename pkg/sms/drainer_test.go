package sms_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/sms"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
	"github.com/matryer/is"
	"github.com/prometheus/client_golang/prometheus"
)

// rig is a drainer over SQLite posting to an SMS endpoint over HTTP.
type rig struct {
	store   *sqlite.Store
	ep      *endpoint
	drainer *sms.Drainer
	reg     *prometheus.Registry
	logs    *lockedWriter
}

func newRig(t *testing.T, statuses []int, maxAttempts int) *rig {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "primeflow.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ep := &endpoint{statuses: statuses}
	srv := httptest.NewServer(ep)
	t.Cleanup(srv.Close)
	sender, err := sms.NewHTTPSender(sms.Config{URL: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedWriter{}
	reg := prometheus.NewRegistry()
	d, err := sms.NewDrainer(sms.DrainerConfig{MaxAttempts: maxAttempts, Backoff: []time.Duration{20 * time.Millisecond, 40 * time.Millisecond},
		Lease: time.Minute, Sweep: time.Minute, Workers: 4}, st, sender, slog.New(slog.NewTextHandler(logs, nil)), reg)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{store: st, ep: ep, drainer: d, reg: reg, logs: logs}
}

// lockedWriter lets the drainer's goroutines and the test share a buffer.
type lockedWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// waitFor waits, up to a deadline, for the logs to contain text.
func (l *lockedWriter) waitFor(text string) bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		found := strings.Contains(l.b.String(), text)
		l.mu.Unlock()
		if found {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// run runs the drainer until the test ends.
func (r *rig) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.drainer.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func (r *rig) queue(t *testing.T, body string) int64 {
	t.Helper()
	id, _, err := r.store.QueueSMS(context.Background(), store.NewSMS{Recipient: "+61400000000", Body: body, Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// waitState waits, up to a deadline, for a message to reach a state.
func (r *rig) waitState(t *testing.T, id int64, want store.SMSState) store.SMSMessage {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		m, err := r.store.GetSMS(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if m.State == want {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("sms %d is %s after 20s, want %s", id, m.State, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// metric reads a counter or gauge from the registry; labels "" for none.
func metric(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if label != "" && (len(m.GetLabel()) == 0 || m.GetLabel()[0].GetValue() != label) {
				continue
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

func TestAnEndpointThatFailsThenRecoversGetsTheMessageOnce(t *testing.T) {
	is := is.New(t)
	r := newRig(t, []int{http.StatusServiceUnavailable, http.StatusInternalServerError, http.StatusOK}, 5)
	r.run(t)
	id := r.queue(t, "MAKE SAFE")
	r.drainer.Kick()
	m := r.waitState(t, id, store.SMSSent)
	is.Equal(m.Attempts, 3)                                                   // two failures, then the send
	is.Equal(len(r.ep.got()), 3)                                              // three posts in all
	is.Equal(r.ep.accepted(id), 1)                                            // accepted once
	is.True(strings.Contains(m.LastError, "HTTP 500"))                        // the last failure stays on the row
	is.Equal(metric(t, r.reg, "primeflow_sms_sent_total", ""), 1.0)           // counted sent
	is.Equal(metric(t, r.reg, "primeflow_sms_send_retries_total", ""), 2.0)   // after two retries
	is.Equal(metric(t, r.reg, "primeflow_sms_failed_total", ""), 0.0)         // and no failure
	is.Equal(metric(t, r.reg, "primeflow_sms_handoff_seconds", ""), 1.0)      // one first hand-off timed
	is.Equal(metric(t, r.reg, "primeflow_sms_queue_messages", "Sent"), 1.0)   // the queue shows it sent
	is.Equal(metric(t, r.reg, "primeflow_sms_queue_messages", "Queued"), 0.0) // and nothing waiting

	// Draining again sends nothing more.
	is.NoErr(r.drainer.Drain(context.Background()))
	is.Equal(len(r.ep.got()), 3) // no further post
}

func TestAMessageFailsVisiblyAfterItsLastAttempt(t *testing.T) {
	is := is.New(t)
	r := newRig(t, []int{http.StatusBadGateway}, 3)
	r.run(t)
	id := r.queue(t, "x")
	r.drainer.Kick()
	m := r.waitState(t, id, store.SMSFailed)
	is.Equal(m.Attempts, 3)                                           // three attempts
	is.Equal(len(r.ep.got()), 3)                                      // three posts
	is.True(strings.Contains(m.LastError, "HTTP 502"))                // the reason on the row
	is.Equal(metric(t, r.reg, "primeflow_sms_failed_total", ""), 1.0) // counted failed
	is.Equal(metric(t, r.reg, "primeflow_sms_queue_messages", "Failed"), 1.0)
	is.True(r.logs.waitFor("sms failed for good")) // and logged
}

func TestARefusalIsNotRetried(t *testing.T) {
	is := is.New(t)
	r := newRig(t, []int{http.StatusUnprocessableEntity}, 5)
	id := r.queue(t, "x")
	is.NoErr(r.drainer.Drain(context.Background()))
	m, err := r.store.GetSMS(context.Background(), id)
	is.NoErr(err)
	is.Equal(m.State, store.SMSFailed) // refused for good
	is.Equal(m.Attempts, 1)            // after one attempt
	is.Equal(len(r.ep.got()), 1)       // one post
}

// Two drainers on one queue (two makesafe processes) send each message once.
func TestTwoDrainersSendEachMessageOnce(t *testing.T) {
	is := is.New(t)
	r := newRig(t, nil, 5)
	ids := make([]int64, 30)
	for i := range ids {
		ids[i] = r.queue(t, "m")
	}
	sender, err := sms.NewHTTPSender(sms.Config{URL: mustServer(t, r.ep)}, nil)
	is.NoErr(err)
	other, err := sms.NewDrainer(sms.DrainerConfig{MaxAttempts: 5, Backoff: []time.Duration{time.Millisecond},
		Lease: time.Minute, Sweep: time.Minute, Workers: 3}, r.store, sender, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	is.NoErr(err)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, d := range []*sms.Drainer{r.drainer, other} {
		wg.Go(func() { errs[i] = d.Drain(context.Background()) })
	}
	wg.Wait()
	is.NoErr(errs[0]) // both drains work
	is.NoErr(errs[1])
	for _, id := range ids {
		is.Equal(r.ep.accepted(id), 1) // every message sent exactly once
	}
	is.Equal(len(r.ep.got()), len(ids)) // and nothing else
}

func mustServer(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestDrainerConfigIsChecked(t *testing.T) {
	ok := sms.DrainerConfig{MaxAttempts: 5, Backoff: []time.Duration{time.Second}, Lease: time.Minute, Sweep: time.Minute, Workers: 1}
	for _, tc := range []struct {
		name string
		edit func(*sms.DrainerConfig)
	}{
		{"no attempts", func(c *sms.DrainerConfig) { c.MaxAttempts = 0 }},
		{"no backoff", func(c *sms.DrainerConfig) { c.Backoff = nil }},
		{"a zero backoff", func(c *sms.DrainerConfig) { c.Backoff = []time.Duration{0} }},
		{"no lease", func(c *sms.DrainerConfig) { c.Lease = 0 }},
		{"no workers", func(c *sms.DrainerConfig) { c.Workers = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			cfg := ok
			tc.edit(&cfg)
			_, err := sms.NewDrainer(cfg, nil, nil, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
			is.True(err != nil) // refused
		})
	}
}
