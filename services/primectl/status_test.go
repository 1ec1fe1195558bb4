package primectl_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/lock"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primebudget"
	"github.com/ethosbuilding/primeflow/pkg/status"
	"github.com/ethosbuilding/primeflow/pkg/store"
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

	ns := natstest.Server(t)
	_, js := natstest.Connect(t, ns)
	is.NoErr(events.EnsureStreams(ctx, js, 0))
	c := events.ConsumerJobMirror
	_, err = js.CreateOrUpdateConsumer(ctx, c.Stream, jetstream.ConsumerConfig{Durable: c.Durable, FilterSubjects: c.Subjects, AckPolicy: jetstream.AckExplicitPolicy})
	is.NoErr(err)
	for range 3 {
		_, err := js.Publish(ctx, events.ResolvedSubject(events.ActionChangeJobStatus), []byte("{}"))
		is.NoErr(err)
	}
	locks, err := lock.New(ctx, js, lock.Config{TTL: time.Minute, Wait: time.Second}, nil)
	is.NoErr(err)
	held, err := locks.Take(ctx, events.LockOptimoPlan)
	is.NoErr(err)
	defer held.Release(context.Background())

	ingest := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if u, p, _ := r.BasicAuth(); r.URL.Path != "/metrics" || u != "ops" || p != "pw" {
			rw.WriteHeader(http.StatusUnauthorized)
			return
		}
		rw.Write([]byte("# TYPE prime_client_ratelimit_remaining gauge\n" +
			`prime_client_ratelimit_remaining{client="prime",window="minute"} 57` + "\n" +
			`prime_client_ratelimit_remaining{client="prime",window="day"} 4890` + "\n"))
	}))
	defer ingest.Close()
	// NATS_URL unset: bin/primeflow's embedded server, at NATS_LISTEN.
	w.env["NATS_LISTEN"], w.env["INGEST_URL"], w.env["ADMIN_USER"], w.env["ADMIN_PASSWORD"] = strings.TrimPrefix(ns.ClientURL(), "nats://"), ingest.URL, "ops", "pw"

	out, _, err := w.run("", "status")
	is.NoErr(err)
	for _, want := range []string{
		"2 unprocessed, 1 capped, 1 processed, 4 unpublished",                 // the log by state
		"oldest unprocessed: row " + id(w, "queued") + " (change-job-status)", // the oldest queued row
		"1 hand-off not published",                                            // the outbox
		"optimo-plan: held by ",                                               // the lock held
		"optimo-create: free",                                                 // and the one that is not
		"Failed 0",                                                            // SMS by state
		"0 pending",                                                           // triage invites
		"NotPlanned 1 (from 2026-12-02)",                                      // plan dates
		"57 calls left this minute, 4890 today",                               // the Prime budget
		"missing: the service has not started",                                // and those not made yet
		"child-mirror  log row " + id(w, "capped") + " (create-appointment), attempt 5 of 5", // each stage's last error
		`prime: 503 \x1b[2Jcleared`, // escaped, not sent to the terminal
		"1 log row failed 5 times",  // what needs a person
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	is.True(!strings.Contains(out, "\x1b"))                                         // no control character reaches the terminal
	is.True(hasLine(out, "job-mirror", "PRIME_RESOLVED/job-mirror", "3", "0", "0")) // a stage's consumer lag

	out, _, err = w.run("", "status", "--json")
	is.NoErr(err)
	var rep status.Report
	is.NoErr(json.Unmarshal([]byte(out), &rep))
	is.Equal(rep.Log.Capped, 1) // the same, as JSON
	is.Equal(rep.Log.OldestUnprocessed.ID, w.ids["queued"])
	is.Equal(*rep.PrimeBudget.Minute, 57.0)
	lag := map[string]status.Consumer{}
	for _, c := range rep.Consumers {
		lag[c.Name] = c
	}
	is.Equal(lag["job-mirror"].Pending, uint64(3)) // the consumer's lag
	is.True(lag["resolver"].Missing)

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
	is.NoErr(err)
	is.True(hasLine(out, strings.Fields("prime budget 59 calls left this minute, not known yet today; 1 in flight, 1 process spending it from the deployment's budget in NATS (KV prime_budget)")...)) // the shared budget, not one process's metrics

	// NATS and ingest out of reach: said, and the database's part printed.
	w.env["NATS_URL"], w.env["INGEST_URL"] = "nats://"+flowtest.FreeAddr(t), "http://"+flowtest.FreeAddr(t)
	out, _, err = w.run("", "status")
	is.NoErr(err)
	is.True(strings.Contains(out, "2 unprocessed, 1 capped"))                                                                // the database's part
	is.True(strings.Contains(out, "consumers and locks: NATS (NATS_URL, or NATS_LISTEN's embedded server) does not answer")) // what could not be read
	is.True(strings.Contains(out, "Prime budget: "))
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

// status gives the day's forecast of the deployment's budget: the calls
// so far, their pace, and when the reserve is reached at that pace, said
// loudly when it is before the day ends.
func TestStatusForecastsTheDay(t *testing.T) {
	is := is.New(t)
	w := emptyWorld(t)
	ns := natstest.Server(t)
	_, js := natstest.Connect(t, ns)
	ctx := context.Background()
	w.env["NATS_URL"], w.env["INGEST_URL"] = ns.ClientURL(), "http://"+flowtest.FreeAddr(t)
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
