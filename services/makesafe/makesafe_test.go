package makesafe_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/delivery"
	"github.com/ethosbuilding/primeflow/pkg/dryrun"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/pkg/sms"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/services/makesafe"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const onCall = "+61400000000"

// Saturday 2026-10-03 22:14 in Melbourne, and Tuesday 2026-09-01 10:00 there.
var (
	saturdayNight  = time.Date(2026, 10, 3, 12, 14, 0, 0, time.UTC)
	tuesdayMorning = time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
)

// smsEndpoint is the SMS flow's webhook over real HTTP: it answers each post
// with the next status of a script (the last repeats) and keeps what it got.
type smsEndpoint struct {
	mu       sync.Mutex
	statuses []int
	posts    []sms.Payload
	answered []int
	at       []time.Time
}

func (e *smsEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var p sms.Payload
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	e.mu.Lock()
	status := http.StatusOK
	if len(e.statuses) > 0 {
		status = e.statuses[min(len(e.posts), len(e.statuses)-1)]
	}
	e.posts = append(e.posts, p)
	e.answered = append(e.answered, status)
	e.at = append(e.at, time.Now())
	e.mu.Unlock()
	w.WriteHeader(status)
}

// accepted returns the posts answered 2xx.
func (e *smsEndpoint) accepted() []sms.Payload {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []sms.Payload
	for i, p := range e.posts {
		if e.answered[i]/100 == 2 {
			out = append(out, p)
		}
	}
	return out
}

func (e *smsEndpoint) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.posts)
}

// rig is makesafe over the flowtest harness: embedded NATS, SQLite, the
// Prime simulator over HTTP, and an SMS endpoint.
type rig struct {
	*flowtest.Env
	ms  *makesafe.Makesafe
	ep  *smsEndpoint
	cfg makesafe.Config
}

func testConfig(smsURL string) makesafe.Config {
	cfg := makesafe.DefaultConfig()
	cfg.SMSTo = onCall
	cfg.Ladder = []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second}
	cfg.Workers = 4
	cfg.OutboxSweep = time.Second
	cfg.SMS.URL = smsURL
	cfg.Drainer = delivery.Config{MaxAttempts: 5, Backoff: []time.Duration{50 * time.Millisecond},
		Lease: time.Minute, Sweep: time.Hour, Workers: 2}
	return cfg
}

func newRig(t *testing.T, statuses []int, edit ...func(*makesafe.Config)) *rig {
	t.Helper()
	env := flowtest.New(t, flowtest.Options{})
	ep := &smsEndpoint{statuses: statuses}
	srv := httptest.NewServer(ep)
	t.Cleanup(srv.Close)
	cfg := testConfig(srv.URL)
	for _, e := range edit {
		e(&cfg)
	}
	sender, err := makesafe.SenderFor(cfg.SMS, dryrun.Config{}, env.Deps.Log)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := makesafe.New(cfg, env.Deps, env.Prime, sender)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{Env: env, ms: ms, ep: ep, cfg: cfg}
}

// job makes a job in the simulator and mirrors it, as job-mirror would have
// before anything asks for detection.
func (r *rig) job(created time.Time) prime.Job {
	r.T.Helper()
	j := r.Sim.NewJob(func(j *prime.Job) { j.CreatedAt = prime.Time{Time: created} })
	_, err := r.Store.UpsertJob(context.Background(), store.Job{
		JobID: strings.ToLower(j.ID), JobNumber: j.JobNumber, CreatedAt: j.CreatedAt.Time, Version: j.Version,
		AddressLine1: j.Address.AddressLine1, Suburb: j.Address.Suburb, State: j.Address.State, Postcode: j.Address.Postcode,
	})
	if err != nil {
		r.T.Fatal(err)
	}
	return j.Job
}

