package primesim_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/pkg/simcontrol"
	"github.com/matryer/is"
)

const (
	fixtureJob      = "0f8e3c1a-5b7d-4e2f-9a6c-1d3e5f7a9b01"
	fixtureJobRef   = 2402073
	fixtureJob2     = "1a2b3c4d-6e7f-4a8b-9c0d-2e3f4a5b6c02"
	fixtureMakeSafe = "5e6f7a8b-0c1d-4e2f-9a3b-6c7d8e9f0a06"
	fixtureAppt     = "3c4d5e6f-8a9b-4c0d-9e1f-4a5b6c7d8e04"
)

// manualClock is a clock the test moves by hand.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newClock() *manualClock { return &manualClock{now: time.Date(2025, 2, 7, 4, 0, 0, 0, time.UTC)} }

// serve runs a simulator with the default fixture over real HTTP.
func serve(t *testing.T, opts primesim.Options) (*primesim.Sim, string) {
	t.Helper()
	f, err := primesim.DefaultFixture()
	if err != nil {
		t.Fatalf("default fixture: %v", err)
	}
	opts.Fixture = f
	if opts.ControlToken == "" {
		opts.ControlToken = controlToken
	}
	sim, err := primesim.New(opts)
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return sim, srv.URL
}

// controlToken is the control API's token of the simulators serve runs,
// which do sends with every control request.
const controlToken = "primesim-test-control-token"

type call struct {
	method, path, body, token string
	noAccept                  bool
	ctx                       context.Context
}

type result struct {
	status int
	header http.Header
	body   []byte
}

