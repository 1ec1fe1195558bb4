package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/migration"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
	"github.com/ethosbuilding/primeflow/pkg/store/storetest"
	schema "github.com/ethosbuilding/primeflow/sql"
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

// migrate --plan on SQLite: a missing file plans every script without
// making the file; a migrated one plans nothing; a table changed by hand and
// a changed script are noticed.
func TestPlan(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "primeflow.db")
	recipient := []migration.Setting{{Name: store.SettingMakesafeSMSRecipient, Want: "+61400000000", From: "MAKESAFE_SMS_TO"}}

	plan, err := sqlite.Plan(ctx, path, recipient)
	is.NoErr(err)
	is.True(plan.Runs()) // every script is pending
	for _, it := range plan.Items {
		is.Equal(it.Action, migration.Create) // every table
	}
	_, err = os.Stat(path)
	is.True(errors.Is(err, fs.ErrNotExist)) // and the plan made no file

	plan, err = sqlite.Migrate(ctx, path, recipient)
	is.NoErr(err)
	is.True(plan.Runs()) // it acted on that plan
	plan, err = sqlite.Plan(ctx, path, recipient)
	is.NoErr(err)
	is.True(!plan.Runs()) // then nothing is left
	for _, it := range plan.Items {
		if it.State != migration.Same {
			t.Errorf("%s: %s %v", it.Name, it.State, it.Reasons)
		}
	}
	is.True(plan.Settings[0].Found && plan.Settings[0].Current == "+61400000000") // the setting was written

	db, err := sql.Open("sqlite", path)
	is.NoErr(err)
	defer db.Close()
	for _, q := range []string{
		`DROP INDEX IX_ethAIJobSummaryQueue_QueuedFor`,
		`ALTER TABLE ethAIJobSummaryQueue DROP COLUMN updatedUTC`,
		`UPDATE primeflowSchemaMigrations SET checksum = 'edited' WHERE name = '020_child_mirror.sql'`,
	} {
		_, err := db.ExecContext(ctx, q)
		is.NoErr(err)
	}
	plan, err = sqlite.Plan(ctx, path, nil)
	is.NoErr(err)
	it, _ := plan.Item(migration.Table, "ethAIJobSummaryQueue")
	is.Equal(it.State, migration.Different) // noticed
	is.Equal(it.Action, migration.None)     // SQLite scripts run once: nothing would change it back
	why := strings.Join(it.Reasons, "\n")
	is.True(strings.Contains(why, "lacks column updatedUTC")) // the column
	is.True(strings.Contains(why, "lacks index IX_ethAIJobSummaryQueue_QueuedFor"))
	var changed bool
	for _, s := range plan.Scripts {
		if strings.HasSuffix(s.Name, "020_child_mirror.sql") {
			changed = s.Status == migration.Changed && !s.Runs
		}
	}
	is.True(changed) // the changed script, not applied again
	is.True(!plan.Runs())
}

// openWithSQL opens a store and, beside it, the same database for SQL
// alone, as another program would write it.
func openWithSQL(t *testing.T) (*sqlite.Store, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "primeflow.db")
	s, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return s, db
}

// isMakeSafe is derived from the row whoever writes it: an allocation saved
// with SQL alone, as another program would, is read as a Make Safe.
func TestMakeSafeOfARowAnotherWriterSaved(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, db := openWithSQL(t)
	const job = "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"
	_, err := db.ExecContext(ctx, `INSERT INTO primeAllocations (allocationId, jobId, allocationType, syncedUTC)
		VALUES ('a1a1a1a1-0000-4000-8000-000000000001', ?, 'MAKE SAFE', '2026-10-03 12:00:00.000')`, job)
	is.NoErr(err)
	has, err := s.HasMakeSafeAllocation(ctx, job)
	is.NoErr(err)
	is.True(has) // derived in SQL, not by the writer
}

