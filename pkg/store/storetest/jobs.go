package storetest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

const (
	statusNew        = "3c1e9a2b-6f0d-4c8e-9b7a-1d2e3f4a5b6c"
	statusICM        = "8e7d6c5b-4a39-4281-9f0e-d1c2b3a4f5e6"
	contactA         = "5a4b3c2d-1e0f-4a9b-8c7d-6e5f4a3b2c1d"
	absentGUID       = "00000000-1111-4222-8333-444444444444"
	attributesOfJobA = `{"jobNumber":"J012345","statusId":"` + statusNew + `","authorisedTotalIncludingTax":"700.80","custom":{"x":[1,2]}}`
)

// sampleJob is a job with every column set.
func sampleJob(id, status string, version int64) store.Job {
	return store.Job{
		JobID: id, JobNumber: "J012345", StatusID: status,
		ClientID: "11111111-2222-4333-8444-555555555555", AssignedID: "21111111-2222-4333-8444-555555555555",
		EstimatorID: "31111111-2222-4333-8444-555555555555", CaseManagerID: "41111111-2222-4333-8444-555555555555",
		SupervisorID: "51111111-2222-4333-8444-555555555555", DivisionID: "61111111-2222-4333-8444-555555555555",
		Region: "Metro", Description: "Storm damage, roof",
		IncidentDate: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC),
		CreatedAt:    time.Date(2026, 9, 2, 21, 14, 33, 0, time.UTC),
		UpdatedAt:    time.Date(2026, 9, 3, 4, 5, 6, 0, time.UTC),
		Version:      version, PrimeURL: "https://www.primeeco.tech/jobs/J012345",
		AuthorisedTotalIncludingTax: "700.80",
		AddressLine1:                "1 Example St", AddressLine2: "Unit 2", Suburb: "Carlton", State: "VIC", Postcode: "3053",
		PrimaryContactID: contactA, Attributes: attributesOfJobA,
	}
}

// sameAmount compares decimals as numbers: SQL Server keeps DECIMAL(19,4).
func sameAmount(a, b string) bool {
	x, errX := strconv.ParseFloat(a, 64)
	y, errY := strconv.ParseFloat(b, 64)
	return errX == nil && errY == nil && x == y
}

