package resolver_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/consume"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/instance"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/outbox"
	"github.com/ethosbuilding/primeflow/pkg/pipeline"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/services/resolver"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go"
	_ "modernc.org/sqlite"
)

// env is the resolver under test with a stage that records what it is
// handed and does what the test says.
type env struct {
	*flowtest.Env
	dbPath string
	mu     sync.Mutex
	got    []events.Resolved
	work   atomic.Pointer[pipeline.Work]
}

func start(t *testing.T, cfg ...func(*resolver.Config)) *env {
	t.Helper()
	return startWith(t, flowtest.Options{}, cfg...)
}

// startWith is start on an Env with opts (its own StoreDir).
func startWith(t *testing.T, opts flowtest.Options, cfg ...func(*resolver.Config)) *env {
	t.Helper()
	dir := t.TempDir()
	opts.StoreDir = dir
	e := &env{Env: flowtest.New(t, opts), dbPath: filepath.Join(dir, "primeflow.db")}
	c := resolver.DefaultConfig()
	c.Lanes, c.LaneWait, c.Backoff = 8, 10*time.Second, retry.Backoff{20 * time.Millisecond}
	for _, f := range cfg {
		f(&c)
	}
	r, err := resolver.New(c, e.Deps, e.Prime)
	if err != nil {
		t.Fatal(err)
	}
	e.Run("resolver", r)
	e.setWork(func(context.Context, events.Resolved) (pipeline.Finish, error) { return pipeline.Finish{}, nil })
	stage := &pipeline.Stage{Store: e.Store, NC: e.NC, Log: e.Deps.Log,
		Outbox: &outbox.Publisher{JS: e.JS, Store: e.Store, Log: e.Deps.Log}}
	tc := e.Consumer(events.Consumer{Stream: events.StreamResolved, Durable: "test-stage"})
	e.Run("stage", runner(func(ctx context.Context) error {
		return consume.Run(ctx, e.JS, consume.Spec{Consumer: tc, Workers: 16},
			e.Deps.Log, e.Deps.Metrics, stage.Handler(func(ctx context.Context, ev events.Resolved) (pipeline.Finish, error) {
				e.mu.Lock()
				e.got = append(e.got, ev)
				e.mu.Unlock()
				return (*e.work.Load())(ctx, ev)
			}))
	}))
	return e
}

type runner func(ctx context.Context) error

func (f runner) Run(ctx context.Context) error { return f(ctx) }

func (e *env) setWork(w pipeline.Work) { e.work.Store(&w) }

// stuckOnFirst makes the stage stick on its first hand-over until release
// is closed, and finish every hand-over; calls counts them.
func (e *env) stuckOnFirst() (release chan struct{}, calls *atomic.Int32) {
	release, calls = make(chan struct{}), &atomic.Int32{}
	e.setWork(func(ctx context.Context, _ events.Resolved) (pipeline.Finish, error) {
		if calls.Add(1) == 1 {
			<-release
		}
		return pipeline.Finish{}, nil
	})
	return release, calls
}

// resolved returns what the stage was handed for a row.
func (e *env) resolved(logID int64) []events.Resolved {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []events.Resolved
	for _, ev := range e.got {
		if ev.LogID == logID {
			out = append(out, ev)
		}
	}
	return out
}

