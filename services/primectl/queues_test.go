package primectl_test

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/services/primectl"
	"github.com/matryer/is"
)

func TestSyncQueue(t *testing.T) {
	is := is.New(t)
	w := emptyWorld(t)
	ctx := context.Background()
	_, err := w.store.QueueMissingObjectsByJob(ctx, jobA)
	is.NoErr(err)
	is.NoErr(w.store.UpsertSyncQueue(ctx, store.TableAllocations, jobB))
	_, err = w.store.ClaimSyncQueue(ctx, store.SyncQueueFilter{Object: store.TableAllocations, Limit: 1}, time.Now().Add(-time.Minute))
	is.NoErr(err)

	out, _, err := w.run("", "syncqueue")
	is.NoErr(err)
	is.True(regexp.MustCompile(`primeAllocations\s+2\s+1\s`).MatchString(out)) // by object: two items, one held by a drain
	is.True(regexp.MustCompile(`primeContacts\s+1\s+0\s`).MatchString(out))
	is.True(strings.Contains(out, jobB))      // the items
	is.True(strings.Contains(out, "5 items")) // all five

	out, _, err = w.run("", "syncqueue", "--job", jobB)
	is.NoErr(err)
	is.True(strings.Contains(out, "1 items"))          // one job's
	is.True(!strings.Contains(out, "HELD BY A DRAIN")) // and not the whole queue's counts, as if they were the job's
	out, _, err = w.run("", "syncqueue", "--object", strings.ToLower(store.TableContacts))
	is.NoErr(err)
	is.True(strings.Contains(out, "1 items"))                               // one object's, named in any case
	is.True(regexp.MustCompile(`primeContacts\s+1\s+0\s`).MatchString(out)) // its counts
	is.True(!strings.Contains(out, store.TableAllocations))                 // and no other's
	_, errOut, err := w.run("", "syncqueue", "--object", "primeContact")
	is.True(errors.Is(err, primectl.ErrUsage)) // an object the queue has not: refused, not an empty list
	is.True(strings.Contains(errOut, store.TableContacts))
}

// queueInvite mirrors job in the Initial Contact Made status and queues
// its triage invite.
func queueInvite(t *testing.T, w *world, job string) {
	t.Helper()
	is := is.New(t)
	const icm = "8e7d6c5b-4a39-4281-9f0e-d1c2b3a4f5e6"
	_, err := w.store.UpsertJob(context.Background(), store.Job{JobID: job, StatusID: icm})
	is.NoErr(err)
	queued, err := w.store.QueueTriageInvite(context.Background(), job, icm)
	is.NoErr(err)
	is.True(queued)
}

func TestInvites(t *testing.T) {
	is := is.New(t)
	w := emptyWorld(t)
	ctx := context.Background()
	for _, j := range []string{jobA, jobB} {
		queueInvite(t, w, j)
	}
	now := time.Now().Add(time.Second)
	claimed, err := w.store.ClaimTriageInvites(ctx, now, time.Minute, 5, 1)
	is.NoErr(err)
	is.NoErr(w.store.SetTriageInviteFailed(ctx, claimed[0].ID, 1, "HTTP 400: \x1b[31mno such contact\x1b[0m", time.Time{}, now))

	out, _, err := w.run("", "invites")
	is.NoErr(err)
	is.True(strings.Contains(out, "2 invites")) // both not sent
	is.True(strings.Contains(out, "Failed") && strings.Contains(out, "Queued"))
	is.True(strings.Contains(out, `\x1b[31mno such contact`)) // the error, printable
	is.True(!strings.Contains(out, "\x1b"))                   // never raw
	out, _, err = w.run("", "invites", "--failed")
	is.NoErr(err)
	is.True(strings.Contains(out, "1 invite\n")) // the failed one alone
	is.True(strings.Contains(out, claimed[0].JobID))
	_, _, err = w.run("", "invites", "--failed", "--all")
	is.True(err != nil) // one or the other
}

// requeue and dismiss resolve the rows named that wait for a person, say
// what became of each, and refuse what cannot be done, recording nothing
// for it.
func TestResolveSaysWhatItCannot(t *testing.T) {
	is := is.New(t)
	w := emptyWorld(t)
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	var ids []string
	var rows []int64
	for i := range 2 {
		id, _, err := w.store.QueueSMS(ctx, store.NewSMS{Recipient: "+61400000000", Body: "make safe", Source: "test", Now: t0})
		is.NoErr(err)
		claimed, err := w.store.ClaimSMS(ctx, t0.Add(time.Second), time.Minute, 5, 1)
		is.NoErr(err)
		if i == 0 {
			is.NoErr(w.store.SetSMSFailed(ctx, id, claimed[0].Attempts, "HTTP 400", time.Time{}, t0))
		} else {
			is.NoErr(w.store.SetSMSSent(ctx, id, claimed[0].Attempts, t0))
		}
		ids, rows = append(ids, strconv.FormatInt(id, 10)), append(rows, id)
	}
	failed, sent := ids[0], ids[1]

	for _, args := range [][]string{
		{"sms", "dismiss", failed},          // no reason
		{"sms", "dismiss", "--reason", "x"}, // no id
		{"sms", "requeue", "twelve"},        // not an id
		{"emails", "requeue", failed},       // an email is moved back, not requeued
		{"sms", "--failed", "--all"},        // one or the other
	} {
		_, _, err := w.run("", args...)
		is.True(errors.Is(err, primectl.ErrUsage)) // refused as a usage
	}
	out, errOut, err := w.run("", "sms", "dismiss", sent, failed, "999", "--reason", "phoned the on-call", "--by", "alice")
	is.True(err != nil && strings.Contains(err.Error(), "2 of 3 not resolved"))                // fails for the two it could not
	is.True(strings.Contains(errOut, "sms "+sent+" is Sent, not Failed: waits for no person")) // each said
	is.True(strings.Contains(errOut, "sms 999: not found"))
	is.True(strings.Contains(out, "sms "+failed+" dismissed by alice")) // and the one it could, resolved
	recs, err := w.store.ListResolutions(ctx, store.ResolvableSMS, append(rows, 999))
	is.NoErr(err)
	is.Equal(len(recs), 1) // one recorded
	out, _, err = w.run("", "sms")
	is.NoErr(err)
	is.True(strings.Contains(out, "0 messages")) // nothing left to send or to look at
	out, _, err = w.run("", "sms", "--all")
	is.NoErr(err)
	is.True(strings.Contains(out, "2 messages"))
	is.True(regexp.MustCompile(`Dismissed\s+1\s`).MatchString(out)) // the dismissed one, its attempt kept
}

