package storetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

func sampleAllocation(id, job, allocationType string, version int64, created time.Time) store.Allocation {
	return store.Allocation{
		AllocationID: strings.ToUpper(id), JobID: strings.ToUpper(job), AssignedID: childUser,
		AssignedContactID: childContact, AllocationType: allocationType, AllocationNumber: "A000123",
		Label: allocationType, AllocationStatusID: childStatus, Version: version,
		CreatedAt: created, UpdatedAt: created.Add(time.Hour), Attributes: `{"allocationType":"` + allocationType + `"}`,
	}
}

func testAllocations(t *testing.T, open Opener) {
	ctx := context.Background()

	t.Run("save, read back, version guard", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		_, found, err := s.GetAllocation(ctx, childAlloc)
		is.NoErr(err)
		is.True(!found) // nothing mirrored yet

		saved, err := s.SaveAllocation(ctx, sampleAllocation(childAlloc, childJob, "Make Safe", 2, at(3, 1)))
		is.NoErr(err)
		is.True(saved) // written
		got, found, err := s.GetAllocation(ctx, strings.ToUpper(childAlloc))
		is.NoErr(err)
		is.True(found)                                    // found in any case
		is.Equal(got.AllocationID, childAlloc)            // lower-case
		is.Equal(got.JobID, childJob)                     // lower-case job
		is.Equal(got.AssignedID, childUser)               // assignee
		is.Equal(got.AssignedContactID, childContact)     // assigned contact
		is.Equal(got.AllocationType, "Make Safe")         // allocationType as sent
		is.Equal(got.AllocationNumber, "A000123")         // number
		is.Equal(got.Label, "Make Safe")                  // label
		is.Equal(got.AllocationStatusID, childStatus)     // status
		is.True(got.IsMakeSafe)                           // the Make Safe verdict derived
		is.Equal(got.Version, int64(2))                   // version
		is.Equal(got.CreatedAt, at(3, 1))                 // createdAt
		is.Equal(got.UpdatedAt, at(3, 2))                 // updatedAt
		is.True(strings.Contains(got.Attributes, "Make")) // raw attributes
		is.True(!got.SyncedUTC.IsZero())                  // stamped

		saved, err = s.SaveAllocation(ctx, sampleAllocation(childAlloc, childJob, "Builder", 1, at(3, 1)))
		is.NoErr(err)
		is.True(!saved) // an older version is not written
		got, _, err = s.GetAllocation(ctx, childAlloc)
		is.NoErr(err)
		is.True(got.IsMakeSafe) // still the newer row
	})

	t.Run("a job's allocations and its Make Safe", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		has, err := s.HasMakeSafeAllocation(ctx, childJob)
		is.NoErr(err)
		is.True(!has) // no allocations at all

		_, err = s.SaveAllocation(ctx, sampleAllocation(childAlloc2, childJob, "Builder", 1, at(4, 1)))
		is.NoErr(err)
		has, err = s.HasMakeSafeAllocation(ctx, strings.ToUpper(childJob))
		is.NoErr(err)
		is.True(!has) // an allocation, but not a Make Safe

		_, err = s.SaveAllocation(ctx, sampleAllocation(childAlloc, childJob, "make-safe", 1, at(3, 1)))
		is.NoErr(err)
		_, err = s.SaveAllocation(ctx, sampleAllocation("b1b1b1b1-0000-4000-8000-000000000003", childJob2, "Make Safe", 1, at(2, 1)))
		is.NoErr(err)
		has, err = s.HasMakeSafeAllocation(ctx, childJob)
		is.NoErr(err)
		is.True(has) // a Make Safe, whatever the spelling of the type

		list, err := s.ListJobAllocations(ctx, strings.ToUpper(childJob))
		is.NoErr(err)
		is.Equal(len(list), 2)                      // only the job's own
		is.Equal(list[0].AllocationID, childAlloc)  // oldest first
		is.Equal(list[1].AllocationID, childAlloc2) // then the newer

		none, err := s.ListJobAllocations(ctx, "c0a80101-0000-4000-8000-0000000000ff")
		is.NoErr(err)
		is.Equal(len(none), 0) // a job without allocations
	})
}