// mirrorJob writes a job into primeJobs, as job-mirror would.
func (e *env) mirrorJob(id string) {
	e.T.Helper()
	db, err := sql.Open("sqlite", e.dbPath+"?_pragma=busy_timeout(5000)")
	if err != nil {
		e.T.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO primeJobs (jobId, syncedUTC) VALUES (?, '2026-01-01 00:00:00.000')`, id); err != nil {
		e.T.Fatal(err)
	}
}

func TestUnknownActionIsProcessedWithoutAStage(t *testing.T) {
	is := is.New(t)
	e := start(t)
	for _, action := range []string{"delete-everything", "", "Change Job.Status"} {
		id := e.Publish(action, `{"eventAction":"`+action+`","jobId":1}`)
		row := e.WaitProcessed(id)
		is.Equal(row.ProcessStatus, fmt.Sprintf("No handler for '%s'", action)) // §3
		is.Equal(len(e.resolved(id)), 0)                                        // no stage involved
	}
}

// The resolver pairs its database with the NATS whose PRIME_WEBHOOK it
// consumes, for primectl status to tell another instance's NATS apart.
func TestTheDatabaseIsPairedWithItsNATS(t *testing.T) {
	is := is.New(t)
	e := start(t)
	flowtest.Eventually(t, "the database paired", func() bool {
		p, err := instance.Check(context.Background(), e.JS, e.Store)
		return err == nil && p.Known()
	})
	p, err := instance.Check(context.Background(), e.JS, e.Store)
	is.NoErr(err)
	is.True(p.Same()) // with this NATS
}

func TestChangeJobStatusIdentification(t *testing.T) {
	e := start(t)
	known := e.Sim.NewJob()
	e.mirrorJob(known.ID)
	// The email flow (§7) mirrored known and mapped its reference.
	if _, err := e.Store.SaveJobReference(context.Background(), known.Ref, known.ID); err != nil {
		t.Fatal(err)
	}
	fresh := e.Sim.NewJob()

	for _, tc := range []struct {
		name, body                 string
		wantJob                    string
		wantInMirror, wantFetched  bool
		wantRef                    int64
		wantRefMapped, wantWarning bool
		wantPrimeCalls             int64
	}{
		{name: "GUID of a mirrored job: no Prime call",
			body:    fmt.Sprintf(`{"eventAction":"change-job-status","jobId":%d,"jobStatusId":"%s"}`, known.Ref, known.ID),
			wantJob: known.ID, wantInMirror: true, wantRef: known.Ref, wantRefMapped: true},
		{name: "GUID of a job not mirrored: fetched, first sight",
			body:    fmt.Sprintf(`{"eventAction":"change-job-status","jobId":%d,"jobStatusId":"%s"}`, fresh.Ref, fresh.ID),
			wantJob: fresh.ID, wantFetched: true, wantRef: fresh.Ref, wantPrimeCalls: 1},
		{name: "GUID under an unexpected property: used, with a warning",
			body:    fmt.Sprintf(`{"eventAction":"change-job-status","jobUuid":"%s"}`, known.ID),
			wantJob: known.ID, wantInMirror: true, wantWarning: true},
		{name: "numeric reference only: the fallback, first sight",
			body:    fmt.Sprintf(`{"eventAction":"change-job-status","jobId":%d}`, fresh.Ref),
			wantRef: fresh.Ref},
		{name: "numeric reference only, already mapped: not first sight",
			body:    fmt.Sprintf(`{"eventAction":"change-job-status","jobId":%d}`, known.Ref),
			wantRef: known.Ref, wantRefMapped: true},
		{name: "a GUID Prime does not know falls back to the reference",
			body:    fmt.Sprintf(`{"eventAction":"change-job-status","jobId":%d,"jobStatusId":"%s"}`, fresh.Ref, "9d3f8e21-9c4b-4d1e-8f6a-5b2c9e0a1d34"),
			wantRef: fresh.Ref, wantPrimeCalls: 1},
		{name: "a GUID Prime does not know falls back to a mapped reference",
			body:    fmt.Sprintf(`{"eventAction":"change-job-status","jobId":%d,"jobStatusId":"%s"}`, known.Ref, "9d3f8e21-9c4b-4d1e-8f6a-5b2c9e0a1d34"),
			wantRef: known.Ref, wantRefMapped: true, wantPrimeCalls: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			before := e.Sim.Stats().ByEndpoint["GET /jobs/{id}"]
			id := e.Publish("change-job-status", tc.body)
			row := e.WaitProcessed(id)
			is.Equal(row.ProcessStatus, "Processed")
			got := e.resolved(id)
			is.Equal(len(got), 1) // handed to the stage once
			ev := got[0]
			is.Equal(ev.JobID, tc.wantJob)                                                 // the job
			is.Equal(ev.JobInMirror, tc.wantInMirror)                                      // found in primeJobs
			is.Equal(len(ev.Fetched) == 1, tc.wantFetched)                                 // the record Prime returned
			is.Equal(ev.NumericRef, tc.wantRef)                                            // the numeric reference
			is.Equal(ev.RefWasMapped, tc.wantRefMapped)                                    // mapped before the event: first sight is decided on it (§5.1 step 2)
			is.Equal(e.Sim.Stats().ByEndpoint["GET /jobs/{id}"]-before, tc.wantPrimeCalls) // Prime calls while identifying
			is.True(ev.ReceivedUTC.Equal(row.ReceivedUTC))                                 // when the webhook came, for the stage to reuse an answer Prime gave since
			if tc.wantWarning {
				is.True(strings.Contains(e.Logs.String(), "payload shape has changed")) // warned
			}
		})
	}
}

func TestNoIdentifierIsProcessed(t *testing.T) {
	is := is.New(t)
	e := start(t)
	id := e.Publish("change-job-status", `{"eventAction":"change-job-status"}`)
	row := e.WaitProcessed(id)
	is.Equal(row.ProcessStatus, "No identifier in the payload") // §5.1: it will never gain one
	is.Equal(len(e.resolved(id)), 0)
}

func TestUnknownGuidIsAPayloadFaultUpToTheCap(t *testing.T) {
	is := is.New(t)
	e := start(t)
	body := `{"eventAction":"change-job-status","jobStatusId":"9d3f8e21-9c4b-4d1e-8f6a-5b2c9e0a1d34"}`
	id := e.Publish("change-job-status", body)
	row := e.WaitRow(id, "capped", store.WebhookLogRow.Capped)
	is.Equal(row.ProcessAttempts, store.MaxAttempts)                      // five attempts
	is.True(strings.Contains(row.ProcessStatus, "UnknownIdentifier"))     // the last error kept
	is.True(!row.Processed())                                             // still unprocessed
	is.True(strings.Contains(e.Logs.String(), "payload fault"))           // logged apart
	is.True(strings.Contains(e.Logs.String(), "9d3f8e21-9c4b-4d1e-8f6a")) // with the payload
	time.Sleep(200 * time.Millisecond)
	is.Equal(e.Row(id).ProcessAttempts, store.MaxAttempts) // and not retried after the cap
}

func TestAppointmentIdentification(t *testing.T) {
	e := start(t)
	job := e.Sim.NewJob()
	e.mirrorJob(job.ID)
	appt := e.Sim.NewAppointment(job.ID)
	t.Run("appointment fetched from Prime", func(t *testing.T) {
		is := is.New(t)
		id := e.Fire("create-appointment", appt.ID)
		e.WaitProcessed(id)
		ev := e.resolved(id)[0]
		is.Equal(ev.Entity, store.TableAppointments)
		is.Equal(ev.EntityID, appt.ID)
		is.Equal(ev.JobID, job.ID)   // the appointment's job
		is.Equal(len(ev.Fetched), 1) // the appointment, so the stage need not fetch it
		is.Equal(ev.NumericRef, job.Ref)
	})
	t.Run("a job GUID where an appointment is expected", func(t *testing.T) {
		is := is.New(t)
		id := e.Publish("create-appointment", fmt.Sprintf(`{"eventAction":"create-appointment","jobId":%d,"appointmentTypeId":"%s"}`, job.Ref, job.ID))
		row := e.WaitRow(id, "capped", store.WebhookLogRow.Capped)
		is.True(strings.Contains(row.ProcessStatus, "WrongEntityType")) // §4.2 fault
	})
	t.Run("no GUID at all", func(t *testing.T) {
		is := is.New(t)
		id := e.Publish("create-allocation", fmt.Sprintf(`{"eventAction":"create-allocation","jobId":%d}`, job.Ref))
		row := e.WaitRow(id, "capped", store.WebhookLogRow.Capped)
		is.True(strings.Contains(row.ProcessStatus, "MissingIdentifier")) // RequireEntityGuid throws
	})
}

// §5.3 and §5.4 confirm the event's id only after the sync, and no
// property name is trusted (§4.2, §10.2): every GUID-valued property goes to
// the stage, the preferred names first, in their order, then the rest by
// name; the job's own GUID among them.
func TestConfirmCarriesEveryGuid(t *testing.T) {
	e := start(t)
	job := e.Sim.NewJob()
	const a, b, c = "0a7c3e61-5d2b-4f8e-9c14-6b3d2a1e0f57", "1b8d4f72-6e3c-4a9f-8d25-7c4e3b2f1a68", "2c9e5a83-7f4d-4b1a-9e36-8d5f4c3a2b79"
	for _, tc := range []struct {
		name, action string
		props        string
		want         []events.PayloadGUIDProperty
	}{
		{"the preferred names first, then the rest by name", "change-custom-form-status", `"siteFormId":"` + b + `","zeta":"` + c + `","customFormStatusId":"` + a + `","jobUuid":"` + job.ID + `","note":"not a GUID"`,
			[]events.PayloadGUIDProperty{{Property: "customFormStatusId", ID: a, Preferred: true}, {Property: "siteFormId", ID: b, Preferred: true},
				{Property: "jobUuid", ID: job.ID}, {Property: "zeta", ID: c}}},
		{"a renamed id beside the job's GUID", "create-estimate", `"jobUuid":"` + job.ID + `","estimateUuid":"` + a + `"`,
			[]events.PayloadGUIDProperty{{Property: "estimateUuid", ID: a}, {Property: "jobUuid", ID: job.ID}}},
		{"no GUID", "create-estimate", `"seq":1`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			id := e.Publish(tc.action, fmt.Sprintf(`{"eventAction":%q,"jobId":%d,%s}`, tc.action, job.Ref, tc.props))
			e.WaitProcessed(id)
			ev := e.resolved(id)[0]
			is.Equal(ev.JobID, job.ID)    // the job of the numeric reference
			is.Equal(ev.Confirm, tc.want) // every GUID, in probe order
			var first string
			for _, c := range tc.want {
				if c.Preferred && first == "" {
					first = c.ID
				}
			}
			is.Equal(ev.ConfirmID, first) // and, for older child-mirrors, the id under its expected name
		})
	}
}

func TestLanesKeepOneJobInOrderAndOneAtATime(t *testing.T) {
	is := is.New(t)
	e := start(t)
	const jobs, perJob = 6, 8
	lane := map[int64]int{}
	var refs [jobs]int64
	for j := range jobs {
		refs[j] = e.Sim.NewJob().Ref
		lane[refs[j]] = j
	}
	var inFlight [jobs]atomic.Int32
	var overlap atomic.Bool
	e.setWork(func(_ context.Context, ev events.Resolved) (pipeline.Finish, error) {
		j := lane[ev.NumericRef]
		if inFlight[j].Add(1) > 1 {
			overlap.Store(true)
		}
		time.Sleep(2 * time.Millisecond)
		inFlight[j].Add(-1)
		return pipeline.Finish{}, nil
	})
	var ids [jobs][]int64
	for i := range perJob {
		for j := range jobs {
			ids[j] = append(ids[j], e.Publish("create-estimate",
				fmt.Sprintf(`{"eventAction":"create-estimate","jobId":%d,"seq":%d}`, refs[j], i)))
		}
	}
	for j := range jobs {
		e.WaitProcessed(ids[j][perJob-1])
	}
	is.True(!overlap.Load()) // never two events of one job at once
	e.mu.Lock()
	defer e.mu.Unlock()
	last := map[int64]int64{}
	for _, ev := range e.got {
		is.True(ev.LogID > last[ev.NumericRef]) // each job's events in log order
		last[ev.NumericRef] = ev.LogID
	}
}

func TestStageFailureIsRetriedThroughTheLane(t *testing.T) {
	is := is.New(t)
	e := start(t)
	var calls atomic.Int32
	e.setWork(func(context.Context, events.Resolved) (pipeline.Finish, error) {
		if calls.Add(1) < 3 {
			return pipeline.Finish{}, errors.New("prime answered 503")
		}
		return pipeline.Finish{JobID: "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"}, nil
	})
	id := e.Publish("create-estimate", fmt.Sprintf(`{"eventAction":"create-estimate","jobId":%d}`, e.Sim.NewJob().Ref))
	row := e.WaitProcessed(id)
	is.Equal(row.ProcessAttempts, 2)                            // two failed attempts recorded
	is.Equal(row.JobID, "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10") // jobId backfilled
	is.Equal(len(e.resolved(id)), 3)                            // resolved afresh each time

	// Each retry names its attempt, its error and when the next comes; the
	// success after them says so, once.
	logs := e.Logs.String()
	for _, attempt := range []string{"attempt=1 of=5", "attempt=2 of=5"} {
		line := logLine(logs, "event failed; it is retried", attempt)
		is.True(line != "")                                         // attempt logged
		is.True(strings.Contains(line, `err="prime answered 503"`)) // with its error
		is.True(strings.Contains(line, "next=20ms nextAt="))        // and when the next comes
	}
	flowtest.Eventually(t, "the success said", func() bool {
		return strings.Count(e.Logs.String(), "event processed, after failed attempts or a replay") == 1
	})
	is.True(logLine(e.Logs.String(), "event processed, after failed attempts", "failedAttempts=2") != "") // how many it took
}

// logLine is the first line of logs holding every part, or "".
func logLine(logs string, parts ...string) string {
	for line := range strings.Lines(logs) {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
			return line
		}
	}
	return ""
}

func TestRateLimitHoldsTheLaneWithoutCountingAttempts(t *testing.T) {
	is := is.New(t)
	e := start(t)
	var calls atomic.Int32
	e.setWork(func(context.Context, events.Resolved) (pipeline.Finish, error) {
		if calls.Add(1) <= 3 {
			return pipeline.Finish{}, &prime.RateLimitedError{Wait: 30 * time.Millisecond, Endpoint: "jobs.get"}
		}
		return pipeline.Finish{}, nil
	})
	ref := e.Sim.NewJob().Ref
	first := e.Publish("create-estimate", fmt.Sprintf(`{"eventAction":"create-estimate","jobId":%d,"n":1}`, ref))
	second := e.Publish("create-estimate", fmt.Sprintf(`{"eventAction":"create-estimate","jobId":%d,"n":2}`, ref))
	is.Equal(e.WaitProcessed(first).ProcessAttempts, 0) // no attempt burned
	e.WaitProcessed(second)
	e.mu.Lock()
	defer e.mu.Unlock()
	var order []int64
	for _, ev := range e.got {
		order = append(order, ev.LogID)
	}
	is.Equal(order, []int64{first, first, first, first, second}) // the lane held the job's next event
}

// A wait is labelled by what it waits for: Prime's 429 (rate_limited) is
// told from Prime not answering (prime_unavailable, pkg/prime/outage.go),
// whether the stage's call met it or the resolver's own.
func TestAWaitForPrimeSaysWhetherItWasARateLimitOrAnOutage(t *testing.T) {
	is := is.New(t)
	e := start(t)
	var calls atomic.Int32
	e.setWork(func(context.Context, events.Resolved) (pipeline.Finish, error) {
		switch calls.Add(1) {
		case 1:
			return pipeline.Finish{}, &prime.RateLimitedError{Wait: 30 * time.Millisecond, Endpoint: "jobs.get"}
		case 2, 3:
			return pipeline.Finish{}, &prime.UnavailableError{Wait: 30 * time.Millisecond, Endpoint: "jobs.get", Since: time.Now()}
		}
		return pipeline.Finish{}, nil
	})
	job := e.Sim.NewJob()
	is.Equal(e.WaitProcessed(e.Publish("create-estimate", fmt.Sprintf(`{"eventAction":"create-estimate","jobId":%d}`, job.Ref))).ProcessAttempts, 0)
	is.Equal(e.outcomes("rate_limited"), 1.0)      // the stage's 429
	is.Equal(e.outcomes("prime_unavailable"), 2.0) // and its outage, apart

	// The resolver's own call: it looks the job's reference up (§4.1), and
	// Prime answers 503, a first failure, Prime's: the event waits.
	other := e.Sim.NewJob()
	e.Sim.SetFaults(primesim.Faults{Path: fmt.Sprintf("/jobs/%d", other.Ref), FailNext: 1, FailStatus: http.StatusServiceUnavailable})
	is.Equal(e.WaitProcessed(e.Publish("create-estimate", fmt.Sprintf(`{"eventAction":"create-estimate","jobId":%d}`, other.Ref))).ProcessAttempts, 0)
	is.Equal(e.outcomes("prime_unavailable"), 3.0) // the resolver's wait for Prime, as an outage
	is.Equal(e.outcomes("rate_limited"), 1.0)      // not a rate limit
}

// TestAJetStreamFailoverIsWaitedOut: the cluster loses its quorum while
// the resolver identifies an event (asking Prime, which answers slowly), so
// the resolved event cannot be published. The event waits, no attempt
// counted, as it waits for job-mirror, and goes on once the cluster
// answers: a failover is not the event's failure (one chaos run counted 29
// attempts for "no response from stream"; an outage of some 6 minutes
// would cap events).
func TestAJetStreamFailoverIsWaitedOut(t *testing.T) {
	is := is.New(t)
	c := natstest.NewCluster(t, 3)
	e := startWith(t, flowtest.Options{Cluster: c})
	// The resolver and the stage pull before the quorum goes: a consumer
	// still being made then waits out its 10 s timeout, and the event's
	// wait for its stage runs out meanwhile.
	for _, w := range []struct{ stream, durable string }{{events.StreamWebhook, resolver.Durable}, {events.StreamResolved, "test-stage"}} {
		flowtest.Eventually(t, w.durable+" to pull", func() bool {
			cons, err := e.JS.Consumer(context.Background(), w.stream, w.durable)
			if err != nil {
				return false
			}
			info, err := cons.Info(context.Background())
			return err == nil && info.NumWaiting > 0
		})
	}
	job := e.Sim.NewJob()
	e.Sim.SetFaults(primesim.Faults{Path: "/jobs", Latency: 2 * time.Second})
	id := e.Publish("change-job-status", fmt.Sprintf(`{"eventAction":"change-job-status","jobId":%d,"jobStatusId":"%s"}`, job.Ref, job.ID))
	flowtest.Eventually(t, "the resolver to ask Prime", func() bool { return e.Sim.Stats().ByEndpoint["GET /jobs/{id}"] > 0 })
	c.Stop(1) // while Prime answers: no quorum when the resolver publishes
	c.Stop(2)
	flowtest.Eventually(t, "the publish to fail", func() bool { return e.outcomes("unavailable") > 0 || e.Row(id).ProcessAttempts > 0 })
	e.Sim.SetFaults(primesim.Faults{})
	c.Restart(1)

	row := e.WaitProcessed(id)
	is.Equal(row.ProcessAttempts, 0)          // the failover burned no attempt
	is.True(e.outcomes("unavailable") > 0)    // it was waited out, as JetStream's wait
	is.Equal(e.outcomes("rate_limited"), 0.0) // not Prime's rate limit
	is.True(len(e.resolved(id)) >= 1)         // and the event reached its stage
}

// cliReplay publishes a row's id on its subject as docs/operations.md's nats CLI
// replay does (`nats pub prime.webhook.<action> --header
// Primeflow-Log-Id:<id> ”`): no Nats-Msg-Id, an empty body. It returns the
// message's stream sequence.
func (e *env) cliReplay(id int64) uint64 {
	e.T.Helper()
	m := nats.NewMsg(events.WebhookSubject(e.Row(id).EventAction))
	m.Header.Set(events.HeaderLogID, strconv.FormatInt(id, 10))
	ack, err := e.JS.PublishMsg(context.Background(), m)
	if err != nil {
		e.T.Fatalf("replay row %d: %v", id, err)
	}
	return ack.Sequence
}

// settled waits until the resolver has settled (acked or terminated) the
// PRIME_WEBHOOK message at seq and every one before it: it will not be
// delivered again.
func (e *env) settled(seq uint64) {
	e.T.Helper()
	flowtest.Eventually(e.T, fmt.Sprintf("message %d settled", seq), func() bool {
		c, err := e.JS.Consumer(context.Background(), events.StreamWebhook, resolver.Durable)
		if err != nil {
			return false
		}
		info, err := c.Info(context.Background())
		return err == nil && info.AckFloor.Stream >= seq
	})
}

// outcomes counts the resolver's events by outcome.
func (e *env) outcomes(outcome string) float64 {
	return flowtest.Counter(e.T, e.Deps.Metrics, "primeflow_resolver_events_total", map[string]string{"outcome": outcome})
}

func TestReplayOfAProcessedRowIsHandledAgain(t *testing.T) {
	is := is.New(t)
	e := start(t)
	id := e.Publish("create-estimate", fmt.Sprintf(`{"eventAction":"create-estimate","jobId":%d}`, e.Sim.NewJob().Ref))
	first := e.WaitProcessed(id)
	e.settled(e.cliReplay(id))
	row := e.Row(id)
	is.Equal(len(e.resolved(id)), 2)                    // the replay reached the stage
	is.True(row.ProcessedUTC.After(first.ProcessedUTC)) // and the row was processed again
	is.Equal(row.ProcessStatus, pipeline.StatusProcessed)
	is.Equal(row.ProcessAttempts, 0)       // nothing failed
	is.Equal(row.ReplayCount, 1)           // recorded as a replay, as primectl replay records one
	is.True(!row.PublishedUTC.IsZero())    // the operator's message is its publication: the relay sends no second copy
	is.Equal(e.outcomes("replayed"), 1.0)  // counted
	is.Equal(e.outcomes("duplicate"), 0.0) // not taken for a copy of ingest's
	flowtest.Eventually(t, "the replay's success said", func() bool {
		return logLine(e.Logs.String(), "event processed, after failed attempts or a replay", "replay=1") != ""
	})
	is.Equal(strings.Count(e.Logs.String(), "event processed, after failed attempts or a replay"), 1) // once
	replayed := e.resolved(id)[1]
	is.True(replayed.ReceivedUTC.After(first.ProcessedUTC)) // a replay asks Prime afresh: no answer from before it serves it
}

// An operator's replay whose first delivery fails before it has queued the
// row again (here the database is locked past its busy timeout) is not lost:
// its redelivery finds the row processed but not queued again by this
// message, and queues it then.
func TestReplayWhoseFirstDeliveryFailsIsNotLost(t *testing.T) {
	t.Parallel() // it waits out SQLite's 10-second busy timeout
	is := is.New(t)
	e := start(t)
	id := e.Publish("create-estimate", fmt.Sprintf(`{"eventAction":"create-estimate","jobId":%d}`, e.Sim.NewJob().Ref))
	first := e.WaitProcessed(id)

	db, err := sql.Open("sqlite", e.dbPath)
	is.NoErr(err)
	defer db.Close()
	conn, err := db.Conn(context.Background())
	is.NoErr(err)
	defer conn.Close()
	_, err = conn.ExecContext(context.Background(), "BEGIN IMMEDIATE") // holds the write lock
	is.NoErr(err)
	e.cliReplay(id)
	flowtest.Eventually(t, "the first delivery failed", func() bool {
		return strings.Contains(e.Logs.String(), "queue log row")
	})
	_, err = conn.ExecContext(context.Background(), "ROLLBACK")
	is.NoErr(err)

	row := e.WaitRow(id, "replayed", func(r store.WebhookLogRow) bool {
		return r.Processed() && r.ProcessedUTC.After(first.ProcessedUTC)
	})
	is.Equal(row.ReplayCount, 1)          // queued again by the redelivery
	is.Equal(len(e.resolved(id)), 2)      // and handed to the stage again
	is.Equal(e.outcomes("replayed"), 1.0) // counted once
}

// The command of docs/operations.md itself, through the nats CLI `make test` builds.
func TestNatsCLIReplayAsTheDocsShowIt(t *testing.T) {
	cli := natstest.CLI(t)
	is := is.New(t)
	e := start(t)
	id := e.Publish("create-estimate", fmt.Sprintf(`{"eventAction":"create-estimate","jobId":%d}`, e.Sim.NewJob().Ref))
	first := e.WaitProcessed(id)
	out, err := exec.Command(cli, "--server", e.NATS.ClientURL(), "pub", "prime.webhook.create-estimate",
		"--header", fmt.Sprintf("%s:%d", events.HeaderLogID, id), "").CombinedOutput()
	is.NoErr(err) // the CLI published
	row := e.WaitRow(id, "replayed", func(r store.WebhookLogRow) bool {
		return r.Processed() && r.ProcessedUTC.After(first.ProcessedUTC)
	})
	is.Equal(row.ReplayCount, 1)     // taken for an operator's replay
	is.Equal(len(e.resolved(id)), 2) // and handed to the stage again
	if t.Failed() {
		t.Logf("nats pub: %s", out)
	}
}

// §3, §9: an operator's replay of a processed row is a row like any other
// once it fails: retried, counted against the cap, visible when capped. A
// 503 Prime gives while it answers nothing else is a wait (pkg/prime's
// outage), no attempt; one for the job's record alone, while Prime answers
// the other calls, is the record's and counts.
func TestNatsCLIReplayThatFailsIsRetriedLikeAnyRow(t *testing.T) {
	e := start(t)
	for _, tc := range []struct {
		name          string
		failures      int
		others        bool // Prime answers other calls meanwhile
		wantProcessed bool
		wantAttempts  int
		wantStage     int
	}{
		{name: "Prime answers 503 once: waited out, then processed, no attempt",
			failures: 1, wantProcessed: true, wantAttempts: 0, wantStage: 2},
		{name: "Prime answers 503 past the cap while answering nothing else: waited out, no attempt",
			failures: store.MaxAttempts + 1, wantProcessed: true, wantAttempts: 0, wantStage: 2},
		{name: "Prime answers 503 for the job alone while it answers others: capped, for a person to look at",
			failures: 1 << 20, others: true, wantAttempts: store.MaxAttempts, wantStage: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			job := e.Sim.NewJob()
			id := e.Publish("create-estimate", fmt.Sprintf(`{"eventAction":"create-estimate","jobId":%d}`, job.Ref))
			first := e.WaitProcessed(id)
			// The resolver looks the job's reference up in Prime (§4.1):
			// those calls fail.
			e.Sim.SetFaults(primesim.Faults{Path: fmt.Sprintf("/jobs/%d", job.Ref), FailNext: tc.failures, FailStatus: http.StatusServiceUnavailable})
			defer e.Sim.SetFaults(primesim.Faults{})
			stop := make(chan struct{})
			var others sync.WaitGroup
			if tc.others {
				other := e.Sim.NewJob()
				others.Go(func() {
					for {
						select {
						case <-stop:
							return
						case <-time.After(20 * time.Millisecond):
						}
						_, _ = e.Prime.GetJob(context.Background(), other.ID) // an answer from Prime
					}
				})
			}
			e.settled(e.cliReplay(id))
			close(stop)
			others.Wait()

			row := e.Row(id)
			capped, err := e.Store.ListWebhookLog(context.Background(), store.LogFilter{IDs: []int64{id}, State: store.Capped})
			is.NoErr(err)
			if tc.wantProcessed {
				is.True(row.ProcessedUTC.After(first.ProcessedUTC))   // processed by the replay
				is.Equal(row.ProcessStatus, pipeline.StatusProcessed) // with no error left on it
				is.Equal(len(capped), 0)
				is.Equal(e.Sim.Faults().FailNext, 0) // every 503 was served
			} else {
				is.True(!row.Processed())                                             // left unprocessed
				is.True(strings.Contains(row.ProcessStatus, "503"))                   // with its last error
				is.Equal(len(capped), 1)                                              // where primectl list --state capped shows it
				is.True(strings.Contains(e.Logs.String(), "failed its last attempt")) // and said so
			}
			is.Equal(row.ProcessAttempts, tc.wantAttempts) // the replay's failed tries, counted from zero
			is.Equal(len(e.resolved(id)), tc.wantStage)    // the stage saw the original, and the replay once it got through
			is.Equal(row.ReplayCount, 1)                   // recorded as a replay
		})
	}
}

// A copy of ingest's own message that the stream stores as a new one — the
// relay republishing a row after the duplicate window — is not a replay:
// the event is not acted on twice (§2, §3).
func TestIngestCopyOfAProcessedRowIsSkipped(t *testing.T) {
	for _, tc := range []struct {
		name      string
		replays   int // primectl replays of the row before the copy
		copyOfGen int // the replay count the copy was published under
	}{
		{name: "the first publication", replays: 0, copyOfGen: 0},
		{name: "a replay's publication", replays: 1, copyOfGen: 1},
		{name: "an earlier generation's publication", replays: 1, copyOfGen: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			e := start(t)
			e.duplicateWindow(100 * time.Millisecond) // the stream's smallest, for 15 minutes
			id := e.Publish("create-estimate", fmt.Sprintf(`{"eventAction":"create-estimate","jobId":%d}`, e.Sim.NewJob().Ref))
			e.WaitProcessed(id)
			for range tc.replays { // primectl replay, then ingest's relay
				_, err := e.Store.ResetWebhookLog(ctx, store.LogFilter{IDs: []int64{id}})
				is.NoErr(err)
				reset := e.Row(id)
				_, err = e.JS.PublishMsg(ctx, events.NewWebhookMsg(id, reset.ReplayCount, reset.EventAction, reset.Payload))
				is.NoErr(err)
				e.WaitProcessed(id)
			}
			before := e.Row(id)
			is.Equal(before.ReplayCount, tc.replays)

			var seq uint64
			flowtest.Eventually(t, "a copy the stream keeps", func() bool {
				ack, err := e.JS.PublishMsg(ctx, events.NewWebhookMsg(id, tc.copyOfGen, before.EventAction, before.Payload))
				if err != nil {
					t.Fatalf("publish the copy: %v", err)
				}
				seq = ack.Sequence
				return !ack.Duplicate // past the window: stored as a new message
			})
			e.settled(seq)
			is.Equal(len(e.resolved(id)), 1+tc.replays)                          // the stage was not called again
			is.Equal(e.Row(id), before)                                          // nor was the row touched
			is.Equal(e.outcomes("duplicate"), 1.0)                               // counted
			is.Equal(e.outcomes("replayed"), 0.0)                                // not taken for a replay
			is.True(strings.Contains(e.Logs.String(), "skipped as a duplicate")) // and logged
		})
	}
}