// A database migrated before checksums were kept (its rows named by the
// script's path, with no checksum) opens as it did, and is brought up to
// the new history.
func TestHistoryBeforeChecksums(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "primeflow.db")
	s, err := sqlite.Open(ctx, path)
	is.NoErr(err)
	is.NoErr(s.Close())
	db, err := sql.Open("sqlite", path)
	is.NoErr(err)
	defer db.Close()
	for _, q := range []string{`UPDATE primeflowSchemaMigrations SET name = 'sqlite/' || name`,
		`ALTER TABLE primeflowSchemaMigrations DROP COLUMN checksum`} {
		_, err = db.ExecContext(ctx, q)
		is.NoErr(err)
	}
	s, err = sqlite.Open(ctx, path)
	is.NoErr(err) // no script is applied a second time
	is.NoErr(s.Close())
	var old, unsummed int
	is.NoErr(db.QueryRowContext(ctx, `SELECT COUNT(*) FROM primeflowSchemaMigrations WHERE name LIKE 'sqlite/%'`).Scan(&old))
	is.NoErr(db.QueryRowContext(ctx, `SELECT COUNT(*) FROM primeflowSchemaMigrations WHERE checksum IS NULL`).Scan(&unsummed))
	is.Equal(old, 0)      // named by file
	is.Equal(unsummed, 0) // with checksums
}

// An invite another writer stamped sent (the live TriageInviteService,
// until job-mirror sends them) is recorded Sent at the next claim: Queued,
// Failed, or Sending under a lapsed claim. It neither fails for good nor
// waits in Queued, and no claim nothing takes stays due.
func TestTriageInviteAnotherWriterSent(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, db := openWithSQL(t)
	for _, job := range []string{"0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b11", "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b12", "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b13"} {
		_, err := db.ExecContext(ctx, `INSERT INTO ethTriageInviteQueue (jobId, statusId, queuedUTC, state, attempts, nextAttemptUTC, updatedUTC)
			VALUES (?, '5e2a7c10-0000-4000-8000-000000000001', '2026-10-03 12:00:00.000', 'Queued', 0, '2026-10-03 12:00:00.000', '2026-10-03 12:00:00.000')`, job)
		is.NoErr(err)
	}
	t0 := time.Date(2026, 10, 3, 12, 1, 0, 0, time.UTC)
	const lease = time.Minute
	claimed, err := s.ClaimTriageInvites(ctx, t0, lease, 1, 2)
	is.NoErr(err)
	is.Equal(len(claimed), 2) // the first two Sending, on their last attempt
	is.NoErr(s.SetTriageInviteFailed(ctx, claimed[1].ID, 1, "HTTP 400", time.Time{}, t0))
	// The other writer sends all three: one Sending, one Failed, one Queued.
	_, err = db.ExecContext(ctx, `UPDATE ethTriageInviteQueue SET sentUTC = '2026-10-03 12:01:30.000'`)
	is.NoErr(err)

	claimed, err = s.ClaimTriageInvites(ctx, t0.Add(2*lease), lease, 1, 10)
	is.NoErr(err)
	is.Equal(len(claimed), 0) // none claimed
	counts, err := s.CountTriageInvites(ctx)
	is.NoErr(err)
	is.Equal(counts[store.SendSent], 3) // all recorded Sent
	is.Equal(counts[store.SendFailed], 0)
	_, due, err := s.NextTriageInviteDue(ctx)
	is.NoErr(err)
	is.True(!due) // nothing left due
}

// The database, which holds customers' names and numbers, and its -wal and
// -shm files are their owner's only, also in a folder that existed, readable
// by others, and whatever the umask (issue 27 §8); a database an earlier
// release made readable by others is narrowed when it is opened.
func TestTheFilesAreTheOwnersOnly(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dir := t.TempDir()
	is.NoErr(os.Chmod(dir, 0o755)) // a folder that was there, open to all
	path := filepath.Join(dir, "primeflow.db")
	s, err := sqlite.Open(ctx, path)
	is.NoErr(err)
	_, err = s.InsertWebhookLog(ctx, store.NewWebhookLogRow{Payload: `{"customer":"Jo Citizen","phone":"+61400000000"}`})
	is.NoErr(err)
	perm := func(p string) fs.FileMode {
		fi, err := os.Stat(p)
		is.NoErr(err)
		return fi.Mode().Perm()
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		is.Equal(perm(p), fs.FileMode(0o600)) // the owner's only
	}
	is.NoErr(s.Close())

	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if _, err := os.Stat(p); err == nil {
			is.NoErr(os.Chmod(p, 0o644)) // as an earlier release left them
		}
	}
	s, err = sqlite.Open(ctx, path)
	is.NoErr(err)
	defer s.Close()
	is.Equal(perm(path), fs.FileMode(0o600)) // narrowed at the next open
}

