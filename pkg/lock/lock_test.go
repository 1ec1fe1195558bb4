package lock_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/lock"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/matryer/is"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A waiter takes the lock as soon as the holder releases it, woken by its
// watch: while it waited it made no attempt of its own, though the holder
// renewed the lock several times under its eyes.
func TestWaiterTakesOnRelease(t *testing.T) {
	is := is.New(t)
	ctx := testContext(t)
	srv := natstest.Server(t)
	obs := observe(t, srv, lock.KeyOptimoPlan)
	a, _, _ := newLocker(t, srv, lock.Config{TTL: 2 * time.Second, Wait: time.Minute, Renew: 200 * time.Millisecond})
	b, _, bLog := newLocker(t, srv, lock.Config{TTL: 2 * time.Second, Wait: time.Minute})

	la, err := a.Take(ctx, lock.KeyOptimoPlan)
	is.NoErr(err) // a takes the free lock
	taken := make(chan takeResult, 1)
	go func() {
		lk, err := b.Take(ctx, lock.KeyOptimoPlan)
		taken <- takeResult{lk, err}
	}()
	bLog.waitFor(t, "waiting for lock")
	// Each drain holds every message routed before it, so what comes after
	// this one was published while b waited.
	early := obs.drain(t)
	var during []*nats.Msg
	waitFor(t, "a to renew three times while b waits", func() bool {
		during = append(during, obs.drain(t)...)
		return len(during) >= 3
	})
	select {
	case r := <-taken:
		t.Fatalf("b returned while a held the lock: %v", r.err)
	default:
	}
	is.NoErr(la.Release(ctx)) // a releases

	var r takeResult
	select {
	case r = <-taken:
	case <-ctx.Done():
		t.Fatal("b never took the lock")
	}
	is.NoErr(r.err) // b took the lock after the release
	defer r.lock.Release(ctx)

	var bEarly int
	for _, m := range early {
		if holderOf(m) == r.lock.Holder().ID {
			bEarly++
		}
	}
	is.Equal(bEarly, 1) // b tried once before it started waiting
	for _, m := range during {
		is.Equal(holderOf(m), la.Holder().ID)      // and not at all while it waited
		is.Equal(m.Header.Get("KV-Operation"), "") // while a renewed the lock under its watch
	}
	e, err := kvOf(t, srv).Get(ctx, lock.KeyOptimoPlan)
	is.NoErr(err)
	is.Equal(decode(t, e.Value()).ID, r.lock.Holder().ID) // the bucket names b as the holder
	is.Equal(e.Revision(), r.lock.Revision())             // at the revision b holds
}

// A waiter that gives up returns ErrBusy naming the holder and leaves the
// lock exactly as it was: same revision, same value, and the holder can
// still release it (§8.3, §10.10).
func TestGiveUpLeavesLockIntact(t *testing.T) {
	is := is.New(t)
	ctx := testContext(t)
	srv := natstest.Server(t)
	obs := observe(t, srv, lock.KeyOptimoCreate)
	a, _, _ := newLocker(t, srv, lock.Config{TTL: time.Minute, Wait: time.Minute})
	b, _, _ := newLocker(t, srv, lock.Config{TTL: time.Minute, Wait: time.Second})

	la, err := a.Take(ctx, lock.KeyOptimoCreate)
	is.NoErr(err)
	rev := la.Revision()
	_, err = b.Take(ctx, lock.KeyOptimoCreate)
	is.True(errors.Is(err, lock.ErrBusy)) // b gives up busy
	var busy *lock.BusyError
	is.True(errors.As(err, &busy))                         // with the details
	is.Equal(busy.Holder.ID, la.Holder().ID)               // naming the holder
	is.True(strings.Contains(err.Error(), la.Holder().ID)) // in its message too
	is.True(busy.Waited >= time.Second)                    // after its whole budget

	e, err := kvOf(t, srv).Get(ctx, lock.KeyOptimoCreate)
	is.NoErr(err)
	is.Equal(e.Revision(), rev)                       // the lock's revision is unchanged
	is.Equal(decode(t, e.Value()).ID, la.Holder().ID) // and it still names a
	for _, m := range obs.drain(t) {
		is.Equal(m.Header.Get("KV-Operation"), "") // nobody deleted or purged the key
	}
	is.NoErr(la.Release(ctx)) // the holder can still release it
}

