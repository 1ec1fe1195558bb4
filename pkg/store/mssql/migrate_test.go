package mssql

// The migration's SQL Server code paths without a SQL Server: the database's
// state is given, and what Migrate sends goes to a recording connection
// that accepts every Exec.

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/migration"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
	"github.com/matryer/is"
)

// liveSQL is what the live database of the tests holds before primeflow:
// the spec's log table without primeflow's columns, a live
// spPrimeInsertWebhookLog of its own, and spPrimeflowGetJob exactly as
// 010_jobs.sql writes it (whoever put it there).
func liveSQL(t *testing.T) liveState {
	t.Helper()
	var getJob string
	for _, b := range scriptNamed(t, "010_jobs.sql").batches {
		if strings.Contains(b.sql, "PROCEDURE dbo.spPrimeflowGetJob\n") {
			getJob = b.sql
		}
	}
	if getJob == "" {
		t.Fatal("010_jobs.sql has no spPrimeflowGetJob")
	}
	return liveState{
		catalog: migration.Catalog{
			migration.Key(migration.Table, "ethPrimeWebhookLog"): {Kind: migration.Table, Name: "ethPrimeWebhookLog",
				Columns: []migration.Column{{Name: "id", Type: "BIGINT", Identity: true}, {Name: "receivedUTC", Type: "DATETIME2(3)"},
					{Name: "payload", Type: "NVARCHAR(MAX)"}}},
			migration.Key(migration.Procedure, "spPrimeInsertWebhookLog"): {Kind: migration.Procedure, Name: "spPrimeInsertWebhookLog",
				Definition: "CREATE PROCEDURE dbo.spPrimeInsertWebhookLog @Payload NVARCHAR(MAX), @Headers NVARCHAR(MAX) AS INSERT INTO dbo.ethPrimeWebhookLog (payload) VALUES (@Payload);"},
			migration.Key(migration.Procedure, "spPrimeflowGetJob"): {Kind: migration.Procedure, Name: "spPrimeflowGetJob", Definition: getJob},
		},
		settings: map[string]string{},
	}
}

func scriptNamed(t *testing.T, name string) script {
	t.Helper()
	for _, sc := range loaded(t) {
		if sc.name == name {
			return sc
		}
	}
	t.Fatalf("no script %s", name)
	return script{}
}