func testJobs(t *testing.T, open Opener) {
	ctx := context.Background()

	t.Run("insert, read back, update", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		_, found, err := s.GetJob(ctx, jobA)
		is.NoErr(err)
		is.True(!found) // nothing mirrored yet

		want := sampleJob(strings.ToUpper(jobA), strings.ToUpper(statusNew), 3)
		before := time.Now().Add(-time.Second)
		created, err := s.UpsertJob(ctx, want)
		is.NoErr(err)
		is.True(created) // a new job is inserted

		got, found, err := s.GetJob(ctx, strings.ToUpper(jobA))
		is.NoErr(err)
		is.True(found)            // found whatever the GUID's case
		is.Equal(got.JobID, jobA) // GUIDs stored lower-case
		is.Equal(got.StatusID, statusNew)
		is.Equal(got.JobNumber, want.JobNumber)
		is.Equal(got.ClientID, want.ClientID)
		is.Equal(got.AssignedID, want.AssignedID)
		is.Equal(got.EstimatorID, want.EstimatorID)
		is.Equal(got.CaseManagerID, want.CaseManagerID)
		is.Equal(got.SupervisorID, want.SupervisorID)
		is.Equal(got.DivisionID, want.DivisionID)
		is.Equal(got.Region, want.Region)
		is.Equal(got.Description, want.Description)
		is.True(got.IncidentDate.Equal(want.IncidentDate)) // times kept, UTC
		is.True(got.CreatedAt.Equal(want.CreatedAt))
		is.True(got.UpdatedAt.Equal(want.UpdatedAt))
		is.Equal(got.Version, want.Version)
		is.Equal(got.PrimeURL, want.PrimeURL)
		is.True(sameAmount(got.AuthorisedTotalIncludingTax, "700.80")) // the amount, as a decimal
		is.Equal(got.AddressLine1, want.AddressLine1)
		is.Equal(got.AddressLine2, want.AddressLine2)
		is.Equal(got.Suburb, want.Suburb)
		is.Equal(got.State, want.State)
		is.Equal(got.Postcode, want.Postcode)
		is.Equal(got.PrimaryContactID, contactA)
		is.Equal(got.Attributes, attributesOfJobA)    // the raw attributes, byte for byte
		is.True(!got.SyncedUTC.Before(before))        // stamped when written
		is.True(got.SyncedUTC.Location() == time.UTC) // in UTC

		changed := sampleJob(jobA, statusICM, 4)
		changed.Description = ""
		changed.IncidentDate = time.Time{}
		created, err = s.UpsertJob(ctx, changed)
		is.NoErr(err)
		is.True(!created) // an existing job is updated
		got, _, err = s.GetJob(ctx, jobA)
		is.NoErr(err)
		is.Equal(got.StatusID, statusICM)  // the new status
		is.Equal(got.Version, int64(4))    // the new version
		is.Equal(got.Description, "")      // an emptied column is NULL again
		is.True(got.IncidentDate.IsZero()) // so is an emptied time

		stale := sampleJob(jobA, statusNew, 2)
		created, err = s.UpsertJob(ctx, stale)
		is.NoErr(err)
		is.True(!created) // still not an insert
		got, _, err = s.GetJob(ctx, jobA)
		is.NoErr(err)
		is.Equal(got.StatusID, statusICM) // an older version never rolls the mirror back
		is.Equal(got.Version, int64(4))
		stale.AskedUTC = got.SyncedUTC.Add(-time.Millisecond)
		_, err = s.UpsertJob(ctx, stale)
		is.NoErr(err)
		got, _, err = s.GetJob(ctx, jobA)
		is.NoErr(err)
		is.Equal(got.Version, int64(4)) // nor one asked before the row was written
	})

	// Issue 27: a version Prime never gave (2^53, forged) held the row for
	// good, Prime's own answers after it all older. An answer to a call sent
	// after the row was written gainsays it.
	t.Run("an answer asked after the row was written overrides a version Prime never gave", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		forged := sampleJob(jobA, statusNew, 1<<53)
		forged.JobNumber = "FORGED"
		_, err := s.UpsertJob(ctx, forged)
		is.NoErr(err)
		pinned, _, err := s.GetJob(ctx, jobA)
		is.NoErr(err)

		real := sampleJob(jobA, statusICM, 5)
		_, err = s.UpsertJob(ctx, real)
		is.NoErr(err)
		got, _, err := s.GetJob(ctx, jobA)
		is.NoErr(err)
		is.Equal(got.JobNumber, "FORGED") // a job that says nothing of when it was asked does not
		real.AskedUTC = pinned.SyncedUTC.Add(time.Second)
		created, err := s.UpsertJob(ctx, real)
		is.NoErr(err)
		is.True(!created)
		got, _, err = s.GetJob(ctx, jobA)
		is.NoErr(err)
		is.Equal(got.Version, int64(5)) // Prime's version
		is.Equal(got.JobNumber, real.JobNumber)
		is.Equal(got.StatusID, statusICM)
	})

	t.Run("a job with only its id", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		created, err := s.UpsertJob(ctx, store.Job{JobID: jobB})
		is.NoErr(err)
		is.True(created)
		got, found, err := s.GetJob(ctx, jobB)
		is.NoErr(err)
		is.True(found)
		is.Equal(got.StatusID, "") // NULL columns read as empty
		is.Equal(got.Version, int64(0))
		is.True(got.CreatedAt.IsZero())
		_, err = s.UpsertJob(ctx, store.Job{})
		is.True(err != nil) // a job needs an id
	})

	t.Run("concurrent upserts of a new job create it once", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		const n = 8
		var wg sync.WaitGroup
		results := make([]bool, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() { results[i], errs[i] = s.UpsertJob(ctx, sampleJob(jobA, statusNew, 1)) })
		}
		wg.Wait()
		created := 0
		for i := range n {
			is.NoErr(errs[i]) // no upsert fails
			if results[i] {
				created++
			}
		}
		is.Equal(created, 1) // exactly one reports the insert
	})

	t.Run("a rolled-back upsert leaves nothing", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		boom := errors.New("boom")
		err := s.InTx(ctx, func(tx store.Store) error {
			created, err := tx.UpsertJob(ctx, sampleJob(jobA, statusNew, 1))
			is.NoErr(err)
			is.True(created)
			return boom
		})
		is.True(errors.Is(err, boom))
		_, found, err := s.GetJob(ctx, jobA)
		is.NoErr(err)
		is.True(!found) // rolled back
	})
}

func testIdentify(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	if _, err := s.UpsertJob(ctx, sampleJob(jobA, statusNew, 1)); err != nil {
		t.Fatalf("upsert job: %v", err)
	}
	for _, tc := range []struct {
		name, id, expected string
		want               []string
	}{
		{"job found as expected", jobA, store.TableJobs, []string{store.TableJobs}},
		{"job found without expected entity", jobA, "", []string{store.TableJobs}},
		{"upper-case GUID", strings.ToUpper(jobA), store.TableJobs, []string{store.TableJobs}},
		{"job under a wrong expected entity", jobA, store.TableAppointments, []string{store.TableJobs}},
		{"absent everywhere", absentGUID, store.TableJobs, nil},
		{"absent, no expected entity", absentGUID, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			got, err := s.IdentifyGuid(ctx, tc.id, tc.expected)
			is.NoErr(err)
			is.Equal(len(got), len(tc.want)) // the tables found
			for i := range tc.want {
				is.Equal(got[i], tc.want[i])
			}
		})
	}
}