func do(t *testing.T, base string, c call) result {
	t.Helper()
	ctx := c.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	req, err := http.NewRequestWithContext(ctx, c.method, base+c.path, strings.NewReader(c.body))
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	if !c.noAccept {
		req.Header.Set("Accept", prime.MediaType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.method == http.MethodPost && strings.HasPrefix(c.path, "/oauth/") {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if strings.HasPrefix(c.path, simcontrol.Prefix) {
		simcontrol.Authorize(req, controlToken)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return result{status: resp.StatusCode, header: resp.Header, body: b}
}

// listIDs is the ids of a JSON:API list's records, in order.
func listIDs(t *testing.T, body []byte) []string {
	t.Helper()
	var many struct{ Data []struct{ ID string } }
	if err := json.Unmarshal(body, &many); err != nil {
		t.Fatalf("list: %v", err)
	}
	ids := []string{}
	for _, d := range many.Data {
		ids = append(ids, d.ID)
	}
	return ids
}

func tokenForm(clientSecret, password string) string {
	return url.Values{"grant_type": {"password"}, "client_id": {"primesim-client"}, "client_secret": {clientSecret},
		"username": {"primesim"}, "password": {password}}.Encode()
}

func getToken(t *testing.T, base string) string {
	t.Helper()
	res := do(t, base, call{method: http.MethodPost, path: "/oauth/token", body: tokenForm("primesim-secret", "primesim-password")})
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if res.status != http.StatusOK || json.Unmarshal(res.body, &tok) != nil {
		t.Fatalf("token: %d %s", res.status, res.body)
	}
	return tok.AccessToken
}

func TestDefaultFixture(t *testing.T) {
	is := is.New(t)
	sim, _ := serve(t, primesim.Options{})
	j, ok := sim.Job("2402073")
	is.True(ok)                           // a job found by numeric reference
	is.Equal(j.ID, fixtureJob)            // the right one
	is.Equal(j.Ref, int64(fixtureJobRef)) // carrying its reference
	r, ok := sim.Get(primesim.KindAllocations, fixtureMakeSafe)
	is.True(ok) // the Make Safe allocation
	var a prime.Allocation
	is.NoErr(json.Unmarshal(r.Attributes, &a))
	is.True(a.IsMakeSafe()) // is one
	f, err := primesim.DefaultFixture()
	is.NoErr(err)
	for _, k := range primesim.Kinds() {
		is.True(len(f[k]) > 0) // every collection has records
	}
}

func TestTokenEndpoint(t *testing.T) {
	clock := newClock()
	_, base := serve(t, primesim.Options{Now: clock.Now, TokenTTL: time.Hour})
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantError  string
	}{
		{"good credentials", tokenForm("primesim-secret", "primesim-password"), http.StatusOK, ""},
		{"wrong client secret", tokenForm("nope", "primesim-password"), http.StatusUnauthorized, "invalid_client"},
		{"wrong password", tokenForm("primesim-secret", "nope"), http.StatusBadRequest, "invalid_grant"},
		{"other grant", "grant_type=client_credentials", http.StatusBadRequest, "unsupported_grant_type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			res := do(t, base, call{method: http.MethodPost, path: "/oauth/token", body: tt.body})
			is.Equal(res.status, tt.wantStatus) // credentials checked
			var body struct {
				Error       string `json:"error"`
				TokenType   string `json:"token_type"`
				ExpiresIn   int    `json:"expires_in"`
				AccessToken string `json:"access_token"`
			}
			is.NoErr(json.Unmarshal(res.body, &body))
			is.Equal(body.Error, tt.wantError) // OAuth error code
			if tt.wantStatus == http.StatusOK {
				is.Equal(body.TokenType, "Bearer") // a bearer token
				is.Equal(body.ExpiresIn, 3600)     // expires_in is the TTL
				is.True(body.AccessToken != "")    // issued
			}
		})
	}

	t.Run("tokens expire", func(t *testing.T) {
		is := is.New(t)
		tok := getToken(t, base)
		get := call{method: http.MethodGet, path: "/jobs/" + fixtureJob, token: tok}
		is.Equal(do(t, base, get).status, http.StatusOK) // a fresh token works
		clock.Advance(time.Hour)
		is.Equal(do(t, base, get).status, http.StatusUnauthorized) // an expired one does not
		get.token = "made-up"
		is.Equal(do(t, base, get).status, http.StatusUnauthorized) // nor an unknown one
		get.token = ""
		is.Equal(do(t, base, get).status, http.StatusUnauthorized) // nor none
	})
}

func TestAcceptHeaderGuard(t *testing.T) {
	is := is.New(t)
	_, base := serve(t, primesim.Options{})
	tok := getToken(t, base)
	res := do(t, base, call{method: http.MethodGet, path: "/jobs/" + fixtureJob, token: tok, noAccept: true})
	is.Equal(res.status, http.StatusNotAcceptable)               // no Accept, no answer
	is.True(strings.Contains(string(res.body), prime.MediaType)) // saying what is needed
	res = do(t, base, call{method: http.MethodPost, path: "/oauth/token", body: tokenForm("primesim-secret", "primesim-password"), noAccept: true})
	is.Equal(res.status, http.StatusNotAcceptable) // the token endpoint too
}

func TestGetAndList(t *testing.T) {
	sim, base := serve(t, primesim.Options{})
	tok := getToken(t, base)
	other := sim.NewSiteForm(fixtureJob2, func(f *prime.SiteForm) { f.ObjectType = "Allocation" })
	tests := []struct {
		name       string
		path       string
		wantStatus int
		wantIDs    []string
		wantPages  int
	}{
		{"job by GUID", "/jobs/" + fixtureJob, 200, []string{fixtureJob}, 0},
		{"job by numeric reference", "/jobs/2402073", 200, []string{fixtureJob}, 0},
		{"unknown job", "/jobs/999", 404, nil, 0},
		{"appointment", "/appointments/" + fixtureAppt, 200, []string{fixtureAppt}, 0},
		{"a job's GUID is not an appointment", "/appointments/" + fixtureJob, 404, nil, 0},
		{"filter by jobId", "/site-forms?q=" + url.QueryEscape("'jobId'.eq('"+fixtureJob2+"')"), 200,
			[]string{"7a8b9c0d-2e3f-4a4b-9c5d-8e9f0a1b2c08", other.ID}, 1},
		{"filter by jobId and objectType", "/site-forms?q=" + url.QueryEscape("'jobId'.eq('"+fixtureJob2+"'),'objectType'.eq('Job')"), 200,
			[]string{"7a8b9c0d-2e3f-4a4b-9c5d-8e9f0a1b2c08"}, 1},
		{"second page", "/site-forms?per_page=1&page=2&q=" + url.QueryEscape("'jobId'.eq('"+fixtureJob2+"')"), 200, []string{other.ID}, 2},
		{"past the last page", "/site-forms?per_page=1&page=3&q=" + url.QueryEscape("'jobId'.eq('"+fixtureJob2+"')"), 200, []string{}, 2},
		{"unsupported filter", "/site-forms?q=" + url.QueryEscape("'jobId'.like('x')"), 400, nil, 0},
		{"per_page too big", "/site-forms?per_page=501", 400, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			res := do(t, base, call{method: http.MethodGet, path: tt.path, token: tok})
			is.Equal(res.status, tt.wantStatus) // status
			if tt.wantStatus != http.StatusOK {
				var doc struct{ Errors []prime.ErrorObject }
				is.NoErr(json.Unmarshal(res.body, &doc))
				is.Equal(len(doc.Errors), 1) // a JSON:API errors document
				return
			}
			var one struct {
				Data struct{ ID, Type string }
			}
			if json.Unmarshal(res.body, &one) == nil {
				is.Equal([]string{one.Data.ID}, tt.wantIDs) // the record
				return
			}
			var many struct {
				Data []struct{ ID string }
				Meta struct {
					Pagination struct {
						TotalPages int `json:"total_pages"`
					}
				}
			}
			is.NoErr(json.Unmarshal(res.body, &many))
			ids := []string{}
			for _, d := range many.Data {
				ids = append(ids, d.ID)
			}
			is.Equal(ids, tt.wantIDs)                               // the matching records, in order
			is.Equal(many.Meta.Pagination.TotalPages, tt.wantPages) // meta.pagination
		})
	}
}

// The ordering operators compare Prime's timestamps as text, which orders
// them as time; they combine with eq, and any other operator is refused.
func TestListFiltersByRange(t *testing.T) {
	sim, base := serve(t, primesim.Options{})
	tok := getToken(t, base)
	const second = "4d5e6f7a-9b0c-4d1e-8f2a-5b6c7d8e9f05" // starts 2025-02-11 03:30:00
	noStart := sim.NewAppointment(fixtureJob, func(a *prime.Appointment) { a.StartDate = prime.Time{} })
	q := func(terms string) string { return "/appointments?q=" + url.QueryEscape(terms) }
	tests := []struct {
		name       string
		path       string
		wantStatus int
		wantIDs    []string
	}{
		{"gte and lt: a half-open range", q("'startDate'.gte('2025-02-10 23:00:00'),'startDate'.lt('2025-02-11 03:30:00')"), 200, []string{fixtureAppt}},
		{"gt leaves out the bound", q("'startDate'.gt('2025-02-10 23:00:00')"), 200, []string{second}},
		{"lte keeps the bound", q("'startDate'.lte('2025-02-11 03:30:00')"), 200, []string{fixtureAppt, second}},
		{"lt before everything", q("'startDate'.lt('2025-01-01 00:00:00')"), 200, []string{}},
		{"with eq", q("'startDate'.gte('2025-01-01 00:00:00'),'jobId'.eq('" + fixtureJob2 + "')"), 200, []string{second}},
		{"neq is not simulated", q("'startDate'.neq('2025-01-01 00:00:00')"), 400, nil},
		{"between is not simulated", q("'startDate'.between('2025-01-01 00:00:00')"), 400, nil},
		{"no value", q("'startDate'.gte()"), 400, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			res := do(t, base, call{method: http.MethodGet, path: tt.path, token: tok})
			is.Equal(res.status, tt.wantStatus) // status
			if tt.wantStatus != http.StatusOK {
				return
			}
			ids := listIDs(t, res.body)
			is.Equal(ids, tt.wantIDs)                  // the appointments in range, in order
			is.True(!slices.Contains(ids, noStart.ID)) // never one without a startDate
		})
	}
}