// mirrorMakeSafe gives the job a Make Safe in Prime and in the mirror, as
// child-mirror does on create-allocation.
func (r *rig) mirrorMakeSafe(jobID string) {
	r.T.Helper()
	a := r.Sim.NewMakeSafeAllocation(jobID)
	if _, err := r.Store.SaveAllocation(context.Background(), store.Allocation{
		AllocationID: strings.ToLower(a.ID), JobID: strings.ToLower(jobID), AllocationType: a.Type, Version: a.Version,
	}); err != nil {
		r.T.Fatal(err)
	}
}

// detect publishes makesafe.detect, as child-mirror and newjob-pipeline do.
func (r *rig) detect(jobID string, queueChecks bool, msgID string) {
	r.T.Helper()
	b, _ := json.Marshal(events.MakesafeDetect{JobID: jobID, QueueChecks: queueChecks, Source: "test"})
	m := nats.NewMsg(events.SubjectMakesafeDetect)
	m.Data = b
	m.Header.Set(nats.MsgIdHdr, msgID)
	if _, err := r.JS.PublishMsg(context.Background(), m); err != nil {
		r.T.Fatal(err)
	}
}

func (r *rig) checks(jobID string) []store.MakesafeCheck {
	r.T.Helper()
	cs, err := r.Store.ListMakesafeChecks(context.Background(), jobID)
	if err != nil {
		r.T.Fatal(err)
	}
	return cs
}

func (r *rig) listCalls() int64 { return r.Sim.Stats().ByEndpoint["GET /allocations"] }

// schedules counts the rung schedules the MAKESAFE stream has taken.
func (r *rig) schedules(jobID string) int {
	r.T.Helper()
	s, err := r.JS.Stream(context.Background(), events.StreamMakesafe)
	if err != nil {
		r.T.Fatal(err)
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(events.SubjectMakesafeScheduleAll))
	if err != nil {
		r.T.Fatal(err)
	}
	n := 0
	for subj, c := range info.State.Subjects {
		if strings.Contains(subj, jobID) {
			n += int(c)
		}
	}
	return n
}

func TestAMakeSafeAfterHoursRaisesOneCallAndItsSMS(t *testing.T) {
	is := is.New(t)
	r := newRig(t, nil)
	r.Run("makesafe", r.ms)
	j := r.job(saturdayNight)
	r.mirrorMakeSafe(j.ID)
	r.detect(j.ID, false, "d1")

	flowtest.Eventually(t, "the SMS is posted", func() bool { return len(r.ep.accepted()) == 1 })
	p := r.ep.accepted()[0]
	is.Equal(p.To, onCall)                                                                                                                       // to the on-call number
	is.Equal(p.Message, store.MakesafeSMSBody(j.ID, j.JobNumber, j.Address.AddressLine1, j.Address.Suburb, j.Address.State, j.Address.Postcode)) // naming the job and its address
	call, found, err := r.Store.GetMakesafePhoneCall(context.Background(), j.ID)
	is.NoErr(err)
	is.True(found)                        // the phone call is raised
	is.Equal(call.SMSID, p.ID)            // with the SMS that was sent
	is.Equal(call.JobNumber, j.JobNumber) // for the job
	is.Equal(len(r.checks(j.ID)), 0)      // queue-checks off: no ladder

	r.detect(j.ID, false, "d2") // a replay, past the duplicate window's id
	r.detect(j.ID, true, "d3")  // and the first-sight detection after it
	flowtest.Eventually(t, "the replays are handled", func() bool {
		return flowtest.Counter(t, r.Deps.Metrics, "primeflow_makesafe_detections_total", map[string]string{"result": "already_raised"}) == 2
	})
	is.NoErr(r.ms.DrainSMS(context.Background()))
	is.Equal(r.ep.count(), 1)         // no second SMS
	is.Equal(len(r.checks(j.ID)), 0)  // and no ladder
	is.Equal(r.listCalls(), int64(0)) // Prime never asked
}

func TestBusinessHoursRaiseNothing(t *testing.T) {
	is := is.New(t)
	r := newRig(t, nil)
	j := r.job(tuesdayMorning)
	r.mirrorMakeSafe(j.ID)
	out, err := r.ms.Detect(context.Background(), j.ID, true, "test")
	is.NoErr(err)
	is.True(out.HasMakeSafe)     // a Make Safe
	is.True(!out.Raised)         // inside business hours: no call
	is.Equal(len(out.Checks), 0) // and nothing to wait for
	is.NoErr(r.ms.DrainSMS(context.Background()))
	is.Equal(r.ep.count(), 0) // no SMS
}

