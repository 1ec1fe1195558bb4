package jobmirror_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/consume"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/opshttp"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/services/ingest"
	jobmirror "github.com/ethosbuilding/primeflow/services/job-mirror"
	"github.com/ethosbuilding/primeflow/services/resolver"
	"github.com/nats-io/nats.go/jetstream"
)

const benchAPIKey = "0f3c1c8e-2b7d-4c1e-9a55-6d0e8b1f2a37"

// The services with their production defaults.
func benchServices(b *testing.B, e *flowtest.Env) {
	b.Helper()
	r, err := resolver.New(resolver.DefaultConfig(), e.Deps, e.Prime)
	if err != nil {
		b.Fatal(err)
	}
	e.Run("resolver", r)
	m, err := jobmirror.New(jobmirror.DefaultConfig(), e.Deps, e.Prime, jobmirror.LogInvites{Log: e.Deps.Log})
	if err != nil {
		b.Fatal(err)
	}
	e.Run("job-mirror", m)
}

// mirrorDirectly puts jobs into the mirror and the reference map, as if
// job-mirror had seen each once.
func mirrorDirectly(b *testing.B, e *flowtest.Env, n int) []primesim.Job {
	b.Helper()
	ctx := context.Background()
	jobs := make([]primesim.Job, n)
	for i := range jobs {
		j := e.Sim.NewJob()
		stored, _ := e.Sim.Job(j.ID)
		row := store.Job{JobID: j.ID, StatusID: j.StatusID, Version: j.Version, Attributes: string(stored.Raw)}
		if _, err := e.Store.UpsertJob(ctx, row); err != nil {
			b.Fatal(err)
		}
		if _, err := e.Store.SaveJobReference(ctx, j.Ref, j.ID); err != nil {
			b.Fatal(err)
		}
		jobs[i] = j
	}
	return jobs
}

func webhookBody(b *testing.B, e *flowtest.Env, jobID string) string {
	b.Helper()
	body, err := e.Sim.WebhookBody("change-job-status", jobID)
	if err != nil {
		b.Fatal(err)
	}
	return string(body)
}

// latencies posts n webhooks to a real ingest one after another, each about
// a known job whose status just changed in Prime, and measures from ingest's
// 200 to the new version in primeJobs.
func latencies(b *testing.B, n int) []time.Duration {
	b.Helper()
	e := flowtest.New(b, flowtest.Options{})
	jobs := mirrorDirectly(b, e, 50)
	r := service.NewRouter(opshttp.Credentials{User: "admin", Password: "bench"})
	cfg := ingest.DefaultConfig()
	cfg.APIKey, cfg.MaxBodyBytes, cfg.RelayInterval = benchAPIKey, 64<<10, time.Hour
	in, err := ingest.New(cfg, e.Deps, r)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: r.Handler(e.Deps)}
	e.Run("ingest", runnerFunc(func(ctx context.Context) error { return service.Run(ctx, srv, ln, in) }))
	benchServices(b, e)
	url := "http://" + ln.Addr().String() + ingest.WebhookPath
	client := &http.Client{}
	ctx := context.Background()
	post := func(body string) { flowtest.PostWebhook(b, client, url, benchAPIKey, body) }
	statuses := []string{"3f1c2a8e-6b1d-4c55-9a0e-1d2b7c9e4a01", statusICM}
	out := make([]time.Duration, 0, n)
	for i := range n + 20 { // the first 20 warm up
		j := jobs[i%len(jobs)]
		updated, err := e.Sim.UpdateJob(j.ID, func(pj *prime.Job) { pj.StatusID = statuses[i%2] })
		if err != nil {
			b.Fatal(err)
		}
		post(webhookBody(b, e, j.ID))
		t0 := time.Now()
		deadline := t0.Add(20 * time.Second)
		for {
			got, _, err := e.Store.GetJob(ctx, j.ID)
			if err != nil {
				b.Fatal(err)
			}
			if got.Version == updated.Version {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("job %s never reached version %d", j.ID, updated.Version)
			}
			time.Sleep(100 * time.Microsecond)
		}
		if i >= 20 {
			out = append(out, time.Since(t0))
		}
	}
	slices.Sort(out)
	return out
}

// backlog stores n change-job-status events of known jobs, as ingest
// would, before anything consumes them.
func backlog(b *testing.B, e *flowtest.Env, jobs []primesim.Job, n int) {
	b.Helper()
	ctx := context.Background()
	rows := make([]store.NewWebhookLogRow, 0, 500)
	flush := func() {
		ids, err := e.Store.InsertWebhookLogs(ctx, rows)
		if err != nil {
			b.Fatal(err)
		}
		for i, id := range ids {
			if _, err := e.JS.PublishMsgAsync(events.NewWebhookMsg(id, 0, rows[i].EventAction, rows[i].Payload)); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-e.JS.PublishAsyncComplete():
		case <-time.After(30 * time.Second):
			b.Fatal("publishing the backlog timed out")
		}
		rows = rows[:0]
	}
	for i := range n {
		j := jobs[i%len(jobs)]
		rows = append(rows, store.NewWebhookLogRow{ReceivedUTC: time.Now().UTC(), EventAction: "change-job-status",
			Payload: webhookBody(b, e, j.ID), IsAuthenticated: true})
		if len(rows) == cap(rows) {
			flush()
		}
	}
	if len(rows) > 0 {
		flush()
	}
}

