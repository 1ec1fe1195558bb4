package mailintake_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// waitFiled waits until every message's receipt says it was moved to the
// processed folder, and returns the receipts.
func (e *env) waitFiled(b *testing.B, msgs []string, within time.Duration) []store.EmailReceipt {
	b.Helper()
	out := make([]store.EmailReceipt, len(msgs))
	filed := 0 // the receipts read so far, in order
	flowtest.Poll(b, within, 5*time.Millisecond, fmt.Sprintf("%d emails filed as processed", len(msgs)), func() bool {
		for ; filed < len(msgs); filed++ {
			r, found, err := e.Store.GetEmailReceipt(context.Background(), msgs[filed])
			if err != nil {
				b.Fatal(err)
			}
			if !found || r.MovedTo != store.EmailProcessed {
				return false
			}
			out[filed] = r
		}
		return true
	})
	return out
}

// BenchmarkNewJobEmailLatency: an email for a new job dropped into the folder
// at a random moment, to the job mirrored and the email moved (its receipt's
// movedUTC), one at a time, against the poll interval: waiting for the next
// poll is most of it (p50 about half an interval, p95 about all of one).
func BenchmarkNewJobEmailLatency(b *testing.B) {
	const samples = 40
	const poll = 500 * time.Millisecond
	for range b.N {
		e := start(b)
		cfg := e.config()
		cfg.PollInterval = poll
		e.intake(cfg, nil, nil)
		rng := rand.New(rand.NewPCG(1, 2))
		var lat []time.Duration
		for range samples {
			time.Sleep(time.Duration(rng.Int64N(int64(poll))))
			j := e.Sim.NewJob()
			sent := time.Now()
			msg := e.email(j)
			r := e.waitFiled(b, []string{msg}, 30*time.Second)[0]
			if _, found, err := e.Store.GetJob(context.Background(), j.ID); err != nil || !found {
				b.Fatalf("job %s not mirrored (%v)", j.ID, err)
			}
			lat = append(lat, r.MovedUTC.Sub(sent))
		}
		slices.Sort(lat)
		p50, p95 := lat[len(lat)/2], lat[len(lat)*95/100]
		fmt.Fprintf(os.Stdout, "\nnew-job email → job mirrored and email moved, %d emails one at a time, MAIL_POLL_INTERVAL %s\n", samples, poll)
		fmt.Fprintf(os.Stdout, "  p50 %s (%.2f of the interval), p95 %s (%.2f of the interval)\n",
			p50.Round(time.Millisecond), p50.Seconds()/poll.Seconds(), p95.Round(time.Millisecond), p95.Seconds()/poll.Seconds())
		b.ReportMetric(float64(p50.Milliseconds()), "p50-ms")
		b.ReportMetric(float64(p95.Milliseconds()), "p95-ms")
		b.ReportMetric(p50.Seconds()/poll.Seconds(), "p50/interval")
		b.ReportMetric(p95.Seconds()/poll.Seconds(), "p95/interval")
	}
}

// BenchmarkNewJobEmailBacklog: 300 job emails waiting in the folder when the
// intake starts, a third of them for jobs the webhook had already brought
// (mirrored, mapped and seen first by a webhook event, as job-mirror leaves
// them), drained with the Prime client at Prime's own 60 calls a minute
// (BENCH_PRIME_RATE overrides it): the drain time against the bound Prime
// sets, its calls ÷ the rate, and Prime's calls per email — an email for a
// job already mirrored costs none.
func BenchmarkNewJobEmailBacklog(b *testing.B) {
	const emails = 300
	rate := 60
	if v, err := strconv.Atoi(os.Getenv("BENCH_PRIME_RATE")); err == nil && v > 0 {
		rate = v
	}
	for range b.N {
		e := startWith(b, func(c *prime.Config) { c.RatePerMinute, c.RateBurst = rate, 1 })
		ctx := context.Background()
		var msgs []string
		seen := 0
		for i := range emails {
			j := e.Sim.NewJob()
			if i%3 == 0 {
				webhookSaw(b, e, j)
				seen++
			}
			msgs = append(msgs, e.email(j))
		}
		e.Sim.ResetStats()
		cfg := e.config()
		cfg.PollInterval = time.Second
		start := time.Now()
		e.intake(cfg, nil, nil)
		e.waitFiled(b, msgs, 30*time.Minute)
		took := time.Since(start)
		st := e.Sim.Stats()
		gets := st.ByEndpoint["GET /jobs/{id}"]
		bound := time.Duration(float64(st.Calls) / float64(rate) * float64(time.Minute))
		firstSeen, err := e.Store.ListFirstSeen(ctx, store.FirstSeenAny, emails+10)
		if err != nil {
			b.Fatal(err)
		}
		if len(firstSeen) != emails {
			b.Fatalf("%d first sights for %d jobs", len(firstSeen), emails)
		}
		fmt.Fprintf(os.Stdout, "\nbacklog of %d new-job emails, %d of them for jobs the webhook had brought, Prime paced at %d calls a minute\n", emails, seen, rate)
		fmt.Fprintf(os.Stdout, "  drained in %s; Prime's bound (%d calls ÷ %d a minute) %s: ratio %.3f\n",
			took.Round(100*time.Millisecond), st.Calls, rate, bound.Round(100*time.Millisecond), took.Seconds()/bound.Seconds())
		fmt.Fprintf(os.Stdout, "  Prime calls per email: %.3f overall (%d job GETs + %d token), %.3f for the new jobs, %.3f for the mirrored ones\n",
			float64(st.Calls)/emails, gets, st.Calls-gets, float64(gets)/float64(emails-seen), float64(int(gets)-(emails-seen))/float64(seen))
		b.ReportMetric(took.Seconds(), "drain-s")
		b.ReportMetric(bound.Seconds(), "bound-s")
		b.ReportMetric(took.Seconds()/bound.Seconds(), "ratio")
		b.ReportMetric(float64(st.Calls)/emails, "prime-calls/email")
	}
}

// webhookSaw leaves a job as a change-job-status webhook does: its log row,
// the job mirrored with its numeric mapping, its first sight claimed by the
// event, and the pipeline done.
func webhookSaw(b *testing.B, e *env, j primesim.Job) {
	b.Helper()
	ctx := context.Background()
	id, err := e.Store.InsertWebhookLog(ctx, store.NewWebhookLogRow{ReceivedUTC: time.Now().UTC(), EventAction: "change-job-status",
		JobID: j.ID, Payload: "{}", IsAuthenticated: true})
	if err != nil {
		b.Fatal(err)
	}
	stored, _ := e.Sim.Job(j.ID)
	if _, err := e.Store.UpsertJob(ctx, store.Job{JobID: j.ID, JobNumber: j.JobNumber, Version: j.Version, CreatedAt: j.CreatedAt.Time,
		Attributes: string(stored.Raw)}); err != nil {
		b.Fatal(err)
	}
	if _, err := e.Store.SaveJobReference(ctx, j.Ref, j.ID); err != nil {
		b.Fatal(err)
	}
	if _, err := e.Store.ProcessNewPrimeJob(ctx, j.ID, id, store.ViaWebhook, store.OutboxMessage{Subject: "bench.none", MsgID: "bench:" + j.ID}); err != nil {
		b.Fatal(err)
	}
	if err := e.Store.SetWebhookLogProcessed(ctx, id, j.ID, "Processed"); err != nil {
		b.Fatal(err)
	}
}
