package service_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
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
		done <- service.Main(mctx, "locked-test", func(k string) string { return vars[k] }, logs, nil,
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
	err = service.Main(bctx, "bad-db-test", func(k string) string { return vars[k] }, logs, nil,
		func(context.Context, service.Deps, *service.Router) (service.Runner, error) {
			t.Fatal("built on a database that cannot be opened")
			return nil, nil
		})
	is.True(err != nil)                                // refused
	is.True(!errors.Is(err, context.DeadlineExceeded)) // at once, not after waiting
}

// ownConfig is a service's own configuration, for Main.
type ownConfig struct {
	Workers int `env:"OWN_WORKERS" envDefault:"4"`
}

func (c ownConfig) Validate() error { return config.Positive("OWN_WORKERS", c.Workers) }

// Main reads and checks a service's own settings with the shared ones, and
// refuses every bad one at once before it binds its port (held here, so a
// bind would fail otherwise) or builds the service.
func TestMainRefusesEverySettingAtOnce(t *testing.T) {
	is := is.New(t)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	is.NoErr(err)
	defer held.Close()
	vars := map[string]string{"HTTP_ADDR": held.Addr().String(), "HTTP_MAX_CONNS": "0", "LOG_LEVEL": "loud", "OWN_WORKERS": "0"}
	var own ownConfig
	built := false
	err = service.Main(context.Background(), "settings-test", func(k string) string { return vars[k] }, io.Discard,
		[]config.Part{config.Read(&own, ownConfig.Validate)},
		func(context.Context, service.Deps, *service.Router) (service.Runner, error) {
			built = true
			return nil, nil
		})
	var ce *config.Error
	is.True(errors.As(err, &ce)) // the configuration's error, not the port's
	is.Equal(err.Error(), "3 settings refused:\n"+
		"  LOG_LEVEL=\"loud\": want debug, info, warn or error\n"+
		"  HTTP_MAX_CONNS=\"0\": must be above zero\n"+
		"  OWN_WORKERS=\"0\": must be above zero") // each named with its value, the shared ones first
	is.True(!built) // nothing built
}
