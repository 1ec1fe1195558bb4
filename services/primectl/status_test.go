package primectl_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/instance"
	"github.com/ethosbuilding/primeflow/pkg/lock"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/pipeline"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primebudget"
	"github.com/ethosbuilding/primeflow/pkg/status"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/services/primectl"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go/jetstream"
)

// status on a seeded database, a NATS with one stage's consumer behind and
// a lock held, and a process whose Prime client has heard from Prime:
// every part, as text and as JSON.
func TestStatus(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	ctx := context.Background()
	_, err := w.store.InsertOutbox(ctx, []store.OutboxMessage{{Subject: events.SubjectJobFirstSeen, MsgID: "m1", Data: []byte("{}")}})
	is.NoErr(err)
	_, err = w.store.IncrementWebhookLogAttempt(ctx, w.ids["other"], "", "prime: 503 \x1b[2Jcleared") // a hostile error
	is.NoErr(err)
	is.NoErr(w.store.PlanUpsert(ctx, "2026-12-02"))
	// A make-safe SMS waiting out an endpoint that is not taking posts.
	queued := time.Now().Add(-time.Hour).Truncate(time.Second)
	smsID, _, err := w.store.QueueSMS(ctx, store.NewSMS{Recipient: "+61400000000", Body: "MAKE SAFE", Source: "makesafe", Now: queued})
	is.NoErr(err)
	claims, err := w.store.ClaimSMS(ctx, time.Now(), time.Minute, 5, 1)
	is.NoErr(err)
	is.NoErr(w.store.DeferSMS(ctx, smsID, claims[0].Attempts, "waiting for the endpoint, no attempt counted: post to https://sms.example.com: HTTP 503: ",
		time.Now().Add(time.Minute), time.Now()))

	ns := natstest.Server(t)
	_, js := natstest.Connect(t, ns)                                                                      // the streams and consumers applied
	is.NoErr(js.DeleteConsumer(ctx, events.ConsumerOptimoPlan.Stream, events.ConsumerOptimoPlan.Durable)) // but one
	for range 3 {
		_, err := js.Publish(ctx, events.ResolvedSubject(events.ActionChangeJobStatus), []byte("{}"))
		is.NoErr(err)
	}
	locks, err := lock.New(ctx, js, lock.Config{TTL: time.Minute, Wait: time.Second}, nil)
	is.NoErr(err)
	held, err := locks.Take(ctx, events.LockOptimoPlan)
	is.NoErr(err)
	defer held.Release(context.Background())

	unreachable := time.Now().Add(-10 * time.Minute).Truncate(time.Second) // Prime down for 10 minutes
	ingest := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/livez" {
			return // 200 to anyone, as every primeflow process answers
		}
		if u, p, _ := r.BasicAuth(); r.URL.Path != "/metrics" || u != "ops" || p != "pw" {
			rw.WriteHeader(http.StatusUnauthorized)
			return
		}
		rw.Write([]byte("# TYPE prime_client_ratelimit_remaining gauge\n" +
			`prime_client_ratelimit_remaining{client="prime",window="minute"} 57` + "\n" +
			`prime_client_ratelimit_remaining{client="prime",window="day"} 4890` + "\n" +
			"# TYPE prime_client_unreachable_since_seconds gauge\n" +
			fmt.Sprintf("prime_client_unreachable_since_seconds{client=\"prime\"} %d\n", unreachable.Unix())))
	}))
	defer ingest.Close()
	// NATS_URL unset: bin/primeflow's embedded server, at NATS_LISTEN.
	w.env["NATS_LISTEN"], w.env["INGEST_URL"], w.env["ADMIN_USER"], w.env["ADMIN_PASSWORD"] = strings.TrimPrefix(ns.ClientURL(), "nats://"), ingest.URL, "ops", "pw"

	out, _, err := w.run("", "status")
	is.Equal(exitCode(err), 1) // a capped row needs a person
	for _, want := range []string{
		"2 unprocessed, 1 capped, 1 processed, 4 unpublished",                 // the log by state
		"oldest unprocessed: row " + id(w, "queued") + " (change-job-status)", // the oldest queued row
		"1 hand-off not published",                                            // the outbox
		"optimo-plan: held by ",                                               // the lock held
		"optimo-create: free",                                                 // and the one that is not
		"Failed 0, Logged 0, Queued 1",                                        // SMS by state
		"oldest not sent queued " + queued.UTC().Format("2006-01-02 15:04:05") + " UTC (1h0m", // and how long one has waited
		"waiting for the endpoint, no attempt counted: post to https://sms",                   // why, as makesafe's last error
		"an SMS has waited 1h0m",                   // a long wait needs a person
		"0 pending, 0 failed",                      // triage invites
		"0 failed",                                 // new-job emails
		"NotPlanned 1 (from 2026-12-02)",           // plan dates
		"57 calls left this minute, 4890 today",    // the Prime budget
		"missing: primectl streams apply makes it", // and those not made yet
		"child-mirror  log row " + id(w, "capped") + " (create-appointment), attempt 5 of 5", // each stage's last error
		`prime: 503 \x1b[2Jcleared`, // escaped, not sent to the terminal
		"1 log row failed 5 times",  // what needs a person
		"unreachable since " + unreachable.UTC().Format("2006-01-02 15:04:05"), // Prime down, as the process's client saw it
		"waiting, no attempt counted\n  Prime has not answered for 10m",        // a wait, apart from what needs a person
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	is.True(!strings.Contains(out, "\x1b"))                                         // no control character reaches the terminal
	is.True(hasLine(out, "job-mirror", "PRIME_RESOLVED/job-mirror", "3", "0", "0")) // a stage's consumer lag

	out, _, err = w.run("", "status", "--json")
	is.Equal(exitCode(err), 1) // the same verdict
	var rep status.Report
	is.NoErr(json.Unmarshal([]byte(out), &rep))
	is.Equal(rep.Log.Capped, 1) // the same, as JSON
	is.Equal(rep.Log.OldestUnprocessed.ID, w.ids["queued"])
	is.True(rep.SMS.OldestWaitingUTC.Equal(queued))
	is.Equal(*rep.PrimeBudget.Minute, 57.0)
	lag := map[string]status.Consumer{}
	for _, c := range rep.Consumers {
		lag[c.Name] = c
	}
	is.Equal(lag["job-mirror"].Pending, uint64(3)) // the consumer's lag
	is.True(lag["optimo-plan"].Missing)

	// Once a process spends the deployment's budget, status reads it from
	// NATS: the minute, the calls in flight, the processes.
	budget, err := primebudget.New(ctx, js, prime.Config{RatePerMinute: 60, MaxConcurrent: 5},
		primebudget.Config{Lease: time.Minute, Margin: 2 * time.Second, DayReserve: 250, Timeout: 5 * time.Second}, slog.New(slog.DiscardHandler))
	is.NoErr(err)
	permit, _, err := budget.Admit(ctx, prime.Turn{Since: time.Now()})
	is.NoErr(err)
	is.True(permit != nil) // a call in flight
	defer permit.Done(http.StatusOK, nil)
	out, _, err = w.run("", "status")
	is.Equal(exitCode(err), 1)
	is.True(hasLine(out, strings.Fields("prime budget 59 calls left this minute, not known yet today; 1 in flight, 1 process spending it from the deployment's budget in NATS (KV prime_budget)")...)) // the shared budget, not one process's metrics
	is.True(strings.Contains(out, "Prime has not answered for"))                                                                                                                                       // and Prime's outage still, from the process's

	// NATS and ingest out of reach: said, and the database's part printed.
	w.env["NATS_URL"], w.env["INGEST_URL"] = "nats://"+flowtest.FreeAddr(t), "http://"+flowtest.FreeAddr(t)
	out, _, err = w.run("", "status")
	is.Equal(exitCode(err), 2)                                                                                               // NATS and ingest could not be asked
	is.True(strings.Contains(out, "2 unprocessed, 1 capped"))                                                                // the database's part
	is.True(strings.Contains(out, "consumers and locks: NATS (NATS_URL, or NATS_LISTEN's embedded server) does not answer")) // what could not be read
	is.True(strings.Contains(out, "Prime budget: "))
	is.True(strings.Contains(out, "ingest: does not answer at http://"+strings.TrimPrefix(w.env["INGEST_URL"], "http://"))) // nor ingest

	// No database where DATABASE_URL says: nothing can be told.
	w.env["DATABASE_URL"] = "sqlite:" + filepath.Join(t.TempDir(), "none.db")
	_, _, err = w.run("", "status")
	is.Equal(exitCode(err), 2) // the database could not be opened
}

