// Package groupcommit wraps a store so that transactions which arrive while
// another is committing run together in the next database transaction: many
// callers share one durable commit (one sync) instead of paying one each.
// SQLite has a single writer and syncs every commit, so this is what lets the
// services keep up under load; the all-in-one process wraps its one store
// once, so every service's transactions share commits.
//
// Each transaction still commits whole or not at all: when one of a group
// fails, the group is rolled back and each of its transactions runs again on
// its own, so only the failing one fails. A transaction's function may
// therefore run twice; it must keep nothing from a rolled-back run (assign
// results, do not append them) and have no effect outside the transaction.
package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/ethosbuilding/primeflow/pkg/metrics"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/prometheus/client_golang/prometheus"
)

// MaxGroup bounds how many transactions commit together.
const MaxGroup = 256

// ErrClosed: the store was closed.
var ErrClosed = errors.New("groupcommit: store closed")

// Store is a store.Store whose InTx groups concurrent transactions.
type Store struct {
	store.Store
	reqs    chan *txRequest
	stop    context.CancelFunc
	stopped chan struct{}
	once    sync.Once
	observe func(group int)
}

type txRequest struct {
	ctx  context.Context
	fn   func(store.Store) error
	done chan error
}

// New wraps s and starts its committer; Close stops it and closes s.
// observe, when not nil, is told the size of every group committed (see
// GroupSizes).
func New(s store.Store, observe func(group int)) *Store {
	ctx, stop := context.WithCancel(context.Background())
	// The queue is buffered: handing a transaction over does not wake the
	// caller a second time (it waits for its answer only), which under load
	// was a scheduler round trip a transaction.
	g := &Store{Store: s, reqs: make(chan *txRequest, MaxGroup), stop: stop, stopped: make(chan struct{}), observe: observe}
	go g.run(ctx)
	return g
}

// InTx runs fn in a transaction shared with the others that arrive with it.
func (g *Store) InTx(ctx context.Context, fn func(store.Store) error) error {
	r := &txRequest{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case g.reqs <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-g.stopped:
		return ErrClosed
	}
	select {
	case err := <-r.done:
		return err
	case <-g.stopped:
		// The committer answers a group before it stops: no answer by now
		// means the transaction was still queued and never ran.
		select {
		case err := <-r.done:
			return err
		default:
			return ErrClosed
		}
	}
}

// Close stops the committer, after the group in hand, and closes the store;
// transactions still queued then fail with ErrClosed, without running.
func (g *Store) Close() error {
	g.once.Do(func() {
		g.stop()
		<-g.stopped
	})
	return g.Store.Close()
}

// GroupSizes is a histogram of the transactions that shared a commit, for
// New's observe; it is registered with reg.
func GroupSizes(reg prometheus.Registerer) (func(group int), error) {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "primeflow_store_commit_group_size",
		Help:    "Transactions that shared one database commit (group commit).",
		Buckets: prometheus.ExponentialBuckets(1, 2, 9),
	})
	if err := metrics.Register(reg, &h); err != nil {
		return nil, fmt.Errorf("groupcommit metrics: %w", err)
	}
	return func(n int) { h.Observe(float64(n)) }, nil
}

func (g *Store) run(ctx context.Context) {
	defer close(g.stopped)
	group := make([]*txRequest, 0, MaxGroup)
	for {
		if ctx.Err() != nil { // stopping wins over a queue that is never empty
			return
		}
		select {
		case <-ctx.Done():
			return
		case r := <-g.reqs:
			group = append(group[:0], r)
		}
	more:
		for len(group) < MaxGroup {
			select {
			case r := <-g.reqs:
				group = append(group, r)
			default:
				break more
			}
		}
		if g.observe != nil {
			g.observe(len(group))
		}
		g.commit(group)
		// The callers just answered wait on this goroutine's processor,
		// which would otherwise go straight on to the next group (the
		// queue is seldom empty under load) and hold them there through
		// its inserts and the commit's syscalls: let them run first.
		runtime.Gosched()
	}
}

func (g *Store) commit(group []*txRequest) {
	if len(group) == 1 {
		group[0].done <- g.Store.InTx(group[0].ctx, group[0].fn)
		return
	}
	// The shared transaction belongs to no one caller: a caller whose
	// context ends fails its own statements, not the others' commit.
	err := g.Store.InTx(context.Background(), func(tx store.Store) error {
		for _, r := range group {
			if err := r.fn(tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		for _, r := range group {
			r.done <- nil
		}
		return
	}
	for _, r := range group {
		r.done <- g.Store.InTx(r.ctx, r.fn)
	}
}
