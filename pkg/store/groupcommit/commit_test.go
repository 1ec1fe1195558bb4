package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
	"github.com/matryer/is"
)

// TestAFailingTransactionFailsAlone: one transaction of a group fails; the
// group is rolled back and each runs again alone, so only it fails.
func TestAFailingTransactionFailsAlone(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "primeflow.db"))
	is.NoErr(err)
	g := New(s, nil)
	defer g.Close()
	job := func(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }
	boom := errors.New("boom")
	var runs atomic.Int32
	var group []*txRequest
	for i := range 5 {
		group = append(group, &txRequest{ctx: ctx, done: make(chan error, 1), fn: func(tx store.Store) error {
			runs.Add(1)
			if _, err := tx.ClaimFirstSeen(ctx, job(i), int64(i), store.ViaWebhook); err != nil {
				return err
			}
			if i == 2 {
				return boom // after a write: the write must not stay
			}
			return nil
		}})
	}
	g.commit(group)
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

// TestCloseAnswersEveryQueuedTransaction: the group in hand when the store
// closes commits; the transactions queued behind it are each answered
// ErrClosed, without running, and none waits forever.
func TestCloseAnswersEveryQueuedTransaction(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "primeflow.db")
	s, err := sqlite.Open(ctx, path)
	is.NoErr(err)
	g := New(s, nil)
	job := func(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }
	claim := func(i int) func(store.Store) error {
		return func(tx store.Store) error {
			_, err := tx.ClaimFirstSeen(ctx, job(i), int64(i), store.ViaWebhook)
			return err
		}
	}
	holding, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- g.InTx(ctx, func(tx store.Store) error {
			close(holding)
			<-release // the committer is busy with this group
			return claim(0)(tx)
		})
	}()
	<-holding
	const n = 20
	errs := make([]error, n)
	var queued sync.WaitGroup
	for i := 1; i < n; i++ {
		queued.Go(func() { errs[i] = g.InTx(ctx, claim(i)) })
	}
	for len(g.reqs) < n-1 {
		time.Sleep(time.Millisecond) // until all of them wait in the queue
	}
	g.stop() // what Close does first; it then waits for the group in hand
	close(release)
	queued.Wait() // every queued transaction is answered
	is.NoErr(<-first)
	is.NoErr(g.Close())

	s, err = sqlite.Open(ctx, path)
	is.NoErr(err)
	defer s.Close()
	_, written, err := s.GetFirstSeen(ctx, job(0))
	is.NoErr(err)
	is.True(written) // the group in hand committed
	for i := 1; i < n; i++ {
		is.True(errors.Is(errs[i], ErrClosed)) // the queued ones were refused
		_, written, err := s.GetFirstSeen(ctx, job(i))
		is.NoErr(err)
		is.True(!written) // and did not run
	}
}
