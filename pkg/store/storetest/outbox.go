package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

func testOutbox(t *testing.T, open Opener) {
	ctx := context.Background()
	is := is.New(t)
	s := open(t)
	msgs, err := s.InsertOutbox(ctx, []store.OutboxMessage{
		{Subject: "prime.job.firstseen", MsgID: "firstseen:" + jobA, Data: []byte(`{"jobId":"` + jobA + `"}`)},
		{Subject: "makesafe.schedule.x", MsgID: "rung:1", Header: map[string]string{"Nats-Schedule": "@at 2026-11-30T00:00:00Z"}, Data: []byte(`{}`)},
	})
	is.NoErr(err)
	is.Equal(len(msgs), 2)
	is.True(msgs[0].ID > 0 && msgs[1].ID > msgs[0].ID) // ids in order

	later := time.Now().Add(time.Minute)
	got, err := s.GetOutboxUnpublished(ctx, 0, later, 10)
	is.NoErr(err)
	is.Equal(len(got), 2)
	is.Equal(got[0].Subject, "prime.job.firstseen")
	is.Equal(got[0].MsgID, "firstseen:"+jobA)
	is.Equal(string(got[0].Data), `{"jobId":"`+jobA+`"}`)                // the body as written
	is.Equal(got[0].Header, map[string]string(nil))                      // no headers
	is.Equal(got[1].Header["Nats-Schedule"], "@at 2026-11-30T00:00:00Z") // headers kept

	got, err = s.GetOutboxUnpublished(ctx, 0, time.Now().Add(-time.Hour), 10)
	is.NoErr(err)
	is.Equal(len(got), 0) // written after the cut-off

	got, err = s.GetOutboxUnpublished(ctx, msgs[0].ID, later, 10)
	is.NoErr(err)
	is.Equal(len(got), 1)
	is.Equal(got[0].ID, msgs[1].ID) // the page after a message skipped
	got, err = s.GetOutboxUnpublished(ctx, msgs[1].ID, later, 10)
	is.NoErr(err)
	is.Equal(len(got), 0) // none after the last
	got, err = s.GetOutboxUnpublished(ctx, 0, later, 1)
	is.NoErr(err)
	is.Equal(len(got), 1)
	is.Equal(got[0].ID, msgs[0].ID) // the limit keeps the oldest

	is.NoErr(s.SetOutboxPublished(ctx, []int64{msgs[0].ID}, time.Now().Add(-2*time.Hour)))
	got, err = s.GetOutboxUnpublished(ctx, 0, later, 10)
	is.NoErr(err)
	is.Equal(len(got), 1)
	is.Equal(got[0].ID, msgs[1].ID) // only the unpublished one

	n, err := s.PurgeOutbox(ctx, time.Now().Add(-time.Hour))
	is.NoErr(err)
	is.Equal(n, 1) // published long ago: purged
	n, err = s.PurgeOutbox(ctx, time.Now().Add(time.Hour))
	is.NoErr(err)
	is.Equal(n, 0) // unpublished messages are never purged

	boom := errors.New("boom")
	err = s.InTx(ctx, func(tx store.Store) error {
		_, err := tx.InsertOutbox(ctx, []store.OutboxMessage{{Subject: "x", MsgID: "y", Data: []byte("{}")}})
		is.NoErr(err)
		return boom
	})
	is.True(errors.Is(err, boom))
	got, err = s.GetOutboxUnpublished(ctx, 0, later, 10)
	is.NoErr(err)
	is.Equal(len(got), 1) // the rolled-back message was never written
}
