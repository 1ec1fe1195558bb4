package jobmirror

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
	"github.com/matryer/is"
)

func openStore(t *testing.T) store.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "primeflow.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func job(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }

func TestGroupCommitIsolatesAFailingTransaction(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := openStore(t)
	g := newGroupCommit(s)
	boom := errors.New("boom")
	var runs atomic.Int32
	var group []*txRequest
	for i := range 5 {
		group = append(group, &txRequest{ctx: ctx, done: make(chan error, 1), fn: func(tx store.Store) error {
			runs.Add(1)
			if _, err := tx.ClaimFirstSeen(ctx, job(i), int64(i)); err != nil {
				return err
			}
			if i == 2 {
				return boom // after a write: it must not stay
			}
			return nil
		}})
	}
	g.commit(ctx, group)
	for i, r := range group {
		err := <-r.done
		_, found, gerr := s.GetFirstSeen(ctx, job(i))
		is.NoErr(gerr)
		if i == 2 {
			is.True(errors.Is(err, boom)) // the failing transaction fails
			is.True(!found)               // and leaves nothing
			continue
		}
		is.NoErr(err) // the others commit
		is.True(found)
	}
	is.Equal(runs.Load(), int32(3+5)) // the group up to the failure, then each alone
}

func TestGroupCommitUnderLoad(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := openStore(t)
	g := newGroupCommit(s)
	runCtx, stop := context.WithCancel(ctx)
	var committer sync.WaitGroup
	committer.Go(func() { g.run(runCtx) })

	const n = 200
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = g.InTx(ctx, func(tx store.Store) error {
				_, err := tx.ClaimFirstSeen(ctx, job(i), int64(i))
				return err
			})
		})
	}
	wg.Wait()
	stop()
	committer.Wait()
	for _, err := range errs {
		is.NoErr(err) // every transaction answered and committed
	}
	all, err := s.ListFirstSeen(ctx, store.FirstSeenAny, n+1)
	is.NoErr(err)
	is.Equal(len(all), n)                                                               // every write is there
	is.True(errors.Is(g.InTx(ctx, func(store.Store) error { return nil }), errStopped)) // a stopped committer says so
}