// A waiter whose context ends returns that error, not ErrBusy.
func TestWaitEndsWithContext(t *testing.T) {
	is := is.New(t)
	ctx := testContext(t)
	srv := natstest.Server(t)
	a, _, _ := newLocker(t, srv, lock.Config{TTL: time.Minute, Wait: time.Minute})
	b, _, bLog := newLocker(t, srv, lock.Config{TTL: time.Minute, Wait: time.Minute})
	la, err := a.Take(ctx, lock.KeyOptimoPlan)
	is.NoErr(err)
	bctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := b.Take(bctx, lock.KeyOptimoPlan)
		errc <- err
	}()
	bLog.waitFor(t, "waiting for lock")
	cancel()
	err = <-errc
	is.True(errors.Is(err, context.Canceled)) // the caller's cancellation
	is.True(!errors.Is(err, lock.ErrBusy))    // is not reported as busy
	is.NoErr(la.Release(ctx))                 // and the holder's lock is intact
}

// A holder that crashes never releases: its lock expires by its TTL, the
// waiter is woken by the expiry and takes it, and the crashed holder's lock
// reports itself lost.
func TestCrashedHolderExpires(t *testing.T) {
	is := is.New(t)
	ctx := testContext(t)
	srv := natstest.Server(t)
	a, aConn, _ := newLocker(t, srv, lock.Config{TTL: time.Second, Wait: time.Minute})
	b, _, bLog := newLocker(t, srv, lock.Config{TTL: time.Second, Wait: time.Minute})

	la, err := a.Take(ctx, lock.KeyOptimoPlan)
	is.NoErr(err)
	taken := make(chan takeResult, 1)
	go func() {
		lk, err := b.Take(ctx, lock.KeyOptimoPlan)
		taken <- takeResult{lk, err}
	}()
	bLog.waitFor(t, "waiting for lock")
	aConn.Close() // a crashes: no release, no renewals

	r := <-taken
	is.NoErr(r.err) // b took the lock once a's expired
	defer r.lock.Release(ctx)
	bLog.waitFor(t, "took lock after waiting")
	waitDone(t, ctx, la)
	is.True(errors.Is(context.Cause(la.Context()), lock.ErrLost)) // a learns it lost the lock
	e, err := kvOf(t, srv).Get(ctx, lock.KeyOptimoPlan)
	is.NoErr(err)
	is.Equal(decode(t, e.Value()).ID, r.lock.Holder().ID) // b holds it
}

// Keep-alive holds a lock over several TTLs without it ever expiring, the key
// keeps a TTL all along, and once keep-alive stops the lock expires.
func TestKeepAliveOutlivesTTL(t *testing.T) {
	is := is.New(t)
	ctx := testContext(t)
	srv := natstest.Server(t)
	kv := kvOf(t, srv)
	cfg := lock.Config{TTL: 2 * time.Second, Wait: time.Minute, Renew: 300 * time.Millisecond}
	a, _, _ := newLocker(t, srv, cfg)
	w, err := kv.Watch(ctx, lock.KeyOptimoCreate)
	is.NoErr(err)
	defer w.Stop()
	is.Equal(next(t, w), nil) // the key starts empty

	hold, stop := context.WithCancel(ctx)
	la, err := a.Take(hold, lock.KeyOptimoCreate)
	is.NoErr(err)
	first := la.Revision()
	var renewals int
	for {
		e := next(t, w)
		is.Equal(e.Operation(), jetstream.KeyValuePut) // only puts: the lock never expired
		h := decode(t, e.Value())
		is.Equal(h.ID, la.Holder().ID) // all of them a's
		renewals++
		if h.RenewedAt.Sub(h.TakenAt) > 3*cfg.TTL {
			break
		}
	}
	is.True(renewals > 3)                                                                             // renewed again and again
	is.NoErr(la.Context().Err())                                                                      // a still holds it
	is.True(la.Revision() > first)                                                                    // at a later revision
	is.Equal(lastMsg(t, jsOf(t, srv), lock.KeyOptimoCreate).Header.Get(jetstream.MsgTTLHeader), "2s") // still with its TTL

	stop() // keep-alive ends without a release
	for {
		e := next(t, w)
		if e.Operation() != jetstream.KeyValuePut {
			is.Equal(e.Operation(), jetstream.KeyValuePurge) // the TTL expired it
			break
		}
	}
	is.True(errors.Is(la.Release(ctx), lock.ErrLost)) // nothing left to release
}