// "Prime Sync Jobs by Date": the jobs updated since a time, newest first,
// a page a call.
func TestListJobsUpdatedSince(t *testing.T) {
	sim, base := serve(t, primesim.Options{})
	tok := getToken(t, base)
	const third = "2b3c4d5e-7f8a-4b9c-8d1e-3f4a5b6c7d03" // updated 2025-02-09 01:02:17
	later := sim.NewJob(func(j *prime.Job) { j.UpdatedAt = prime.Time{Time: time.Date(2025, 2, 10, 0, 0, 0, 0, time.UTC)} })
	q := func(terms, order string) string {
		return "/jobs?q=" + url.QueryEscape(terms) + "&order=" + url.QueryEscape(order)
	}
	tests := []struct {
		name       string
		path       string
		wantStatus int
		wantIDs    []string
	}{
		{"newest first", q("'updatedAt'.gte('2025-02-08 00:00:00')", "updatedAt|DESC"), 200, []string{later.ID, third, fixtureJob2}},
		{"oldest first", q("'updatedAt'.gte('2025-02-08 00:00:00')", "updatedAt|asc"), 200, []string{fixtureJob2, third, later.ID}},
		{"a page of them", q("'updatedAt'.gte('2025-02-08 00:00:00')", "updatedAt|DESC") + "&per_page=2&page=2", 200, []string{fixtureJob2}},
		{"since the last one", q("'updatedAt'.gte('2025-02-10 00:00:00')", "updatedAt|DESC"), 200, []string{later.ID}},
		{"an order the simulator does not know", q("'updatedAt'.gte('2025-02-08 00:00:00')", "updatedAt|sideways"), 400, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			res := do(t, base, call{method: http.MethodGet, path: tt.path, token: tok})
			is.Equal(res.status, tt.wantStatus) // status
			if tt.wantStatus != http.StatusOK {
				return
			}
			is.Equal(listIDs(t, res.body), tt.wantIDs) // the jobs updated since, in order
		})
	}
}