func TestAJobThatIsNotMirroredIsRetried(t *testing.T) {
	is := is.New(t)
	r := newRig(t, nil)
	_, err := r.ms.Detect(context.Background(), "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10", true, "test")
	is.True(err != nil) // nothing to decide on yet: the message is redelivered
}

// The ladder on a short clock: no Make Safe yet, so four rungs; the first
// asks Prime and finds nothing (the sync queue entry is deleted, §7); the
// Make Safe then appears in Prime; the next rung syncs it and raises the call;
// the rungs after it ask Prime nothing.
func TestTheLadderFindsAMakeSafeThatArrivesBetweenRungs(t *testing.T) {
	is := is.New(t)
	r := newRig(t, nil)
	r.Run("makesafe", r.ms)
	j := r.job(saturdayNight)
	job := strings.ToLower(j.ID)
	r.detect(j.ID, true, "firstseen")

	flowtest.Eventually(t, "the first rung runs", func() bool {
		cs := r.checks(job)
		return len(cs) == 4 && !cs[0].FiredUTC.IsZero()
	})
	is.Equal(r.schedules(job), 3)                                             // four rungs were scheduled; one has fired and been purged
	is.True(strings.HasPrefix(r.checks(job)[0].Outcome, makesafe.RungSynced)) // the first rung asked Prime
	items, err := r.Store.ListSyncQueue(context.Background(), store.SyncQueueFilter{Object: store.TableAllocations, JobID: job})
	is.NoErr(err)
	is.Equal(len(items), 0) // Prime had nothing: the queue entry was deleted (§7)
	_, called, err := r.Store.GetMakesafePhoneCall(context.Background(), job)
	is.NoErr(err)
	is.True(!called) // no call yet

	r.Sim.NewMakeSafeAllocation(j.ID) // the Make Safe appears in Prime between rungs

	flowtest.Eventually(t, "every rung runs", func() bool {
		for _, c := range r.checks(job) {
			if c.FiredUTC.IsZero() {
				return false
			}
		}
		return true
	})
	flowtest.Eventually(t, "the SMS is posted", func() bool { return len(r.ep.accepted()) == 1 })
	cs := r.checks(job)
	raisedAt := 0
	for i, c := range cs {
		if i > 0 && raisedAt == 0 && strings.HasPrefix(c.Outcome, makesafe.RungSynced) {
			raisedAt = i
		}
	}
	is.True(raisedAt >= 1) // a later rung synced the Make Safe
	for _, c := range cs[raisedAt+1:] {
		is.Equal(c.Outcome, makesafe.RungCalled) // and every rung after it did nothing
	}
	is.Equal(r.listCalls(), int64(raisedAt+1)) // Prime was asked once a rung up to the call, never after
	_, called, err = r.Store.GetMakesafePhoneCall(context.Background(), job)
	is.NoErr(err)
	is.True(called) // the call is raised
	has, err := r.Store.HasMakeSafeAllocation(context.Background(), job)
	is.NoErr(err)
	is.True(has)                  // with the allocation mirrored
	is.Equal(r.schedules(job), 0) // every schedule fired and was purged
	st := r.Prime.Stats()
	is.Equal(st.ByPriority[prime.PriorityMakesafe], st.Requests) // every rung's call is make-safe work
}