// Release only releases what the holder still holds: after expiry, after
// someone else took the lock, or a second time, it fails and changes nothing.
func TestReleaseWhenNotHeld(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lose    func(t *testing.T, ctx context.Context, h heldLock)
		wantErr error
	}{
		{
			name: "after expiry",
			lose: func(t *testing.T, ctx context.Context, h heldLock) {
				h.stop()
				kv := kvOf(t, h.srv)
				waitFor(t, "the lock to expire", func() bool {
					_, err := kv.Get(ctx, h.lock.Key())
					return errors.Is(err, jetstream.ErrKeyNotFound)
				})
			},
			wantErr: lock.ErrLost,
		},
		{
			name: "taken by someone else",
			lose: func(t *testing.T, ctx context.Context, h heldLock) {
				h.stop()
				lb, err := h.other.Take(ctx, h.lock.Key())
				if err != nil {
					t.Fatalf("b take: %v", err)
				}
				t.Cleanup(func() { lb.Release(context.Background()) })
			},
			wantErr: lock.ErrLost,
		},
		{
			name: "twice",
			lose: func(t *testing.T, ctx context.Context, h heldLock) {
				if err := h.lock.Release(ctx); err != nil {
					t.Fatalf("first release: %v", err)
				}
			},
			wantErr: lock.ErrReleased,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ctx := testContext(t)
			srv := natstest.Server(t)
			jsc := jsOf(t, srv)
			a, _, _ := newLocker(t, srv, lock.Config{TTL: time.Second, Wait: time.Minute})
			b, _, _ := newLocker(t, srv, lock.Config{TTL: time.Minute, Wait: time.Minute})
			hold, stop := context.WithCancel(ctx)
			la, err := a.Take(hold, lock.KeyOptimoPlan)
			is.NoErr(err)
			tc.lose(t, ctx, heldLock{srv: srv, lock: la, stop: stop, other: b})

			before := lastMsg(t, jsc, lock.KeyOptimoPlan)
			err = la.Release(ctx)
			is.True(errors.Is(err, tc.wantErr)) // release fails
			after := lastMsg(t, jsc, lock.KeyOptimoPlan)
			is.Equal(after.Sequence, before.Sequence) // and the key is as it was
			is.Equal(after.Data, before.Data)         // value and all
		})
	}
}

// If someone else writes the key while it is held, the holder's next renewal
// finds out and the lock's context ends with ErrLost naming the new value.
func TestHolderLearnsItWasOverwritten(t *testing.T) {
	is := is.New(t)
	ctx := testContext(t)
	srv := natstest.Server(t)
	a, _, _ := newLocker(t, srv, lock.Config{TTL: 2 * time.Second, Wait: time.Minute, Renew: 100 * time.Millisecond})
	la, err := a.Take(ctx, lock.KeyOptimoPlan)
	is.NoErr(err)
	_, err = kvOf(t, srv).Put(ctx, lock.KeyOptimoPlan, []byte("maintenance"))
	is.NoErr(err)
	waitDone(t, ctx, la)
	cause := context.Cause(la.Context())
	is.True(errors.Is(cause, lock.ErrLost))                 // a knows it lost the lock
	is.True(strings.Contains(cause.Error(), "maintenance")) // and to whom
	is.True(errors.Is(la.Release(ctx), lock.ErrLost))       // its release fails
	e, err := kvOf(t, srv).Get(ctx, lock.KeyOptimoPlan)
	is.NoErr(err)
	is.Equal(string(e.Value()), "maintenance") // and leaves the other value alone
}