// A row done since an attempt failed (sent, logged, processed, dismissed)
// lists that attempt's error as an earlier attempt's, not as if it were
// why the row waits; a row that waits on it lists it as it is.
func TestListsSayADoneRowsErrorIsAnEarlierAttempts(t *testing.T) {
	is := is.New(t)
	w := emptyWorld(t)
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	line := func(out, id string) string {
		for l := range strings.SplitSeq(out, "\n") {
			if strings.HasPrefix(l, id+" ") {
				return l
			}
		}
		t.Fatalf("no row %s in:\n%s", id, out)
		return ""
	}

	// Two messages fail an attempt and wait for their retry; one is then sent.
	var sms []string
	for i := range 2 {
		id, _, err := w.store.QueueSMS(ctx, store.NewSMS{Recipient: "+61400000000", Body: "make safe", Source: "test", Now: t0})
		is.NoErr(err)
		claimed, err := w.store.ClaimSMS(ctx, t0.Add(time.Duration(i+1)*time.Second), time.Minute, 5, 1)
		is.NoErr(err)
		is.Equal(len(claimed), 1)
		is.NoErr(w.store.SetSMSFailed(ctx, id, claimed[0].Attempts, "HTTP 503", t0.Add(time.Minute), t0))
		sms = append(sms, strconv.FormatInt(id, 10))
	}
	claimed, err := w.store.ClaimSMS(ctx, t0.Add(2*time.Minute), time.Minute, 5, 1)
	is.NoErr(err)
	is.NoErr(w.store.SetSMSSent(ctx, claimed[0].ID, claimed[0].Attempts, t0.Add(2*time.Minute)))
	sent, waiting := strconv.FormatInt(claimed[0].ID, 10), sms[1]
	if sent == sms[1] {
		waiting = sms[0]
	}
	out, _, err := w.run("", "sms", "--all")
	is.NoErr(err)
	is.True(strings.Contains(line(out, sent), "earlier attempt: HTTP 503"))     // the sent one's error, an earlier attempt's
	is.True(strings.Contains(line(out, waiting), "HTTP 503"))                   // the waiting one's, why it waits
	is.True(!strings.Contains(line(out, waiting), "earlier attempt"))           // as it is
	is.True(regexp.MustCompile(`Sent\s+2\s`).MatchString(line(out, sent)))      // sent at its second attempt
	is.True(regexp.MustCompile(`Queued\s+1\s`).MatchString(line(out, waiting))) // the other still queued

	// An invite fails an attempt, then is sent.
	queueInvite(t, w, jobA)
	now := time.Now().Add(time.Second)
	invites, err := w.store.ClaimTriageInvites(ctx, now, time.Minute, 5, 1)
	is.NoErr(err)
	is.NoErr(w.store.SetTriageInviteFailed(ctx, invites[0].ID, invites[0].Attempts, "HTTP 502", now, now))
	invites, err = w.store.ClaimTriageInvites(ctx, now.Add(time.Second), time.Minute, 5, 1)
	is.NoErr(err)
	is.Equal(len(invites), 1)
	is.NoErr(w.store.SetTriageInviteSent(ctx, invites[0].ID, invites[0].Attempts, now))
	out, _, err = w.run("", "invites", "--all")
	is.NoErr(err)
	is.True(strings.Contains(line(out, strconv.FormatInt(invites[0].ID, 10)), "earlier attempt: HTTP 502"))

	// An email processed at its second attempt.
	r, _, err := w.store.RegisterEmail(ctx, store.EmailReceipt{InternetMessageID: "<a@p>", Subject: "New Job", ReceivedUTC: t0})
	is.NoErr(err)
	r.Outcome, r.Attempts, r.LastError, r.MovedUTC, r.MovedTo = store.EmailProcessed, 1, "job-mirror did not answer", t0, store.EmailProcessed
	is.NoErr(w.store.UpdateEmailReceipt(ctx, r))
	out, _, err = w.run("", "emails", "--all")
	is.NoErr(err)
	is.True(strings.Contains(line(out, strconv.FormatInt(r.ID, 10)), "earlier attempt: job-mirror did not answer"))
}