// exitCode is the exit status primectl's main gives err.
func exitCode(err error) int {
	var exit *primectl.ExitStatus
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.Code
	case errors.Is(err, primectl.ErrUsage):
		return 2
	}
	return 1
}

// hasLine reports whether out has a line of these fields, however spaced.
func hasLine(out string, fields ...string) bool {
	for line := range strings.Lines(out) {
		if slices.Equal(strings.Fields(line), fields) {
			return true
		}
	}
	return false
}

// statusWorld is an empty database beside a NATS with every stage's
// consumer made, an ingest that answers, and the database paired with the
// NATS as the resolver pairs it: status has nothing to say.
func statusWorld(t *testing.T) (*world, jetstream.JetStream) {
	t.Helper()
	ctx := context.Background()
	w := emptyWorld(t)
	ns := natstest.Server(t)
	_, js := natstest.Connect(t, ns) // every stage's consumer made, as the operators' step makes them
	if _, err := instance.Pair(ctx, js, w.store); err != nil {
		t.Fatal(err)
	}
	ingest := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/livez" {
			rw.WriteHeader(http.StatusUnauthorized)
		}
	}))
	t.Cleanup(ingest.Close)
	w.env["NATS_URL"], w.env["INGEST_URL"] = ns.ClientURL(), ingest.URL
	return w, js
}

