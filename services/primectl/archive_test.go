package primectl_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/services/primectl"
	"github.com/matryer/is"
)

// archiveWorld is newWorld (its rows received on 2026-11-30, before the
// test's T) with the queues' rows besides: an SMS sent and one Failed, an
// invite sent whose job has left its status, a receipt processed and moved
// and one Failed.
func archiveWorld(t *testing.T) *world {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	w := newWorld(t)
	st := w.store
	t0 := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	for i, fail := range []bool{false, true} {
		id, _, err := st.QueueSMS(ctx, store.NewSMS{Recipient: "+61400000000", Body: "make safe J01", Source: "makesafe", Now: t0})
		is.NoErr(err)
		claimed, err := st.ClaimSMS(ctx, t0.Add(time.Second), time.Minute, 1, 1)
		is.NoErr(err)
		is.Equal(len(claimed), 1)
		if fail {
			is.NoErr(st.SetSMSFailed(ctx, id, claimed[0].Attempts, "400 bad number", time.Time{}, t0.Add(time.Minute)))
		} else {
			is.NoErr(st.SetSMSSent(ctx, id, claimed[0].Attempts, t0.Add(time.Duration(i+1)*time.Minute)))
		}
	}
	_, err := st.UpsertJob(ctx, store.Job{JobID: jobA, StatusID: jobB, SyncedUTC: t0})
	is.NoErr(err)
	queued, err := st.QueueTriageInvite(ctx, jobA, jobB)
	is.NoErr(err)
	is.True(queued)
	invites, err := st.ClaimTriageInvites(ctx, time.Now().Add(time.Second), time.Minute, 1, 1)
	is.NoErr(err)
	is.NoErr(st.SetTriageInviteSent(ctx, invites[0].ID, invites[0].Attempts, t0))
	_, err = st.UpsertJob(ctx, store.Job{JobID: jobA, StatusID: jobA, Version: 2, SyncedUTC: t0}) // the job moves on:
	is.NoErr(err)
	queued, err = st.QueueTriageInvite(ctx, jobA, jobB) // its invite's change is over
	is.NoErr(err)
	is.True(!queued)
	for _, e := range []struct{ id, outcome string }{{"<a@prime>", store.EmailProcessed}, {"<b@prime>", store.EmailFailed}} {
		r, _, err := st.RegisterEmail(ctx, store.EmailReceipt{InternetMessageID: e.id, Subject: "New Job", ReceivedUTC: t0})
		is.NoErr(err)
		r.Outcome, r.MovedUTC, r.MovedTo = e.outcome, t0.Add(time.Minute), e.outcome
		is.NoErr(st.UpdateEmailReceipt(ctx, r))
	}
	// A second processed log row, of another job and action.
	id, err := st.InsertWebhookLog(ctx, store.NewWebhookLogRow{ReceivedUTC: t0, EventAction: "create-estimate", JobID: jobB,
		Payload: `{"eventAction":"create-estimate","estimateId":"e1"}`, Headers: `{}`, RemoteIP: "203.0.113.9", IsAuthenticated: true})
	is.NoErr(err)
	is.NoErr(st.SetWebhookLogProcessed(ctx, id, "", "Processed"))
	w.ids["estimate"] = id
	// The log stamps a row processed at the time it is; these were
	// processed the minute after they came.
	db, err := sql.Open("sqlite", w.path+"?_pragma=busy_timeout(5000)")
	is.NoErr(err)
	defer db.Close()
	_, err = db.Exec(`UPDATE ethPrimeWebhookLog SET processedUTC = strftime('%Y-%m-%d %H:%M:%f', receivedUTC, '+1 minute')
		WHERE processedUTC IS NOT NULL`)
	is.NoErr(err)
	return w
}

// archiveBefore is the T of the tests: after every row of archiveWorld.
const archiveBefore = "2026-12-01"