func TestFaultModes(t *testing.T) {
	clock := newClock()
	tests := []struct {
		name   string
		faults primesim.Faults
		paths  []string
		want   []int
	}{
		{"fail the next 2", primesim.Faults{FailNext: 2}, []string{"/jobs/" + fixtureJob, "/jobs/" + fixtureJob, "/jobs/" + fixtureJob}, []int{500, 500, 200}},
		{"fail with a chosen status", primesim.Faults{FailNext: 1, FailStatus: 502}, []string{"/jobs/" + fixtureJob, "/jobs/" + fixtureJob}, []int{502, 200}},
		{"every other call fails", primesim.Faults{ErrorRate: 0.5}, []string{"/jobs/1", "/jobs/1", "/jobs/1", "/jobs/1"}, []int{404, 500, 404, 500}},
		{"429 for the next call", primesim.Faults{RateLimitNext: 1}, []string{"/jobs/" + fixtureJob, "/jobs/" + fixtureJob}, []int{429, 200}},
		{"429 for a window", primesim.Faults{RateLimitFor: 10 * time.Second}, []string{"/jobs/" + fixtureJob, "/jobs/" + fixtureJob}, []int{429, 429}},
		{"only the matching path", primesim.Faults{Path: "/allocations", FailNext: 1},
			[]string{"/jobs/" + fixtureJob, "/allocations/" + fixtureMakeSafe, "/allocations/" + fixtureMakeSafe}, []int{200, 500, 200}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			sim, base := serve(t, primesim.Options{Now: clock.Now})
			tok := getToken(t, base)
			sim.SetFaults(tt.faults)
			is.Equal(getToken(t, base) != "", true) // the token endpoint is left alone
			var got []int
			for _, p := range tt.paths {
				res := do(t, base, call{method: http.MethodGet, path: p, token: tok})
				got = append(got, res.status)
				if res.status == http.StatusTooManyRequests {
					is.Equal(res.header.Get("Retry-After"), "1") // default Retry-After
				}
			}
			is.Equal(got, tt.want) // deterministic: the same every run
		})
	}

	t.Run("the window ends", func(t *testing.T) {
		is := is.New(t)
		sim, base := serve(t, primesim.Options{Now: clock.Now})
		tok := getToken(t, base)
		sim.SetFaults(primesim.Faults{RateLimitFor: 10 * time.Second, RetryAfter: 10 * time.Second})
		get := call{method: http.MethodGet, path: "/jobs/" + fixtureJob, token: tok}
		res := do(t, base, get)
		is.Equal(res.status, 429)                     // inside the window
		is.Equal(res.header.Get("Retry-After"), "10") // with the chosen Retry-After
		clock.Advance(10 * time.Second)
		is.Equal(do(t, base, get).status, 200)                // after it
		is.Equal(sim.Faults().RateLimitFor, time.Duration(0)) // and the window reads as over
	})

	t.Run("down: no answer at all", func(t *testing.T) {
		is := is.New(t)
		sim, base := serve(t, primesim.Options{})
		tok := getToken(t, base)
		sim.SetFaults(primesim.Faults{Down: true})
		req, err := http.NewRequest(http.MethodGet, base+"/jobs/"+fixtureJob, nil)
		is.NoErr(err)
		req.Header.Set("Accept", prime.MediaType)
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := http.DefaultClient.Do(req)
		is.True(err != nil) // the connection dropped, no answer
		if res != nil {
			res.Body.Close()
		}
		is.True(sim.Faults().Down) // until the faults are cleared
		sim.SetFaults(primesim.Faults{})
		is.Equal(do(t, base, call{method: http.MethodGet, path: "/jobs/" + fixtureJob, token: tok}).status, 200) // then answered
	})

	t.Run("latency", func(t *testing.T) {
		is := is.New(t)
		sim, base := serve(t, primesim.Options{})
		tok := getToken(t, base)
		sim.SetFaults(primesim.Faults{Latency: time.Minute})
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/jobs/"+fixtureJob, nil)
		is.NoErr(err)
		req.Header.Set("Accept", prime.MediaType)
		req.Header.Set("Authorization", "Bearer "+tok)
		_, err = http.DefaultClient.Do(req)
		is.True(errors.Is(err, context.DeadlineExceeded)) // the answer is held back by the added latency
	})
}

