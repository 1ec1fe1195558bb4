package makesafe_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/sms"
	"github.com/ethosbuilding/primeflow/services/child-mirror/pipelinetest"
	jobmirror "github.com/ethosbuilding/primeflow/services/job-mirror"
	"github.com/ethosbuilding/primeflow/services/makesafe"
	newjobpipeline "github.com/ethosbuilding/primeflow/services/newjob-pipeline"
)

// handoffs records when each SMS was handed to the sender, then sends it.
type handoffs struct {
	next sms.Sender
	mu   sync.Mutex
	at   map[string]time.Time // by body
}

func (h *handoffs) Send(ctx context.Context, m sms.Message) error {
	h.mu.Lock()
	if _, ok := h.at[m.Body]; !ok {
		h.at[m.Body] = time.Now()
	}
	h.mu.Unlock()
	return h.next.Send(ctx, m)
}

// handedOff is when the SMS whose body contains text was handed over.
func (h *handoffs) handedOff(text string) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for body, at := range h.at {
		if strings.Contains(body, text) {
			return at, true
		}
	}
	return time.Time{}, false
}

// pipeline is the whole path for real: ingest over HTTP, the resolver,
// job-mirror, child-mirror, newjob-pipeline and makesafe on embedded NATS,
// SQLite and the Prime simulator over HTTP, with an SMS endpoint.
type pipeline struct {
	*flowtest.Env
	ingestURL string
	sent      *handoffs
	ep        *smsEndpoint
}

const apiKey = "3f1c2b4a-5d6e-4f70-8a9b-0c1d2e3f4a5b"

func startPipeline(b *testing.B, ladder []time.Duration) *pipeline {
	b.Helper()
	env := flowtest.New(b, flowtest.Options{})
	d := env.Deps
	p := &pipeline{Env: env, ep: &smsEndpoint{}}
	p.ingestURL = pipelinetest.StartFront(env, apiKey)
	pipelineCfg := newjobpipeline.DefaultConfig()
	pipelineCfg.Workers, pipelineCfg.Backoff = 2, retry.Backoff{100 * time.Millisecond}
	nj, err := newjobpipeline.New(pipelineCfg, d)
	if err != nil {
		b.Fatal(err)
	}
	env.Run("newjob-pipeline", nj)

	epSrv := httptest.NewServer(p.ep)
	b.Cleanup(epSrv.Close)
	cfg := testConfig(epSrv.URL)
	cfg.Ladder = ladder
	cfg.Drainer.Sweep = time.Minute
	httpSender, err := sms.NewHTTPSender(cfg.SMS, nil)
	if err != nil {
		b.Fatal(err)
	}
	p.sent = &handoffs{next: httpSender, at: map[string]time.Time{}}
	ms, err := makesafe.New(cfg, d, env.Prime, p.sent)
	if err != nil {
		b.Fatal(err)
	}
	env.Run("makesafe", ms)
	flowtest.Eventually(b, "job-mirror's ensure-job micro service", func() bool {
		_, err := env.NC.Request("$SRV.PING."+jobmirror.ServiceName, nil, time.Second)
		return err == nil
	})
	return p
}

// post sends Prime's webhook for action about record id to ingest over HTTP,
// the way Prime does, and returns when ingest answered (after its commit).
func (p *pipeline) post(action, id string) {
	p.T.Helper()
	w, err := p.Sim.Webhook(action, id)
	if err != nil {
		p.T.Fatal(err)
	}
	if err := p.Sim.FireWebhook(context.Background(), p.ingestURL, apiKey, w); err != nil {
		p.T.Fatal(err)
	}
}

// newJobSeen makes an after-hours job in Prime and lets the pipeline see it
// first through change-job-status: mirrored, new-job pipeline run, ladder
// queued (no Make Safe yet).
func (p *pipeline) newJobSeen() prime.Job {
	p.T.Helper()
	j := p.Sim.NewJob(func(j *prime.Job) { j.CreatedAt = prime.Time{Time: saturdayNight} })
	p.post("change-job-status", j.ID)
	flowtest.Eventually(p.T, "the ladder is queued at first sight", func() bool {
		cs, err := p.Store.ListMakesafeChecks(context.Background(), strings.ToLower(j.ID))
		return err == nil && len(cs) > 0
	})
	return j.Job
}

