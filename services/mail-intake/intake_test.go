package mailintake_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/graph"
	"github.com/ethosbuilding/primeflow/pkg/graphsim"
	"github.com/ethosbuilding/primeflow/pkg/metrics"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/ethosbuilding/primeflow/pkg/store"
	jobmirror "github.com/ethosbuilding/primeflow/services/job-mirror"
	mailintake "github.com/ethosbuilding/primeflow/services/mail-intake"
	newjobpipeline "github.com/ethosbuilding/primeflow/services/newjob-pipeline"
	"github.com/ethosbuilding/primeflow/services/resolver"
	"github.com/matryer/is"
)

// The folders of graphsim.DefaultFolders.
var (
	inFolder        = graphsim.DefaultFolders[0]
	processedFolder = graphsim.DefaultFolders[1]
	failedFolder    = graphsim.DefaultFolders[2]
)

// env is the new-job path over real NATS, SQLite, the Prime simulator and
// the Graph simulator, both over HTTP: the resolver, job-mirror and the
// new-job pipeline run; the mail intake is started by each test.
type env struct {
	*flowtest.Env
	graph    *graphsim.Sim
	graphURL string
}

func start(t testing.TB) *env { return startWith(t, nil) }

// startWith is start with the Prime client's configuration adjusted.
func startWith(t testing.TB, primeConfig func(*prime.Config)) *env {
	t.Helper()
	e := &env{Env: flowtest.New(t, flowtest.Options{PrimeConfig: primeConfig})}
	e.graph = graphsim.New(graphsim.Options{})
	srv := httptest.NewServer(e.graph)
	t.Cleanup(srv.Close)
	e.graphURL = srv.URL
	rc := resolver.DefaultConfig()
	rc.Lanes, rc.LaneWait, rc.Backoff = 8, 20*time.Second, retry.Backoff{10 * time.Millisecond}
	r, err := resolver.New(rc, e.Deps, e.Prime)
	if err != nil {
		t.Fatal(err)
	}
	e.Run("resolver", r)
	mc := jobmirror.DefaultConfig()
	mc.Workers, mc.EnsureTimeout = 8, 5*time.Second
	mc.JobsSweepEvery = jobmirror.SweepOff // the email path alone, here
	m, err := jobmirror.New(mc, e.Deps, e.Prime, jobmirror.LogInvites{Log: e.Deps.Log})
	if err != nil {
		t.Fatal(err)
	}
	e.Run("job-mirror", m)
	pc := newjobpipeline.DefaultConfig()
	pc.Workers, pc.Backoff = 4, retry.Backoff{20 * time.Millisecond}
	p, err := newjobpipeline.New(pc, e.Deps)
	if err != nil {
		t.Fatal(err)
	}
	e.Run("newjob-pipeline", p)
	flowtest.Eventually(t, "job-mirror's micro service", func() bool {
		_, err := e.NC.Request("$SRV.PING."+jobmirror.ServiceName, nil, time.Second)
		return err == nil
	})
	return e
}

func (e *env) config() mailintake.Config {
	c := mailintake.DefaultConfig()
	c.Graph, c.User = e.graph.ClientConfig(e.graphURL), e.graph.User()
	c.Folder, c.ProcessedFolder, c.FailedFolder = inFolder, processedFolder, failedFolder
	c.PollInterval, c.MaxAttempts, c.EnsureTimeout = 20*time.Millisecond, 3, 10*time.Second
	c.AllowedSenders, c.WaitBackoff = []string{graphsim.DefaultFrom}, retry.Backoff{20 * time.Millisecond}
	return c
}

// intake starts a mail intake with cfg on d (e.Deps by default) and returns
// its stop.
func (e *env) intake(cfg mailintake.Config, mailbox mailintake.Mailbox, d *service.Deps) (stop func()) {
	e.T.Helper()
	if mailbox == nil {
		c, err := graph.New(cfg.Graph, nil)
		if err != nil {
			e.T.Fatal(err)
		}
		mailbox = c
	}
	deps := e.Deps
	if d != nil {
		deps = *d
	}
	in, err := mailintake.New(cfg, deps, mailbox)
	if err != nil {
		e.T.Fatal(err)
	}
	return e.Run("mail-intake", in)
}