func TestRateLimit(t *testing.T) {
	t.Run("per minute", func(t *testing.T) {
		is := is.New(t)
		clock := newClock()
		sim, base := serve(t, primesim.Options{Now: clock.Now, RateLimit: primesim.RateLimit{PerMinute: 3, PerDay: 100}})
		tok := getToken(t, base) // 1 of 3
		get := call{method: http.MethodGet, path: "/jobs/" + fixtureJob, token: tok}
		clock.Advance(15 * time.Second)
		res := do(t, base, get)                                       // 2 of 3
		is.Equal(res.status, 200)                                     // within the budget
		is.Equal(res.header.Get("X-Ratelimit-Minute-Remaining"), "1") // remaining counts down
		is.Equal(res.header.Get("X-Ratelimit-Minute-Reset"), "45")    // seconds to the window's end
		is.Equal(res.header.Get("X-Ratelimit-Day-Remaining"), "98")   // the day budget too
		res = do(t, base, get)
		is.Equal(res.header.Get("X-Ratelimit-Minute-Remaining"), "0") // the last one
		res = do(t, base, get)
		is.Equal(res.status, http.StatusTooManyRequests) // refused
		is.Equal(res.header.Get("Retry-After"), "45")    // until the window ends
		clock.Advance(45 * time.Second)
		is.Equal(do(t, base, get).status, 200)      // a new window
		is.Equal(sim.Stats().RateLimited, int64(1)) // one refusal counted

		sim.SetRateLimit(primesim.RateLimit{})
		res = do(t, base, get)
		is.Equal(res.header.Get("X-Ratelimit-Minute-Remaining"), "") // switched off: no headers
	})

	t.Run("concurrent", func(t *testing.T) {
		is := is.New(t)
		sim, base := serve(t, primesim.Options{RateLimit: primesim.RateLimit{MaxConcurrent: 1}})
		tok := getToken(t, base)
		sim.SetFaults(primesim.Faults{Path: "/jobs", Latency: 5 * time.Second})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/jobs/"+fixtureJob, nil)
			req.Header.Set("Accept", prime.MediaType)
			req.Header.Set("Authorization", "Bearer "+tok)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		deadline := time.Now().Add(10 * time.Second)
		for sim.Stats().InFlight < 1 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		is.Equal(sim.Stats().InFlight, int64(1)) // one call is being served
		res := do(t, base, call{method: http.MethodGet, path: "/appointments/" + fixtureAppt, token: tok})
		is.Equal(res.status, http.StatusTooManyRequests) // a second at once is refused
		cancel()
		<-done
		is.Equal(sim.Stats().MaxInFlight, int64(2)) // the gauge saw both
	})
}

func TestStats(t *testing.T) {
	is := is.New(t)
	sim, base := serve(t, primesim.Options{})
	tok := getToken(t, base)
	do(t, base, call{method: http.MethodGet, path: "/jobs/" + fixtureJob, token: tok})
	do(t, base, call{method: http.MethodGet, path: "/jobs/2402073", token: tok})
	do(t, base, call{method: http.MethodGet, path: "/allocations?q=" + url.QueryEscape("'jobId'.eq('x')"), token: tok})
	do(t, base, call{method: http.MethodGet, path: "/_sim/stats"})

	st := sim.Stats()
	is.Equal(st.Calls, int64(4))                           // control calls are not counted
	is.Equal(st.ByEndpoint["POST /oauth/token"], int64(1)) // by endpoint
	is.Equal(st.ByEndpoint["GET /jobs/{id}"], int64(2))    // GUID and reference alike
	is.Equal(st.ByEndpoint["GET /allocations"], int64(1))  // lists
	is.Equal(st.ByStatus[200], int64(4))                   // by status
	is.Equal(st.TokensIssued, int64(1))                    // tokens
	is.Equal(st.InFlight, int64(0))                        // nothing left in flight

	res := do(t, base, call{method: http.MethodGet, path: "/_sim/stats"})
	var viaHTTP primesim.Stats
	is.NoErr(json.Unmarshal(res.body, &viaHTTP))
	is.Equal(viaHTTP.Calls, int64(4)) // the same over the control API

	do(t, base, call{method: http.MethodDelete, path: "/_sim/stats"})
	is.Equal(sim.Stats().Calls, int64(0)) // reset
}
