package childmirror_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go/micro"
)

// sweep asks child-mirror's sweep endpoint over NATS, as optimo-create
// does, and returns its reply (a failure's body is the reply too).
func (e *env) sweep(from, to time.Time) events.SweepReply {
	e.T.Helper()
	return e.sweepAsked(events.SweepRequest{FromUTC: from, ToUTC: to, TimeoutMS: 30_000, Source: "test"})
}

func (e *env) sweepAsked(req events.SweepRequest) events.SweepReply {
	e.T.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		e.T.Fatal(err)
	}
	msg, err := e.NC.Request(events.SubjectSweepAppointments, body, 30*time.Second)
	if err != nil {
		e.T.Fatalf("sweep request: %v", err)
	}
	var reply events.SweepReply
	if err := json.Unmarshal(msg.Data, &reply); err != nil {
		e.T.Fatalf("sweep reply %q: %v", msg.Data, err)
	}
	return reply
}

// calls is how many calls Prime got on each route since before.
func (e *env) calls(before primesim.Stats) map[string]int64 {
	out := map[string]int64{}
	for route, n := range e.Sim.Stats().ByEndpoint {
		if d := n - before.ByEndpoint[route]; d > 0 {
			out[route] = d
		}
	}
	return out
}

// §8.1 "Prime Sync Appointments by Date" / "Prime Sync Contacts by Date":
// the appointments Prime has in the range are mirrored unless the mirror
// holds them at their version already. An appointment whose webhook never
// came is mirrored job first (§4.3) with its job's contacts; one the mirror
// holds costs no Prime call beyond the list; one outside the range is not
// touched; one that cannot be mirrored is counted and the rest still are.
func TestSweepMirrorsWhatTheMirrorLacks(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	now := time.Now().UTC()

	unseen := e.Sim.NewJob() // its webhook never came
	contact, _ := e.Sim.NewContact(unseen.ID)
	missed := e.Sim.NewAppointment(unseen.ID) // tomorrow

	known := e.Sim.NewJob() // mirrored through its webhook
	knownContact, _ := e.Sim.NewContact(known.ID)
	held := e.Sim.NewAppointment(known.ID)
	e.WaitProcessed(e.Fire(events.ActionCreateAppointment, held.ID))
	flowtest.Eventually(t, "the held appointment's contact synced", func() bool { // after the commit (§5.2 step 4)
		_, found, err := e.Env.Store.GetContact(context.Background(), knownContact.ID)
		return err == nil && found
	})

	later := e.Sim.NewAppointment(unseen.ID, func(a *prime.Appointment) {
		a.StartDate = prime.Time{Time: now.Add(10 * 24 * time.Hour).Truncate(time.Second)}
	})
	orphan := e.Sim.NewAppointment("9f0e1d2c-3b4a-4958-8776-a5b4c3d2e1f0") // its job is not in Prime
	is.True(!e.mirrored(unseen.ID))                                        // never seen

	stats := e.Sim.Stats()
	classes := e.Prime.Stats().ByPriority
	writes := len(e.store.writes())
	reply := e.sweep(now, now.Add(48*time.Hour))

	is.Equal(reply.Error, "")         // the sweep went through the list
	is.Equal(reply.Listed, 3)         // the three appointments in range
	is.Equal(reply.Saved, 1)          // the missed one written
	is.Equal(reply.Unchanged, 1)      // the one held at its version left alone
	is.Equal(reply.Failed, 1)         // the orphan counted
	is.Equal(reply.JobsEnsured, 1)    // one job made sure of
	is.Equal(reply.ContactJobs, 1)    // and its contacts synced
	is.True(!reply.OrderRunRequested) // no order run asked for: optimo-create's run drains after its sweep
	flowtest.Eventually(t, "the sweep logged", func() bool { return strings.Contains(e.Logs.String(), "sweep finished") })
	is.True(strings.Contains(e.Logs.String(), "reply.listed=3 reply.saved=1")) // what it did, as text
	is.True(!strings.Contains(e.Logs.String(), "{Listed:"))                    // not a Go struct

	got := e.appointment(missed.ID)
	is.Equal(got.JobID, unseen.ID)        // the missed appointment mirrored under its job
	is.Equal(got.Version, missed.Version) // at Prime's version
	w := e.store.writes()[writes:]
	is.True(before(w, "job:"+unseen.ID, "appointment:"+missed.ID)) // job first
	_, found, err := e.Env.Store.GetContact(context.Background(), contact.ID)
	is.NoErr(err)
	is.True(found) // the job's contacts synced
	rels, err := e.Env.Store.ListJobContactRelationships(context.Background(), unseen.ID)
	is.NoErr(err)
	is.Equal(len(rels), 1) // with its relationship
	_, found, err = e.Env.Store.GetAppointment(context.Background(), later.ID)
	is.NoErr(err)
	is.True(!found) // the appointment outside the range untouched
	_, found, err = e.Env.Store.GetAppointment(context.Background(), orphan.ID)
	is.NoErr(err)
	is.True(!found) // the orphan not mirrored

	calls := e.calls(stats)
	delete(calls, "POST /oauth/token")
	is.Equal(calls, map[string]int64{
		"GET /appointments":          1, // one page of the list
		"GET /jobs/{id}":             3, // the unseen job (ensure, then the contact sync's fresh copy) and the orphan's
		"GET /contact-relationships": 1, // the unseen job's contacts only: nothing for the held appointment
		"GET /contacts/{id}":         1,
	}) // and no appointment fetched one by one
	after := e.Prime.Stats().ByPriority
	is.Equal(after[prime.PrioritySweep]-classes[prime.PrioritySweep], int64(6)) // every call of the sweep in its class, job-mirror's ensure too
	is.Equal(after[prime.PriorityEvent], classes[prime.PriorityEvent])          // none as an event's
	flowtest.Eventually(t, "first sight of the unseen job", func() bool { return e.firstSeen(unseen.ID) == 1 })
	is.Equal(flowtest.Counter(t, e.Deps.Metrics, "primeflow_childmirror_sweeps_total", map[string]string{"result": "ok"}), 1.0)
	is.Equal(flowtest.Counter(t, e.Deps.Metrics, "primeflow_childmirror_sweep_appointments_total", map[string]string{"outcome": "failed"}), 1.0)

	// A second sweep finds the mirror up to date: only the list is asked.
	stats = e.Sim.Stats()
	reply = e.sweep(now, now.Add(48*time.Hour))
	is.Equal(reply.Unchanged, 2) // both held now
	is.Equal(reply.Failed, 1)    // the orphan still fails
	calls = e.calls(stats)
	delete(calls, "POST /oauth/token")
	is.Equal(calls, map[string]int64{"GET /appointments": 1, "GET /jobs/{id}": 1}) // the list, and the orphan's job
}