// status exits 0 when all is well, 1 when something waits for a person —
// a capped row, a new-job email or a triage invite given up on — and 2
// when NATS or ingest cannot be asked: a cron job or a probe can act on it.
func TestStatusExitStatus(t *testing.T) {
	ctx := context.Background()
	t.Run("all well", func(t *testing.T) {
		is := is.New(t)
		w, _ := statusWorld(t)
		out, _, err := w.run("", "status")
		is.Equal(exitCode(err), 0)                                                                        // nothing to say
		is.True(!strings.Contains(out, "needs a person"))                                                 // and nothing said
		is.True(strings.Contains(out, "the database and NATS are one instance's (PRIME_WEBHOOK created")) // paired
	})

	t.Run("junk refused unread", func(t *testing.T) {
		is := is.New(t)
		w, _ := statusWorld(t)
		for _, id := range []string{"<a@junk>", "<b@junk>"} {
			r, _, err := w.store.RegisterEmail(ctx, store.EmailReceipt{InternetMessageID: id, Subject: "You have won", ReceivedUTC: time.Now()})
			is.NoErr(err)
			r.Outcome, r.LastError, r.MovedUTC, r.MovedTo = store.EmailRejected, "refused unread: the sender is not in MAIL_ALLOWED_SENDERS", time.Now(), store.EmailFailed
			is.NoErr(w.store.UpdateEmailReceipt(ctx, r))
		}
		out, _, err := w.run("", "status")
		is.Equal(exitCode(err), 0)                                                                           // junk needs nobody
		is.True(hasLine(out, strings.Fields("new-job emails 0 failed 2 rejected unread as not Prime's")...)) // counted apart
		is.True(!strings.Contains(out, "needs a person"))
		is.True(!strings.Contains(out, "You have won")) // and no junk among the last errors
		out, _, err = w.run("", "status", "--json")
		is.Equal(exitCode(err), 0)
		var rep status.Report
		is.NoErr(json.Unmarshal([]byte(out), &rep))
		is.Equal(rep.Emails.Rejected, 2) // as JSON
		is.Equal(rep.Emails.Failed, 0)
	})

	t.Run("a capped row", func(t *testing.T) {
		is := is.New(t)
		w, _ := statusWorld(t)
		id, err := w.store.InsertWebhookLog(ctx, store.NewWebhookLogRow{ReceivedUTC: time.Now(), EventAction: events.ActionCreateAppointment,
			Payload: `{"eventAction":"create-appointment"}`})
		is.NoErr(err)
		for range store.MaxAttempts {
			// The resolver met the fault: the row's action is child-mirror's.
			_, err := w.store.IncrementWebhookLogAttempt(ctx, id, "", pipeline.RecordedError("resolver", "payload fault MissingIdentifier (create-appointment): no appointmentId"))
			is.NoErr(err)
		}
		out, _, err := w.run("", "status")
		is.Equal(exitCode(err), 1)                                                                                                                                                                             // needs a person
		is.True(strings.Contains(out, "1 log row failed 5 times, not retried until replayed"))                                                                                                                 // said once
		is.True(hasLine(out, strings.Fields("resolver log row "+strconv.FormatInt(id, 10)+" (create-appointment), attempt 5 of 5 payload fault MissingIdentifier (create-appointment): no appointmentId")...)) // the resolver's, not child-mirror's
		is.Equal(strings.Count(out, "log row "+strconv.FormatInt(id, 10)), 1)                                                                                                                                  // the row listed once
	})

	t.Run("an email and an invite given up on", func(t *testing.T) {
		is := is.New(t)
		w, _ := statusWorld(t)
		r, _, err := w.store.RegisterEmail(ctx, store.EmailReceipt{InternetMessageID: "<j014370@prime>", Subject: "New Job J014370",
			ReceivedUTC: time.Now().Add(-time.Hour)})
		is.NoErr(err)
		r.Outcome, r.LastError, r.Attempts, r.MovedUTC, r.MovedTo = store.EmailFailed, "no JobID in the email", 5, time.Now(), store.EmailFailed
		is.NoErr(w.store.UpdateEmailReceipt(ctx, r))
		_, err = w.store.UpsertJob(ctx, store.Job{JobID: jobA, StatusID: jobB, SyncedUTC: time.Now()})
		is.NoErr(err)
		queued, err := w.store.QueueTriageInvite(ctx, jobA, jobB)
		is.NoErr(err)
		is.True(queued)
		invites, err := w.store.ClaimTriageInvites(ctx, time.Now().Add(time.Second), time.Minute, 1, 1)
		is.NoErr(err)
		is.Equal(len(invites), 1)
		is.NoErr(w.store.SetTriageInviteFailed(ctx, invites[0].ID, invites[0].Attempts, "invite endpoint: 400", time.Time{}, time.Now()))

		out, _, err := w.run("", "status")
		is.Equal(exitCode(err), 1) // needs a person
		for _, want := range []string{
			"1 new-job email failed for good, in MAIL_FAILED_FOLDER",     // the email, from its receipt
			"1 triage invite failed for good: primectl invites --failed", // the invite
			"1 pending, 1 failed",                // counted
			`email "New Job J014370" (1 failed)`, // the newest email given up on
			"no JobID in the email",              // and why
		} {
			if !strings.Contains(out, want) {
				t.Errorf("status lacks %q:\n%s", want, out)
			}
		}
		out, _, err = w.run("", "status", "--json")
		is.Equal(exitCode(err), 1)
		var rep status.Report
		is.NoErr(json.Unmarshal([]byte(out), &rep))
		is.Equal(rep.Emails.Failed, 1) // as JSON
		is.Equal(rep.Emails.LastFailed.Subject, "New Job J014370")
		is.Equal(rep.Invites.Failed, 1)
		is.Equal(len(rep.NeedsPerson), 2)
	})

	// Each kind of row that needs a person has a way out from primectl,
	// recorded: before it, a Failed SMS, invite or email kept status at 1
	// for good, and a probe's 1 never cleared.
	t.Run("what needs a person, resolved: 0 again", func(t *testing.T) {
		is := is.New(t)
		w, _ := statusWorld(t)
		t0 := time.Now().Add(-2 * time.Hour)
		var sms []int64
		for range 2 {
			id, _, err := w.store.QueueSMS(ctx, store.NewSMS{Recipient: "+61400000000", Body: "MAKE SAFE after hours: job J014370", Source: store.MakesafeSMSSource, Now: t0})
			is.NoErr(err)
			claimed, err := w.store.ClaimSMS(ctx, t0.Add(time.Second), time.Minute, 5, 1)
			is.NoErr(err)
			is.NoErr(w.store.SetSMSFailed(ctx, id, claimed[0].Attempts, "HTTP 400: unknown number", time.Time{}, t0.Add(time.Minute)))
			sms = append(sms, id)
		}
		_, err := w.store.UpsertJob(ctx, store.Job{JobID: jobA, StatusID: jobB, SyncedUTC: time.Now()})
		is.NoErr(err)
		_, err = w.store.QueueTriageInvite(ctx, jobA, jobB)
		is.NoErr(err)
		invites, err := w.store.ClaimTriageInvites(ctx, time.Now().Add(time.Second), time.Minute, 1, 1)
		is.NoErr(err)
		is.NoErr(w.store.SetTriageInviteFailed(ctx, invites[0].ID, invites[0].Attempts, "invite endpoint: 400", time.Time{}, time.Now()))
		r, _, err := w.store.RegisterEmail(ctx, store.EmailReceipt{InternetMessageID: "<promo@supplier>", Subject: "50% off gutter guards", ReceivedUTC: t0})
		is.NoErr(err)
		r.Outcome, r.LastError, r.Attempts, r.MovedUTC, r.MovedTo = store.EmailFailed, "no JobID in the email", 5, time.Now(), store.EmailFailed
		is.NoErr(w.store.UpdateEmailReceipt(ctx, r))

		out, _, err := w.run("", "status")
		is.Equal(exitCode(err), 1) // needs a person
		for _, want := range []string{"primectl sms requeue ID", "primectl invites dismiss ID", "primectl emails dismiss ID"} {
			is.True(strings.Contains(out, want)) // each line says how to clear it
		}
		for _, cmd := range [][]string{
			{"sms", "dismiss", strconv.FormatInt(sms[0], 10), "--reason", "phoned the on-call", "--by", "alice"},
			{"sms", "requeue", strconv.FormatInt(sms[1], 10), "--by", "alice"},
			{"invites", "dismiss", strconv.FormatInt(invites[0].ID, 10), "--reason", "invited by phone", "--by", "bob"},
			{"emails", "dismiss", strconv.FormatInt(r.ID, 10), "--reason", "a supplier's newsletter"},
		} {
			out, errOut, err := w.run("", cmd...)
			is.NoErr(err)
			is.Equal(errOut, "")
			is.True(strings.Contains(out, "(resolution ")) // recorded
		}
		claimed, err := w.store.ClaimSMS(ctx, time.Now().Add(time.Second), time.Minute, 5, 5)
		is.NoErr(err)
		is.Equal(len(claimed), 1) // the requeued SMS goes again, as makesafe would send it
		is.NoErr(w.store.SetSMSSent(ctx, claimed[0].ID, claimed[0].Attempts, time.Now()))

		out, _, err = w.run("", "status")
		is.Equal(exitCode(err), 0)                        // all well again
		is.True(!strings.Contains(out, "needs a person")) // nothing listed
		is.True(strings.Contains(out, "Dismissed 1"))     // the dismissed SMS counted as such
		out, _, err = w.run("", "sms", "--all")
		is.NoErr(err)
		is.True(strings.Contains(out, "dismissed")) // the rows stay, with who and why
		is.True(strings.Contains(out, "by alice: phoned the on-call"))
		is.True(strings.Contains(out, "requeued"))
		out, _, err = w.run("", "emails", "--all")
		is.NoErr(err)
		is.True(strings.Contains(out, "Dismissed"))
		is.True(strings.Contains(out, "a supplier's newsletter"))
		is.True(strings.Contains(out, "@")) // by the OS user at this host, --by not given
	})

	for _, down := range []struct{ name, variable, url, says string }{
		{"NATS down", "NATS_URL", "nats://", "consumers and locks: NATS (NATS_URL, or NATS_LISTEN's embedded server) does not answer"},
		{"ingest down", "INGEST_URL", "http://", "ingest: does not answer at http://"},
	} {
		t.Run(down.name, func(t *testing.T) {
			is := is.New(t)
			w, _ := statusWorld(t)
			w.env[down.variable] = down.url + flowtest.FreeAddr(t)
			out, _, err := w.run("", "status")
			is.Equal(exitCode(err), 2)                                       // cannot tell
			is.True(strings.Contains(out, "could not ask, so what follows")) // said first
			is.True(strings.Contains(out, down.says))                        // and what
		})
	}
}

