package primectl_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/services/primectl"
	"github.com/matryer/is"
)

// coverageWorld is a week of three new jobs: one every path saw, one only
// the email and the backstop saw, one only the webhook saw; and one created
// before the window.
func coverageWorld(t *testing.T) (*world, time.Time) {
	t.Helper()
	w := emptyWorld(t)
	ctx := context.Background()
	created := time.Now().UTC().Add(-48 * time.Hour).Truncate(time.Second)
	at := func(m int) time.Time { return created.Add(time.Duration(m) * time.Minute) }
	const jobC, old = "3c1e9a2b-6f0d-4c8e-9b7a-1d2e3f4a5b6c", "9e8d7c6b-5a49-4382-b716-f5e4d3c2b1a0"
	for id, when := range map[string]time.Time{jobA: at(0), jobB: at(0), jobC: at(0), old: created.Add(-8 * 24 * time.Hour)} {
		if _, err := w.store.UpsertJob(ctx, store.Job{JobID: id, JobNumber: "J" + id[:4], CreatedAt: when}); err != nil {
			t.Fatal(err)
		}
	}
	logRow := func(job string, m int) {
		if _, err := w.store.InsertWebhookLog(ctx, store.NewWebhookLogRow{ReceivedUTC: at(m), EventAction: "change-job-status", JobID: job, Payload: "{}"}); err != nil {
			t.Fatal(err)
		}
	}
	logRow(jobA, 1)
	logRow(jobC, 3)
	email := func(msg, job, outcome string, m int) {
		r, _, err := w.store.RegisterEmail(ctx, store.EmailReceipt{InternetMessageID: msg, ReceivedUTC: at(m), BodyPreview: "x"})
		if err != nil {
			t.Fatal(err)
		}
		r.PrimeJobID, r.Outcome = job, outcome
		if err := w.store.UpdateEmailReceipt(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	email("<a@x>", jobA, store.EmailProcessed, 2)
	email("<b@x>", jobB, store.EmailProcessed, 1)
	email("<junk@x>", "", store.EmailRejected, 4) // refused unread
	email("<nojob@x>", "", store.EmailFailed, 6)  // for a person
	if _, err := w.store.ClaimFirstSeen(ctx, jobA, 0, store.ViaWebhook); err != nil {
		t.Fatal(err)
	}
	if _, err := w.store.ClaimFirstSeen(ctx, jobB, 0, store.ViaEmail); err != nil {
		t.Fatal(err)
	}
	if _, err := w.store.RecordBackstopSeen(ctx, []string{jobA}, at(10)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.store.RecordBackstopSeen(ctx, []string{jobB}, at(5)); err != nil {
		t.Fatal(err)
	}
	return w, created
}

func TestCoverage(t *testing.T) {
	is := is.New(t)
	w, _ := coverageWorld(t)
	out, _, err := w.run("", "coverage", "--since", "7d", "--json")
	is.NoErr(err)
	var c primectl.Coverage
	is.NoErr(json.Unmarshal([]byte(out), &c))
	is.Equal(c.Jobs, 3) // the jobs created in the week, not the older one
	is.Equal(c.Paths[store.ViaWebhook], primectl.PathCoverage{Seen: 2, OnlyThere: 1, First: 2, MedianLagSeconds: 0})
	is.Equal(c.Paths[store.ViaEmail], primectl.PathCoverage{Seen: 2, OnlyThere: 0, First: 1, MedianLagSeconds: 30})     // 1m behind for A, first for B
	is.Equal(c.Paths[store.ViaBackstop], primectl.PathCoverage{Seen: 2, OnlyThere: 0, First: 0, MedianLagSeconds: 390}) // 9m and 4m behind
	is.Equal(c.Lags, []primectl.PathLag{
		{From: store.ViaWebhook, To: store.ViaEmail, Jobs: 1, MedianSeconds: 60},
		{From: store.ViaWebhook, To: store.ViaBackstop, Jobs: 1, MedianSeconds: 540},
		{From: store.ViaEmail, To: store.ViaBackstop, Jobs: 2, MedianSeconds: 360}, // 8m and 4m
	})
	is.Equal(len(c.WebhookNeverSaw), 1) // the jobs the webhook never saw
	is.Equal(c.WebhookNeverSaw[0].JobID, jobB)
	is.Equal(c.WebhookNeverSaw[0].FirstSeenBy, store.ViaEmail)
	is.Equal(len(c.Actions), 1) // §7.1's query over the window
	is.Equal(c.Actions[0].Action, "change-job-status")
	is.Equal(c.Actions[0].Events, 2)
	is.Equal(c.Emails, map[string]int{store.EmailProcessed: 2, store.EmailRejected: 1, store.EmailFailed: 1}) // the window's emails by outcome

	out, _, err = w.run("", "coverage")
	is.NoErr(err)
	for _, want := range []string{
		"Coverage of the 3 jobs Prime created since",
		"webhook   2          1                2           0s",
		"email → backstop",
		"Jobs the webhook never saw: 1",
		jobB,
		"2 processed, 1 failed (for a person: primectl status), 0 dismissed by a person, 1 rejected unread as not Prime's, 0 pending",
		"§7.1's coverage check",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
}

func TestCoverageRefusesABadSince(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	_, _, err := w.run("", "coverage", "--since", "a week")
	is.True(err != nil && strings.Contains(err.Error(), "--since")) // named
}

func TestCoverageOverNoJobsPrintsNoMedian(t *testing.T) {
	is := is.New(t)
	w := emptyWorld(t)
	out, _, err := w.run("", "coverage")
	is.NoErr(err)
	is.True(strings.Contains(out, "Coverage of the 0 jobs"))
	is.True(regexp.MustCompile(`(?m)^webhook\s+0\s+0\s+0\s+-$`).MatchString(out)) // no jobs, no median: not a lag of 0s
	is.True(regexp.MustCompile(`(?m)^webhook → email\s+0\s+-$`).MatchString(out)) // nor between paths
	is.True(!regexp.MustCompile(`(?m)\s0s$`).MatchString(out))
	is.True(strings.Contains(out, "0 processed, 0 failed (for a person: primectl status), 0 dismissed by a person, 0 rejected unread as not Prime's, 0 pending")) // no email either
	is.True(!strings.Contains(out, "Every email received was refused"))
}

// An email path that saw no job because the intake refused every email —
// Prime's own mail not passing MAIL_ALLOWED_SENDERS or its authentication
// check — is said, with where to look.
func TestCoverageSaysEveryEmailWasRefused(t *testing.T) {
	is := is.New(t)
	w := emptyWorld(t)
	ctx := context.Background()
	for _, id := range []string{"<a@primeeco.tech>", "<b@primeeco.tech>"} {
		r, _, err := w.store.RegisterEmail(ctx, store.EmailReceipt{InternetMessageID: id, ReceivedUTC: time.Now().Add(-time.Hour)})
		is.NoErr(err)
		r.Outcome, r.LastError = store.EmailRejected, "refused unread: mail from \"noreply@primeeco.tech\" passed neither DMARC nor DKIM"
		is.NoErr(w.store.UpdateEmailReceipt(ctx, r))
	}
	out, _, err := w.run("", "coverage", "--since", "1d")
	is.NoErr(err)
	is.True(strings.Contains(out, "0 processed, 0 failed (for a person: primectl status), 0 dismissed by a person, 2 rejected unread as not Prime's")) // counted
	is.True(strings.Contains(out, "Every email received was refused as not Prime's: check MAIL_ALLOWED_SENDERS"))                                      // and said
}

// An email that failed and that a person dismissed counts as dismissed, not
// as failed, nor left out of the report.
func TestCoverageCountsDismissedEmails(t *testing.T) {
	is := is.New(t)
	w := emptyWorld(t)
	ctx := context.Background()
	r, _, err := w.store.RegisterEmail(ctx, store.EmailReceipt{InternetMessageID: "<a@primeeco.tech>", ReceivedUTC: time.Now().Add(-time.Hour)})
	is.NoErr(err)
	r.Outcome, r.LastError, r.Attempts, r.MovedUTC, r.MovedTo = store.EmailFailed, "no JobID in the email", 5, time.Now(), store.EmailFailed
	is.NoErr(w.store.UpdateEmailReceipt(ctx, r))
	_, _, err = w.run("", "emails", "dismiss", strconv.FormatInt(r.ID, 10), "--reason", "made by hand", "--by", "alice")
	is.NoErr(err)
	out, _, err := w.run("", "coverage", "--since", "1d")
	is.NoErr(err)
	is.True(strings.Contains(out, "0 processed, 0 failed (for a person: primectl status), 1 dismissed by a person, 0 rejected")) // counted, as dismissed
}
