package primesim_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/pkg/simcontrol"
	"github.com/matryer/is"
)

func TestControlAPIRecords(t *testing.T) {
	is := is.New(t)
	sim, base := serve(t, primesim.Options{})
	tok := getToken(t, base)

	res := do(t, base, call{method: http.MethodPut, path: "/_sim/jobs/job-x",
		body: `{"numericReference":555,"attributes":{"jobNumber":"J000555","statusId":"s1"}}`})
	is.Equal(res.status, http.StatusOK) // a job stored
	res = do(t, base, call{method: http.MethodGet, path: "/jobs/555", token: tok})
	is.Equal(res.status, http.StatusOK)                      // served by its numeric reference
	is.True(strings.Contains(string(res.body), `"J000555"`)) // with its attributes

	res = do(t, base, call{method: http.MethodPut, path: "/_sim/jobs/job-y", body: `{"attributes":{}}`})
	is.Equal(res.status, http.StatusBadRequest) // a new job needs a numeric reference
	res = do(t, base, call{method: http.MethodPut, path: "/_sim/jobs/job-y", body: `{"numericReference":555,"attributes":{}}`})
	is.Equal(res.status, http.StatusBadRequest) // and one no other job has (§4.1)

	res = do(t, base, call{method: http.MethodPost, path: "/_sim/allocations",
		body: `{"jobId":"job-x","attributes":{"allocationType":"Make Safe"}}`})
	is.Equal(res.status, http.StatusCreated) // a generated allocation
	var rec primesim.Record
	is.NoErr(json.Unmarshal(res.body, &rec))
	var alloc prime.Allocation
	is.NoErr(json.Unmarshal(rec.Attributes, &alloc))
	is.True(alloc.IsMakeSafe())           // with the attributes asked for
	is.Equal(alloc.JobID, "job-x")        // on the job asked for
	is.True(alloc.AllocationNumber != "") // and realistic others

	res = do(t, base, call{method: http.MethodGet, path: "/_sim/allocations/" + rec.ID})
	is.Equal(res.status, http.StatusOK) // readable through the control API
	res = do(t, base, call{method: http.MethodDelete, path: "/_sim/allocations/" + rec.ID})
	is.Equal(res.status, http.StatusNoContent) // deleted
	res = do(t, base, call{method: http.MethodGet, path: "/allocations/" + rec.ID, token: tok})
	is.Equal(res.status, http.StatusNotFound) // and gone from the API

	res = do(t, base, call{method: http.MethodPost, path: "/_sim/jobs", body: `{}`})
	is.Equal(res.status, http.StatusCreated) // a generated job
	is.NoErr(json.Unmarshal(res.body, &rec))
	is.True(rec.NumericReference > fixtureJobRef) // with a fresh numeric reference

	res = do(t, base, call{method: http.MethodPost, path: "/_sim/appointments", body: `{}`})
	is.Equal(res.status, http.StatusBadRequest) // a child needs its job
	res = do(t, base, call{method: http.MethodPut, path: "/_sim/widgets/1", body: `{}`})
	is.Equal(res.status, http.StatusNotFound) // unknown collection

	res = do(t, base, call{method: http.MethodPost, path: "/_sim/reset"})
	is.Equal(res.status, http.StatusNoContent) // reset
	_, ok := sim.Job("555")
	is.True(!ok) // the stored job is gone
	_, ok = sim.Job(fixtureJob)
	is.True(ok) // the fixture is back
}

func TestControlAPIFaultsAndLimits(t *testing.T) {
	is := is.New(t)
	sim, base := serve(t, primesim.Options{})

	res := do(t, base, call{method: http.MethodPost, path: "/_sim/faults", body: `{"failNext":2,"latency":"5ms","retryAfter":"3s","path":"/jobs"}`})
	is.Equal(res.status, http.StatusOK) // faults set
	f := sim.Faults()
	is.Equal(f.FailNext, 2)                                // counters
	is.Equal(f.Latency, 5*time.Millisecond)                // durations as text
	is.Equal(f.RetryAfter, 3*time.Second)                  // Retry-After
	is.Equal(f.Path, "/jobs")                              // path
	is.Equal(f.FailStatus, http.StatusInternalServerError) // default status

	res = do(t, base, call{method: http.MethodGet, path: "/_sim/faults"})
	var back primesim.Faults
	is.NoErr(json.Unmarshal(res.body, &back))
	is.Equal(back, f) // read back as set

	res = do(t, base, call{method: http.MethodPost, path: "/_sim/faults", body: `{"latency":"soon"}`})
	is.Equal(res.status, http.StatusBadRequest) // a bad duration is refused
	res = do(t, base, call{method: http.MethodPost, path: "/_sim/faults", body: `{"errorRate":2}`})
	is.Equal(res.status, http.StatusBadRequest) // a rate above 1 is refused
	res = do(t, base, call{method: http.MethodPost, path: "/_sim/faults", body: `{"down":true}`})
	is.Equal(res.status, http.StatusOK)
	is.True(sim.Faults().Down) // Prime unreachable, on the control API too
	res = do(t, base, call{method: http.MethodDelete, path: "/_sim/faults"})
	is.Equal(res.status, http.StatusNoContent)
	is.Equal(sim.Faults().FailNext, 0) // cleared
	is.True(!sim.Faults().Down)

	res = do(t, base, call{method: http.MethodPut, path: "/_sim/ratelimit", body: `{"perMinute":60,"perDay":5000,"maxConcurrent":5}`})
	is.Equal(res.status, http.StatusOK)                  // limits switched on
	is.Equal(sim.RateLimit(), primesim.PrimeRateLimit()) // Prime's budget

	tok := getToken(t, base)
	sim.RevokeTokens()
	res = do(t, base, call{method: http.MethodGet, path: "/jobs/" + fixtureJob, token: tok})
	is.Equal(res.status, http.StatusUnauthorized) // revoked tokens are refused
	tok = getToken(t, base)
	do(t, base, call{method: http.MethodPost, path: "/_sim/tokens/revoke"})
	res = do(t, base, call{method: http.MethodGet, path: "/jobs/" + fixtureJob, token: tok})
	is.Equal(res.status, http.StatusUnauthorized) // also through the control API
}