// The Make Safe arrives through its create-allocation event instead: the
// detection it hands on raises the call, and the rungs left ask Prime nothing.
func TestRungsAfterTheCallDoNothing(t *testing.T) {
	is := is.New(t)
	r := newRig(t, nil, func(c *makesafe.Config) {
		c.Ladder = []time.Duration{time.Second, 3 * time.Second, 4 * time.Second, 5 * time.Second}
	})
	r.Run("makesafe", r.ms)
	j := r.job(saturdayNight)
	job := strings.ToLower(j.ID)
	r.detect(j.ID, true, "firstseen")
	flowtest.Eventually(t, "the first rung runs", func() bool {
		cs := r.checks(job)
		return len(cs) == 4 && !cs[0].FiredUTC.IsZero()
	})
	r.mirrorMakeSafe(j.ID)
	r.detect(j.ID, false, "allocation") // §5.5: queue-checks off
	flowtest.Eventually(t, "the SMS is posted", func() bool { return len(r.ep.accepted()) == 1 })
	flowtest.Eventually(t, "every rung runs", func() bool {
		cs := r.checks(job)
		return !cs[3].FiredUTC.IsZero()
	})
	cs := r.checks(job)
	is.True(strings.HasPrefix(cs[0].Outcome, makesafe.RungSynced)) // the rung before the Make Safe asked Prime
	for _, c := range cs[1:] {
		is.True(c.Outcome == makesafe.RungCalled || c.Outcome == makesafe.RungMakeSafe) // the rest did not
	}
	is.Equal(cs[3].Outcome, makesafe.RungCalled) // the last found the call raised
	is.Equal(r.listCalls(), int64(1))            // one Prime call in all
	is.Equal(r.ep.count(), 1)                    // one SMS
}

// A job created in business hours can get no call (§5.5): its ladder's
// rungs have nothing to wait for, and ask Prime nothing. The job's events
// and the sync drains mirror its allocations.
func TestTheRungsOfAJobCreatedInBusinessHoursAskPrimeNothing(t *testing.T) {
	is := is.New(t)
	r := newRig(t, nil)
	r.Run("makesafe", r.ms)
	j := r.job(tuesdayMorning)
	job := strings.ToLower(j.ID)
	r.detect(j.ID, true, "firstseen")
	flowtest.Eventually(t, "every rung runs", func() bool {
		cs := r.checks(job)
		return len(cs) == 4 && !cs[3].FiredUTC.IsZero()
	})
	for _, c := range r.checks(job) {
		is.Equal(c.Outcome, makesafe.RungInHours) // each says why it did nothing
	}
	is.Equal(r.listCalls(), int64(0)) // Prime was asked nothing
	items, err := r.Store.ListSyncQueue(context.Background(), store.SyncQueueFilter{JobID: job})
	is.NoErr(err)
	is.Equal(len(items), 0) // nor was anything queued for the drains
	is.Equal(flowtest.Counter(t, r.Deps.Metrics, "primeflow_makesafe_rungs_fired_total", map[string]string{"outcome": "in_hours"}), 4.0)
}

func TestQueueChecksOffNeverAddsRungs(t *testing.T) {
	is := is.New(t)
	r := newRig(t, nil)
	j := r.job(saturdayNight)
	out, err := r.ms.Detect(context.Background(), j.ID, false, "test")
	is.NoErr(err)
	is.True(out.LacksMakeSafe())                    // no Make Safe yet
	is.Equal(len(out.Checks), 0)                    // but no rungs
	is.Equal(len(r.checks(j.ID)), 0)                // stored
	is.Equal(r.schedules(strings.ToLower(j.ID)), 0) // or scheduled
}

func TestAReplayedDetectionAddsNoSecondLadder(t *testing.T) {
	is := is.New(t)
	r := newRig(t, nil, func(c *makesafe.Config) {
		c.Ladder = []time.Duration{time.Hour, 2 * time.Hour}
	})
	j := r.job(saturdayNight)
	job := strings.ToLower(j.ID)
	first, err := r.ms.Detect(context.Background(), j.ID, true, "test")
	is.NoErr(err)
	is.Equal(len(first.Checks), 2) // the ladder
	is.Equal(r.schedules(job), 2)  // scheduled on the stream
	for range 3 {
		again, err := r.ms.Detect(context.Background(), strings.ToUpper(j.ID), true, "replay")
		is.NoErr(err)
		is.Equal(len(again.Checks), 0) // a replay queues no rung
	}
	is.Equal(len(r.checks(job)), 2) // still two rungs
	is.Equal(r.schedules(job), 2)   // and two schedules
	for _, c := range first.Checks {
		is.True(c.DueUTC.Equal(c.DueUTC.Truncate(time.Second))) // due on whole seconds, as @at holds them
	}
	unpublished, err := r.Store.GetOutboxUnpublished(context.Background(), 0, time.Now().Add(time.Hour), 10)
	is.NoErr(err)
	is.Equal(len(unpublished), 0) // every schedule was published at once
}