// A renewal whose ack never arrived leaves the lock one revision ahead of
// what the holder knows; the holder recognises its own value and carries on.
func TestRenewalRecognisesItsOwnWrite(t *testing.T) {
	is := is.New(t)
	ctx := testContext(t)
	srv := natstest.Server(t)
	jsc := jsOf(t, srv)
	a, _, _ := newLocker(t, srv, lock.Config{TTL: 10 * time.Second, Wait: time.Minute, Renew: 100 * time.Millisecond})
	la, err := a.Take(ctx, lock.KeyOptimoPlan)
	is.NoErr(err)

	// Write a's own value behind its back, as a renewal whose ack was lost would.
	var written uint64
	waitFor(t, "a write behind a's back", func() bool {
		m := lastMsg(t, jsc, lock.KeyOptimoPlan)
		ack, err := jsc.PublishMsg(ctx, &nats.Msg{Subject: m.Subject, Data: m.Data},
			jetstream.WithMsgTTL(10*time.Second), jetstream.WithExpectLastSequencePerSubject(m.Sequence))
		if err != nil {
			return false // a renewed in between: try again
		}
		written = ack.Sequence
		return true
	})
	waitFor(t, "a to renew past the write", func() bool { return la.Revision() > written })
	is.NoErr(la.Context().Err()) // a still holds its lock
	is.NoErr(la.Release(ctx))    // and releases it
}

// Ten takers at once: every one gets the lock in the end, never two at a time.
func TestConcurrentTakers(t *testing.T) {
	is := is.New(t)
	ctx := testContext(t)
	srv := natstest.Server(t)
	kv := kvOf(t, srv)
	const n = 10
	var (
		mu           sync.Mutex
		inside, most int
		took         int
	)
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for range n {
		l, _, _ := newLocker(t, srv, lock.Config{TTL: 5 * time.Second, Wait: time.Minute})
		wg.Go(func() {
			lk, err := l.Take(ctx, lock.KeyOptimoCreate)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			inside++
			most = max(most, inside)
			took++
			mu.Unlock()
			// Some work under the lock, giving the others a chance to barge in.
			if _, err := kv.Get(lk.Context(), lock.KeyOptimoCreate); err != nil {
				errs <- err
			}
			mu.Lock()
			inside--
			mu.Unlock()
			if err := lk.Release(ctx); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		is.NoErr(err) // every take, read and release succeeded
	}
	is.Equal(took, n) // every taker got the lock
	is.Equal(most, 1) // one at a time
}

// The lock's value says who holds it, readable with `nats kv get`.
func TestHolderIsReadable(t *testing.T) {
	is := is.New(t)
	ctx := testContext(t)
	srv := natstest.Server(t)
	a, _, _ := newLocker(t, srv, lock.Config{TTL: time.Minute, Wait: time.Minute})
	la, err := a.Take(ctx, lock.KeyOptimoPlan)
	is.NoErr(err)
	defer la.Release(ctx)
	host, err := os.Hostname()
	is.NoErr(err)

	e, err := kvOf(t, srv).Get(ctx, lock.KeyOptimoPlan)
	is.NoErr(err)
	h := decode(t, e.Value())
	is.Equal(h, la.Holder())     // the stored holder is the lock's
	is.True(len(h.ID) >= 16)     // a random id
	is.Equal(h.Host, host)       // this host
	is.Equal(h.PID, os.Getpid()) // this process
	is.True(!h.TakenAt.IsZero()) // and when

	cli := os.Getenv("NATS_CLI")
	if cli == "" {
		t.Log("NATS_CLI is not set: the nats kv get check did not run (make test sets it)")
		return
	}
	out, err := exec.Command(cli, "--server", srv.ClientURL(), "kv", "get", events.BucketLocks, lock.KeyOptimoPlan, "--raw").CombinedOutput()
	is.NoErr(err)                     // nats kv get reads the lock
	is.Equal(decode(t, out).ID, h.ID) // and shows its holder
}

func TestConfig(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		is := is.New(t)
		var cfg lock.Config
		is.NoErr(config.Parse(func(string) string { return "" }, &cfg))
		is.Equal(cfg, lock.Config{TTL: 12 * time.Minute, Wait: 6 * time.Minute}) // §8.1 12-minute TTL, §8.3 6-minute wait
	})
	srv := natstest.Server(t)
	for _, tc := range []struct {
		name string
		env  map[string]string
		ok   bool
	}{
		{"overrides", map[string]string{"LOCK_TTL": "30s", "LOCK_WAIT": "1m", "LOCK_RENEW": "5s"}, true},
		{"fractional TTL", map[string]string{"LOCK_TTL": "1500ms"}, false},
		{"TTL under a second", map[string]string{"LOCK_TTL": "500ms"}, false},
		{"no wait", map[string]string{"LOCK_WAIT": "0s"}, false},
		{"renew not under TTL", map[string]string{"LOCK_TTL": "10s", "LOCK_RENEW": "10s"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			var cfg lock.Config
			is.NoErr(config.Parse(func(k string) string { return tc.env[k] }, &cfg))
			_, err := lock.New(testContext(t), jsOf(t, srv), cfg, discard())
			is.Equal(err == nil, tc.ok) // New accepts only valid settings
		})
	}
	t.Run("the error names the service's variable", func(t *testing.T) {
		is := is.New(t)
		cfg := lock.Config{TTL: 1500 * time.Millisecond, Wait: time.Minute}.Named("OPTIMO_PLAN_")
		_, err := lock.New(testContext(t), jsOf(t, srv), cfg, discard())
		is.True(err != nil)
		is.True(strings.Contains(err.Error(), "OPTIMO_PLAN_LOCK_TTL: must be a whole number of seconds")) // what to fix, under the service's prefix
	})
}

