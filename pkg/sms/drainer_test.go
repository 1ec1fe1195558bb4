package sms_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/delivery"
	"github.com/ethosbuilding/primeflow/pkg/dryrun"
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
	sender  *sms.HTTPSender
	drainer *sms.Drainer
	reg     *prometheus.Registry
	logs    *lockedWriter
}

func newRig(t *testing.T, ep *endpoint, maxAttempts int) *rig {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "primeflow.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv := httptest.NewServer(ep)
	t.Cleanup(srv.Close)
	sender, err := sms.NewHTTPSender(delivery.HTTPConfig{URL: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{store: st, ep: ep, sender: sender, reg: prometheus.NewRegistry(), logs: &lockedWriter{}}
	r.drainer = r.newDrainer(t, st, sender, maxAttempts, r.reg)
	return r
}

// newDrainer makes a drainer over q and s, logging to the rig's logs.
func (r *rig) newDrainer(t *testing.T, q sms.Queue, s sms.Sender, maxAttempts int, reg prometheus.Registerer) *sms.Drainer {
	t.Helper()
	d, err := sms.NewDrainer(delivery.Config{MaxAttempts: maxAttempts, Backoff: []time.Duration{20 * time.Millisecond, 40 * time.Millisecond},
		Lease: time.Minute, Sweep: time.Minute, Workers: 4}, q, s, slog.New(slog.NewTextHandler(r.logs, nil)), reg)
	if err != nil {
		t.Fatal(err)
	}
	return d
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

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor waits, up to a deadline, for the logs to contain text.
func (l *lockedWriter) waitFor(text string) bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(l.String(), text) {
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
func (r *rig) waitState(t *testing.T, id int64, want store.SendState) store.SMSMessage {
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
	r := newRig(t, &endpoint{statuses: []int{http.StatusRequestTimeout, http.StatusInternalServerError, http.StatusOK}}, 5)
	r.run(t)
	id := r.queue(t, "MAKE SAFE")
	r.drainer.Kick()
	m := r.waitState(t, id, store.SendSent)
	is.Equal(m.Attempts, 3)                                                   // two failures, then the send
	is.Equal(len(r.ep.got()), 3)                                              // three posts in all
	is.Equal(r.ep.accepted(id), 1)                                            // accepted once
	is.True(strings.Contains(m.LastError, "HTTP 500"))                        // the last failure stays on the row
	is.Equal(metric(t, r.reg, "primeflow_sms_sent_total", ""), 1.0)           // counted sent
	is.Equal(metric(t, r.reg, "primeflow_sms_send_retries_total", ""), 2.0)   // after two retries
	is.Equal(metric(t, r.reg, "primeflow_sms_failed_total", ""), 0.0)         // and no failure
	is.Equal(metric(t, r.reg, "primeflow_sms_send_waits_total", ""), 0.0)     // the failures were no waits
	is.Equal(metric(t, r.reg, "primeflow_sms_handoff_seconds", ""), 1.0)      // one first hand-off timed
	is.Equal(metric(t, r.reg, "primeflow_sms_queue_messages", "Sent"), 1.0)   // the queue shows it sent
	is.Equal(metric(t, r.reg, "primeflow_sms_queue_messages", "Queued"), 0.0) // and nothing waiting
	var retried []string
	for _, line := range strings.Split(r.logs.String(), "\n") {
		if strings.Contains(line, "sms not sent; it is retried") {
			retried = append(retried, line)
		}
	}
	is.Equal(len(retried), 2) // each failed attempt is logged once
	for n, line := range retried {
		is.True(strings.Contains(line, fmt.Sprintf("attempt=%d ", n+1)) && strings.Contains(line, "of=5"))              // naming its attempt of the cap
		is.True(strings.Contains(line, "err=") && strings.Contains(line, "next=") && strings.Contains(line, "nextAt=")) // its error, and when the next comes
	}

	// Draining again sends nothing more.
	is.NoErr(r.drainer.Drain(context.Background()))
	is.Equal(len(r.ep.got()), 3) // no further post
}

// A 500 is the endpoint's answer about this post: it counts an attempt,
// and after the last the message is Failed.
func TestAMessageFailsVisiblyAfterItsLastAttempt(t *testing.T) {
	is := is.New(t)
	r := newRig(t, &endpoint{statuses: []int{http.StatusInternalServerError}}, 3)
	r.run(t)
	id := r.queue(t, "x")
	r.drainer.Kick()
	m := r.waitState(t, id, store.SendFailed)
	is.Equal(m.Attempts, 3)                            // three attempts
	is.Equal(len(r.ep.got()), 3)                       // three posts
	is.True(strings.Contains(m.LastError, "HTTP 500")) // the reason on the row
	// The drainer counts and logs the failure after the row says Failed:
	// the log line, which comes last, says the count is in.
	is.True(r.logs.waitFor("sms failed for good"))                    // logged
	is.Equal(metric(t, r.reg, "primeflow_sms_failed_total", ""), 1.0) // counted failed
	is.Equal(metric(t, r.reg, "primeflow_sms_queue_messages", "Failed"), 1.0)
}

// An endpoint that is not taking posts (its rate limit, or it or a gateway
// in front of it saying it cannot answer now) for longer than
// SMS_MAX_ATTEMPTS attempts and their backoff would last is waited out: the
// make-safe SMS goes once it takes posts again, on its first attempt, and
// is never Failed for a person to requeue. The wait is seen while it lasts.
func TestAnEndpointNotTakingPostsIsWaitedOut(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			is := is.New(t)
			const maxAttempts, waits = 2, 8 // four times the attempts
			statuses := slices.Repeat([]int{status}, waits)
			r := newRig(t, &endpoint{statuses: append(statuses, http.StatusOK)}, maxAttempts)
			id := r.queue(t, "MAKE SAFE")
			is.NoErr(r.drainer.Drain(context.Background()))
			m, err := r.store.GetSMS(context.Background(), id)
			is.NoErr(err)
			is.Equal(m.State, store.SendQueued)                                                     // waiting
			is.Equal(m.Attempts, 0)                                                                 // its attempt not used
			is.True(strings.Contains(m.LastError, fmt.Sprintf("HTTP %d", status)))                  // saying why
			is.True(strings.HasPrefix(m.LastError, "waiting for the endpoint, no attempt counted")) // and that it waits
			is.True(metric(t, r.reg, "primeflow_sms_oldest_waiting_seconds", "") > 0)               // seen waiting

			r.run(t)
			m = r.waitState(t, id, store.SendSent)
			is.Equal(m.Attempts, 1)                                                          // sent on its first attempt
			is.Equal(len(r.ep.got()), waits+1)                                               // after every wait
			is.Equal(r.ep.accepted(id), 1)                                                   // once
			is.Equal(metric(t, r.reg, "primeflow_sms_send_waits_total", ""), float64(waits)) // each wait counted as one
			is.Equal(metric(t, r.reg, "primeflow_sms_send_retries_total", ""), 0.0)          // none a failed attempt
			is.Equal(metric(t, r.reg, "primeflow_sms_failed_total", ""), 0.0)                // nor a failure
			is.Equal(metric(t, r.reg, "primeflow_sms_oldest_waiting_seconds", ""), 0.0)      // nothing waits now
			is.True(strings.Contains(r.logs.String(), "sms waits; no attempt counted"))      // logged as a wait
		})
	}
}

// An endpoint that is not there at all — the connection refused — for
// longer than the attempts would last is waited out too, and the message
// goes when it is back at the same address.
func TestAnEndpointThatIsNotThereIsWaitedOut(t *testing.T) {
	is := is.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	is.NoErr(err)
	addr := ln.Addr().String()
	is.NoErr(ln.Close()) // nothing listens: every connection is refused
	ep := &endpoint{}
	r := newRig(t, ep, 2)
	sender, err := sms.NewHTTPSender(delivery.HTTPConfig{URL: "http://" + addr + "/sms"}, nil)
	is.NoErr(err)
	reg := prometheus.NewRegistry()
	d := r.newDrainer(t, r.store, sender, 2, reg)
	id := r.queue(t, "MAKE SAFE")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(20 * time.Second)
	for metric(t, reg, "primeflow_sms_send_waits_total", "") < 8 {
		m, err := r.store.GetSMS(context.Background(), id)
		is.NoErr(err)
		if m.State == store.SendFailed {
			t.Fatalf("the SMS is Failed after %d attempts while its endpoint was down: %s", m.Attempts, m.LastError)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v waits after 20s, want 8", metric(t, reg, "primeflow_sms_send_waits_total", ""))
		}
		time.Sleep(10 * time.Millisecond)
	}
	m, err := r.store.GetSMS(context.Background(), id)
	is.NoErr(err)
	is.True(m.State != store.SendFailed)                         // eight waits, four times its attempts, and not Failed
	is.True(m.Attempts <= 1)                                     // none used (one while a claim is out)
	is.True(strings.Contains(m.LastError, "connection refused")) // saying why it waits

	back, err := net.Listen("tcp", addr) // the endpoint comes back where it was
	if err != nil {
		t.Fatalf("the endpoint's port was taken while it was down: %v", err)
	}
	srv := &http.Server{Handler: ep}
	go srv.Serve(back)
	t.Cleanup(func() { srv.Close() })
	m = r.waitState(t, id, store.SendSent)
	is.Equal(m.Attempts, 1)                                               // sent on its first attempt
	is.Equal(ep.accepted(id), 1)                                          // once
	is.Equal(metric(t, reg, "primeflow_sms_send_retries_total", ""), 0.0) // no failed attempt
}

// A post that went out and got no answer may have been acted on: it counts
// an attempt, so an endpoint that takes posts and never answers (and may be
// sending each) sends the on-call at most SMS_MAX_ATTEMPTS copies, and the
// message is Failed, visibly, after the last.
func TestAPostWithNoAnswerCountsAnAttempt(t *testing.T) {
	is := is.New(t)
	ep := &endpoint{hold: make(chan struct{})}
	r := newRig(t, ep, 2)
	sender, err := sms.NewHTTPSender(delivery.HTTPConfig{URL: mustServer(t, ep), Timeout: 100 * time.Millisecond}, nil)
	is.NoErr(err)
	t.Cleanup(func() { close(ep.hold) }) // before the server closes
	reg := prometheus.NewRegistry()
	r.drainer = r.newDrainer(t, r.store, sender, 2, reg)
	id := r.queue(t, "MAKE SAFE")
	r.run(t)
	m := r.waitState(t, id, store.SendFailed)
	is.Equal(m.Attempts, 2)                                                            // both attempts counted
	is.True(strings.Contains(m.LastError, "the request was sent, and no answer came")) // saying why
	is.Equal(metric(t, reg, "primeflow_sms_send_retries_total", ""), 1.0)              // one retry
	is.Equal(metric(t, reg, "primeflow_sms_send_waits_total", ""), 0.0)                // no wait
}

// A Retry-After holds the wait back as long as it asks, up to an hour.
func TestAWaitHonoursRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		header string
		want   time.Duration
	}{
		{"120", 2 * time.Minute},
		{"86400", time.Hour}, // at most an hour
	} {
		t.Run(tc.header, func(t *testing.T) {
			is := is.New(t)
			r := newRig(t, &endpoint{}, 5)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Retry-After", tc.header)
				w.WriteHeader(http.StatusTooManyRequests)
			}))
			t.Cleanup(srv.Close)
			sender, err := sms.NewHTTPSender(delivery.HTTPConfig{URL: srv.URL}, nil)
			is.NoErr(err)
			id := r.queue(t, "MAKE SAFE")
			is.NoErr(r.newDrainer(t, r.store, sender, 5, prometheus.NewRegistry()).Drain(context.Background()))
			m, err := r.store.GetSMS(context.Background(), id)
			is.NoErr(err)
			is.Equal(m.Attempts, 0) // a wait
			wait := m.NextAttemptUTC.Sub(m.UpdatedUTC)
			is.True(wait >= tc.want && wait < tc.want+time.Second) // as long as it asked, within the cap
		})
	}
}