func testFirstSeen(t *testing.T, open Opener) {
	ctx := context.Background()

	t.Run("claim, fail, complete", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		_, found, err := s.GetFirstSeen(ctx, jobA)
		is.NoErr(err)
		is.True(!found) // never seen

		before := time.Now().Add(-time.Second)
		claimed, err := s.ClaimFirstSeen(ctx, strings.ToUpper(jobA), 42, store.ViaWebhook)
		is.NoErr(err)
		is.True(claimed) // the first claim wins
		claimed, err = s.ClaimFirstSeen(ctx, jobA, 43, store.ViaEmail)
		is.NoErr(err)
		is.True(!claimed) // a second claim does not

		row, found, err := s.GetFirstSeen(ctx, jobA)
		is.NoErr(err)
		is.True(found)
		is.Equal(row.JobID, jobA)           // lower-case
		is.Equal(row.LogID, int64(42))      // the first claimer's row
		is.Equal(row.Via, store.ViaWebhook) // and path
		is.True(!row.FirstSeenUTC.Before(before))
		is.True(!row.Completed()) // the pipeline is pending
		is.Equal(row.PipelineAttempts, 0)

		attempts, err := s.FailFirstSeen(ctx, jobA, "queue missing objects: boom")
		is.NoErr(err)
		is.Equal(attempts, 1) // one failed attempt
		attempts, err = s.FailFirstSeen(ctx, jobA, strings.Repeat("é", store.MaxStatusLen+10))
		is.NoErr(err)
		is.Equal(attempts, 2) // two
		row, _, err = s.GetFirstSeen(ctx, jobA)
		is.NoErr(err)
		is.Equal(row.PipelineStatus, strings.Repeat("é", store.MaxStatusLen)) // the last error, cut to 500 characters

		failed, err := s.ListFirstSeen(ctx, store.FirstSeenFailed, 0)
		is.NoErr(err)
		is.Equal(len(failed), 1) // listed as failed
		pending, err := s.ListFirstSeen(ctx, store.FirstSeenPending, 0)
		is.NoErr(err)
		is.Equal(len(pending), 1) // and as pending

		is.NoErr(s.CompleteFirstSeen(ctx, jobA, "Queued 4"))
		row, _, err = s.GetFirstSeen(ctx, jobA)
		is.NoErr(err)
		is.True(row.Completed()) // finished
		is.Equal(row.PipelineStatus, "Queued 4")
		is.Equal(row.PipelineAttempts, 2) // the failed attempts stay counted
		stamp := row.PipelineCompletedUTC
		is.NoErr(s.CompleteFirstSeen(ctx, jobA, "again"))
		row, _, err = s.GetFirstSeen(ctx, jobA)
		is.NoErr(err)
		is.True(row.PipelineCompletedUTC.Equal(stamp)) // completing again keeps the first stamp

		pending, err = s.ListFirstSeen(ctx, store.FirstSeenPending, 0)
		is.NoErr(err)
		is.Equal(len(pending), 0) // no longer pending
		done, err := s.ListFirstSeen(ctx, store.FirstSeenCompleted, 0)
		is.NoErr(err)
		is.Equal(len(done), 1) // completed

		is.True(errors.Is(s.CompleteFirstSeen(ctx, jobB, "x"), store.ErrNotFound)) // never claimed
		_, err = s.FailFirstSeen(ctx, jobB, "x")
		is.True(errors.Is(err, store.ErrNotFound)) // never claimed
	})

	t.Run("list states and limit", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		claimed, err := s.ClaimFirstSeen(ctx, jobA, 0, "")
		is.NoErr(err)
		is.True(claimed)
		claimed, err = s.ClaimFirstSeen(ctx, jobB, 7, store.ViaWebhook)
		is.NoErr(err)
		is.True(claimed)
		row, _, err := s.GetFirstSeen(ctx, jobA)
		is.NoErr(err)
		is.Equal(row.LogID, int64(0)) // no log row (an ensure-job request)
		is.Equal(row.Via, "")         // nor a path
		all, err := s.ListFirstSeen(ctx, store.FirstSeenAny, 0)
		is.NoErr(err)
		is.Equal(len(all), 2) // both
		one, err := s.ListFirstSeen(ctx, store.FirstSeenAny, 1)
		is.NoErr(err)
		is.Equal(len(one), 1) // the limit holds
		failed, err := s.ListFirstSeen(ctx, store.FirstSeenFailed, 0)
		is.NoErr(err)
		is.Equal(len(failed), 0) // nothing failed
	})

	t.Run("concurrent claims: one winner", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		const n = 8
		var wg sync.WaitGroup
		won := make([]bool, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() { won[i], errs[i] = s.ClaimFirstSeen(ctx, jobA, int64(i+1), store.ViaBackstop) })
		}
		wg.Wait()
		winners := 0
		for i := range n {
			is.NoErr(errs[i]) // a lost claim is not an error
			if won[i] {
				winners++
			}
		}
		is.Equal(winners, 1) // exactly one claim wins
	})
}
