package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

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
			if _, err := tx.ClaimFirstSeen(ctx, job(i), int64(i)); err != nil {
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