// migrating returns a connection that records what it is sent and accepts
// every Exec, handing each to exec when it is not nil.
func migrating(t *testing.T, exec func(query string) error) (*sql.Conn, *recorder) {
	t.Helper()
	rec := &recorder{exec: func(q string) error {
		if exec != nil {
			return exec(q)
		}
		return nil
	}}
	db := sql.OpenDB(rec)
	t.Cleanup(func() { db.Close() })
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatalf("conn: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, rec
}

func given(st liveState) func(context.Context, sqlrows.Querier) (liveState, error) {
	return func(context.Context, sqlrows.Querier) (liveState, error) { return st, nil }
}

// sentBatches are the script batches among what was sent.
func sentBatches(sends []sent) []string {
	var out []string
	for _, s := range sends {
		if strings.Contains(s.query, "CREATE OR ALTER") || strings.Contains(s.query, "IF OBJECT_ID(N'dbo.") {
			out = append(out, s.query)
		}
	}
	return out
}

func TestMigrateRefusesWhatItDoesNotOwn(t *testing.T) {
	is := is.New(t)
	conn, rec := migrating(t, nil)
	plan, err := migrate(context.Background(), conn, Options{}, given(liveSQL(t)))
	var refused *migration.RefusedError
	is.True(errors.As(err, &refused))             // refused
	is.True(errors.Is(err, migration.ErrRefused)) // as ErrRefused
	var names []string
	for _, it := range refused.Items {
		names = append(names, it.Name)
	}
	is.Equal(names, []string{"ethPrimeWebhookLog", "spPrimeInsertWebhookLog"}) // the live objects primeflow would change
	is.Equal(len(sentBatches(rec.take())), 0)                                  // and nothing of any script was sent
	it, _ := plan.Item(migration.Procedure, "spPrimeflowGetJob")
	is.Equal(it.State, migration.Same) // a live copy identical to the script's needs nothing
}

func TestMigratePlanOnlyChangesNothing(t *testing.T) {
	is := is.New(t)
	conn, rec := migrating(t, nil)
	plan, err := migrate(context.Background(), conn, Options{PlanOnly: true,
		Settings: []migration.Setting{{Name: store.SettingMakesafeSMSRecipient, Want: "+61400000000", From: "MAKESAFE_SMS_TO"}}}, given(liveSQL(t)))
	is.NoErr(err)                    // a plan is not refused
	is.Equal(len(plan.Refused()), 2) // it says what would be
	is.True(!plan.Settings[0].Found) // and that the setting is not there yet
	sends := rec.take()
	is.Equal(len(sends), 1)                                      // the session's SET options, nothing else
	is.True(strings.HasPrefix(sends[0].query, "SET ANSI_NULLS")) // not even the lock
}

func TestMigrateAdoptsAfterCapturing(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	is.NoErr(os.Chmod(dir, 0o755)) // a folder that was there
	at := time.Date(2026, 3, 1, 10, 15, 0, 0, time.UTC)
	captured := filepath.Join(dir, "20260301T101500Z", "Programmable", "dbo.spPrimeInsertWebhookLog.sql")
	var firstBatchSawCapture *bool
	conn, rec := migrating(t, func(q string) error {
		if firstBatchSawCapture == nil && strings.Contains(q, "CREATE OR ALTER") {
			_, err := os.Stat(captured)
			ok := err == nil
			firstBatchSawCapture = &ok
		}
		return nil
	})
	plan, err := migrate(context.Background(), conn, Options{
		Adopt: []string{"dbo.spPrimeInsertWebhookLog", "ethPrimeWebhookLog"}, CaptureDir: dir, Now: func() time.Time { return at },
		Settings: []migration.Setting{{Name: store.SettingMakesafeSMSRecipient, Want: "+61400000000", From: "MAKESAFE_SMS_TO"}},
	}, given(liveSQL(t)))
	is.NoErr(err)
	is.Equal(len(plan.Adopted()), 2)                              // both taken over
	is.True(firstBatchSawCapture != nil && *firstBatchSawCapture) // captured before the first batch ran

	text, err := os.ReadFile(captured)
	is.NoErr(err)
	is.True(strings.Contains(string(text), "@Headers NVARCHAR(MAX) AS INSERT")) // the live definition, as it was
	table, err := os.ReadFile(filepath.Join(dir, "20260301T101500Z", "Tables", "dbo.ethPrimeWebhookLog.sql"))
	is.NoErr(err)
	is.True(strings.Contains(string(table), "[id] BIGINT IDENTITY NOT NULL")) // the live table's columns
	for _, p := range []string{captured, filepath.Dir(captured), filepath.Dir(filepath.Dir(captured))} {
		fi, err := os.Stat(p)
		is.NoErr(err)
		is.Equal(fi.Mode().Perm()&0o077, os.FileMode(0)) // the owner's only, though dir is open to all (issue 27 §8)
	}

	sends := rec.take()
	all := make([]string, len(sends))
	for i, s := range sends {
		all[i] = s.query
	}
	joined := strings.Join(all, "\n--\n")
	is.True(!strings.Contains(joined, "PROCEDURE dbo.spPrimeflowGetJob\n")) // held as written: not sent again
	marks := map[string]string{}
	var recorded []string
	for _, s := range sends {
		args := map[string]any{}
		for _, a := range s.args {
			args[a.Name] = a.Value
		}
		switch s.query {
		case markOwner:
			marks[args["object"].(string)] = args["mark"].(string)
		case recordScript:
			recorded = append(recorded, args["name"].(string))
			is.Equal(args["checksum"], scriptNamed(t, args["name"].(string)).checksum()) // with its checksum
		}
	}
	is.Equal(marks["spPrimeInsertWebhookLog"], "adopted by 001_webhook_log.sql at 2026-03-01T10:15:00Z") // adopted, marked so
	is.Equal(marks["ethPrimeWebhookLog"], "adopted by 001_webhook_log.sql at 2026-03-01T10:15:00Z")
	is.Equal(marks["ethPrimeJobReference"], "created by 001_webhook_log.sql") // created, marked so
	is.Equal(marks["primeflowIdList"], "created by 001_webhook_log.sql")      // types too
	_, marked := marks["spPrimeflowGetJob"]
	is.True(!marked)                                  // the one it found as written is not claimed
	is.Equal(len(recorded), len(loaded(t)))           // every script recorded
	is.True(strings.Contains(joined, procSetSetting)) // and the setting written
}

func TestMigrateAgainSendsNoScript(t *testing.T) {
	is := is.New(t)
	scripts := loaded(t)
	st := liveState{catalog: migration.Catalog{}, settings: map[string]string{store.SettingMakesafeSMSRecipient: "+61400000000"}}
	for _, sc := range scripts {
		st.history = append(st.history, migration.Applied{Name: sc.name, Checksum: sc.checksum()})
	}
	objs, err := migration.Objects(plainScripts(scripts))
	is.NoErr(err)
	for _, o := range objs { // the database as the scripts left it
		l := migration.Live{Kind: o.Kind, Name: o.Name, Definition: o.Definition, Owner: "created by " + o.Scripts[0]}
		for _, c := range o.Columns {
			l.Columns = append(l.Columns, migration.Column{Name: c.Name, Type: c.Type})
		}
		for _, ix := range o.Indexes {
			l.Indexes = append(l.Indexes, ix.Name)
		}
		st.catalog[migration.Key(o.Kind, o.Name)] = l
	}
	conn, rec := migrating(t, nil)
	plan, err := migrate(context.Background(), conn, Options{
		Settings: []migration.Setting{{Name: store.SettingMakesafeSMSRecipient, Want: "+61400000000"}}}, given(st))
	is.NoErr(err)
	is.True(!plan.Runs()) // nothing to apply
	for _, it := range plan.Items {
		if it.State != migration.Same {
			t.Errorf("%s %s: %s %v", it.Kind, it.Name, it.State, it.Reasons)
		}
	}
	for _, s := range rec.take() {
		is.True(!strings.Contains(s.query, "CREATE OR ALTER")) // no script
		is.True(s.query != recordScript)                       // no history
		is.True(s.query != procSetSetting)                     // the setting already holds the value
	}
}

func TestMigrateAdoptingNeedsACaptureFolder(t *testing.T) {
	is := is.New(t)
	conn, rec := migrating(t, nil)
	_, err := migrate(context.Background(), conn, Options{Adopt: []string{"spPrimeInsertWebhookLog", "ethPrimeWebhookLog"}}, given(liveSQL(t)))
	is.True(err != nil && strings.Contains(err.Error(), "capture folder")) // nowhere to keep what it replaces
	is.Equal(len(sentBatches(rec.take())), 0)                              // so nothing is applied
}

func TestMigrateStopsAtAFailingScript(t *testing.T) {
	is := is.New(t)
	boom := errors.New("Msg 134: The variable name has already been declared")
	conn, rec := migrating(t, func(q string) error {
		if strings.Contains(q, "PROCEDURE dbo.spPrimeflowReplaceJobEstimates") {
			return boom
		}
		return nil
	})
	_, err := migrate(context.Background(), conn, Options{}, given(liveState{catalog: migration.Catalog{}}))
	is.True(errors.Is(err, boom))                                  // the server's error
	is.True(strings.Contains(err.Error(), "020_child_mirror.sql")) // named with its script
	var recorded []string
	for _, s := range rec.take() {
		if s.query == recordScript {
			recorded = append(recorded, s.args[0].Value.(string))
		}
	}
	is.Equal(recorded, []string{"001_webhook_log.sql", "002_mirror.sql", "003_outbox.sql", "004_identify.sql",
		"010_jobs.sql", "011_job_triggers.sql", "012_sync_queue.sql"}) // the scripts before it, not it nor after
}

func TestCaptureText(t *testing.T) {
	is := is.New(t)
	at := time.Date(2026, 3, 1, 10, 15, 0, 0, time.UTC)
	got := captureText(migration.Live{Kind: migration.Table, Name: "t]x", Indexes: []string{"IX_t"}, Columns: []migration.Column{
		{Name: "id", Type: "BIGINT", Identity: true},
		{Name: "name", Type: "NVARCHAR(50)", Nullable: true, Default: "(N'')"},
		{Name: "flag", Type: migration.Computed, Expression: "(CONVERT([bit],(1)))"},
	}}, at)
	is.Equal(got, `-- table dbo.t]x as the database held it at 2026-03-01T10:15:00Z, captured by primectl migrate before adopting it.
CREATE TABLE dbo.[t]]x] (
    [id] BIGINT IDENTITY NOT NULL,
    [name] NVARCHAR(50) NULL DEFAULT (N''),
    [flag] AS (CONVERT([bit],(1)))
);
GO
-- index IX_t
`) // a table to read, and to recreate by hand
}

func TestTypeName(t *testing.T) {
	is := is.New(t)
	is.Equal(typeName("nvarchar", 100, 0, 0), "NVARCHAR(50)") // bytes to characters
	is.Equal(typeName("nvarchar", -1, 0, 0), "NVARCHAR(MAX)") // MAX
	is.Equal(typeName("varchar", 20, 0, 0), "VARCHAR(20)")    // one byte a character
	is.Equal(typeName("decimal", 9, 19, 4), "DECIMAL(19,4)")  // precision and scale
	is.Equal(typeName("datetime2", 8, 27, 3), "DATETIME2(3)") // fractional digits
	is.Equal(typeName("uniqueidentifier", 16, 0, 0), "UNIQUEIDENTIFIER")
}