// A database read beside another instance's NATS is said, and status
// exits 2: one's rows with the other's lag would mislead.
func TestStatusTellsAnotherInstancesNATS(t *testing.T) {
	is := is.New(t)
	w, _ := statusWorld(t) // paired with its own NATS
	other := natstest.Server(t)
	natstest.Connect(t, other) // another instance's, streams and all
	w.env["NATS_URL"] = other.ClientURL()
	out, _, err := w.run("", "status")
	is.Equal(exitCode(err), 2)                                    // cannot tell
	is.True(strings.Contains(out, "NATS is not this database's")) // said
	is.True(strings.Contains(out, "NATS is NOT this database's: above"))
}

// The sync drains' redeliveries of jobs queued within the grace are kept
// for a later pass (§7, §9), not trouble; past the grace they are
// redeliveries like any.
func TestStatusKeepsTheSyncGraceApart(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	w, js := statusWorld(t)
	_, err := w.store.QueueMissingObjectsByJob(ctx, jobA)
	is.NoErr(err)
	body, err := json.Marshal(events.SyncQueued{JobID: jobA, Objects: store.MissingObjects(), Source: events.SourceFirstSeen})
	is.NoErr(err)
	_, err = js.Publish(ctx, events.SubjectSyncQueued, body)
	is.NoErr(err)
	// The drain finds Prime with nothing yet and keeps the hand-off for a
	// later pass, as child-mirror does: delivered, given back, delivered
	// again and not acked yet.
	c := events.ConsumerSyncDrain
	cons, err := js.Consumer(ctx, c.Stream, c.Durable)
	is.NoErr(err)
	for i := range 2 {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		is.NoErr(err)
		for m := range batch.Messages() {
			if i == 0 {
				is.NoErr(m.Nak())
			}
		}
		is.NoErr(batch.Error())
	}

	out, _, err := w.run("", "status")
	is.Equal(exitCode(err), 0)                                                                                                       // nothing wrong
	is.True(hasLine(out, "child-mirror", "PRIME_JOB/child-mirror-sync", "0", "1", "0", "(+1", "kept", "for", "a", "later", "pass)")) // the redelivery kept apart
	is.True(strings.Contains(out, "1 redelivery of a job queued within SYNC_DRAIN_EMPTY_GRACE is the §7/§9 grace"))

	w.env["SYNC_DRAIN_EMPTY_GRACE"] = "1ms" // the item queued longer ago than that
	time.Sleep(5 * time.Millisecond)
	out, _, err = w.run("", "status", "--json")
	is.Equal(exitCode(err), 0)
	var rep status.Report
	is.NoErr(json.Unmarshal([]byte(out), &rep))
	for _, cs := range rep.Consumers {
		if cs.Name == c.Durable {
			is.Equal(cs.Redelivered, 1) // past the grace, a redelivery
			is.Equal(cs.Kept, 0)
		}
	}
}

