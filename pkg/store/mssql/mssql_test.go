package mssql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/migration"
	"github.com/ethosbuilding/primeflow/pkg/store/storetest"
	schema "github.com/ethosbuilding/primeflow/sql"
	"github.com/matryer/is"
)

// skipped is said, loudly, when there is no SQL Server to test against.
const skipped = "mssql: SKIPPED — MSSQL_DSN is not set; the SQL Server contract tests did not run"

// contractDSN names the database the SQL Server tests run in: one made for
// the run on MSSQL_DSN's server, with a case-insensitive collation, as a
// default instance has (names that differ only in case are one name there);
// or, with MSSQL_USE_DATABASE=1, MSSQL_DSN's own database (contractdb_test.go).
var contractDSN string

// contractCollation is that database's collation.
const contractCollation = "Latin1_General_100_CI_AS"

func TestMain(m *testing.M) {
	dsn := os.Getenv("MSSQL_DSN")
	if dsn == "" {
		if os.Getenv(useDatabaseVar) != "" {
			fmt.Fprintf(os.Stderr, "mssql: %s is set, but MSSQL_DSN, which names the database, is not\n", useDatabaseVar)
		}
		fmt.Fprintln(os.Stderr, skipped)
		os.Exit(m.Run())
	}
	var drop func()
	use, err := useGivenDatabase()
	switch {
	case err != nil:
	case use:
		contractDSN = dsn
		drop, err = givenDatabase(dsn)
	default:
		contractDSN, drop, err = contractDatabase(dsn)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mssql:", err)
		os.Exit(1)
	}
	code := m.Run()
	drop()
	os.Exit(code)
}

// contractDatabase makes a database for the run on dsn's server, with
// contractCollation, and returns its DSN and how to drop it. It says which
// collation the instance has: variable names follow the instance's, not the
// database's, so on a case-sensitive instance TestNamesAreUniqueIgnoringCase
// is what keeps them apart.
func contractDatabase(dsn string) (string, func(), error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme != "sqlserver" {
		return "", nil, errors.New("MSSQL_DSN: want sqlserver://user:password@host?database=name")
	}
	ctx := context.Background()
	db, err := sql.Open("sqlserver", dsn)
	if err != nil {
		return "", nil, err
	}
	var instance string
	if err := db.QueryRowContext(ctx, `SELECT CONVERT(NVARCHAR(128), SERVERPROPERTY('Collation'))`).Scan(&instance); err != nil {
		db.Close()
		return "", nil, fmt.Errorf("connect to MSSQL_DSN: %w", err)
	}
	name := fmt.Sprintf("primeflow_contract_%d_%d", os.Getpid(), time.Now().Unix())
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+quoteName(name)+" COLLATE "+contractCollation); err != nil {
		db.Close()
		return "", nil, fmt.Errorf("the contract suite makes a database of its own on MSSQL_DSN's server (CREATE DATABASE): %w; with a login that may not, or a server that takes only its own collation, set %s=1 and name an empty sandbox database in MSSQL_DSN", err, useDatabaseVar)
	}
	fmt.Fprintf(os.Stderr, "mssql: contract suite in database %s (%s); the instance's collation is %s\n", name, contractCollation, instance)
	if !strings.Contains(strings.ToUpper(instance), "_CI") {
		fmt.Fprintln(os.Stderr, "mssql: NOTE — a case-sensitive instance: variable names are compared as it compares them, so @x and @X do not collide here; the offline TestNamesAreUniqueIgnoringCase guards them")
	}
	q := u.Query()
	q.Set("database", name)
	u.RawQuery = q.Encode()
	return u.String(), func() {
		defer db.Close()
		if _, err := db.ExecContext(ctx, "ALTER DATABASE "+quoteName(name)+" SET SINGLE_USER WITH ROLLBACK IMMEDIATE; DROP DATABASE "+quoteName(name)); err != nil {
			fmt.Fprintf(os.Stderr, "mssql: drop the contract database %s: %v\n", name, err)
		}
	}, nil
}