// email drops Prime's notification for a job into the folder, as Outlook's
// HTML, and returns its internetMessageId.
func (e *env) email(j primesim.Job) string {
	e.T.Helper()
	m, err := e.graph.Deliver(graphsim.NewMessage{Subject: "New Job " + j.JobNumber,
		Body: fmt.Sprintf(`<html><body><p>{ &quot;JobID&quot;: &#39;%d&#39;, &quot;JobNumber&quot;: &#39;%s&#39; }</p></body></html>`, j.Ref, j.JobNumber)})
	if err != nil {
		e.T.Fatal(err)
	}
	return m.InternetMessageID
}

func (e *env) waitIn(folder string, n int) {
	e.T.Helper()
	flowtest.Eventually(e.T, fmt.Sprintf("%d messages in %s", n, folder), func() bool { return len(e.graph.Messages(folder)) == n })
}

// filed waits until the message's receipt says it was moved to a folder.
func (e *env) filed(msg, to string) store.EmailReceipt {
	e.T.Helper()
	var r store.EmailReceipt
	flowtest.Eventually(e.T, msg+" filed as "+to, func() bool {
		got, found, err := e.Store.GetEmailReceipt(context.Background(), msg)
		r = got
		return err == nil && found && got.MovedTo == to
	})
	return r
}

func (e *env) receipt(msg string) store.EmailReceipt {
	e.T.Helper()
	r, found, err := e.Store.GetEmailReceipt(context.Background(), msg)
	if err != nil || !found {
		e.T.Fatalf("receipt of %s: found %v, %v", msg, found, err)
	}
	return r
}

// jobGets is how many times Prime was asked for a job.
func (e *env) jobGets() int64 { return e.Sim.Stats().ByEndpoint["GET /jobs/{id}"] }

// published counts a job's messages on a stream's subject.
func (e *env) published(stream, subject, jobID string) int {
	e.T.Helper()
	n := 0
	for _, body := range e.Published(stream, subject) {
		var m struct {
			JobID string `json:"jobId"`
		}
		if json.Unmarshal(body, &m) == nil && m.JobID == jobID {
			n++
		}
	}
	return n
}

// pipelineOnce waits for the job's new-job pipeline to complete and checks
// it ran once: one first-sight hand-off, one make-safe hand-off, the four
// missing objects queued once.
func (e *env) pipelineOnce(jobID string) store.FirstSeen {
	e.T.Helper()
	var f store.FirstSeen
	flowtest.Eventually(e.T, "the new-job pipeline of "+jobID, func() bool {
		var found bool
		var err error
		f, found, err = e.Store.GetFirstSeen(context.Background(), jobID)
		return err == nil && found && f.Completed()
	})
	flowtest.Eventually(e.T, "the make-safe hand-off published", func() bool {
		return e.published(events.StreamMakesafeDetect, events.SubjectMakesafeDetect, jobID) >= 1
	})
	is := is.New(e.T)
	is.Equal(e.published(events.StreamJob, events.SubjectJobFirstSeen, jobID), 1)              // one first sight
	is.Equal(e.published(events.StreamMakesafeDetect, events.SubjectMakesafeDetect, jobID), 1) // the pipeline once
	items, err := e.Store.ListSyncQueue(context.Background(), store.SyncQueueFilter{JobID: jobID})
	is.NoErr(err)
	is.Equal(len(items), 4) // its missing objects, queued once
	return f
}

// coverage is the coverage report's row of a job.
func (e *env) coverage(jobID string) store.JobCoverage {
	e.T.Helper()
	rows, err := e.Store.ListJobCoverage(context.Background(), time.Now().Add(-time.Hour))
	if err != nil {
		e.T.Fatal(err)
	}
	for _, r := range rows {
		if r.JobID == jobID {
			return r
		}
	}
	e.T.Fatalf("job %s is not in the coverage report", jobID)
	return store.JobCoverage{}
}