// migratedBefore makes a database file as one that had applied the scripts
// named before before, and a connection to it alone.
func migratedBefore(t *testing.T, before string) (string, *sql.DB) {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "primeflow.db")
	db, err := sql.Open("sqlite", file)
	is.NoErr(err)
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	names, err := fs.Glob(schema.SQLite, "sqlite/*.sql")
	is.NoErr(err)
	_, err = db.ExecContext(ctx, `CREATE TABLE primeflowSchemaMigrations (name TEXT PRIMARY KEY, appliedUTC TEXT NOT NULL, checksum TEXT)`)
	is.NoErr(err)
	for _, n := range names {
		if path.Base(n) >= before {
			break
		}
		text, err := fs.ReadFile(schema.SQLite, n)
		is.NoErr(err)
		_, err = db.ExecContext(ctx, string(text))
		is.NoErr(err) // the scripts as a database before them had them
		_, err = db.ExecContext(ctx, `INSERT INTO primeflowSchemaMigrations (name, appliedUTC) VALUES (?, '2026-10-01 00:00:00.000')`, path.Base(n))
		is.NoErr(err)
	}
	return file, db
}

// A database whose triage invites were queued under 011's rule (one unsent
// invite a job) takes 062 on opening: an invite a later one followed, or
// whose job has left its status, answered a change that is over; the newest
// of a job still in the status stays open, so no event invites it again,
// and a job that has left and comes back is invited.
func TestTriageInvitesQueuedBeforeStatusChanges(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	file, db := migratedBefore(t, "062")
	const icm, other = "8e7d6c5b-4a39-4281-9f0e-d1c2b3a4f5e6", "3c1e9a2b-6f0d-4c8e-9b7a-1d2e3f4a5b6c"
	const stays, left, again = "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b11", "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b12", "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b13"
	for _, j := range []struct{ id, status string }{{stays, icm}, {left, other}, {again, icm}} {
		_, err := db.ExecContext(ctx, `INSERT INTO primeJobs (jobId, statusId, version, syncedUTC) VALUES (?, ?, 1, '2026-10-01 00:00:00.000')`, j.id, j.status)
		is.NoErr(err)
	}
	for _, inv := range []struct{ job, sent string }{{stays, "2026-10-02 00:00:00.000"}, {stays, ""}, {left, "2026-10-02 00:00:00.000"}, {again, "2026-10-02 00:00:00.000"}} {
		_, err := db.ExecContext(ctx, `INSERT INTO ethTriageInviteQueue (jobId, statusId, queuedUTC, sentUTC, state, attempts, nextAttemptUTC, updatedUTC)
			VALUES (?, ?, '2026-10-01 00:00:00.000', NULLIF(?, ''), CASE WHEN ? = '' THEN 'Queued' ELSE 'Sent' END, 0, '2026-10-01 00:00:00.000', '2026-10-01 00:00:00.000')`,
			inv.job, icm, inv.sent, inv.sent)
		is.NoErr(err)
	}

	s, err := sqlite.Open(ctx, file)
	is.NoErr(err) // 062 applies to the rows there
	defer s.Close()
	open := func(job string) []bool {
		got, err := s.ListTriageInvites(ctx, job)
		is.NoErr(err)
		var out []bool
		for _, inv := range got {
			out = append(out, inv.StatusLeftUTC.IsZero())
		}
		return out
	}
	is.Equal(open(stays), []bool{false, true}) // the older closed, the newest open
	is.Equal(open(left), []bool{false})        // its job has left the status
	is.Equal(open(again), []bool{true})        // still in it
	queued, err := s.QueueTriageInvite(ctx, stays, icm)
	is.NoErr(err)
	is.True(!queued) // the open invite answers the change
	queued, err = s.QueueTriageInvite(ctx, again, icm)
	is.NoErr(err)
	is.True(!queued) // sent before 062, it still does
	_, err = db.ExecContext(ctx, `UPDATE primeJobs SET statusId = ?, version = 2 WHERE jobId = ?`, icm, left)
	is.NoErr(err)
	queued, err = s.QueueTriageInvite(ctx, left, icm)
	is.NoErr(err)
	is.True(queued) // back in the status: a new change
}

