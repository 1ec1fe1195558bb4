package service_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
	"github.com/matryer/is"
)

// TestMainWaitsForALockedDatabase: another program holds the database's
// write lock as a service starts (a migration, a backup; 30 s in the chaos
// runs, past SQLite's 10 s busy timeout). The service says it waits, and
// starts once the lock is released, instead of exiting on "database is
// locked" (job-mirror and optimo-create did). A database that cannot be
// opened at all still stops it at once.
func TestMainWaitsForALockedDatabase(t *testing.T) {
	is := is.New(t)
	ns := natstest.Server(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "primeflow.db")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := sqlite.Open(ctx, path) // made and migrated, as primectl migrate would
	is.NoErr(err)
	is.NoErr(st.Close())
	other, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate")
	is.NoErr(err)
	defer other.Close()
	tx, err := other.BeginTx(ctx, nil) // the other program's write lock
	is.NoErr(err)

	vars := map[string]string{"NATS_URL": ns.ClientURL(), "DATA_DIR": dir, "HTTP_ADDR": "127.0.0.1:0"}
	logs := &flowtest.Buffer{}
	started := make(chan struct{})
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- service.Main(mctx, "locked-test", func(k string) string { return vars[k] }, logs,
			func(context.Context, service.Deps, *service.Router) (service.Runner, error) {
				close(started)
				return service.RunnerFunc(func(ctx context.Context) error { <-ctx.Done(); return nil }), nil
			})
	}()
	flowtest.Poll(t, time.Minute, 50*time.Millisecond, "the service to say it waits for the database", func() bool {
		select {
		case err := <-done:
			t.Fatalf("Main returned while the database was locked: %v", err)
		default:
		}
		return strings.Contains(logs.String(), "database not ready; waiting")
	})
	select {
	case <-started:
		t.Fatal("the service started on a locked database")
	default:
	}
	is.NoErr(tx.Rollback()) // the other program is done

	select {
	case <-started: // the service starts
	case err := <-done:
		t.Fatalf("Main returned: %v", err)
	case <-ctx.Done():
		t.Fatal("the service did not start once the database was free")
	}
	stop()
	is.NoErr(<-done)

	vars["DATABASE_URL"] = "sqlite:" + filepath.Join(path, "under-a-file.db") // a path that cannot be: the configuration's error
	bctx, bcancel := context.WithTimeout(ctx, 30*time.Second)
	defer bcancel()
	err = service.Main(bctx, "bad-db-test", func(k string) string { return vars[k] }, logs,
		func(context.Context, service.Deps, *service.Router) (service.Runner, error) {
			t.Fatal("built on a database that cannot be opened")
			return nil, nil
		})
	is.True(err != nil)                                // refused
	is.True(!errors.Is(err, context.DeadlineExceeded)) // at once, not after waiting
}
