package lock_test

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/lock"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// clusterLocker is a Locker on a 3-node cluster whose locks bucket has
// three replicas, the bucket, and what the Locker logs.
func clusterLocker(t *testing.T, cfg lock.Config) (*lock.Locker, jetstream.KeyValue, *natstest.Cluster, *logRecorder) {
	t.Helper()
	c := natstest.NewCluster(t, 3)
	_, js := c.Connect(t)
	rec := &logRecorder{msgs: make(chan string, 1000)}
	l, err := lock.New(testContext(t), js, cfg, slog.New(rec))
	if err != nil {
		t.Fatalf("lock.New: %v", err)
	}
	kv, err := js.KeyValue(testContext(t), events.BucketLocks)
	if err != nil {
		t.Fatal(err)
	}
	return l, kv, c, rec
}

// TestReleaseRidesOutALostQuorum: the cluster loses its quorum just before
// the holder releases the lock, as it does while a killed leader's
// followers elect another. The purge is tried again until the cluster
// answers, so the lock is free at once; a release that gave up on the
// first "no response from stream" left the lock held until its TTL, and
// the next run waiting for it (6 minutes, then giving up).
func TestReleaseRidesOutALostQuorum(t *testing.T) {
	is := is.New(t)
	ctx := testContext(t)
	l, kv, c, rec := clusterLocker(t, lock.Config{TTL: 10 * time.Minute, Wait: time.Second})
	lk, err := l.Take(ctx, lock.KeyOptimoCreate)
	is.NoErr(err) // taken
	c.Stop(1)
	c.Stop(2)
	released := make(chan error, 1)
	go func() { released <- lk.Release(ctx) }()
	rec.waitFor(t, "releasing the lock failed; trying again") // no answer, and not given up
	c.Restart(1)

	is.NoErr(<-released) // released once the cluster answers
	_, err = kv.Get(ctx, lock.KeyOptimoCreate)
	is.True(errors.Is(err, jetstream.ErrKeyNotFound)) // the lock is free now, not in 10 minutes
}

// TestTakeRidesOutALostQuorum: the cluster loses its quorum just before a
// run takes the lock. The take is tried again until the cluster answers,
// instead of failing the run, whose request was acked and would wait for
// the next schedule (30 minutes for optimo-plan).
func TestTakeRidesOutALostQuorum(t *testing.T) {
	is := is.New(t)
	ctx := testContext(t)
	l, kv, c, rec := clusterLocker(t, lock.Config{TTL: 10 * time.Minute, Wait: time.Second})
	c.Stop(1)
	c.Stop(2)
	type taken struct {
		lk  *lock.Lock
		err error
	}
	got := make(chan taken, 1)
	go func() {
		lk, err := l.Take(ctx, lock.KeyOptimoPlan)
		got <- taken{lk, err}
	}()
	rec.waitFor(t, "taking the lock failed; trying again") // no answer, and not given up
	c.Restart(1)

	res := <-got
	is.NoErr(res.err) // taken once the cluster answers
	e, err := kv.Get(ctx, lock.KeyOptimoPlan)
	is.NoErr(err)
	is.Equal(e.Revision(), res.lk.Revision()) // the lock it holds is the one in the bucket
	is.NoErr(res.lk.Release(ctx))
}

