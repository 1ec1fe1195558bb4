package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

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