// The spec's own insert (§5.1 step 6: "skips any job that already has an
// invite pending"), as the live processor queues an invite through the
// cutover, runs against the migrated schema: for a job whose invite was sent
// and still answers its change, it queues one and breaks no index, and it
// still queues no second pending one. primeflow's own rule keeps to one
// invite an arrival beside it.
func TestTheSpecInviteInsertRunsOnTheMigratedSchema(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, db := openWithSQL(t)
	const job, icm, other = "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10", "8e7d6c5b-4a39-4281-9f0e-d1c2b3a4f5e6", "3c1e9a2b-6f0d-4c8e-9b7a-1d2e3f4a5b6c"
	_, err := s.UpsertJob(ctx, store.Job{JobID: job, StatusID: icm, Version: 1})
	is.NoErr(err)
	queued, err := s.QueueTriageInvite(ctx, job, icm)
	is.NoErr(err)
	is.True(queued)
	claimed, err := s.ClaimTriageInvites(ctx, time.Now(), time.Minute, 5, 10)
	is.NoErr(err)
	is.NoErr(s.SetTriageInviteSent(ctx, claimed[0].ID, claimed[0].Attempts, time.Now()))

	specInsert := func() int64 {
		t.Helper()
		res, err := db.ExecContext(ctx, `INSERT INTO ethTriageInviteQueue (jobId, statusId, queuedUTC)
			SELECT j.jobId, j.statusId, strftime('%Y-%m-%d %H:%M:%f', 'now') FROM primeJobs AS j
			WHERE j.jobId = ? AND j.statusId = ?
			  AND NOT EXISTS (SELECT 1 FROM ethTriageInviteQueue AS q WHERE q.jobId = ? AND q.sentUTC IS NULL)`, job, icm, job)
		if err != nil {
			t.Fatalf("the spec's insert: %v", err)
		}
		n, err := res.RowsAffected()
		is.NoErr(err)
		return n
	}
	is.Equal(specInsert(), int64(1)) // the live processor's invite, beside the sent one that is still open
	is.Equal(specInsert(), int64(0)) // one pending, as the spec reads it
	queued, err = s.QueueTriageInvite(ctx, job, icm)
	is.NoErr(err)
	is.True(!queued) // primeflow's rule: the arrival is answered
	// The job leaves the status and comes back, an event each.
	for i, status := range []string{other, icm} {
		_, err = s.UpsertJob(ctx, store.Job{JobID: job, StatusID: status, Version: int64(2 + i)})
		is.NoErr(err)
		queued, err = s.QueueTriageInvite(ctx, job, icm)
		is.NoErr(err)
	}
	is.True(queued) // the return, beside the live processor's invite not sent yet
	got, err := s.ListTriageInvites(ctx, job)
	is.NoErr(err)
	is.Equal(len(got), 3)
}

