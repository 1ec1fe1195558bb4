package storetest

import (
	"context"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

func testClientWIPTriggers(t *testing.T, open Opener) {
	ctx := context.Background()
	is := is.New(t)
	s := open(t)
	is.Equal(store.ClientWIPSource(12), "ethPrimeWebhookLog:12") // §5.1 step 5's source

	queued, err := s.QueueClientWIPStatusChange(ctx, strings.ToUpper(jobA), store.ClientWIPSource(12))
	is.NoErr(err)
	is.True(queued) // the first trigger from a source is queued
	queued, err = s.QueueClientWIPStatusChange(ctx, jobA, store.ClientWIPSource(12))
	is.NoErr(err)
	is.True(!queued) // the same source again (a replay) is not
	queued, err = s.QueueClientWIPStatusChange(ctx, jobA, store.ClientWIPSource(13))
	is.NoErr(err)
	is.True(queued) // another event of the job is
	queued, err = s.QueueClientWIPStatusChange(ctx, jobB, store.ClientWIPSource(12))
	is.NoErr(err)
	is.True(queued) // and the same source for another job is

	got, err := s.ListClientWIPTriggers(ctx, jobA)
	is.NoErr(err)
	is.Equal(len(got), 2) // two triggers for the job
	is.Equal(got[0].JobID, jobA)
	is.Equal(got[0].TriggerType, store.ClientWIPStatusChange) // StatusChange
	is.Equal(got[0].Source, "ethPrimeWebhookLog:12")
	is.Equal(got[1].Source, "ethPrimeWebhookLog:13") // oldest first
	is.True(!got[0].QueuedUTC.IsZero())
	is.True(got[0].ProcessedUTC.IsZero()) // not processed yet

	_, err = s.QueueClientWIPStatusChange(ctx, jobA, "")
	is.True(err != nil) // a trigger needs a source
}

func testTriageInvites(t *testing.T, open Opener) {
	ctx := context.Background()
	is := is.New(t)
	s := open(t)

	queued, err := s.QueueTriageInvite(ctx, jobA, statusICM)
	is.NoErr(err)
	is.True(!queued) // a job not in the mirror gets no invite

	_, err = s.UpsertJob(ctx, sampleJob(jobA, statusNew, 1))
	is.NoErr(err)
	queued, err = s.QueueTriageInvite(ctx, jobA, statusICM)
	is.NoErr(err)
	is.True(!queued) // nor one in another status

	_, err = s.UpsertJob(ctx, sampleJob(jobA, statusICM, 2))
	is.NoErr(err)
	queued, err = s.QueueTriageInvite(ctx, jobA, "")
	is.NoErr(err)
	is.True(!queued) // no Initial-Contact-Made status configured: nothing
	queued, err = s.QueueTriageInvite(ctx, strings.ToUpper(jobA), strings.ToUpper(statusICM))
	is.NoErr(err)
	is.True(queued) // Initial Contact Made: queued, whatever the GUIDs' case
	queued, err = s.QueueTriageInvite(ctx, jobA, statusICM)
	is.NoErr(err)
	is.True(!queued) // an invite is pending: skipped

	got, err := s.ListTriageInvites(ctx, jobA)
	is.NoErr(err)
	is.Equal(len(got), 1) // one invite
	is.Equal(got[0].JobID, jobA)
	is.Equal(got[0].StatusID, statusICM) // the status it was queued in
	is.True(got[0].Pending())            // waiting to be sent
	is.True(!got[0].QueuedUTC.IsZero())
	none, err := s.ListTriageInvites(ctx, jobB)
	is.NoErr(err)
	is.Equal(len(none), 0) // other jobs have none
}