// BenchmarkCreateAllocationWebhookToSMS measures, end to end, the time from
// Prime posting create-allocation for a Make Safe on an after-hours job to
// makesafe handing the SMS to the sender: ingest (stored, 200), the resolver
// (identify, §4), child-mirror (allocation mirrored, makesafe.detect from the
// outbox), makesafe (call raised, SMS queued, drainer kicked). The job was
// seen before (its first sight is not timed). The Prime client's pacing is
// lifted (flowtest), so the figure is the pipeline's, not Prime's budget's.
// The baseline, measured in the same run, is ingest's answer alone (the
// webhook's 200, after the log row's commit).
func BenchmarkCreateAllocationWebhookToSMS(b *testing.B) {
	p := startPipeline(b, []time.Duration{time.Hour})
	const samples = 20
	var toSender, toEndpoint, toAnswer []time.Duration
	for range samples {
		j := p.newJobSeen()
		a := p.Sim.NewMakeSafeAllocation(j.ID)
		start := time.Now()
		p.post("create-allocation", a.ID)
		toAnswer = append(toAnswer, time.Since(start))
		var handed time.Time
		flowtest.Eventually(b, "the make-safe SMS is handed to the sender", func() bool {
			var ok bool
			handed, ok = p.sent.handedOff(j.JobNumber)
			return ok
		})
		toSender = append(toSender, handed.Sub(start))
		flowtest.Eventually(b, "the SMS endpoint has it", func() bool {
			for i, q := range p.ep.accepted() {
				if strings.Contains(q.Message, j.JobNumber) {
					p.ep.mu.Lock()
					toEndpoint = append(toEndpoint, p.ep.at[i].Sub(start))
					p.ep.mu.Unlock()
					return true
				}
			}
			return false
		})
	}
	flowtest.ReportLatencies(b, "webhook-to-sender", toSender)
	flowtest.ReportLatencies(b, "webhook-to-endpoint", toEndpoint)
	flowtest.ReportLatencies(b, "baseline-webhook-200", toAnswer)
	b.ReportMetric(float64(flowtest.Quantile(toSender, 0.5))/float64(flowtest.Quantile(toAnswer, 0.5)), "p50-vs-baseline")
}

// BenchmarkFirstSightToFirstRung measures the ladder's start: from a job's
// first sight (primeflowJobFirstSeen.firstSeenUTC, job-mirror) to the
// detection that queued its rungs (newjob-pipeline → makesafe.detect →
// rows and schedules committed), and how late the first rung ran after its
// due time (the server fires @at schedules on whole seconds; the rung's
// run includes its Prime sync). The ladder's first rung is 1s here, 1m in
// production; the figures do not depend on it.
func BenchmarkFirstSightToFirstRung(b *testing.B) {
	p := startPipeline(b, []time.Duration{time.Second, time.Hour})
	const samples = 10
	var toLadder, lateness, toRung []time.Duration
	for range samples {
		j := p.newJobSeen()
		job := strings.ToLower(j.ID)
		var fired time.Time
		flowtest.Eventually(b, "the first rung runs", func() bool {
			cs, err := p.Store.ListMakesafeChecks(context.Background(), job)
			if err != nil || len(cs) == 0 || cs[0].FiredUTC.IsZero() {
				return false
			}
			fired = cs[0].FiredUTC
			return true
		})
		fs, found, err := p.Store.GetFirstSeen(context.Background(), job)
		if err != nil || !found {
			b.Fatalf("first sight of %s: %v %v", job, found, err)
		}
		cs, err := p.Store.ListMakesafeChecks(context.Background(), job)
		if err != nil {
			b.Fatal(err)
		}
		toLadder = append(toLadder, cs[0].QueuedUTC.Sub(fs.FirstSeenUTC))
		lateness = append(lateness, fired.Sub(cs[0].DueUTC))
		toRung = append(toRung, fired.Sub(fs.FirstSeenUTC))
	}
	flowtest.ReportLatencies(b, "firstsight-to-ladder", toLadder)
	flowtest.ReportLatencies(b, "rung1-after-due", lateness)
	flowtest.ReportLatencies(b, "firstsight-to-rung1-1s-ladder", toRung)
}