// A database whose triage invites were queued under 062's rule (one open
// invite a job) takes 063 on opening: an open invite takes its job's
// updatedAt as the time it saw the job, so its job's status history tells
// a later arrival from its own; and the spec's insert runs beside it.
func TestTriageInvitesQueuedBeforeArrivals(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	file, db := migratedBefore(t, "063")
	const job, icm = "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10", "8e7d6c5b-4a39-4281-9f0e-d1c2b3a4f5e6"
	_, err := db.ExecContext(ctx, `INSERT INTO primeJobs (jobId, statusId, version, updatedAt, syncedUTC) VALUES (?, ?, 1, '2026-10-01 09:00:00.000', '2026-10-01 09:00:05.000')`, job, icm)
	is.NoErr(err)
	_, err = db.ExecContext(ctx, `INSERT INTO ethTriageInviteQueue (jobId, statusId, jobVersion, queuedUTC, sentUTC, state, attempts, nextAttemptUTC, updatedUTC)
		VALUES (?, ?, 1, '2026-10-01 09:00:05.000', '2026-10-01 09:00:06.000', 'Sent', 1, '2026-10-01 09:00:05.000', '2026-10-01 09:00:06.000')`, job, icm)
	is.NoErr(err)

	s, err := sqlite.Open(ctx, file)
	is.NoErr(err) // 063 applies to the rows there
	defer s.Close()
	got, err := s.ListTriageInvites(ctx, job)
	is.NoErr(err)
	is.True(got[0].JobUpdatedAt.Equal(time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC))) // its job's updatedAt
	is.Equal(got[0].StatusHistoryID, "")                                             // no entry known for it
	res, err := db.ExecContext(ctx, `INSERT INTO ethTriageInviteQueue (jobId, statusId, queuedUTC)
		SELECT jobId, statusId, '2026-10-01 10:00:00.000' FROM primeJobs WHERE jobId = ?
		  AND NOT EXISTS (SELECT 1 FROM ethTriageInviteQueue WHERE jobId = ? AND sentUTC IS NULL)`, job, job)
	is.NoErr(err) // the spec's insert, beside the open invite that was sent
	n, err := res.RowsAffected()
	is.NoErr(err)
	is.Equal(n, int64(1))
	is.NoErr(s.ReplaceJobStatusHistory(ctx, job, []store.JobStatusHistory{
		{StatusHistoryID: "2a2b3c4d-0000-4000-8000-000000000001", StatusID: icm, CreatedAt: time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC)},
	}))
	got, err = s.ListTriageInvites(ctx, job)
	is.NoErr(err)
	is.True(got[0].StatusLeftUTC.IsZero()) // its own arrival closes nothing
}

// A database whose intake recorded mail refused unread as Failed takes 063
// on opening: those receipts are Rejected, needing nobody, and the others
// Failed stay Failed.
func TestRefusedMailRecordedFailedBefore(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	file, db := migratedBefore(t, "063")
	for _, r := range []struct{ id, outcome, err string }{
		{"<junk@elsewhere.example>", store.EmailFailed, `refused unread: the sender "jobs@elsewhere.example" is not in MAIL_ALLOWED_SENDERS`},
		{"<spoofed@primeeco.tech>", store.EmailFailed, `refused unread: mail from "noreply@primeeco.tech" passed neither DMARC nor DKIM for primeeco.tech`},
		{"<j014370@primeeco.tech>", store.EmailFailed, "no JobID in the email"},
		{"<j014371@primeeco.tech>", store.EmailProcessed, ""},
	} {
		_, err := db.ExecContext(ctx, `INSERT INTO PrimeEmailJobRegistered (registeredUTC, internetMessageId, outcome, lastError, movedTo, updatedUTC)
			VALUES ('2026-10-01 00:00:00.000', ?, ?, NULLIF(?, ''), ?, '2026-10-01 00:00:00.000')`, r.id, r.outcome, r.err, r.outcome)
		is.NoErr(err)
	}

	s, err := sqlite.Open(ctx, file)
	is.NoErr(err) // 063 applies to the rows there
	defer s.Close()
	for id, want := range map[string]string{"<junk@elsewhere.example>": store.EmailRejected, "<spoofed@primeeco.tech>": store.EmailRejected,
		"<j014370@primeeco.tech>": store.EmailFailed, "<j014371@primeeco.tech>": store.EmailProcessed} {
		r, found, err := s.GetEmailReceipt(ctx, id)
		is.NoErr(err)
		is.True(found)
		is.Equal(r.Outcome, want) // refused mail Rejected, the rest as it was
	}
	o, err := s.StatusOverview(ctx, store.OverviewQuery{})
	is.NoErr(err)
	is.Equal(o.EmailsFailed, 1)   // the one for a person
	is.Equal(o.EmailsRejected, 2) // the junk
}