// checkingMailbox checks, at each move to the processed folder, that the
// job's effects and hand-offs were committed before it.
type checkingMailbox struct {
	*graph.Client
	e         *env
	processed string
	moves     atomic.Int32
	early     atomic.Int32
}

func (c *checkingMailbox) Move(ctx context.Context, user, messageID, destinationID string) error {
	if destinationID == c.processed {
		c.moves.Add(1)
		rows, _ := c.e.Store.ListFirstSeen(ctx, store.FirstSeenAny, 0)
		pending, _ := c.e.Store.GetOutboxUnpublished(ctx, 0, time.Now().Add(time.Hour), 10)
		if len(rows) != 1 || (len(pending) == 0 && c.e.published(events.StreamJob, events.SubjectJobFirstSeen, rows[0].JobID) == 0) {
			c.early.Add(1) // no first sight, or no hand-off of it, yet
		}
	}
	return c.Client.Move(ctx, user, messageID, destinationID)
}

func TestNewJobEmail(t *testing.T) {
	is := is.New(t)
	e := start(t)
	cfg := e.config()
	client, err := graph.New(cfg.Graph, nil)
	is.NoErr(err)
	folder, err := client.ResolveFolder(context.Background(), cfg.User, processedFolder)
	is.NoErr(err)
	mb := &checkingMailbox{Client: client, e: e, processed: folder.ID}
	e.intake(cfg, mb, nil)

	j := e.Sim.NewJob()
	msg := e.email(j)
	r := e.filed(msg, store.EmailProcessed)
	e.waitIn(processedFolder, 1)
	e.waitIn(inFolder, 0)

	f := e.pipelineOnce(j.ID)
	is.Equal(f.Via, store.ViaEmail) // the email saw it first
	mirrored, found, err := e.Store.GetJob(context.Background(), j.ID)
	is.NoErr(err)
	is.True(found) // mirrored
	is.Equal(mirrored.JobNumber, j.JobNumber)
	mapped, found, err := e.Store.GetJobIDByReference(context.Background(), j.Ref)
	is.NoErr(err)
	is.True(found && mapped == j.ID) // the numeric → GUID mapping saved (§4.1)
	is.Equal(e.jobGets(), int64(1))  // one GET /jobs/{JobID}
	st := e.Prime.Stats()
	is.Equal(st.ByPriority[prime.PriorityDrain], st.Requests) // in the mail intake's class, job-mirror's call for it included
	is.Equal(mb.moves.Load(), int32(1))
	is.Equal(mb.early.Load(), int32(0)) // moved only after the job's effects and hand-off were committed

	is.Equal(r.Outcome, store.EmailProcessed)
	is.Equal(r.JobID, fmt.Sprint(j.Ref)) // what Extract JobID found
	is.Equal(r.JobIDKind, "numeric")
	is.Equal(r.NumericReference, j.Ref)
	is.Equal(r.JobNumber, j.JobNumber)
	is.Equal(r.PrimeJobID, j.ID)
	is.Equal(r.MovedTo, store.EmailProcessed)
	is.Equal(r.Attempts, 0)
	is.True(e.coverage(j.ID).Email.Equal(r.ReceivedUTC)) // coverage has the email's sight
}