// TestTakeAdoptsItsOwnLockWhoseAnswerWasLost: the answer to the create is
// held back until the client has given up on it, though the server stored
// the lock. Taking again finds the key under its own holder and holds it,
// instead of waiting for itself until it gives up; the same for a release
// whose purge was stored and not answered.
func TestTakeAdoptsItsOwnLockWhoseAnswerWasLost(t *testing.T) {
	is := is.New(t)
	ctx := testContext(t)
	srv := natstest.Server(t)
	p := newPausingProxy(t, srv.Addr().String())
	nc, err := nats.Connect("nats://"+p.addr, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	is.NoErr(err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(time.Second))
	is.NoErr(err)
	_, err = events.Apply(ctx, js, 0)
	is.NoErr(err)
	rec := &logRecorder{msgs: make(chan string, 1000)}
	l, err := lock.New(ctx, js, lock.Config{TTL: 10 * time.Minute, Wait: 3 * time.Second}, slog.New(rec))
	is.NoErr(err)
	kv := kvOf(t, srv)

	p.holdAnswers(1500 * time.Millisecond) // past the client's 1s: the create goes unanswered
	lk, err := l.Take(ctx, lock.KeyOptimoPlan)
	is.NoErr(err) // taken: its own create, found on the retry
	e, err := kv.Get(ctx, lock.KeyOptimoPlan)
	is.NoErr(err)
	is.Equal(e.Revision(), lk.Revision()) // the lock in the bucket, no second one

	p.holdAnswers(1500 * time.Millisecond) // the purge goes unanswered too
	is.NoErr(lk.Release(ctx))              // and is recognised as done
	_, err = kv.Get(ctx, lock.KeyOptimoPlan)
	is.True(errors.Is(err, jetstream.ErrKeyNotFound)) // the lock is free
}

// pausingProxy forwards a NATS connection, and can hold back what the
// server sends for a while: an answer that arrives after the client gave
// up on it.
type pausingProxy struct {
	addr string
	mu   sync.Mutex
	held time.Time // server-to-client bytes wait until then
}

func newPausingProxy(t *testing.T, target string) *pausingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &pausingProxy{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			t.Cleanup(func() { c.Close(); s.Close() })
			go io.Copy(s, c)
			go p.copyHeld(c, s)
		}
	}()
	return p
}

// holdAnswers holds back the server's bytes for d from the next ones.
func (p *pausingProxy) holdAnswers(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = time.Now().Add(d)
}

func (p *pausingProxy) copyHeld(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			until := p.held
			p.mu.Unlock()
			time.Sleep(time.Until(until))
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestNewRidesOutALostQuorum: optimo-create and optimo-plan bind the locks
// bucket at start. While the cluster has no quorum the bind is tried again,
// instead of the process exiting on "lock bucket locks: context deadline
// exceeded".
func TestNewRidesOutALostQuorum(t *testing.T) {
	is := is.New(t)
	ctx := testContext(t)
	c := natstest.NewCluster(t, 3)
	_, js := c.Connect(t)
	keep := c.Follower(js, events.StreamLocks) // the one left cannot answer for the bucket
	// The stream's leader is stopped last: stopped first, it would leave
	// the two others to elect a leader, which could be the one kept, and
	// that one would then answer for the bucket alone (one run in three
	// under the race detector, whose slower stops let the election finish).
	leader := c.StreamLeader(js, events.StreamLocks)
	var stopped []int
	third := 3 - keep - leader // nodes 0, 1 and 2: the one that is neither
	for _, i := range []int{third, leader} {
		c.Stop(i)
		stopped = append(stopped, i)
	}
	rec := &logRecorder{msgs: make(chan string, 1000)}
	type bound struct {
		l   *lock.Locker
		err error
	}
	got := make(chan bound, 1)
	go func() {
		// A connection made now, as a process starting would.
		nc, err := nats.Connect(c.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
		if err != nil {
			got <- bound{nil, err}
			return
		}
		t.Cleanup(nc.Close)
		fresh, err := jetstream.New(nc)
		if err != nil {
			got <- bound{nil, err}
			return
		}
		l, err := lock.New(ctx, fresh, lock.Config{TTL: time.Minute, Wait: time.Second}, slog.New(rec))
		got <- bound{l, err}
	}()
	rec.waitFor(t, "lock bucket not reachable; trying again") // no answer, and not given up
	c.Restart(stopped[0])

	res := <-got
	is.NoErr(res.err) // bound once the cluster answers
	lk, err := res.l.Take(ctx, lock.KeyOptimoCreate)
	is.NoErr(err) // and it works
	is.NoErr(lk.Release(ctx))
}