// New refuses a locks bucket on which lock expiry would go unseen or be
// stretched, and accepts the one in streams/.
func TestNewChecksBucket(t *testing.T) {
	cfg := lock.Config{TTL: 12 * time.Minute, Wait: 6 * time.Minute}
	for _, tc := range []struct {
		name   string
		stream *jetstream.StreamConfig // nil: streams/KV_locks.json
		ok     bool
	}{
		{"streams/KV_locks.json", nil, true},
		{"no TTLs", &jetstream.StreamConfig{MaxMsgsPerSubject: 1}, false},
		{"no markers", &jetstream.StreamConfig{MaxMsgsPerSubject: 1, AllowMsgTTL: true}, false},
		{"history stretches the TTL", &jetstream.StreamConfig{MaxMsgsPerSubject: 5, AllowMsgTTL: true, SubjectDeleteMarkerTTL: 15 * time.Minute}, false},
		{"history with short markers", &jetstream.StreamConfig{MaxMsgsPerSubject: 5, AllowMsgTTL: true, SubjectDeleteMarkerTTL: time.Minute}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ctx := testContext(t)
			srv := natstest.EmptyServer(t) // the bucket as the case makes it
			var jsc jetstream.JetStream
			if tc.stream == nil {
				_, jsc = natstest.Connect(t, srv)
			} else {
				jsc = rawJS(t, srv)
				sc := *tc.stream
				sc.Name, sc.Subjects = "KV_"+events.BucketLocks, []string{"$KV." + events.BucketLocks + ".>"}
				sc.AllowRollup = true
				_, err := jsc.CreateStream(ctx, sc)
				is.NoErr(err)
			}
			_, err := lock.New(ctx, jsc, cfg, discard())
			is.Equal(err == nil, tc.ok) // New judges the bucket
		})
	}
}

type takeResult struct {
	lock *lock.Lock
	err  error
}

// heldLock is what a test has at hand to make a holder lose its lock.
type heldLock struct {
	srv   *server.Server
	lock  *lock.Lock
	stop  func() // ends the holder's context, and with it the keep-alive
	other *lock.Locker
}

// newLocker connects to srv on its own connection, as a separate process would.
func newLocker(t *testing.T, srv *server.Server, cfg lock.Config) (*lock.Locker, *nats.Conn, *logRecorder) {
	t.Helper()
	nc, jsc := natstest.Connect(t, srv)
	rec := &logRecorder{msgs: make(chan string, 1000)}
	l, err := lock.New(testContext(t), jsc, cfg, slog.New(rec))
	if err != nil {
		t.Fatalf("lock.New: %v", err)
	}
	return l, nc, rec
}

func jsOf(t *testing.T, srv *server.Server) jetstream.JetStream {
	t.Helper()
	_, jsc := natstest.Connect(t, srv)
	return jsc
}

