package jobmirror

import (
	"context"
	"errors"

	"github.com/ethosbuilding/primeflow/pkg/store"
)

// maxGroup bounds how many transactions commit together.
const maxGroup = 64

// errStopped: the group committer has stopped (the service is shutting down).
var errStopped = errors.New("job-mirror: store committer stopped")

// groupCommit is the store with one change: transactions that arrive while
// another is committing are run together in the next database transaction,
// so many events share one durable commit (one fsync) instead of paying one
// each. The store's commit is what limits how fast events drain (bench_test.go).
//
// Each transaction still commits whole or not at all: when one of a group
// fails, the group is rolled back and each of its transactions runs again
// on its own, so only the failing one fails. A transaction's function may
// therefore run twice; the stage's writes are idempotent by design (§10.4)
// and keep nothing from a rolled-back run.
type groupCommit struct {
	store.Store
	reqs    chan *txRequest
	stopped chan struct{}
}

type txRequest struct {
	ctx  context.Context
	fn   func(store.Store) error
	done chan error
}

func newGroupCommit(s store.Store) *groupCommit {
	return &groupCommit{Store: s, reqs: make(chan *txRequest), stopped: make(chan struct{})}
}

// InTx runs fn in a transaction shared with the others that arrive with it.
func (g *groupCommit) InTx(ctx context.Context, fn func(store.Store) error) error {
	r := &txRequest{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case g.reqs <- r:
		return <-r.done // a request taken is always answered
	case <-ctx.Done():
		return ctx.Err()
	case <-g.stopped:
		return errStopped
	}
}

// run commits groups until ctx ends. Stop it only once nothing calls InTx.
func (g *groupCommit) run(ctx context.Context) {
	defer close(g.stopped)
	for {
		var first *txRequest
		select {
		case <-ctx.Done():
			return
		case first = <-g.reqs:
		}
		group := []*txRequest{first}
	more:
		for len(group) < maxGroup {
			select {
			case r := <-g.reqs:
				group = append(group, r)
			default:
				break more
			}
		}
		g.commit(ctx, group)
	}
}

func (g *groupCommit) commit(ctx context.Context, group []*txRequest) {
	if len(group) == 1 {
		group[0].done <- g.Store.InTx(group[0].ctx, group[0].fn)
		return
	}
	// The shared transaction belongs to no one caller: a caller whose
	// context ends fails its own statements, not the others' commit.
	err := g.Store.InTx(context.WithoutCancel(ctx), func(tx store.Store) error {
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
