package storetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
)

func testAISummaryQueue(t *testing.T, open Opener) {
	ctx := context.Background()
	is := is.New(t)
	s := open(t)
	_, found, err := s.GetJobSummaryQueue(ctx, childJob)
	is.NoErr(err)
	is.True(!found) // never queued

	first := at(1, 9)
	is.NoErr(s.QueueJobSummaryNow(ctx, strings.ToUpper(childJob), first))
	row, found, err := s.GetJobSummaryQueue(ctx, childJob)
	is.NoErr(err)
	is.True(found)                  // queued
	is.Equal(row.JobID, childJob)   // lower-case
	is.Equal(row.QueuedFor, first)  // due now
	is.Equal(row.CreatedUTC, first) // created now
	is.Equal(row.UpdatedUTC, first) // and updated

	// An earlier pass pushed the job 36 hours out (§5.3 step 4); now is now again.
	later := first.Add(2 * time.Hour)
	is.NoErr(s.QueueJobSummaryNow(ctx, childJob, later))
	row, _, err = s.GetJobSummaryQueue(ctx, childJob)
	is.NoErr(err)
	is.Equal(row.QueuedFor, later)  // due at the new now
	is.Equal(row.CreatedUTC, first) // one row a job, created once
	is.Equal(row.UpdatedUTC, later) // updated
	_, found, err = s.GetJobSummaryQueue(ctx, childJob2)
	is.NoErr(err)
	is.True(!found) // other jobs not queued
}