func TestARefusalIsNotRetried(t *testing.T) {
	is := is.New(t)
	r := newRig(t, &endpoint{statuses: []int{http.StatusUnprocessableEntity}}, 5)
	id := r.queue(t, "x")
	is.NoErr(r.drainer.Drain(context.Background()))
	m, err := r.store.GetSMS(context.Background(), id)
	is.NoErr(err)
	is.Equal(m.State, store.SendFailed) // refused for good
	is.Equal(m.Attempts, 1)             // after one attempt
	is.Equal(len(r.ep.got()), 1)        // one post
}

// Two drainers on one queue (two makesafe processes) send each message once.
func TestTwoDrainersSendEachMessageOnce(t *testing.T) {
	is := is.New(t)
	r := newRig(t, &endpoint{}, 5)
	ids := make([]int64, 30)
	for i := range ids {
		ids[i] = r.queue(t, "m")
	}
	sender, err := sms.NewHTTPSender(delivery.HTTPConfig{URL: mustServer(t, r.ep)}, nil)
	is.NoErr(err)
	other, err := sms.NewDrainer(delivery.Config{MaxAttempts: 5, Backoff: []time.Duration{time.Millisecond},
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

// A shutdown (a deploy's SIGTERM) while the make-safe SMS is being posted
// lets the post finish and records it: cut short, the post would count as a
// failure, on its last attempt Failed for good, though the endpoint may
// have acted on it.
func TestAShutdownLetsThePostInFlightFinish(t *testing.T) {
	is := is.New(t)
	ep := &endpoint{arrived: make(chan int64, 1), hold: make(chan struct{})}
	r := newRig(t, ep, 1)
	answer := sync.OnceFunc(func() { close(ep.hold) })
	t.Cleanup(answer)
	id := r.queue(t, "MAKE SAFE")
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); r.drainer.Run(ctx) }()
	select {
	case got := <-ep.arrived:
		is.Equal(got, id) // the post reached the endpoint
	case <-time.After(10 * time.Second):
		is.Fail() // nothing was posted
	}

	cancel()
	select {
	case <-stopped:
		is.Fail() // Run returned with its post unanswered
	case <-time.After(200 * time.Millisecond):
	}
	answer()
	<-stopped
	m, err := r.store.GetSMS(context.Background(), id)
	is.NoErr(err)
	is.Equal(m.State, store.SendSent)                                 // recorded sent
	is.Equal(m.Attempts, 1)                                           // on its one attempt
	is.Equal(m.LastError, "")                                         // with no failure
	is.Equal(r.ep.accepted(id), 1)                                    // the endpoint answered the post
	is.Equal(metric(t, r.reg, "primeflow_sms_sent_total", ""), 1.0)   // counted sent
	is.Equal(metric(t, r.reg, "primeflow_sms_failed_total", ""), 0.0) // not failed
}

// claimHook is a queue whose ClaimSMS calls claimed once its claim is made.
type claimHook struct {
	*sqlite.Store
	claimed func()
}

func (q claimHook) ClaimSMS(ctx context.Context, now time.Time, lease time.Duration, maxAttempts, limit int) ([]store.SMSMessage, error) {
	msgs, err := q.Store.ClaimSMS(ctx, now, lease, maxAttempts, limit)
	q.claimed()
	return msgs, err
}

// A shutdown between a claim and its post gives the claim back: nothing is
// posted and no attempt is used, so the message goes at the next start on
// the attempt it had, not after its lease on one fewer.
func TestAShutdownBeforeThePostGivesTheClaimBack(t *testing.T) {
	is := is.New(t)
	r := newRig(t, &endpoint{}, 1)
	id := r.queue(t, "MAKE SAFE")
	ctx, cancel := context.WithCancel(context.Background())
	stopping := r.newDrainer(t, claimHook{Store: r.store, claimed: cancel}, r.sender, 1, prometheus.NewRegistry())
	is.NoErr(stopping.Drain(ctx))
	is.Equal(len(r.ep.got()), 0) // nothing posted
	m, err := r.store.GetSMS(context.Background(), id)
	is.NoErr(err)
	is.Equal(m.State, store.SendQueued) // queued again
	is.Equal(m.Attempts, 0)             // its attempt not used
	is.Equal(m.LastError, "")           // and no failure recorded
	is.True(m.ClaimedUntilUTC.IsZero()) // no claim left to lapse

	is.NoErr(r.drainer.Drain(context.Background())) // the next start
	m, err = r.store.GetSMS(context.Background(), id)
	is.NoErr(err)
	is.Equal(m.State, store.SendSent) // sends it
	is.Equal(m.Attempts, 1)           // on its one attempt
	is.Equal(r.ep.accepted(id), 1)    // once
}

// Without SMS_SEND_URL (make run) messages are logged, and in a dry run
// (SEND_DRY_RUN) recorded; either way the drainer says so and records them
// Logged: not "sms sent", nor Sent, nor counted sent.
func TestMessagesNotSentAreLoggedNotSent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sender func(*rig) sms.Sender
		says   string
	}{
		{"no SMS_SEND_URL", func(r *rig) sms.Sender { return sms.LogSender{Log: slog.New(slog.NewTextHandler(r.logs, nil))} },
			"sms logged (not sent: no SMS_SEND_URL)"},
		{"SEND_DRY_RUN", func(r *rig) sms.Sender {
			sink, err := dryrun.OpenSink[sms.Message](dryrun.Config{Send: true, Dir: t.TempDir()}, "sms", slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			return sink
		}, "sms logged (not sent: SEND_DRY_RUN, recorded in "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			r := newRig(t, &endpoint{}, 5)
			reg := prometheus.NewRegistry()
			d := r.newDrainer(t, r.store, tc.sender(r), 5, reg)
			id := r.queue(t, "MAKE SAFE")
			is.NoErr(d.Drain(context.Background()))
			m, err := r.store.GetSMS(context.Background(), id)
			is.NoErr(err)
			is.Equal(m.State, store.SendLogged)                                     // done with, never handed over again, and never Sent
			is.True(r.logs.waitFor(tc.says))                                        // the drainer says it was logged, and why
			is.True(!strings.Contains(r.logs.String(), "sms sent"))                 // not sent
			is.Equal(metric(t, reg, "primeflow_sms_logged_total", ""), 1.0)         // counted logged
			is.Equal(metric(t, reg, "primeflow_sms_sent_total", ""), 0.0)           // not sent
			is.Equal(metric(t, reg, "primeflow_sms_queue_messages", "Logged"), 1.0) // the queue tells it from a sent one
			is.Equal(metric(t, reg, "primeflow_sms_queue_messages", "Sent"), 0.0)
			is.Equal(len(r.ep.got()), 0) // and nothing was posted
		})
	}
}

func mustServer(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestDrainerConfigIsChecked(t *testing.T) {
	ok := delivery.Config{MaxAttempts: 5, Backoff: []time.Duration{time.Second}, Lease: time.Minute, Sweep: time.Minute, Workers: 1}
	for _, tc := range []struct {
		name string
		edit func(*delivery.Config)
	}{
		{"no attempts", func(c *delivery.Config) { c.MaxAttempts = 0 }},
		{"no backoff", func(c *delivery.Config) { c.Backoff = nil }},
		{"a zero backoff", func(c *delivery.Config) { c.Backoff = []time.Duration{0} }},
		{"no lease", func(c *delivery.Config) { c.Lease = 0 }},
		{"no workers", func(c *delivery.Config) { c.Workers = 0 }},
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
