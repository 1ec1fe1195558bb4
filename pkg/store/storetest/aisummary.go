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

	// The database's clock, to the millisecond: a second either side of
	// the call covers a server whose clock is off this one's a little.
	before := time.Now().Add(-time.Second)
	is.NoErr(s.QueueJobSummaryNow(ctx, strings.ToUpper(childJob)))
	row, found, err := s.GetJobSummaryQueue(ctx, childJob)
	is.NoErr(err)
	is.True(found)                                                                            // queued
	is.Equal(row.JobID, childJob)                                                             // lower-case
	is.True(row.QueuedFor.After(before) && row.QueuedFor.Before(time.Now().Add(time.Second))) // due now
	is.Equal(row.CreatedUTC, row.QueuedFor)                                                   // created now
	is.Equal(row.UpdatedUTC, row.QueuedFor)                                                   // and updated
	first := row.QueuedFor

	// An earlier pass pushed the job 36 hours out (§5.3 step 4); now is now again.
	time.Sleep(5 * time.Millisecond) // the next call's now is a later millisecond
	is.NoErr(s.QueueJobSummaryNow(ctx, childJob))
	row, _, err = s.GetJobSummaryQueue(ctx, childJob)
	is.NoErr(err)
	is.True(row.QueuedFor.After(first))     // due at the new now
	is.Equal(row.CreatedUTC, first)         // one row a job, created once
	is.Equal(row.UpdatedUTC, row.QueuedFor) // updated
	_, found, err = s.GetJobSummaryQueue(ctx, childJob2)
	is.NoErr(err)
	is.True(!found) // other jobs not queued
}