// lines reads an archive file's lines.
func lines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(zr)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// archive --before T writes the finished rows before T to the file, checks
// it and deletes them; what is not finished, or waits for a person, stays.
func TestArchive(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	w := archiveWorld(t)
	path := filepath.Join(t.TempDir(), "old.jsonl.gz")
	before := archiveBefore

	out, _, err := w.run("n\n", "archive", "--before", before, "--out", path)
	is.NoErr(err)
	is.True(strings.Contains(out, "ethPrimeWebhookLog       2")) // what it would take
	is.True(strings.Contains(out, "Nothing archived."))          // asked, and told no
	_, err = os.Stat(path)
	is.True(errors.Is(err, os.ErrNotExist)) // no file written

	out, _, err = w.run("y\n", "archive", "--before", before, "--out", path)
	is.NoErr(err)
	for _, want := range []string{
		"5 rows written to " + path + " and checked",
		"ethPrimeWebhookLog       2 archived, 2 deleted",
		"smsQueue                 1 archived, 1 deleted",
		"ethTriageInviteQueue     1 archived, 1 deleted",
		"PrimeEmailJobRegistered  1 archived, 1 deleted",
		"replay: primectl replay --from-archive " + path,
		"PRIME_WEBHOOK keeps each event 30 days (no size limit, streams/PRIME_WEBHOOK.json)", // what NATS keeps, from the stream's file
	} {
		if !strings.Contains(out, want) {
			t.Errorf("archive lacks %q:\n%s", want, out)
		}
	}
	for _, name := range []string{"done", "estimate"} {
		_, err := w.store.GetWebhookLog(ctx, w.ids[name])
		is.True(errors.Is(err, store.ErrNotFound)) // the processed rows are gone
	}
	for _, name := range []string{"queued", "capped", "other"} {
		_, err := w.store.GetWebhookLog(ctx, w.ids[name])
		is.NoErr(err) // the rest stay
	}
	sms, err := w.store.CountSMS(ctx)
	is.NoErr(err)
	is.Equal(sms[store.SendSent], 0)   // the sent SMS archived
	is.Equal(sms[store.SendFailed], 1) // the Failed one waits for its person
	_, found, err := w.store.GetEmailReceipt(ctx, "<b@prime>")
	is.NoErr(err)
	is.True(found) // so does the Failed email

	got := lines(t, path)
	is.Equal(len(got), 1+5+1)                                    // header, rows, trailer
	is.True(strings.HasPrefix(got[0], `{"primeflowArchive":1,`)) // the header
	is.True(strings.HasPrefix(got[len(got)-1], `{"end":{`))      // the trailer
	is.True(strings.Contains(got[len(got)-1], `"ethPrimeWebhookLog":{"rows":2,"sha256":"`))
	var row struct {
		Table string         `json:"table"`
		Row   map[string]any `json:"row"`
	}
	is.NoErr(json.Unmarshal([]byte(got[1]), &row))
	is.Equal(row.Table, "ethPrimeWebhookLog")
	is.Equal(row.Row["payload"], `{"eventAction":"change-job-status","jobId":259047}`) // the row whole, by its columns
	is.Equal(row.Row["processStatus"], "Processed")
	is.Equal(row.Row["jobId"], jobA)
	is.True(strings.Contains(strings.Join(got, "\n"), `"Body":"make safe J01"`)) // and the queues' rows

	_, _, err = w.run("", "archive", "--before", before, "--out", path, "--yes")
	is.True(err != nil) // an archive is never overwritten

	out, _, err = w.run("", "archive", "--before", before, "--out", filepath.Join(t.TempDir(), "again.jsonl.gz"), "--yes")
	is.NoErr(err)
	is.True(strings.Contains(out, "Nothing to archive.")) // nothing finished is left

	_, _, err = w.run("", "archive")
	is.True(errors.Is(err, primectl.ErrUsage)) // T is required
	_, _, err = w.run("", "archive", "--before", "2099-01-01")
	is.True(err != nil) // and not to come
}

