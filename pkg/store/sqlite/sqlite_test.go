package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
	"github.com/ethosbuilding/primeflow/pkg/store/storetest"
	"github.com/matryer/is"
)

func open(t *testing.T) store.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "primeflow.db"))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestContract(t *testing.T) { storetest.Run(t, open) }

func TestReopenKeepsDataAndSchema(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "primeflow.db")
	s, err := sqlite.Open(ctx, path)
	is.NoErr(err)
	id, err := s.InsertWebhookLog(ctx, store.NewWebhookLogRow{Payload: "{}"})
	is.NoErr(err)
	is.NoErr(s.Close())
	s, err = sqlite.Open(ctx, path)
	is.NoErr(err) // reopening skips the migrations already applied
	defer s.Close()
	_, err = s.GetWebhookLog(ctx, id)
	is.NoErr(err) // the row survived
}

// The prepared statements run in a transaction on its connection (reading
// the transaction's own writes) and outside one on the pools.
func TestPreparedStatementsInAndOutOfTransactions(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := open(t)
	var id int64
	err := s.InTx(ctx, func(tx store.Store) error {
		var err error
		if id, err = tx.InsertWebhookLog(ctx, store.NewWebhookLogRow{Payload: `{"n":1}`}); err != nil {
			return err
		}
		got, err := tx.GetWebhookLog(ctx, id)
		is.NoErr(err)
		is.Equal(got.Payload, `{"n":1}`) // the transaction reads its own insert
		_, err = s.GetWebhookLog(ctx, id)
		is.True(errors.Is(err, store.ErrNotFound)) // the read pool does not see it yet
		return nil
	})
	is.NoErr(err)
	got, err := s.GetWebhookLog(ctx, id)
	is.NoErr(err)
	is.Equal(got.Payload, `{"n":1}`)
}

// Marking rows published takes any number of ids in one statement, past
// SQLite's limit of 32,766 parameters.
func TestMarkManyPublished(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := open(t)
	id, err := s.InsertWebhookLog(ctx, store.NewWebhookLogRow{Payload: "{}"})
	is.NoErr(err)
	ids := make([]int64, 40000)
	for i := range ids {
		ids[i] = id + int64(i)
	}
	at := time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC)
	is.NoErr(s.SetWebhookLogPublished(ctx, ids, at))
	got, err := s.GetWebhookLog(ctx, id)
	is.NoErr(err)
	is.Equal(got.PublishedUTC, at)

	msgs, err := s.InsertOutbox(ctx, []store.OutboxMessage{{Subject: "a.b", MsgID: "m1", Data: []byte("x")}})
	is.NoErr(err)
	for i := range ids {
		ids[i] = msgs[0].ID + int64(i)
	}
	is.NoErr(s.SetOutboxPublished(ctx, ids, at))
	pending, err := s.GetOutboxUnpublished(ctx, 0, time.Now().Add(time.Hour), 10)
	is.NoErr(err)
	is.Equal(len(pending), 0)
}