// An answer Prime gave to a call sent since the sweep began serves the
// sweep's calls, as an event's serve the calls made after it reached us:
// the contact sync of a job the sweep has just made sure of takes the job
// as its ensure-job fetched it (a fresh copy: sent after the sweep began)
// rather than asking Prime for it again. The coalescing window is too
// short to join the two calls.
func TestTheSweepTakesAnswersPrimeGaveSinceItBegan(t *testing.T) {
	is := is.New(t)
	e := start(t, options{prime: coalescing})
	now := time.Now().UTC()
	unseen := e.Sim.NewJob() // its webhook never came
	contact, _ := e.Sim.NewContact(unseen.ID)
	e.Sim.NewAppointment(unseen.ID)
	stats := e.Sim.Stats()

	reply := e.sweep(now, now.Add(48*time.Hour))
	is.Equal(reply.Saved, 1)       // its appointment mirrored
	is.Equal(reply.ContactJobs, 1) // and its contacts synced
	_, found, err := e.Env.Store.GetContact(context.Background(), contact.ID)
	is.NoErr(err)
	is.True(found)                                       // from the job's primaryContactId
	is.Equal(e.calls(stats)["GET /jobs/{id}"], int64(1)) // the ensure-job's fetch served the contact sync
}

// Prime's rate limit stops the sweep instead of hammering: it answers with
// what it did and how long Prime asked to wait.
func TestSweepStopsAtTheRateLimit(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	now := time.Now().UTC()
	first := e.Sim.NewAppointment(e.Sim.NewJob().ID)
	second := e.Sim.NewAppointment(e.Sim.NewJob().ID)
	e.Sim.SetFaults(primesim.Faults{Path: "/jobs", RateLimitNext: 1, RetryAfter: 2 * time.Second})
	stats := e.Sim.Stats()

	reply := e.sweep(now, now.Add(48*time.Hour))
	is.Equal(reply.Listed, 2)                            // both listed
	is.Equal(reply.Failed, 1)                            // the first met the limit
	is.Equal(reply.Saved, 0)                             // nothing written
	is.True(reply.RetryAfterMS > 0)                      // the wait is reported
	is.True(reply.Error != "")                           // as the reason the sweep stopped
	is.Equal(e.calls(stats)["GET /jobs/{id}"], int64(1)) // the second job never asked for
	for _, id := range []string{first.ID, second.ID} {
		_, found, err := e.Env.Store.GetAppointment(context.Background(), id)
		is.NoErr(err)
		is.True(!found) // neither mirrored
	}
	is.Equal(flowtest.Counter(t, e.Deps.Metrics, "primeflow_childmirror_sweeps_total", map[string]string{"result": "rate_limited"}), 1.0)
}