func TestParallelDetectionsRaiseOneCall(t *testing.T) {
	is := is.New(t)
	r := newRig(t, nil)
	j := r.job(saturdayNight)
	r.mirrorMakeSafe(j.ID)
	const n = 12
	outs := make([]store.MakesafeOutcome, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { outs[i], errs[i] = r.ms.Detect(context.Background(), j.ID, i%2 == 0, "parallel") })
	}
	wg.Wait()
	raised := 0
	for i := range n {
		is.NoErr(errs[i]) // every detection works
		if outs[i].Raised {
			raised++
		}
	}
	is.Equal(raised, 1) // one raised the call
	is.NoErr(r.ms.DrainSMS(context.Background()))
	is.Equal(len(r.ep.accepted()), 1) // and one SMS went
	is.Equal(r.ep.count(), 1)         // once
}

// makeSafeSMSSent raises a make-safe call for a new job, waits for its SMS
// to be accepted and recorded sent, and returns the SMS's row.
func (r *rig) makeSafeSMSSent() store.SMSMessage {
	r.T.Helper()
	j := r.job(saturdayNight)
	r.mirrorMakeSafe(j.ID)
	r.detect(j.ID, false, "d1")
	flowtest.Eventually(r.T, "the SMS is accepted", func() bool { return len(r.ep.accepted()) == 1 })
	call, _, err := r.Store.GetMakesafePhoneCall(context.Background(), j.ID)
	if err != nil {
		r.T.Fatal(err)
	}
	var m store.SMSMessage
	flowtest.Eventually(r.T, "the SMS is recorded sent", func() bool {
		m, err = r.Store.GetSMS(context.Background(), call.SMSID)
		return err == nil && m.State == store.SendSent
	})
	return m
}

func TestAnSMSEndpointThatFailsThenRecoversSendsOnce(t *testing.T) {
	is := is.New(t)
	r := newRig(t, []int{http.StatusInternalServerError, http.StatusRequestTimeout, http.StatusOK})
	r.Run("makesafe", r.ms)
	m := r.makeSafeSMSSent()
	is.Equal(m.Attempts, 3)   // sent on the third attempt
	is.Equal(r.ep.count(), 3) // after two failed posts
	is.NoErr(r.ms.DrainSMS(context.Background()))
	is.Equal(len(r.ep.accepted()), 1) // and never again
}

// A make-safe SMS whose gateway is rate limiting, then down behind its
// proxy, for longer than SMS_MAX_ATTEMPTS attempts would last goes once the
// gateway is back, on its first attempt: it is never Failed for a person to
// requeue.
func TestAMakeSafeSMSWaitsOutItsGateway(t *testing.T) {
	is := is.New(t)
	down := slices.Concat(slices.Repeat([]int{http.StatusTooManyRequests}, 3), slices.Repeat([]int{http.StatusBadGateway}, 3))
	r := newRig(t, append(down, http.StatusOK), func(c *makesafe.Config) { c.Drainer.MaxAttempts = 2 })
	r.Run("makesafe", r.ms)
	m := r.makeSafeSMSSent()
	is.Equal(m.Attempts, 1)                                                                                  // sent on its first attempt
	is.Equal(r.ep.count(), len(down)+1)                                                                      // after six waits, three times its two attempts
	is.Equal(flowtest.Counter(t, r.Deps.Metrics, "primeflow_sms_send_waits_total", nil), float64(len(down))) // each a wait
	is.Equal(flowtest.Counter(t, r.Deps.Metrics, "primeflow_sms_failed_total", nil), 0.0)                    // none a failure
}