func TestWebhookAndEmailRunThePipelineOnce(t *testing.T) {
	t.Run("webhook then email", func(t *testing.T) {
		is := is.New(t)
		e := start(t)
		j := e.Sim.NewJob()
		e.WaitProcessed(e.Fire("change-job-status", j.ID))
		e.pipelineOnce(j.ID)
		gets := e.jobGets()

		e.intake(e.config(), nil, nil)
		msg := e.email(j)
		e.waitIn(processedFolder, 1)
		f := e.pipelineOnce(j.ID)
		is.Equal(f.Via, store.ViaWebhook) // the webhook saw it first
		is.Equal(e.jobGets(), gets)       // an email for a mirrored job costs no Prime call
		is.Equal(e.receipt(msg).PrimeJobID, j.ID)
		c := e.coverage(j.ID)
		is.True(!c.Webhook.IsZero()) // coverage shows both paths
		is.Equal(c.WebhookAction, "change-job-status")
		is.True(!c.Email.IsZero())
		is.Equal(c.Via, store.ViaWebhook)
	})

	t.Run("email then webhook", func(t *testing.T) {
		is := is.New(t)
		e := start(t)
		e.intake(e.config(), nil, nil)
		j := e.Sim.NewJob()
		e.email(j)
		e.waitIn(processedFolder, 1)
		e.pipelineOnce(j.ID)

		e.WaitProcessed(e.Fire("change-job-status", j.ID))
		f := e.pipelineOnce(j.ID)
		is.Equal(f.Via, store.ViaEmail) // the email saw it first
		c := e.coverage(j.ID)
		is.True(!c.Webhook.IsZero() && !c.Email.IsZero()) // coverage shows both paths
		is.True(c.Email.Before(c.Webhook) || c.Email.Equal(c.Webhook.Truncate(time.Second)))
	})
}

// TestKilledBetweenPipelineAndMove: the process dies after the job's
// effects are committed and before the message is moved; the next process
// moves it, and nothing happens twice.
func TestKilledBetweenPipelineAndMove(t *testing.T) {
	is := is.New(t)
	e := start(t)
	e.graph.SetFaults(graphsim.Faults{Path: "/move", FailNext: 1 << 20, FailStatus: 503}) // every move: 503
	stop := e.intake(e.config(), nil, nil)
	j := e.Sim.NewJob()
	msg := e.email(j)
	flowtest.Eventually(t, "the receipt says processed", func() bool {
		r, found, err := e.Store.GetEmailReceipt(context.Background(), msg)
		return err == nil && found && r.Outcome == store.EmailProcessed
	})
	e.pipelineOnce(j.ID)
	flowtest.Eventually(t, "the intake waiting on the move", func() bool { return e.graph.Stats().ByStatus[503] >= 2 })
	stop()                                       // killed while it waits to move the message
	is.Equal(len(e.graph.Messages(inFolder)), 1) // still in the folder
	gets := e.jobGets()

	e.graph.SetFaults(graphsim.Faults{})
	next := e.Deps
	next.Metrics = metrics.NewRegistry()
	e.intake(e.config(), nil, &next) // the next process
	r := e.filed(msg, store.EmailProcessed)
	e.waitIn(processedFolder, 1)
	e.waitIn(inFolder, 0)
	e.pipelineOnce(j.ID)        // still once
	is.Equal(e.jobGets(), gets) // no second Prime call
	is.Equal(r.Outcome, store.EmailProcessed)
	is.Equal(r.Attempts, 0) // the wait counted no attempt
	is.Equal(r.MovedTo, store.EmailProcessed)
}

func TestGraphDownOrThrottledWaits(t *testing.T) {
	is := is.New(t)
	e := start(t)
	e.graph.SetFaults(graphsim.Faults{Down: true}) // no answer at all, from the start
	e.intake(e.config(), nil, nil)
	var jobs []primesim.Job
	var msgs []string
	for range 3 {
		j := e.Sim.NewJob()
		jobs = append(jobs, j)
		msgs = append(msgs, e.email(j))
	}
	flowtest.Eventually(t, "the intake waiting for Graph", func() bool { return e.graph.Stats().ByStatus[0] >= 2 })
	is.Equal(len(e.graph.Messages(processedFolder)), 0)

	// Back, but throttling: each listing and each move waits its Retry-After.
	e.graph.SetFaults(graphsim.Faults{ThrottleNext: 4, RetryAfter: graphsim.Duration(time.Second)})
	for i, j := range jobs {
		r := e.filed(msgs[i], store.EmailProcessed) // nothing lost
		e.pipelineOnce(j.ID)
		is.Equal(r.Outcome, store.EmailProcessed)
		is.Equal(r.Attempts, 0) // the waits counted no attempt
	}
	is.True(e.graph.Stats().ByStatus[429] == 4) // every 429 was waited out
	is.True(flowtest.Counter(t, e.Deps.Metrics, "primeflow_mailintake_waits_total", map[string]string{"reason": "throttled"}) == 4)
	is.True(flowtest.Counter(t, e.Deps.Metrics, "primeflow_mailintake_waits_total", map[string]string{"reason": "unavailable"}) >= 2)
}