// waitProcessed waits until the resolver has settled every event (its
// consumer has nothing pending or unacknowledged), checks that every row is
// processed, and returns how long it took since start. Watching the
// consumer costs the pipeline almost nothing, where counting rows would not.
func waitProcessed(b *testing.B, e *flowtest.Env, durable string, start time.Time) time.Duration {
	b.Helper()
	ctx := context.Background()
	deadline := start.Add(10 * time.Minute)
	for {
		cons, err := e.JS.Consumer(ctx, events.StreamWebhook, durable)
		if err == nil {
			info, err := cons.Info(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if info.NumPending == 0 && info.NumAckPending == 0 && info.Delivered.Consumer > 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("the backlog was not drained in 10 minutes")
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(start)
	left, err := e.Store.CountWebhookLog(ctx, store.LogFilter{State: store.Unprocessed})
	if err != nil || left > 0 {
		b.Fatalf("%d rows left unprocessed (%v)", left, err)
	}
	return took
}

// drain measures how fast the resolver and job-mirror drain a backlog of n
// events of known jobs, and the Prime calls they make for it.
func drain(b *testing.B, n int) (rate, callsPerEvent float64) {
	b.Helper()
	e := flowtest.New(b, flowtest.Options{})
	jobs := mirrorDirectly(b, e, 1000)
	backlog(b, e, jobs, n)
	e.Sim.ResetStats()
	start := time.Now()
	benchServices(b, e)
	took := waitProcessed(b, e, resolver.Durable, start)
	st := e.Sim.Stats()
	return float64(n) / took.Seconds(), float64(st.Calls-st.ByEndpoint["POST /oauth/token"]) / float64(n)
}

// drainBaseline drains the same backlog with the least any stage does: one
// consumer taking each message from JetStream and stamping its row
// processed in one durable commit.
func drainBaseline(b *testing.B, n int) float64 {
	b.Helper()
	e := flowtest.New(b, flowtest.Options{})
	jobs := mirrorDirectly(b, e, 1000)
	backlog(b, e, jobs, n)
	start := time.Now()
	c := e.Consumer(events.Consumer{Stream: events.StreamWebhook, Durable: "baseline", MaxAckPending: 1024})
	e.Run("baseline", runnerFunc(func(ctx context.Context) error {
		return consume.Run(ctx, e.JS, consume.Spec{Consumer: c, Workers: 64},
			e.Deps.Log, e.Deps.Metrics, func(ctx context.Context, msg jetstream.Msg) error {
				id, err := events.LogID(msg.Headers())
				if err != nil {
					return consume.Drop(err)
				}
				return e.Store.SetWebhookLogProcessed(ctx, id, "", "Processed")
			})
	}))
	return float64(n) / waitProcessed(b, e, "baseline", start).Seconds()
}

// BenchmarkChangeJobStatusEndToEnd measures change-job-status through
// ingest, the resolver and job-mirror against the Prime simulator with no
// added latency (issue 3 item 9):
//   - latency from ingest's 200 to the new version in primeJobs, one event
//     at a time (target p50 ≤ 50 ms);
//   - the drain rate of a 10,000-event backlog of known jobs (target ≥ 1,000
//     events/s), against a baseline measured in the same run: the same
//     backlog drained by a consumer that only stamps each row processed;
//   - Prime calls per event for known jobs (target ≤ 1.1).
func BenchmarkChangeJobStatusEndToEnd(b *testing.B) {
	const backlogEvents, samples = 10_000, 300
	for range b.N {
		lat := latencies(b, samples)
		p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
		base := drainBaseline(b, backlogEvents)
		rate, calls := drain(b, backlogEvents)

		w := os.Stdout
		fmt.Fprintf(w, "\nchange-job-status end to end (zero-latency Prime simulator)\n")
		fmt.Fprintf(w, "  webhook 200 → primeJobs row, %d events one at a time: p50 %s, p99 %s (target p50 ≤ 50ms)\n",
			samples, p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond))
		fmt.Fprintf(w, "  drain of a %d-event backlog of known jobs: %.0f events/s (target ≥ 1000)\n", backlogEvents, rate)
		fmt.Fprintf(w, "  baseline drain (consume + one durable commit a row): %.0f events/s; ratio %.2f\n", base, rate/base)
		fmt.Fprintf(w, "  Prime calls per event for known jobs: %.3f (target ≤ 1.1)\n", calls)
		b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
		b.ReportMetric(rate, "events/s")
		b.ReportMetric(base, "baseline-events/s")
		b.ReportMetric(rate/base, "ratio")
		b.ReportMetric(calls, "prime-calls/event")
	}
}

type runnerFunc func(ctx context.Context) error

func (f runnerFunc) Run(ctx context.Context) error { return f(ctx) }
