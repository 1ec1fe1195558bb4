package storetest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

func objects(items []store.SyncQueueItem) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Object
	}
	return out
}

func testSyncQueue(t *testing.T, open Opener) {
	ctx := context.Background()

	t.Run("missing objects of a job, once", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		n, err := s.QueueMissingObjectsByJob(ctx, strings.ToUpper(jobA))
		is.NoErr(err)
		is.Equal(n, 4) // status histories, contacts, allocations, contact relationships
		n, err = s.QueueMissingObjectsByJob(ctx, jobA)
		is.NoErr(err)
		is.Equal(n, 0) // already queued: skipped

		items, err := s.ListSyncQueue(ctx, store.SyncQueueFilter{JobID: jobA})
		is.NoErr(err)
		is.Equal(len(items), 4)
		got := objects(items)
		for _, want := range store.MissingObjects() {
			found := false
			for _, o := range got {
				found = found || o == want
			}
			is.True(found) // every missing object is queued
		}
		is.Equal(items[0].JobID, jobA) // lower-case
		is.True(items[0].ClaimedUTC.IsZero())

		is.NoErr(s.UpsertSyncQueue(ctx, store.TableAllocations, jobB))
		n, err = s.QueueMissingObjectsByJob(ctx, jobB)
		is.NoErr(err)
		is.Equal(n, 3) // allocations were queued already
	})

	t.Run("upsert, delete", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		is.NoErr(s.UpsertSyncQueue(ctx, store.TableAllocations, jobA))
		claimed, err := s.ClaimSyncQueue(ctx, store.SyncQueueFilter{Object: store.TableAllocations}, time.Now().Add(-time.Minute))
		is.NoErr(err)
		is.Equal(len(claimed), 1) // taken by a drainer
		first := claimed[0].QueuedUTC

		time.Sleep(5 * time.Millisecond) // the re-queue gets a later stamp
		is.NoErr(s.UpsertSyncQueue(ctx, store.TableAllocations, jobA))
		items, err := s.ListSyncQueue(ctx, store.SyncQueueFilter{Object: store.TableAllocations, JobID: jobA})
		is.NoErr(err)
		is.Equal(len(items), 1)                  // still one row
		is.True(items[0].ClaimedUTC.IsZero())    // queued again: no drainer holds it
		is.True(items[0].QueuedUTC.After(first)) // queued now

		deleted, err := s.DeleteSyncQueue(ctx, store.TableAllocations, strings.ToUpper(jobA))
		is.NoErr(err)
		is.True(deleted) // removed
		deleted, err = s.DeleteSyncQueue(ctx, store.TableAllocations, jobA)
		is.NoErr(err)
		is.True(!deleted) // nothing left to remove
		items, err = s.ListSyncQueue(ctx, store.SyncQueueFilter{})
		is.NoErr(err)
		is.Equal(len(items), 0) // the queue is empty
	})

	t.Run("claims", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		_, err := s.QueueMissingObjectsByJob(ctx, jobA)
		is.NoErr(err)
		_, err = s.QueueMissingObjectsByJob(ctx, jobB)
		is.NoErr(err)
		stale := time.Now().Add(-time.Minute)

		got, err := s.ClaimSyncQueue(ctx, store.SyncQueueFilter{Object: store.TableContacts, Limit: 1}, stale)
		is.NoErr(err)
		is.Equal(len(got), 1) // the limit holds
		is.Equal(got[0].Object, store.TableContacts)
		is.True(!got[0].ClaimedUTC.IsZero()) // stamped claimed
		got, err = s.ClaimSyncQueue(ctx, store.SyncQueueFilter{Object: store.TableContacts}, stale)
		is.NoErr(err)
		is.Equal(len(got), 1) // only the one not held
		got, err = s.ClaimSyncQueue(ctx, store.SyncQueueFilter{Object: store.TableContacts}, stale)
		is.NoErr(err)
		is.Equal(len(got), 0) // both held
		got, err = s.ClaimSyncQueue(ctx, store.SyncQueueFilter{Object: store.TableContacts, JobID: jobB}, time.Now().Add(time.Minute))
		is.NoErr(err)
		is.Equal(len(got), 1) // a claim older than staleBefore is taken again
		is.Equal(got[0].JobID, jobB)

		var wg sync.WaitGroup
		claims := make([][]store.SyncQueueItem, 4)
		errs := make([]error, 4)
		for i := range claims {
			wg.Go(func() { claims[i], errs[i] = s.ClaimSyncQueue(ctx, store.SyncQueueFilter{}, stale) })
		}
		wg.Wait()
		taken := map[int64]int{}
		for i, items := range claims {
			is.NoErr(errs[i]) // no claim fails
			for _, it := range items {
				taken[it.ID]++
			}
		}
		is.Equal(len(taken), 6) // the six items not held were taken
		for _, n := range taken {
			is.Equal(n, 1) // each by one claim only
		}
	})
}