func TestNoJobIDGoesToTheFailedFolder(t *testing.T) {
	is := is.New(t)
	e := start(t)
	logs := e.Logs
	e.intake(e.config(), nil, nil)
	bad, err := e.graph.Deliver(graphsim.NewMessage{Subject: "Re: your quote", Body: "<p>Thanks, we will be in touch.</p>"})
	is.NoErr(err)
	j := e.Sim.NewJob()
	good := e.email(j) // behind the bad one

	r := e.filed(bad.InternetMessageID, store.EmailFailed)
	e.filed(good, store.EmailProcessed) // the bad one never held up the good one
	is.Equal(r.Outcome, store.EmailFailed)
	is.Equal(r.Attempts, 3) // MAIL_MAX_ATTEMPTS
	is.Equal(r.MovedTo, store.EmailFailed)
	is.True(strings.Contains(r.LastError, "no JobID"))                            // the receipt says why
	is.True(strings.Contains(r.LastError, `"Re: your quote"`))                    // naming the subject
	is.True(strings.Contains(r.LastError, "Thanks, we will be in touch."))        // and the start of the body
	is.True(strings.Count(logs.String(), "new-job email failed an attempt") == 2) // two retries logged
	is.True(strings.Contains(logs.String(), "new-job email failed its last attempt"))
	is.Equal(e.receipt(good).Outcome, store.EmailProcessed)
	is.Equal(flowtest.Counter(t, e.Deps.Metrics, "primeflow_mailintake_messages_total", map[string]string{"outcome": "failed"}), 1.0)
	is.Equal(flowtest.Counter(t, e.Deps.Metrics, "primeflow_mailintake_messages_total", map[string]string{"outcome": "retry"}), 2.0)
}

// A job Prime does not know fails like a missing JobID; once Prime has it,
// a person moves the message back into the folder and it is tried afresh.
func TestUnknownJobFailsAndCanBeTriedAgain(t *testing.T) {
	is := is.New(t)
	e := start(t)
	cfg := e.config()
	e.intake(cfg, nil, nil)
	m, err := e.graph.Deliver(graphsim.NewMessage{Subject: "New Job J099001", ContentType: "text",
		Body: `{ "JobID": '9900001', "JobNumber": 'J099001' }`})
	is.NoErr(err)
	e.waitIn(failedFolder, 1)
	r := e.receipt(m.InternetMessageID)
	is.Equal(r.Outcome, store.EmailFailed)
	is.True(strings.Contains(r.LastError, "Prime has no job 9900001")) // the receipt says why

	j := e.Sim.NewJob()
	j.ID, j.Ref, j.JobNumber = "5d6e7f80-9a1b-4c2d-8e3f-4a5b6c7d8e9f", 9900001, "J099001"
	is.NoErr(e.Sim.PutJob(j)) // Prime has the job now
	client, err := graph.New(cfg.Graph, nil)
	is.NoErr(err)
	back, err := client.ResolveFolder(context.Background(), cfg.User, inFolder)
	is.NoErr(err)
	is.NoErr(client.Move(context.Background(), cfg.User, e.graph.Messages(failedFolder)[0].ID, back.ID)) // a person moves it back

	r = e.filed(m.InternetMessageID, store.EmailProcessed)
	e.pipelineOnce(j.ID)
	is.Equal(r.Outcome, store.EmailProcessed) // tried afresh
	is.Equal(r.PrimeJobID, j.ID)
	is.Equal(r.Attempts, 0)
	is.Equal(r.LastError, "")
	is.Equal(flowtest.Counter(t, e.Deps.Metrics, "primeflow_mailintake_messages_total", map[string]string{"outcome": "reopened"}), 1.0)
}