// server returns the contract database, migrated, with every table the
// scripts create emptied, and a Store on it; it skips the test when MSSQL_DSN
// is not set. Tests that use it share one database, so none runs in parallel.
func server(t *testing.T) (*Store, *sql.DB) {
	t.Helper()
	dsn := contractDSN
	if dsn == "" {
		t.Skip(skipped)
	}
	ctx := context.Background()
	db, err := sql.Open("sqlserver", dsn)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := Migrate(ctx, db, Options{}); err != nil {
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
	if contractDSN == "" {
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
	_, err := Migrate(ctx, db, Options{})
	is.NoErr(err) // nothing left to apply

	// Forget 001 and apply it over the schema it built: every batch must
	// cope with objects that already exist.
	_, err = db.ExecContext(ctx, `DELETE FROM dbo.primeflowSchemaMigrations WHERE name = N'001_webhook_log.sql'`)
	is.NoErr(err)
	_, err = Open(ctx, contractDSN)
	is.True(err != nil)                                            // a store refuses a database that lacks a script
	is.True(strings.Contains(err.Error(), "run primectl migrate")) // and says what to do

	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { _, errs[i] = Migrate(ctx, db, Options{}) })
	}
	wg.Wait()
	for _, err := range errs {
		is.NoErr(err) // concurrent migrations take turns, and a re-run script is harmless
	}
	var n int
	is.NoErr(db.QueryRowContext(ctx, `SELECT COUNT(*) FROM dbo.primeflowSchemaMigrations WHERE name = N'001_webhook_log.sql'`).Scan(&n))
	is.Equal(n, 1) // recorded once
	s, err := Open(ctx, contractDSN)
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

// The scripts run under a case-insensitive collation (contractDatabase), or
// the one of MSSQL_USE_DATABASE's database when that is case-insensitive.
func TestContractDatabaseIsCaseInsensitive(t *testing.T) {
	if caseSensitive(givenDatabaseCollation) && givenDatabaseCollation != "" {
		t.Skipf("%s: the database's collation %s is case-sensitive, unlike the live database's", useDatabaseVar, givenDatabaseCollation)
	}
	is := is.New(t)
	_, db := server(t)
	var collation string
	is.NoErr(db.QueryRowContext(context.Background(), `SELECT CONVERT(NVARCHAR(128), DATABASEPROPERTYEX(DB_NAME(), 'Collation'))`).Scan(&collation))
	if givenDatabaseCollation != "" {
		is.True(!caseSensitive(collation)) // names that differ only in case are one name here
		return
	}
	is.Equal(collation, contractCollation) // names that differ only in case are one name here
}

// migrate --plan, refusal, adoption with capture and ownership marks, over
// the catalog queries of a real server.
func TestMigratePlanAdoptCaptureOnServer(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	_, db := server(t)

	plan, err := Migrate(ctx, db, Options{PlanOnly: true})
	is.NoErr(err)
	is.True(!plan.Runs()) // everything applied
	for _, it := range plan.Items {
		if it.State != migration.Same || !it.Owned() {
			t.Errorf("%s %s: %s, owner %q: %v", it.Kind, it.Name, it.State, it.Live.Owner, it.Reasons) // the server's copy reads back as written, and primeflow's
		}
	}

	// A live procedure primeflow does not own, different from the script's,
	// which a changed 010 would replace.
	const hand = "CREATE OR ALTER PROCEDURE dbo.spPrimeflowGetJob @JobId UNIQUEIDENTIFIER AS SELECT 42 AS fromTheLiveDatabase;"
	_, err = db.ExecContext(ctx, hand)
	is.NoErr(err)
	_, err = db.ExecContext(ctx, `EXEC sys.sp_dropextendedproperty @name = N'`+migration.OwnerProperty+`',
		@level0type = N'SCHEMA', @level0name = N'dbo', @level1type = N'PROCEDURE', @level1name = N'spPrimeflowGetJob';`)
	is.NoErr(err)
	_, err = db.ExecContext(ctx, `UPDATE dbo.primeflowSchemaMigrations SET checksum = N'changed' WHERE name = N'010_jobs.sql'`)
	is.NoErr(err)
	t.Cleanup(func() { // leave the schema whole for the tests after this one
		if _, err := Migrate(ctx, db, Options{Adopt: []string{"spPrimeflowGetJob"}, CaptureDir: t.TempDir()}); err != nil {
			t.Errorf("restore: %v", err)
		}
	})

	_, err = Migrate(ctx, db, Options{})
	var refused *migration.RefusedError
	is.True(errors.As(err, &refused)) // refused
	is.Equal(len(refused.Items), 1)
	is.Equal(refused.Items[0].Name, "spPrimeflowGetJob") // naming the object
	var def string
	is.NoErr(db.QueryRowContext(ctx, `SELECT OBJECT_DEFINITION(OBJECT_ID(N'dbo.spPrimeflowGetJob'))`).Scan(&def))
	is.True(strings.Contains(def, "fromTheLiveDatabase")) // and left alone

	dir := t.TempDir()
	at := time.Now().UTC().Truncate(time.Second)
	plan, err = Migrate(ctx, db, Options{Adopt: []string{"spPrimeflowGetJob"}, CaptureDir: dir, Now: func() time.Time { return at }})
	is.NoErr(err)
	is.Equal(len(plan.Adopted()), 1) // adopted
	captured, err := os.ReadFile(filepath.Join(dir, at.Format("20060102T150405Z"), "Programmable", "dbo.spPrimeflowGetJob.sql"))
	is.NoErr(err)
	is.True(strings.Contains(string(captured), "fromTheLiveDatabase")) // its definition captured first
	is.NoErr(db.QueryRowContext(ctx, `SELECT OBJECT_DEFINITION(OBJECT_ID(N'dbo.spPrimeflowGetJob'))`).Scan(&def))
	is.True(!strings.Contains(def, "fromTheLiveDatabase")) // then replaced
	var mark string
	is.NoErr(db.QueryRowContext(ctx, `SELECT CONVERT(NVARCHAR(4000), value) FROM sys.fn_listextendedproperty(N'`+migration.OwnerProperty+`',
		N'SCHEMA', N'dbo', N'PROCEDURE', N'spPrimeflowGetJob', NULL, NULL)`).Scan(&mark))
	is.True(strings.HasPrefix(mark, "adopted by 010_jobs.sql")) // and marked primeflow's

	plan, err = Migrate(ctx, db, Options{Settings: []migration.Setting{{Name: store.SettingMakesafeSMSRecipient, Want: "+61400000000"}}})
	is.NoErr(err)
	is.True(!plan.Runs()) // a run again applies nothing
	s, err := Open(ctx, contractDSN)
	is.NoErr(err)
	defer s.Close()
	v, _, err := s.GetSetting(ctx, store.SettingMakesafeSMSRecipient)
	is.NoErr(err)
	is.Equal(v, "+61400000000") // the settings row written
}

// The spec's call shapes, as n8n and the portals send them: the spec's
// parameters and nothing else, by name and by position.
func TestSpecCallShapesOnServer(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, db := server(t)
	const job = "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"
	is.NoErr(s.SetSetting(ctx, store.SettingMakesafeSMSRecipient, "+61400000000"))
	_, err := s.UpsertJob(ctx, store.Job{JobID: job, JobNumber: "J014370", Version: 1,
		CreatedAt: time.Date(2026, 10, 3, 12, 14, 33, 0, time.UTC)}) // a Saturday night in Melbourne
	is.NoErr(err)

	// §6, §7: the email flow's call; no offsets, no recipient.
	_, err = db.ExecContext(ctx, `EXEC dbo.spMakesafeUpsertPhoneCallFromPrimeJob @JobId = @p1, @QueueMakeAllocationChecks = 1;`, job)
	is.NoErr(err)
	checks, err := s.ListMakesafeChecks(ctx, job)
	is.NoErr(err)
	is.Equal(len(checks), len(store.DefaultMakesafeLadder)) // the default ladder
	// An allocation another writer saves, without isMakeSafe (§6's n8n sync).
	_, err = db.ExecContext(ctx, `INSERT INTO dbo.primeAllocations (allocationId, jobId, allocationType, syncedUTC) VALUES (NEWID(), @p1, N'make-safe', SYSUTCDATETIME());`, job)
	is.NoErr(err)
	_, err = db.ExecContext(ctx, `EXEC dbo.spMakesafeUpsertPhoneCallFromPrimeJob @p1, 0;`, job) // §5.5, by position
	is.NoErr(err)
	call, found, err := s.GetMakesafePhoneCall(ctx, job)
	is.NoErr(err)
	is.True(found) // raised: isMakeSafe derived from the row's own type
	m, err := s.GetSMS(ctx, call.SMSID)
	is.NoErr(err)
	is.Equal(m.Recipient, "+61400000000") // to the configured default

	// §3, §4.1, §4.2, §6, §8.4 with the spec's parameters alone.
	id, err := s.InsertWebhookLog(ctx, store.NewWebhookLogRow{Payload: "{}"})
	is.NoErr(err)
	for _, q := range []string{
		`EXEC dbo.spPrimeGetWebhookLogUnprocessed;`,
		`EXEC dbo.spPrimeGetWebhookLogUnprocessed @Top = 50, @MaxAttempts = 5;`,
		`EXEC dbo.spPrimeIncrementWebhookLogAttempt @ID = @p1, @JobId = NULL, @ProcessStatus = N'boom';`,
		`EXEC dbo.spPrimeSetWebhookLogProcessed @ID = @p1, @JobId = NULL, @ProcessStatus = N'Processed';`,
		`EXEC dbo.spPrimeSaveJobReference @NumericReference = 2402073, @JobId = '` + job + `';`,
		`EXEC dbo.spPrimeGetJobIDbyReference @NumericReference = 2402073;`,
		`EXEC dbo.spPrimeIdentifyGuid @Id = '` + job + `';`,
		`EXEC dbo.spEthSyncQueueMissingObjectsByJobID @JobId = '` + job + `';`,
		`EXEC dbo.spOptimoRoutePlanSetStatus @PlanDate = '2026-10-05', @Status = N'NotPlanned';`,
	} {
		var args []any
		if strings.Contains(q, "@p1") {
			args = append(args, id)
		}
		_, err := db.ExecContext(ctx, q, args...)
		is.NoErr(err) // the call is accepted as the spec writes it
	}
	row, err := s.GetWebhookLog(ctx, id)
	is.NoErr(err)
	is.True(row.Processed() && row.ProcessAttempts == 1) // and does what the spec says
	ref, found, err := s.GetJobIDByReference(ctx, 2402073)
	is.NoErr(err)
	is.True(found && ref == job)
	day, found, err := s.GetPlan(ctx, "2026-10-05")
	is.NoErr(err)
	is.True(found && day.PlanStatus == store.PlanNotPlanned)
}