// sms.send.requested (optimo-plan publishes it after planning) sends what is
// queued now, not at the next sweep (an hour away here).
func TestSMSSendRequestedDrainsTheQueue(t *testing.T) {
	is := is.New(t)
	r := newRig(t, nil)
	r.Run("makesafe", r.ms)
	_, _, err := r.Store.QueueSMS(context.Background(), store.NewSMS{Recipient: onCall, Body: "your appointment", Source: "optimo-plan"})
	is.NoErr(err)
	b, _ := json.Marshal(events.SMSSendRequested{Source: "optimo-plan"})
	_, err = r.JS.Publish(context.Background(), events.SubjectSMSSend, b)
	is.NoErr(err)
	flowtest.Eventually(t, "the queued SMS is posted", func() bool { return len(r.ep.accepted()) == 1 })
	is.Equal(r.ep.accepted()[0].Message, "your appointment") // the message queued
}

// A rung that Prime rate-limits waits and runs again; nothing is lost.
func TestARateLimitedRungRunsLater(t *testing.T) {
	is := is.New(t)
	r := newRig(t, nil, func(c *makesafe.Config) { c.Ladder = []time.Duration{time.Second} })
	r.Run("makesafe", r.ms)
	j := r.job(saturdayNight)
	r.Sim.NewMakeSafeAllocation(j.ID) // in Prime, not yet mirrored
	r.Sim.SetFaults(primesim.Faults{RateLimitNext: 1, RetryAfter: time.Second, Path: "/allocations"})
	r.detect(j.ID, true, "firstseen")
	flowtest.Eventually(t, "the SMS is posted", func() bool { return len(r.ep.accepted()) == 1 })
	is.True(r.Sim.Stats().RateLimited >= 1) // Prime said wait first
	cs := r.checks(strings.ToLower(j.ID))
	is.True(strings.HasPrefix(cs[0].Outcome, makesafe.RungSynced)) // then the rung synced
}

func TestConfigIsChecked(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*makesafe.Config)
	}{
		{"no on-call number", func(c *makesafe.Config) { c.SMSTo = " " }},
		{"no ladder", func(c *makesafe.Config) { c.Ladder = nil }},
		{"a rung that is not whole seconds", func(c *makesafe.Config) { c.Ladder = []time.Duration{1500 * time.Millisecond} }},
		{"rungs out of order", func(c *makesafe.Config) { c.Ladder = []time.Duration{4 * time.Minute, time.Minute} }},
		{"no workers", func(c *makesafe.Config) { c.Workers = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			env := flowtest.New(t, flowtest.Options{})
			cfg := testConfig("http://127.0.0.1:1")
			tc.edit(&cfg)
			_, err := makesafe.New(cfg, env.Deps, env.Prime, sms.LogSender{Log: env.Deps.Log})
			is.True(err != nil) // refused
		})
	}
}

// A claim must outlast its post: a lease that lapses during a slow post lets
// another drain claim the SMS and post it again.
func TestTheClaimLeaseMustOutlastASend(t *testing.T) {
	for _, tc := range []struct {
		name           string
		lease, timeout time.Duration
		refusal        string // "" when accepted
	}{
		{"as long as the send timeout", 15 * time.Second, 15 * time.Second, "SMS_CLAIM_LEASE: must be longer than SMS_SEND_TIMEOUT (15s)"},
		{"shorter than the send timeout", 10 * time.Second, 30 * time.Second, "SMS_CLAIM_LEASE: must be longer than SMS_SEND_TIMEOUT (30s)"},
		{"no send timeout", 10 * time.Second, 0, "SMS_SEND_TIMEOUT: must be above zero"},
		{"longer than the send timeout", 16 * time.Second, 15 * time.Second, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			env := flowtest.New(t, flowtest.Options{})
			cfg := testConfig("http://127.0.0.1:1")
			cfg.Drainer.Lease, cfg.SMS.Timeout = tc.lease, tc.timeout
			_, err := makesafe.New(cfg, env.Deps, env.Prime, sms.LogSender{Log: env.Deps.Log})
			if tc.refusal == "" {
				is.NoErr(err) // accepted
				return
			}
			is.True(err != nil)                                // refused
			is.True(strings.Contains(err.Error(), tc.refusal)) // naming the setting, and the one it must outlast with its value
		})
	}
}

