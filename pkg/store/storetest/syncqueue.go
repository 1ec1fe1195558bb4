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

// queuedTwoJobs is a store whose queue holds the missing objects of jobA
// and jobB.
func queuedTwoJobs(t *testing.T, open Opener) store.Store {
	t.Helper()
	s := open(t)
	for _, j := range []string{jobA, jobB} {
		if _, err := s.QueueMissingObjectsByJob(context.Background(), j); err != nil {
			t.Fatal(err)
		}
	}
	return s
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
		s := queuedTwoJobs(t, open)
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

// The version of a job whose objects were last queued: none at first,
// then the last one set, filed under the job (a job's GUID in any case),
// another job's left alone.
func testJobObjectsQueued(t *testing.T, open Opener) {
	ctx := context.Background()
	is := is.New(t)
	s := open(t)
	_, found, err := s.GetJobObjectsQueued(ctx, jobA)
	is.NoErr(err)
	is.True(!found) // none recorded
	at := time.Date(2026, 3, 2, 1, 2, 3, 456_000_000, time.UTC)
	is.NoErr(s.SetJobObjectsQueued(ctx, strings.ToUpper(jobA), store.JobVersion{Version: 3, UpdatedAt: at}))
	is.NoErr(s.SetJobObjectsQueued(ctx, jobB, store.JobVersion{UpdatedAt: at}))
	v, found, err := s.GetJobObjectsQueued(ctx, jobA)
	is.NoErr(err)
	is.True(found)
	is.Equal(v.Version, int64(3))  // the version
	is.True(v.UpdatedAt.Equal(at)) // and updatedAt, to the millisecond
	is.True(v.Covers(store.JobVersion{Version: 3, UpdatedAt: at.Add(time.Hour)}))
	is.True(!v.Covers(store.JobVersion{Version: 4}))
	is.NoErr(s.SetJobObjectsQueued(ctx, jobA, store.JobVersion{Version: 5, UpdatedAt: at.Add(time.Hour)}))
	v, _, err = s.GetJobObjectsQueued(ctx, strings.ToUpper(jobA))
	is.NoErr(err)
	is.Equal(v.Version, int64(5)) // the last one set
	v, _, err = s.GetJobObjectsQueued(ctx, jobB)
	is.NoErr(err)
	is.Equal(v.Version, int64(0))  // another job's is its own
	is.True(v.UpdatedAt.Equal(at)) // a job Prime gives no version: by updatedAt
	is.True(v.Covers(store.JobVersion{UpdatedAt: at}))
	is.True(!v.Covers(store.JobVersion{UpdatedAt: at.Add(time.Second)}))
}

func testSyncQueueDrains(t *testing.T, open Opener) {
	ctx := context.Background()
	stale := func() time.Time { return time.Now().Add(-time.Minute) }

	t.Run("a claim is released or drained only as it was made", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		_, err := s.QueueMissingObjectsByJob(ctx, jobA)
		is.NoErr(err)
		got, err := s.ClaimSyncQueue(ctx, store.SyncQueueFilter{Object: store.TableAllocations}, stale())
		is.NoErr(err)
		is.Equal(len(got), 1)
		it := got[0]

		other := it
		other.ClaimedUTC = it.ClaimedUTC.Add(-time.Second)
		released, err := s.ReleaseSyncQueue(ctx, other)
		is.NoErr(err)
		is.True(!released) // another claim's release changes nothing
		released, err = s.ReleaseSyncQueue(ctx, it)
		is.NoErr(err)
		is.True(released) // its own claim is given back
		// A claim is told by its stamp, kept to the millisecond: a claim
		// made in the millisecond of one given back would be the same claim
		// (which only the drain that gave it back could confuse, and it
		// does no more with the item).
		time.Sleep(5 * time.Millisecond)
		got, err = s.ClaimSyncQueue(ctx, store.SyncQueueFilter{Object: store.TableAllocations}, time.Now().Add(-time.Hour))
		is.NoErr(err)
		is.Equal(len(got), 1) // and the item may be claimed again at once
		deleted, err := s.DeleteClaimedSyncQueue(ctx, it)
		is.NoErr(err)
		is.True(!deleted) // a claim given back drains nothing
		it = got[0]

		time.Sleep(5 * time.Millisecond) // the re-queue gets a later stamp
		is.NoErr(s.UpsertSyncQueue(ctx, store.TableAllocations, jobA))
		deleted, err = s.DeleteClaimedSyncQueue(ctx, it)
		is.NoErr(err)
		is.True(!deleted) // queued again since the claim: kept for the next pass
		got, err = s.ClaimSyncQueue(ctx, store.SyncQueueFilter{Object: store.TableAllocations}, stale())
		is.NoErr(err)
		is.Equal(len(got), 1)
		deleted, err = s.DeleteClaimedSyncQueue(ctx, got[0])
		is.NoErr(err)
		is.True(deleted) // as claimed: drained
		items, err := s.ListSyncQueue(ctx, store.SyncQueueFilter{Object: store.TableAllocations})
		is.NoErr(err)
		is.Equal(len(items), 0) // gone
	})

	// A backstop pass works each item once: the items it leaves in the
	// queue stay claimed until it ends, and its later claims take a lapsed
	// claim only if it was made before the pass's first (staleBefore at
	// that claim's stamp), so none takes back an item the pass has worked.
	t.Run("a claim at staleBefore's stamp is not taken again", func(t *testing.T) {
		is := is.New(t)
		s := queuedTwoJobs(t, open)
		first, err := s.ClaimSyncQueue(ctx, store.SyncQueueFilter{Limit: 3}, stale())
		is.NoErr(err)
		is.Equal(len(first), 3)
		stamp := first[0].ClaimedUTC
		for _, it := range first {
			is.True(it.ClaimedUTC.Equal(stamp)) // one claim, one stamp
		}
		time.Sleep(5 * time.Millisecond) // the next claim gets a later stamp
		rest, err := s.ClaimSyncQueue(ctx, store.SyncQueueFilter{}, stamp)
		is.NoErr(err)
		is.Equal(len(rest), 5) // the others, not one claimed at the stamp
		for _, it := range rest {
			for _, f := range first {
				is.True(it.ID != f.ID) // none of the first claim's
			}
		}
		none, err := s.ClaimSyncQueue(ctx, store.SyncQueueFilter{}, stamp)
		is.NoErr(err)
		is.Equal(len(none), 0) // every item claimed at or after the stamp
		again, err := s.ClaimSyncQueue(ctx, store.SyncQueueFilter{}, stamp.Add(time.Millisecond))
		is.NoErr(err)
		is.Equal(len(again), 3) // claimed before staleBefore: taken again
	})

	t.Run("stats by object", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		stats, err := s.SyncQueueStats(ctx)
		is.NoErr(err)
		is.Equal(len(stats), 4) // every object, the queue empty
		for i, st := range stats {
			is.Equal(st.Object, store.MissingObjects()[i]) // in their order
			is.Equal(st.Items, 0)
			is.True(st.OldestQueuedUTC.IsZero())
		}
		before := time.Now().Add(-time.Second)
		_, err = s.QueueMissingObjectsByJob(ctx, jobA)
		is.NoErr(err)
		is.NoErr(s.UpsertSyncQueue(ctx, store.TableContacts, jobB))
		is.NoErr(s.UpsertSyncQueue(ctx, "primeSomethingElse", jobB))
		_, err = s.ClaimSyncQueue(ctx, store.SyncQueueFilter{Object: store.TableContacts, Limit: 1}, stale())
		is.NoErr(err)
		stats, err = s.SyncQueueStats(ctx)
		is.NoErr(err)
		is.Equal(len(stats), 5) // the four and the other one the queue holds
		byObject := map[string]store.SyncQueueStat{}
		for _, st := range stats {
			byObject[st.Object] = st
		}
		is.Equal(byObject[store.TableContacts].Items, 2)   // two jobs' contacts
		is.Equal(byObject[store.TableContacts].Claimed, 1) // one claimed
		is.Equal(byObject[store.TableAllocations].Items, 1)
		is.Equal(byObject["primeSomethingElse"].Items, 1)
		oldest := byObject[store.TableContacts].OldestQueuedUTC
		is.True(oldest.After(before) && !oldest.After(time.Now())) // when the oldest was queued
	})
}