// rawJS connects without applying streams/.
func rawJS(t *testing.T, srv *server.Server) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	jsc, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return jsc
}

func kvOf(t *testing.T, srv *server.Server) jetstream.KeyValue {
	t.Helper()
	kv, err := jsOf(t, srv).KeyValue(testContext(t), events.BucketLocks)
	if err != nil {
		t.Fatalf("locks bucket: %v", err)
	}
	return kv
}

// waitDone waits for the lock's context to end.
func waitDone(t *testing.T, ctx context.Context, lk *lock.Lock) {
	t.Helper()
	select {
	case <-lk.Context().Done():
	case <-ctx.Done():
		t.Fatal("the lock's context never ended")
	}
}

func decode(t *testing.T, value []byte) lock.Holder {
	t.Helper()
	var h lock.Holder
	if err := json.Unmarshal(value, &h); err != nil {
		t.Fatalf("lock value %q: %v", value, err)
	}
	return h
}

func holderOf(m *nats.Msg) string {
	var h lock.Holder
	if json.Unmarshal(m.Data, &h) != nil {
		return ""
	}
	return h.ID
}

// subjectLog records every message published on a key's subject, including
// attempts JetStream refuses.
type subjectLog struct {
	nc *nats.Conn
	ch chan *nats.Msg
}

func observe(t *testing.T, srv *server.Server, key string) *subjectLog {
	t.Helper()
	nc, _ := natstest.Connect(t, srv)
	s := &subjectLog{nc: nc, ch: make(chan *nats.Msg, 10000)}
	if _, err := nc.ChanSubscribe("$KV."+events.BucketLocks+"."+key, s.ch); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	return s
}

// drain returns what arrived so far. The flush round trip makes sure every
// message the server routed before it is in.
func (s *subjectLog) drain(t *testing.T) []*nats.Msg {
	t.Helper()
	if err := s.nc.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	var msgs []*nats.Msg
	for {
		select {
		case m := <-s.ch:
			msgs = append(msgs, m)
		default:
			return msgs
		}
	}
}

// logRecorder is a slog handler that lets a test wait for a log line.
type logRecorder struct{ msgs chan string }

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	select {
	case r.msgs <- rec.Message:
	default:
	}
	return nil
}
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

func (r *logRecorder) waitFor(t *testing.T, msg string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case m := <-r.msgs:
			if m == msg {
				return
			}
		case <-timeout:
			t.Fatalf("no %q logged within 30s", msg)
		}
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestAnAnswerReflectedOntoTheKeyMakesNoSecondHolder is the review's
// attack on the locks (issue 27): a user that may publish to any stream
// (the portals', on optimo.plan.requested) set a lock's key as its
// publish's reply subject, which nats-server checks against no permission,
// and JetStream stored its pub-ack there. A value no taker wrote is someone
// else's hold: the holder learns at its next renewal that it lost the lock,
// and no one else takes it over the value.
func TestAnAnswerReflectedOntoTheKeyMakesNoSecondHolder(t *testing.T) {
	is := is.New(t)
	ctx := testContext(t)
	srv := natstest.Server(t)
	cfg := lock.Config{TTL: 2 * time.Second, Wait: time.Second, Renew: 100 * time.Millisecond}
	a, nc, _ := newLocker(t, srv, cfg)
	b, _, _ := newLocker(t, srv, cfg)
	la, err := a.Take(ctx, lock.KeyOptimoPlan)
	is.NoErr(err)
	is.NoErr(nc.PublishMsg(&nats.Msg{Subject: events.SubjectOptimoPlan, Reply: "$KV." + events.BucketLocks + "." + lock.KeyOptimoPlan, Data: []byte(`{}`)}))
	waitDone(t, ctx, la)
	is.True(errors.Is(context.Cause(la.Context()), lock.ErrLost)) // a knows it lost the lock
	_, err = b.Take(ctx, lock.KeyOptimoPlan)
	is.True(errors.Is(err, lock.ErrBusy)) // and b does not take it over the pub-ack
	var busy *lock.BusyError
	is.True(errors.As(err, &busy) && strings.Contains(busy.Holder.String(), `"stream"`)) // saying what holds it
}
