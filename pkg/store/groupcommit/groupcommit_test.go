package groupcommit_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/groupcommit"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
	"github.com/matryer/is"
)

func open(t *testing.T, observe func(int)) *groupcommit.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "primeflow.db"))
	if err != nil {
		t.Fatal(err)
	}
	g := groupcommit.New(s, observe)
	t.Cleanup(func() { g.Close() })
	return g
}

func job(i int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }

// TestConcurrentTransactionsShareCommits: every transaction commits, and
// they do so in groups.
func TestConcurrentTransactionsShareCommits(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	var mu sync.Mutex
	largest := 0
	g := open(t, func(n int) { mu.Lock(); largest = max(largest, n); mu.Unlock() })
	const n = 200
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = g.InTx(ctx, func(tx store.Store) error {
				_, err := tx.ClaimFirstSeen(ctx, job(i), int64(i), store.ViaWebhook)
				return err
			})
		})
	}
	wg.Wait()
	for i := range n {
		is.NoErr(errs[i]) // each transaction commits
		_, found, err := g.GetFirstSeen(ctx, job(i))
		is.NoErr(err)
		is.True(found) // and its write is there
	}
	mu.Lock()
	defer mu.Unlock()
	is.True(largest > 1) // transactions shared commits
}

func TestClosedStoreRefuses(t *testing.T) {
	is := is.New(t)
	g := open(t, nil)
	is.NoErr(g.Close())
	err := g.InTx(context.Background(), func(store.Store) error { return nil })
	is.True(errors.Is(err, groupcommit.ErrClosed)) // no transaction after Close
}