// status gives the day's forecast of the deployment's budget: the calls
// so far, their pace, and when the reserve is reached at that pace, said
// loudly when it is before the day ends.
func TestStatusForecastsTheDay(t *testing.T) {
	is := is.New(t)
	w, js := statusWorld(t)
	ctx := context.Background()
	budget, err := primebudget.New(ctx, js, prime.Config{RatePerMinute: 60, MaxConcurrent: 5},
		primebudget.Config{Lease: time.Minute, Margin: 2 * time.Second, DayReserve: 250, Timeout: 5 * time.Second}, slog.New(slog.DiscardHandler))
	is.NoErr(err)
	permit, _, err := budget.Admit(ctx, prime.Turn{Since: time.Now()})
	is.NoErr(err)
	h := http.Header{}
	h.Set("X-Ratelimit-Day-Remaining", "250") // Prime says the day is down to the reserve
	permit.Done(http.StatusOK, h)
	var out string
	flowtest.Eventually(t, "the day's forecast", func() bool {
		out, _, err = w.run("", "status")
		return err == nil && strings.Contains(out, "prime day")
	})
	is.True(strings.Contains(out, "1 call today, 4 an hour: down to the reserve (250) at ")) // one call over the least pace's quarter hour
	is.True(strings.Contains(out, "UTC at this pace, BEFORE the day ends "))                 // said loudly
	out, _, err = w.run("", "status", "--json")
	is.NoErr(err)
	var rep status.Report
	is.NoErr(json.Unmarshal([]byte(out), &rep))
	is.Equal(rep.PrimeBudget.Forecast.Calls, 1) // the same, as JSON
	is.True(rep.PrimeBudget.Forecast.Short)
}