// A hold on Prime's budget that a webhook's call met (a 429's Retry-After)
// stops the sweep at once, without a call: it does not queue up behind the
// webhooks for the budget they share.
func TestSweepDoesNotWaitOutAHold(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	now := time.Now().UTC()
	job := e.Sim.NewJob()
	e.Sim.NewAppointment(job.ID)
	e.Sim.SetFaults(primesim.Faults{Path: "/jobs", RateLimitNext: 1, RetryAfter: 10 * time.Second}) // shorter than the sweep's deadline
	_, err := e.Prime.GetJob(context.Background(), job.ID)                                          // as a webhook's handler would
	is.True(errors.Is(err, prime.ErrRateLimited))                                                   // Prime holds the client for a minute
	stats := e.Sim.Stats()

	reply := e.sweep(now, now.Add(48*time.Hour))
	is.True(reply.RetryAfterMS > 0)  // stopped by the hold
	is.Equal(reply.Listed, 0)        // before the list
	is.Equal(len(e.calls(stats)), 0) // with no call to Prime
	is.Equal(flowtest.Counter(t, e.Deps.Metrics, "primeflow_childmirror_sweeps_total", map[string]string{"result": "rate_limited"}), 1.0)
}

// docs/operations.md's command line sweeps: `nats req primeflow.childmirror.sweep
// '{"fromUTC":…,"toUTC":…}'`. The Makefile builds the nats CLI and sets
// NATS_CLI.
func TestSweepCommandLine(t *testing.T) {
	cli := natstest.CLI(t)
	is := is.New(t)
	e := start(t, options{})
	missed := e.Sim.NewAppointment(e.Sim.NewJob().ID)
	from := time.Now().UTC().Truncate(time.Hour)
	body := fmt.Sprintf(`{"fromUTC":%q,"toUTC":%q,"source":"ops"}`, from.Format(time.RFC3339), from.Add(8*24*time.Hour).Format(time.RFC3339))
	out, err := exec.Command(cli, "--server", e.NATS.ClientURL(), "req", "--timeout", "6m", events.SubjectSweepAppointments, body).CombinedOutput() // as docs/operations.md asks
	is.NoErr(err)                                                                                                                                   // the CLI asked and child-mirror answered
	is.True(strings.Contains(string(out), `"saved":1`))                                                                                             // with what the sweep did
	is.Equal(e.appointment(missed.ID).Version, missed.Version)                                                                                      // the appointment is mirrored
}

// A sweep by hand can ask for the order run, so what it saves becomes
// orders now: child-mirror asks optimo-create once the sweep is over.
func TestSweepCanAskForTheOrderRun(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	e.Sim.NewAppointment(e.Sim.NewJob().ID)
	from := time.Now().UTC().Truncate(time.Hour)
	reply := e.sweepAsked(events.SweepRequest{FromUTC: from, ToUTC: from.Add(8 * 24 * time.Hour), Source: "ops", OrderRun: true})
	is.Equal(reply.Saved, 1)         // swept
	is.True(reply.OrderRunRequested) // and the order run asked for
	stream, err := e.JS.Stream(context.Background(), events.StreamOptimo)
	is.NoErr(err)
	msg, err := stream.GetLastMsgForSubject(context.Background(), events.SubjectOptimoCreate)
	is.NoErr(err) // on optimo.create.requested
	var req events.CreateRequested
	is.NoErr(json.Unmarshal(msg.Data, &req))
	is.True(strings.Contains(req.Reason, "ops")) // saying who asked
}

// A request that names no range is refused.
func TestSweepRefusesABadRequest(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	now := time.Now()
	stats := e.Sim.Stats()
	for _, tc := range []struct{ body, says string }{
		{`not json`, "RFC 3339"},
		{`{"fromUTC":"2026-12-01","toUTC":"2026-12-03"}`, "RFC 3339"}, // dates, not times: says the format
		{`{}`, "fromUTC before toUTC"},
		{string(must(json.Marshal(events.SweepRequest{FromUTC: now, ToUTC: now}))), "fromUTC before toUTC"},
	} {
		msg, err := e.NC.Request(events.SubjectSweepAppointments, []byte(tc.body), 10*time.Second)
		is.NoErr(err)
		is.Equal(msg.Header.Get(micro.ErrorCodeHeader), "400")                // refused
		is.True(strings.Contains(msg.Header.Get(micro.ErrorHeader), tc.says)) // saying what is wrong
	}
	is.Equal(len(e.calls(stats)), 0) // without a call to Prime
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