// replay --from-archive puts the rows a filter chooses back, under their
// own ids and queued for replay; the rest of the file is left.
func TestReplayFromArchive(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	w := archiveWorld(t)
	done, estimate := w.row("done"), w.row("estimate")
	path := filepath.Join(t.TempDir(), "old.jsonl.gz")
	_, _, err := w.run("", "archive", "--before", archiveBefore, "--out", path, "--yes")
	is.NoErr(err)

	_, _, err = w.run("", "replay", "--from-archive", path)
	is.True(errors.Is(err, primectl.ErrUsage)) // no filter: --all, as replay asks
	_, _, err = w.run("", "replay", "--from-archive", path, "999999", "--yes")
	is.True(err != nil && strings.Contains(err.Error(), "no row 999999 in")) // a row the archive lacks

	out, _, err := w.run("y\n", "replay", "--from-archive", path, "--action", "create-estimate")
	is.NoErr(err)
	is.True(strings.Contains(out, "1 row of "+path))         // chosen by the filter
	is.True(strings.Contains(out, "1 row put back"))         // and put back
	back := w.row("estimate")                                // under its id
	is.Equal(back.Payload, estimate.Payload)                 // as received
	is.True(back.ReceivedUTC.Equal(estimate.ReceivedUTC))    // when received
	is.Equal(back.RemoteIP, "203.0.113.9")                   // from where
	is.True(!back.Processed() && back.PublishedUTC.IsZero()) // queued, for ingest's relay to publish
	is.Equal(back.ReplayCount, estimate.ReplayCount+1)       // under a new message id
	_, err = w.store.GetWebhookLog(ctx, done.ID)
	is.True(errors.Is(err, store.ErrNotFound)) // the other row stays archived

	out, _, err = w.run("", "replay", "--from-archive", path, "--all", "--yes")
	is.NoErr(err)
	is.True(strings.Contains(out, "1 row put back"))                             // the other
	is.True(strings.Contains(out, "1 row already in the log, left as they are")) // not the one back already
	is.Equal(w.row("estimate").ReplayCount, estimate.ReplayCount+1)              // reset once only
	is.Equal(w.row("done").JobID, jobA)

	// A file that is not what it says is refused before anything changes.
	b, err := os.ReadFile(path)
	is.NoErr(err)
	raw := gunzip(t, b)
	tampered := bytes.Replace(raw, []byte(`create-estimate`), []byte(`create-estimatf`), 1)
	bad := filepath.Join(t.TempDir(), "bad.jsonl.gz")
	is.NoErr(os.WriteFile(bad, gz(t, tampered), 0o600))
	_, _, err = w.run("", "replay", "--from-archive", bad, "--all", "--yes")
	is.True(err != nil && strings.Contains(err.Error(), "not what its trailer says")) // a changed row
	cut := filepath.Join(t.TempDir(), "cut.jsonl.gz")
	is.NoErr(os.WriteFile(cut, gz(t, raw[:bytes.LastIndex(raw[:len(raw)-1], []byte("\n"))+1]), 0o600))
	_, _, err = w.run("", "replay", "--from-archive", cut, "--all", "--yes")
	is.True(err != nil && strings.Contains(err.Error(), "no trailer")) // a file cut short
}

// replay --from-archive --now asks ingest to publish the rows put back,
// after making sure it can.
func TestReplayFromArchiveNow(t *testing.T) {
	is := is.New(t)
	w := archiveWorld(t)
	path := filepath.Join(t.TempDir(), "old.jsonl.gz")
	_, _, err := w.run("", "archive", "--before", archiveBefore, "--out", path, "--yes")
	is.NoErr(err)
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.Method+" "+r.URL.Path)
		if r.URL.Path == "/healthz" {
			rw.Write([]byte(`{"status":"ok","service":"ingest"}`))
			return
		}
		rw.Write([]byte(`{"published":2}`))
	}))
	defer srv.Close()
	w.env["INGEST_URL"], w.env["ADMIN_USER"], w.env["ADMIN_PASSWORD"] = srv.URL, "ops", "pw"
	out, _, err := w.run("", "replay", "--from-archive", path, "--all", "--yes", "--now")
	is.NoErr(err)
	is.Equal(asked, []string{"GET /healthz", "POST /api/prime/webhooklog/process"}) // checked first, then asked
	is.True(strings.Contains(out, `{"published":2}`))
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := out.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