func testStatusHistories(t *testing.T, open Opener) {
	ctx := context.Background()
	is := is.New(t)
	s := open(t)
	at := time.Date(2026, 3, 2, 1, 2, 3, 0, time.UTC)
	const h1, h2, h3 = "1a2b3c4d-0000-4000-8000-000000000001", "1a2b3c4d-0000-4000-8000-000000000002", "1a2b3c4d-0000-4000-8000-000000000003"
	is.NoErr(s.ReplaceJobStatusHistory(ctx, jobA, []store.JobStatusHistory{
		{StatusHistoryID: strings.ToUpper(h2), StatusID: strings.ToUpper(statusICM), CreatedAt: at.Add(time.Hour), Attributes: `{"n":2}`},
		{StatusHistoryID: h1, StatusID: statusNew, CreatedAt: at},
	}))
	is.NoErr(s.ReplaceJobStatusHistory(ctx, jobB, []store.JobStatusHistory{{StatusHistoryID: h3, StatusID: statusNew, CreatedAt: at}}))
	got, err := s.ListJobStatusHistory(ctx, strings.ToUpper(jobA))
	is.NoErr(err)
	is.Equal(len(got), 2)                  // the job's two changes
	is.Equal(got[0].StatusHistoryID, h1)   // oldest first
	is.True(got[0].CreatedAt.Equal(at))    // with its time
	is.Equal(got[1].StatusHistoryID, h2)   // lower-case
	is.Equal(got[1].StatusID, statusICM)   // lower-case
	is.Equal(got[1].JobID, jobA)           // filed under the job
	is.Equal(got[1].Attributes, `{"n":2}`) // the raw attributes
	is.True(!got[1].SyncedUTC.IsZero())

	is.NoErr(s.ReplaceJobStatusHistory(ctx, jobA, []store.JobStatusHistory{{StatusHistoryID: h2, StatusID: statusNew, CreatedAt: at}}))
	got, err = s.ListJobStatusHistory(ctx, jobA)
	is.NoErr(err)
	is.Equal(len(got), 1)                // what Prime no longer lists is gone
	is.Equal(got[0].StatusID, statusNew) // the rest updated
	other, err := s.ListJobStatusHistory(ctx, jobB)
	is.NoErr(err)
	is.Equal(len(other), 1)                                                                               // another job's history is left alone
	is.True(s.ReplaceJobStatusHistory(ctx, jobA, []store.JobStatusHistory{{StatusID: statusNew}}) != nil) // an entry needs an id
}