func TestLoadFixture(t *testing.T) {
	is := is.New(t)
	sim, base := serve(t, primesim.Options{})
	res := do(t, base, call{method: http.MethodPost, path: "/_sim/fixture",
		body: `{"jobs":[{"id":"j1","numericReference":42,"attributes":{"jobNumber":"J000042"}}],"contacts":[{"id":"c1","attributes":{"name":"A"}}]}`})
	is.Equal(res.status, http.StatusNoContent) // loaded
	_, ok := sim.Job(fixtureJob)
	is.True(!ok) // the old records are replaced
	j, ok := sim.Job("42")
	is.True(ok)                      // the new job by reference
	is.Equal(j.JobNumber, "J000042") // decoded

	res = do(t, base, call{method: http.MethodPost, path: "/_sim/fixture", body: `{"jobs":[{"id":"j2","attributes":{}}]}`})
	is.Equal(res.status, http.StatusBadRequest) // a job without a numeric reference is refused
	res = do(t, base, call{method: http.MethodPost, path: "/_sim/fixture", body: `{"widgets":[]}`})
	is.Equal(res.status, http.StatusBadRequest) // an unknown collection is refused
	_, err := primesim.LoadFixture(strings.NewReader(`{"jobs":[{"id":"","attributes":{}}]}`))
	is.NoErr(err) // parsing alone does not check records
	_, err = primesim.New(primesim.Options{Fixture: primesim.Fixture{primesim.KindJobs: {{ID: "", NumericReference: 1}}}})
	is.True(err != nil) // loading does: a record needs an id
}

func TestGenerators(t *testing.T) {
	is := is.New(t)
	clock := newClock()
	sim, _ := serve(t, primesim.Options{Now: clock.Now})

	a, b := sim.NewJob(), sim.NewJob(func(j *prime.Job) { j.Region = "NSW" })
	is.True(a.ID != b.ID)                        // distinct GUIDs
	is.Equal(b.Ref, a.Ref+1)                     // consecutive numeric references
	is.True(a.JobNumber != b.JobNumber)          // distinct job numbers
	is.True(strings.HasPrefix(a.JobNumber, "J")) // shaped like J012345
	is.Equal(a.CreatedAt.Time, clock.Now())      // created now on the simulator's clock
	is.Equal(b.Region, "NSW")                    // edits applied
	got, ok := sim.Job(strconv.FormatInt(b.Ref, 10))
	is.True(ok)                 // stored, found by reference
	is.Equal(got.Region, "NSW") // as edited

	c, rel := sim.NewContact(a.ID)
	is.Equal(rel.ContactID, c.ID) // linked to the job
	got, _ = sim.Job(a.ID)
	is.Equal(got.PrimaryContactID, c.ID) // and the job's first contact is its primary
	is.Equal(got.Version, int64(2))      // which bumped the job's version

	clock.Advance(time.Hour)
	updated, err := sim.UpdateJob(a.ID, func(j *prime.Job) { j.StatusID = "new-status" })
	is.NoErr(err)
	is.Equal(updated.Version, int64(3))           // version + 1
	is.Equal(updated.UpdatedAt.Time, clock.Now()) // updatedAt now
	appt := sim.NewAppointment(a.ID)
	done, err := sim.UpdateAppointment(appt.ID, func(x *prime.Appointment) { x.Status = "Completed" })
	is.NoErr(err)
	is.Equal(done.Status, "Completed") // appointments change too
	is.Equal(done.Version, int64(2))   // with their version

	is.True(sim.NewMakeSafeAllocation(a.ID).IsMakeSafe()) // a Make Safe allocation
	is.Equal(len(sim.NewEstimate(a.ID).Categories), 2)    // an estimate with categories
	is.Equal(sim.NewSiteForm(a.ID).ObjectType, "Job")     // a site form on the job
	is.Equal(sim.NewStatusHistory(a.ID, "s").JobID, a.ID) // a status history of the job

	one, _ := serve(t, primesim.Options{Now: clock.Now})
	two, _ := serve(t, primesim.Options{Now: clock.Now})
	seven, _ := serve(t, primesim.Options{Now: clock.Now, Seed: 7})
	first := one.NewJob().ID
	is.Equal(two.NewJob().ID, first)    // the same seed makes the same scenario
	is.True(seven.NewJob().ID != first) // another seed another
}