// The drainer's log lines carry makesafe's component and say they are the
// SMS drainer's without repeating a key (a JSON object with a key twice is
// read as either value, or refused, by log shippers).
func TestTheSMSDrainersLogLinesRepeatNoKey(t *testing.T) {
	is := is.New(t)
	env := flowtest.New(t, flowtest.Options{})
	ep := &smsEndpoint{}
	srv := httptest.NewServer(ep)
	defer srv.Close()
	logs := &flowtest.Buffer{}
	d := env.Deps
	d.Log = slog.New(slog.NewJSONHandler(logs, nil))
	cfg := testConfig(srv.URL)
	sender, err := makesafe.SenderFor(cfg.SMS, dryrun.Config{}, d.Log)
	is.NoErr(err)
	ms, err := makesafe.New(cfg, d, env.Prime, sender)
	is.NoErr(err)
	_, _, err = env.Store.QueueSMS(context.Background(), store.NewSMS{Recipient: onCall, Body: "MAKE SAFE", Source: "makesafe"})
	is.NoErr(err)
	is.NoErr(ms.DrainSMS(context.Background()))

	var sent map[string]any
	for line := range strings.Lines(logs.String()) {
		is.Equal(repeatedKeys(t, line), []string(nil)) // no key twice in a line
		var rec map[string]any
		is.NoErr(json.Unmarshal([]byte(line), &rec))
		if rec["msg"] == "sms sent" {
			sent = rec
		}
	}
	is.True(sent != nil)                    // the drainer logged the send
	is.Equal(sent["component"], "makesafe") // under makesafe
	is.Equal(sent["sub"], "sms")            // as its SMS drainer
}

// repeatedKeys returns the keys that an object in a JSON text holds twice.
func repeatedKeys(t *testing.T, text string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(text))
	var repeated []string
	var value func()
	value = func() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				key, err := dec.Token()
				if err != nil {
					t.Fatalf("%q: %v", text, err)
				}
				if seen[key.(string)] {
					repeated = append(repeated, key.(string))
				}
				seen[key.(string)] = true
				value()
			}
			dec.Token() // }
		case json.Delim('['):
			for dec.More() {
				value()
			}
			dec.Token() // ]
		}
	}
	value()
	return repeated
}

func TestTheDefaultsAreTheSpecs(t *testing.T) {
	is := is.New(t)
	var cfg makesafe.Config
	is.NoErr(config.Parse(func(string) string { return "" }, &cfg))
	is.Equal(cfg.Ladder, []time.Duration{time.Minute, 4 * time.Minute, 10 * time.Minute, 15 * time.Minute}) // §6: +1, +4, +10, +15 minutes
	is.NoErr(config.Parse(func(k string) string {
		if k == "MAKESAFE_LADDER" {
			return "1s,2s"
		}
		return ""
	}, &cfg))
	is.Equal(cfg.Ladder, []time.Duration{time.Second, 2 * time.Second}) // a short clock for tests
}

// A message that can never be handled is dropped, not redelivered for ever.
func TestAMessageWithoutAJobGUIDIsDropped(t *testing.T) {
	is := is.New(t)
	r := newRig(t, nil)
	r.Run("makesafe", r.ms)
	r.detect("2402073", false, "numeric") // a numeric reference is not a job GUID
	_, err := r.JS.Publish(context.Background(), events.SubjectMakesafeRecheck, []byte(`{"jobId":"x","rung":1}`))
	is.NoErr(err)
	flowtest.Eventually(t, "both are dropped", func() bool {
		return flowtest.Counter(t, r.Deps.Metrics, "primeflow_consumer_messages_total", map[string]string{"result": "drop"}) == 2
	})
}