// duplicateWindow sets PRIME_WEBHOOK's duplicate window, so a test can
// republish a message past it.
func (e *env) duplicateWindow(d time.Duration) {
	e.T.Helper()
	ctx := context.Background()
	s, err := e.JS.Stream(ctx, events.StreamWebhook)
	if err != nil {
		e.T.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.Duplicates = d
	if _, err := e.JS.UpdateStream(ctx, cfg); err != nil {
		e.T.Fatalf("duplicate window: %v", err)
	}
}

func TestLaneTimeoutHandsTheEventBackWithoutAnAttempt(t *testing.T) {
	is := is.New(t)
	e := start(t, func(c *resolver.Config) { c.LaneWait = 200 * time.Millisecond })
	release, calls := e.stuckOnFirst()
	id := e.Publish("create-estimate", fmt.Sprintf(`{"eventAction":"create-estimate","jobId":%d}`, e.Sim.NewJob().Ref))
	flowtest.Eventually(t, "a second hand-over after the timeout", func() bool { return calls.Load() >= 2 })
	close(release)
	row := e.WaitProcessed(id)
	is.Equal(row.ProcessAttempts, 0) // a slow stage is not the event's fault
}

// TestAnAnswerReflectedOntoTheDoneSubjectReleasesNoLane is the review's
// attack on the lanes (issue 27): a user that may publish to a stream set
// a row's done subject as its publish's reply subject, which nats-server
// checks against no permission, and the resolver took JetStream's pub-ack
// for the stage's announcement: a Done with no outcome, after which it
// handed the row to its stage again while the first hand-over was still
// in hand. Only a stage's Done for the row is one.
func TestAnAnswerReflectedOntoTheDoneSubjectReleasesNoLane(t *testing.T) {
	is := is.New(t)
	e := start(t, func(c *resolver.Config) { c.LaneWait = 10 * time.Minute })
	release, calls := e.stuckOnFirst() // the stage still works on its first hand-over
	id := e.Publish("create-estimate", fmt.Sprintf(`{"eventAction":"create-estimate","jobId":%d}`, e.Sim.NewJob().Ref))
	flowtest.Eventually(t, "the row handed to its stage", func() bool { return calls.Load() == 1 })
	seen, err := e.NC.SubscribeSync(events.DoneSubject(id))
	is.NoErr(err)
	is.NoErr(e.NC.PublishMsg(&nats.Msg{Subject: events.SubjectOptimoPlan, Reply: events.DoneSubject(id), Data: []byte(`{"source":"x"}`)}))
	m, err := seen.NextMsg(10 * time.Second)
	is.NoErr(err)
	is.True(strings.Contains(string(m.Data), `"stream"`)) // JetStream's pub-ack, on the row's done subject
	close(release)
	e.WaitProcessed(id)
	is.Equal(len(e.resolved(id)), 1) // handed to its stage once
}