// A job moves to a status as in Prime: its statusId, version + 1,
// updatedAt now, and the change in its status history; the simulator has
// the Initial Contact Made status a triage invite answers (§5.1 step 6).
func TestChangeJobStatus(t *testing.T) {
	is := is.New(t)
	clock := newClock()
	sim, base := serve(t, primesim.Options{Now: clock.Now})
	tok := getToken(t, base)
	before, _ := sim.Job(fixtureJob)
	clock.Advance(time.Hour)

	res := do(t, base, call{method: http.MethodPost, path: "/_sim/jobs/" + fixtureJob + "/status",
		body: `{"statusId":"` + primesim.StatusInitialContactMade + `"}`})
	is.Equal(res.status, http.StatusOK) // moved
	res = do(t, base, call{method: http.MethodGet, path: "/jobs/" + fixtureJob, token: tok})
	is.Equal(res.status, http.StatusOK)
	var served struct {
		Data struct {
			Attributes prime.Job `json:"attributes"`
		} `json:"data"`
	}
	is.NoErr(json.Unmarshal(res.body, &served))
	job := served.Data.Attributes
	is.Equal(job.StatusID, primesim.StatusInitialContactMade) // Prime serves the new status
	is.Equal(job.Version, before.Version+1)                   // at the next version
	is.Equal(job.UpdatedAt.Time, clock.Now())                 // updated now
	res = do(t, base, call{method: http.MethodGet, token: tok,
		path: "/status-histories?q=" + url.QueryEscape("'jobId'.eq('"+fixtureJob+"'),'statusId'.eq('"+primesim.StatusInitialContactMade+"')")})
	is.Equal(res.status, http.StatusOK)
	is.True(strings.Contains(string(res.body), clock.Now().Format(prime.TimeLayout))) // the change in its history, now

	_, err := sim.ChangeJobStatus(strconv.FormatInt(fixtureJobRef, 10), "3f1c2a8e-6b1d-4c55-9a0e-1d2b7c9e4a01")
	is.NoErr(err) // by its numeric reference too, in Go
	res = do(t, base, call{method: http.MethodPost, path: "/_sim/jobs/" + fixtureJob + "/status", body: `{}`})
	is.Equal(res.status, http.StatusBadRequest) // a status is needed
	res = do(t, base, call{method: http.MethodPost, path: "/_sim/jobs/no-such-job/status", body: `{"statusId":"s"}`})
	is.Equal(res.status, http.StatusNotFound) // and a job
}

func TestPutKeepsUnknownAttributes(t *testing.T) {
	is := is.New(t)
	sim, _ := serve(t, primesim.Options{})
	j := primesim.Job{Ref: 9, Job: prime.Job{ID: "j9", JobNumber: "J000009", Raw: json.RawMessage(`{"jobNumber":"old","claimNumber":"C-9"}`)}}
	is.NoErr(sim.PutJob(j))
	r, ok := sim.Get(primesim.KindJobs, "9")
	is.True(ok)
	var attrs map[string]any
	is.NoErr(json.Unmarshal(r.Attributes, &attrs))
	is.Equal(attrs["jobNumber"], "J000009")                             // typed fields win
	is.Equal(attrs["claimNumber"], "C-9")                               // attributes the type does not know survive
	is.True(sim.PutJob(primesim.Job{Job: prime.Job{ID: "j10"}}) != nil) // a new job needs a reference
}

// The control API serves only a request with the simulator's token and a
// JSON body: a page on another origin, whose text/plain POST a browser
// sends without asking, stores no record (issue 27 §6).
func TestControlAPINeedsTheTokenAndJSON(t *testing.T) {
	is := is.New(t)
	sim, base := serve(t, primesim.Options{})
	for _, req := range simcontrol.Forged(http.MethodPut, base+"/_sim/jobs/job-x", `{"numericReference":555,"attributes":{}}`, controlToken) {
		res, err := http.DefaultClient.Do(req)
		is.NoErr(err)
		res.Body.Close()
		is.True(res.StatusCode == http.StatusUnauthorized || res.StatusCode == http.StatusUnsupportedMediaType) // refused
		_, stored := sim.Job("job-x")
		is.True(!stored) // and nothing stored
	}
	is.Equal(sim.ControlToken(), controlToken) // the token the options gave
	other, err := primesim.New(primesim.Options{})
	is.NoErr(err)
	is.True(len(other.ControlToken()) >= 50) // and, without one, one of its own that nobody guesses
}
