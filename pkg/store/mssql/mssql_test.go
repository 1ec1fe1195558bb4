package mssql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/storetest"
	schema "github.com/ethosbuilding/primeflow/sql"
	"github.com/matryer/is"
)

// skipped is said, loudly, when there is no SQL Server to test against.
const skipped = "mssql: SKIPPED — MSSQL_DSN is not set; the SQL Server contract tests did not run"

func TestMain(m *testing.M) {
	if os.Getenv("MSSQL_DSN") == "" {
		fmt.Fprintln(os.Stderr, skipped)
	}
	os.Exit(m.Run())
}

// server returns the MSSQL_DSN database, migrated, with every table the
// scripts create emptied, and a Store on it; it skips the test when MSSQL_DSN
// is not set. Tests that use it share one database, so none runs in parallel.
func server(t *testing.T) (*Store, *sql.DB) {
	t.Helper()
	dsn := os.Getenv("MSSQL_DSN")
	if dsn == "" {
		t.Skip(skipped)
	}
	ctx := context.Background()
	db, err := sql.Open("sqlserver", dsn)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	if err := Migrate(ctx, db); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	for _, table := range slices.Sorted(maps.Keys(tables(readAll(t, schema.MSSQL, "mssql")))) {
		if _, err := db.ExecContext(ctx, "TRUNCATE TABLE dbo."+table); err != nil {
			t.Fatalf("empty %s: %v", table, err)
		}
	}
	s, err := Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, db
}

func TestContract(t *testing.T) {
	if os.Getenv("MSSQL_DSN") == "" {
		t.Skip(skipped)
	}
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _ := server(t)
		return s
	})
}

func TestMigrateAgainAndAtOnce(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	_, db := server(t)
	is.NoErr(Migrate(ctx, db)) // nothing left to apply

	// Forget 001 and apply it over the schema it built: every batch must
	// cope with objects that already exist.
	_, err := db.ExecContext(ctx, `DELETE FROM dbo.primeflowSchemaMigrations WHERE name = N'001_webhook_log.sql'`)
	is.NoErr(err)
	_, err = Open(ctx, os.Getenv("MSSQL_DSN"))
	is.True(err != nil)                                            // a store refuses a database that lacks a script
	is.True(strings.Contains(err.Error(), "run primectl migrate")) // and says what to do

	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { errs[i] = Migrate(ctx, db) })
	}
	wg.Wait()
	for _, err := range errs {
		is.NoErr(err) // concurrent migrations take turns, and a re-run script is harmless
	}
	var n int
	is.NoErr(db.QueryRowContext(ctx, `SELECT COUNT(*) FROM dbo.primeflowSchemaMigrations WHERE name = N'001_webhook_log.sql'`).Scan(&n))
	is.Equal(n, 1) // recorded once
	s, err := Open(ctx, os.Getenv("MSSQL_DSN"))
	is.NoErr(err) // the schema is whole again
	s.Close()
}

func TestSaveJobReferenceRace(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, _ := server(t)
	const job = "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"
	const other = "7d3f8e21-9c4b-4d1e-8f6a-5b2c9e0a1d34"
	var wg sync.WaitGroup
	inserted := make([]bool, 8)
	errs := make([]error, 8)
	for i := range inserted {
		wg.Go(func() {
			j := job
			if i%2 == 1 {
				j = other
			}
			inserted[i], errs[i] = s.SaveJobReference(ctx, 42, j)
		})
	}
	wg.Wait()
	wins, conflicts := 0, 0
	for i := range inserted {
		if inserted[i] {
			wins++
		}
		if errors.Is(errs[i], store.ErrReferenceConflict) {
			conflicts++
		} else {
			is.NoErr(errs[i]) // the only error is the conflict
		}
	}
	is.Equal(wins, 1)      // exactly one session inserts
	is.Equal(conflicts, 4) // every session saving the losing job conflicts
}

func TestConflictLeavesTheTransactionUsable(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, _ := server(t)
	_, err := s.SaveJobReference(ctx, 7, "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10")
	is.NoErr(err)
	var id int64
	err = s.InTx(ctx, func(tx store.Store) error {
		_, err := tx.SaveJobReference(ctx, 7, "7d3f8e21-9c4b-4d1e-8f6a-5b2c9e0a1d34")
		is.True(errors.Is(err, store.ErrReferenceConflict)) // the conflict
		id, err = tx.InsertWebhookLog(ctx, store.NewWebhookLogRow{Payload: "{}"})
		return err // the transaction goes on after it
	})
	is.NoErr(err)
	_, err = s.GetWebhookLog(ctx, id)
	is.NoErr(err) // and commits
}

func TestGUIDsComeBackLowerCase(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, _ := server(t)
	const upper = "0B6A3C52-3E0F-4A57-9A39-2F1D7C1E4B10"
	id, err := s.InsertWebhookLog(ctx, store.NewWebhookLogRow{JobID: upper, Payload: "{}"})
	is.NoErr(err)
	got, err := s.GetWebhookLog(ctx, id)
	is.NoErr(err)
	is.Equal(got.JobID, strings.ToLower(upper)) // canonical lower case, bytes in the right order
	_, err = s.SaveJobReference(ctx, 9, upper)
	is.NoErr(err)
	job, _, err := s.GetJobIDByReference(ctx, 9)
	is.NoErr(err)
	is.Equal(job, strings.ToLower(upper)) // the same through the reference map
}

func TestBatchInsertAcrossChunks(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, _ := server(t)
	rows := make([]store.NewWebhookLogRow, 2*insertBatchRows+7)
	for i := range rows {
		rows[i] = store.NewWebhookLogRow{EventAction: fmt.Sprint(i), Payload: "{}"}
	}
	ids, err := s.InsertWebhookLogs(ctx, rows)
	is.NoErr(err)
	is.Equal(len(ids), len(rows)) // an id a row
	for i, id := range ids {
		if i > 0 {
			is.True(id > ids[i-1]) // in order
		}
	}
	got, err := s.GetWebhookLog(ctx, ids[len(ids)-1])
	is.NoErr(err)
	is.Equal(got.EventAction, fmt.Sprint(len(rows)-1)) // the last id holds the last row
}
