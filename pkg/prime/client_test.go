package prime_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/matryer/is"
	"github.com/prometheus/client_golang/prometheus"
)

// Records of primesim's default fixture.
const (
	fixtureJob         = "0f8e3c1a-5b7d-4e2f-9a6c-1d3e5f7a9b01"
	fixtureJobRef      = "2402073"
	fixtureJob2        = "1a2b3c4d-6e7f-4a8b-9c0d-2e3f4a5b6c02"
	fixtureJob3        = "2b3c4d5e-7f8a-4b9c-8d1e-3f4a5b6c7d03"
	fixtureAppointment = "3c4d5e6f-8a9b-4c0d-9e1f-4a5b6c7d8e04"
	fixtureMakeSafe    = "5e6f7a8b-0c1d-4e2f-9a3b-6c7d8e9f0a06"
	fixtureContact     = "6a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c41"
	fixtureSiteForm    = "7a8b9c0d-2e3f-4a4b-9c5d-8e9f0a1b2c08"
	fixtureEstimate    = "8b9c0d1e-3f4a-4b5c-8d6e-9f0a1b2c3d09"
)

// simPrefix is where the tests mount the simulator, as Prime's own base path.
const simPrefix = "/api.prime/v2"

type env struct {
	sim *primesim.Sim
	url string
}

// newEnv serves a simulator (with the default fixture unless opts has one)
// over real HTTP.
func newEnv(t *testing.T, opts primesim.Options) env {
	t.Helper()
	return newWrappedEnv(t, opts, func(h http.Handler) http.Handler { return h })
}

// newWrappedEnv is newEnv with the simulator's handler wrapped, for a test
// that watches the requests as they arrive.
func newWrappedEnv(t *testing.T, opts primesim.Options, wrap func(http.Handler) http.Handler) env {
	t.Helper()
	if opts.Fixture == nil {
		f, err := primesim.DefaultFixture()
		if err != nil {
			t.Fatalf("default fixture: %v", err)
		}
		opts.Fixture = f
	}
	sim, err := primesim.New(opts)
	if err != nil {
		t.Fatalf("primesim: %v", err)
	}
	srv := httptest.NewServer(wrap(http.StripPrefix(simPrefix, sim)))
	t.Cleanup(srv.Close)
	return env{sim: sim, url: srv.URL + simPrefix}
}

// client makes a client of the simulator. Unless edit says otherwise its
// budget is far above anything a test does, so only the tests about the
// budget see it.
func (e env) client(t *testing.T, edit func(*prime.Config), opts ...prime.Option) *prime.Client {
	t.Helper()
	cfg := e.sim.ClientConfig(e.url)
	cfg.RatePerMinute, cfg.RateBurst = 600000, 1000
	if edit != nil {
		edit(&cfg)
	}
	c, err := prime.New(cfg, opts...)
	if err != nil {
		t.Fatalf("prime.New: %v", err)
	}
	return c
}

func TestTokenCachedAndRefreshedEarly(t *testing.T) {
	is := is.New(t)
	clock := newFakeClock(false)
	e := newEnv(t, primesim.Options{Now: clock.Now, TokenTTL: 600 * time.Second})
	c := e.client(t, nil, prime.WithClock(clock))
	ctx := context.Background()

	_, err := c.GetJob(ctx, fixtureJob)
	is.NoErr(err)                                  // first call
	is.Equal(e.sim.Stats().TokensIssued, int64(1)) // the first call fetched a token

	clock.Advance(500 * time.Second)
	_, err = c.GetJob(ctx, fixtureJob)
	is.NoErr(err)                                  // call within the token's life
	is.Equal(e.sim.Stats().TokensIssued, int64(1)) // the token was reused

	// 550s into a 600s token: still valid at Prime, but inside the refresh margin.
	clock.Advance(50 * time.Second)
	_, err = c.GetJob(ctx, fixtureJob)
	is.NoErr(err)                                                       // call near the token's end
	is.Equal(e.sim.Stats().TokensIssued, int64(2))                      // a new token was fetched early
	is.Equal(e.sim.Stats().ByStatus[http.StatusUnauthorized], int64(0)) // no call was ever refused
	is.Equal(c.Stats().TokenFetches, int64(2))                          // the client counts its token fetches
}

func TestConcurrentFirstCallsShareOneTokenFetch(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, primesim.Options{})
	// A slow token endpoint, so that every caller arrives while the fetch runs.
	e.sim.SetFaults(primesim.Faults{Path: "/oauth/token", Latency: 300 * time.Millisecond})
	c := e.client(t, nil)

	const callers = 10
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	start := make(chan struct{})
	for range callers {
		wg.Go(func() {
			<-start
			_, err := c.GetJob(context.Background(), fixtureJob)
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		is.NoErr(err) // every concurrent first call succeeds
	}
	is.Equal(e.sim.Stats().TokensIssued, int64(1))                       // one token fetch was shared
	is.Equal(e.sim.Stats().ByEndpoint["GET /jobs/{id}"], int64(callers)) // every call went out once
}

func TestUnauthorizedRefetchesTokenOnceAndRetriesOnce(t *testing.T) {
	tests := []struct {
		name       string
		refuse     func(*primesim.Sim)
		wantErr    error
		wantTokens int64
		wantCalls  int64
	}{
		{
			name:       "revoked token: new token, call retried and succeeds",
			refuse:     func(s *primesim.Sim) { s.RevokeTokens() },
			wantTokens: 2,
			wantCalls:  3, // the warm-up call, the refused call, its retry
		},
		{
			name: "refused again after the new token: error, no further retry",
			refuse: func(s *primesim.Sim) {
				s.SetFaults(primesim.Faults{Path: "/jobs", FailNext: 2, FailStatus: http.StatusUnauthorized})
			},
			wantErr:    prime.ErrUnauthorized,
			wantTokens: 2,
			wantCalls:  3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, primesim.Options{})
			c := e.client(t, nil)
			ctx := context.Background()
			_, err := c.GetJob(ctx, fixtureJob)
			is.NoErr(err) // warm-up call fetches the first token

			tt.refuse(e.sim)
			job, err := c.GetJob(ctx, fixtureJob)
			if tt.wantErr != nil {
				is.True(errors.Is(err, tt.wantErr)) // the second 401 is returned
				var apiErr *prime.APIError
				is.True(errors.As(err, &apiErr))                     // as an APIError
				is.Equal(apiErr.StatusCode, http.StatusUnauthorized) // carrying the status
			} else {
				is.NoErr(err)                // the retried call succeeds
				is.Equal(job.ID, fixtureJob) // and returns the job
			}
			st := e.sim.Stats()
			is.Equal(st.TokensIssued, tt.wantTokens)                // exactly one new token
			is.Equal(st.ByEndpoint["GET /jobs/{id}"], tt.wantCalls) // exactly one retry
		})
	}
}

func TestSimulatorRejectsRequestsWithoutAcceptHeader(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, primesim.Options{})
	c := e.client(t, nil)
	_, err := c.GetJob(context.Background(), fixtureJob)
	is.NoErr(err) // the client's token and API requests carry the Accept header

	for _, req := range []*http.Request{
		httptest.NewRequest(http.MethodPost, e.url+"/oauth/token", strings.NewReader("grant_type=password")),
		httptest.NewRequest(http.MethodGet, e.url+"/jobs/"+fixtureJob, nil),
	} {
		req.RequestURI = ""
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		is.NoErr(err)
		resp.Body.Close()
		is.Equal(resp.StatusCode, http.StatusNotAcceptable) // the guard rejects a request without Prime's media type
	}
	is.Equal(e.sim.Stats().ByStatus[http.StatusNotAcceptable], int64(2)) // only the bare requests were rejected
}

func TestGetJobByGUIDOrNumericReference(t *testing.T) {
	e := newEnv(t, primesim.Options{})
	c := e.client(t, nil)
	for _, identifier := range []string{fixtureJob, fixtureJobRef} {
		t.Run(identifier, func(t *testing.T) {
			is := is.New(t)
			job, err := c.GetJob(context.Background(), identifier)
			is.NoErr(err)                      // the job is found
			is.Equal(job.ID, fixtureJob)       // by GUID and by numeric reference alike
			is.Equal(job.JobNumber, "J012345") // the same job
		})
	}
}

func TestEveryCallDecodes(t *testing.T) {
	e := newEnv(t, primesim.Options{})
	c := e.client(t, nil)
	ctx := context.Background()
	// A site form that hangs off something other than the job must not be listed.
	e.sim.NewSiteForm(fixtureJob2, func(f *prime.SiteForm) { f.ObjectType, f.ObjectID = "Allocation", "x" })

	t.Run("job", func(t *testing.T) {
		is := is.New(t)
		j, err := c.GetJob(ctx, fixtureJob)
		is.NoErr(err)
		is.Equal(j.StatusID, "3f1c2a8e-6b1d-4c55-9a0e-1d2b7c9e4a01")              // statusId
		is.Equal(j.CreatedAt.Time, time.Date(2025, 2, 7, 4, 14, 33, 0, time.UTC)) // Prime time read as UTC
		is.Equal(j.Address.Suburb, "Brunswick")                                   // nested address
		is.Equal(j.AuthorisedTotalIncludingTax, prime.Amount("700.80"))           // money as text
		is.Equal(j.PrimaryContactID, fixtureContact)                              // assumed primaryContactId
		is.Equal(j.Version, int64(3))                                             // version
		is.True(bytes.Contains(j.Raw, []byte(`"claimNumber":"CLM-2402073"`)))     // raw attributes keep what the type does not know
	})
	t.Run("appointment", func(t *testing.T) {
		is := is.New(t)
		a, err := c.GetAppointment(ctx, fixtureAppointment)
		is.NoErr(err)
		is.Equal(a.JobID, fixtureJob)                                             // jobId
		is.Equal(a.StartDate.Time, time.Date(2025, 2, 10, 23, 0, 0, 0, time.UTC)) // startDate
		is.Equal(a.Status, "Scheduled")                                           // status
		is.Equal(a.Notes, "Dog on premises, call on arrival")                     // notes for the driver
		is.True(len(a.Raw) > 0)                                                   // raw attributes
	})
	t.Run("allocation", func(t *testing.T) {
		is := is.New(t)
		a, err := c.GetAllocation(ctx, fixtureMakeSafe)
		is.NoErr(err)
		is.Equal(a.JobID, fixtureJob3) // jobId
		is.True(a.IsMakeSafe())        // allocationType "Make Safe"
	})
	t.Run("job allocations", func(t *testing.T) {
		is := is.New(t)
		as, err := c.ListJobAllocations(ctx, fixtureJob)
		is.NoErr(err)
		is.Equal(len(as), 1)         // only the job's own
		is.True(!as[0].IsMakeSafe()) // an Assessment Report
	})
	t.Run("site forms", func(t *testing.T) {
		is := is.New(t)
		fs, err := c.GetSiteFormsByJob(ctx, fixtureJob2)
		is.NoErr(err)
		is.Equal(len(fs), 1)                                // objectType Job only
		is.Equal(fs[0].ID, fixtureSiteForm)                 // the triage form
		is.Equal(fs[0].ObjectType, prime.SiteFormObjectJob) // objectType
		is.Equal(fs[0].Status, "Completed")                 // status
	})
	t.Run("estimates", func(t *testing.T) {
		is := is.New(t)
		es, err := c.GetEstimatesByJob(ctx, fixtureJob2)
		is.NoErr(err)
		is.Equal(len(es), 1)                                                     // one estimate
		is.Equal(es[0].ID, fixtureEstimate)                                      // id
		is.Equal(es[0].Total, prime.Amount("2068.00"))                           // total
		is.Equal(len(es[0].Categories), 2)                                       // categories
		is.Equal(len(es[0].Categories[1].Items), 2)                              // line items
		is.Equal(es[0].Categories[1].Items[1].UnitPrice, prime.Amount("284.00")) // item amounts
	})
	t.Run("contact", func(t *testing.T) {
		is := is.New(t)
		ct, err := c.GetContact(ctx, fixtureContact)
		is.NoErr(err)
		is.Equal(ct.DisplayName(), "Olivia Nguyen") // name
		is.Equal(ct.Mobile, "0412 345 678")         // mobile
	})
	t.Run("contact relationships", func(t *testing.T) {
		is := is.New(t)
		rs, err := c.GetJobContactRelationships(ctx, fixtureJob)
		is.NoErr(err)
		is.Equal(len(rs), 1)                      // one link
		is.Equal(rs[0].ContactID, fixtureContact) // to the primary contact
		is.Equal(rs[0].Type, "Insured")           // relationship type
	})
	t.Run("status histories", func(t *testing.T) {
		is := is.New(t)
		hs, err := c.GetJobStatusHistories(ctx, fixtureJob2)
		is.NoErr(err)
		is.Equal(len(hs), 2)                                                         // both changes
		is.Equal(hs[1].StatusID, "7a9e0c3b-2f4d-4e8a-b1c6-5d3e9f2a7b02")             // in order
		is.Equal(hs[1].CreatedAt.Time, time.Date(2025, 2, 9, 0, 5, 12, 0, time.UTC)) // createdAt
	})
}

func TestListsFollowEveryPage(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, primesim.Options{})
	job := e.sim.NewJob()
	for range 5 {
		e.sim.NewAllocation(job.ID, "Plumbing Report")
	}
	c := e.client(t, func(cfg *prime.Config) { cfg.PageSize = 2 })

	as, err := c.ListJobAllocations(context.Background(), job.ID)
	is.NoErr(err)
	is.Equal(len(as), 5)                                             // every record, across pages
	is.Equal(e.sim.Stats().ByEndpoint["GET /allocations"], int64(3)) // three pages of two
	seen := map[string]bool{}
	for _, a := range as {
		seen[a.ID] = true
	}
	is.Equal(len(seen), 5) // no record twice
}

// §8.1 "Prime Sync Appointments by Date": the appointments starting in
// [from, to), every page, with Prime's UTC timestamps in the filter.
func TestListAppointmentsByStartDate(t *testing.T) {
	is := is.New(t)
	var queries []string
	var mu sync.Mutex
	e := newWrappedEnv(t, primesim.Options{Fixture: primesim.Fixture{}}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if q := r.URL.Query().Get("q"); q != "" {
				mu.Lock()
				queries = append(queries, q)
				mu.Unlock()
			}
			h.ServeHTTP(w, r)
		})
	})
	job := e.sim.NewJob()
	day := time.Date(2026, 3, 2, 13, 0, 0, 0, time.UTC) // midnight in Melbourne (AEDT)
	var inRange []string
	at := func(start time.Time) string {
		return e.sim.NewAppointment(job.ID, func(a *prime.Appointment) { a.StartDate = prime.Time{Time: start} }).ID
	}
	at(day.Add(-time.Second)) // just before
	for i := range 5 {
		inRange = append(inRange, at(day.Add(time.Duration(i)*5*time.Hour)))
	}
	at(day.Add(24 * time.Hour)) // the end is left out
	c := e.client(t, func(cfg *prime.Config) { cfg.PageSize = 2 })
	melbourne, err := time.LoadLocation("Australia/Melbourne")
	is.NoErr(err)

	got, err := c.ListAppointmentsByStartDate(context.Background(), day.In(melbourne), day.Add(24*time.Hour))
	is.NoErr(err)
	ids := make([]string, len(got))
	for i, a := range got {
		ids[i] = a.ID
	}
	is.Equal(ids, inRange)                                                                               // the appointments in range, across pages
	is.Equal(got[1].StartDate.Time, day.Add(5*time.Hour))                                                // decoded
	is.Equal(got[1].JobID, job.ID)                                                                       // with their job
	is.Equal(e.sim.Stats().ByEndpoint["GET /appointments"], int64(3))                                    // three pages of two
	is.Equal(queries[0], "'startDate'.gte('2026-03-02 13:00:00'),'startDate'.lt('2026-03-03 13:00:00')") // in UTC, as Prime writes times

	_, err = c.ListAppointmentsByStartDate(context.Background(), day, day)
	is.True(err != nil)                                               // an empty range is refused
	is.Equal(e.sim.Stats().ByEndpoint["GET /appointments"], int64(3)) // without a call
}

// "Prime Sync Jobs by Date": the jobs updated since a time, newest first,
// one call a page.
func TestListJobsUpdatedSince(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, primesim.Options{Fixture: primesim.Fixture{}})
	since := time.Date(2026, 3, 2, 13, 0, 0, 0, time.UTC)
	updated := func(at time.Time) string {
		return e.sim.NewJob(func(j *prime.Job) { j.UpdatedAt = prime.Time{Time: at} }).ID
	}
	updated(since.Add(-time.Second)) // before: left out
	var want []string
	for i := range 5 {
		want = append([]string{updated(since.Add(time.Duration(i) * time.Minute))}, want...)
	}
	c := e.client(t, func(cfg *prime.Config) { cfg.PageSize = 2 })
	melbourne, err := time.LoadLocation("Australia/Melbourne")
	is.NoErr(err)

	var got []string
	for n := 1; ; n++ {
		page, err := c.ListJobsUpdatedSince(context.Background(), since.In(melbourne), n)
		is.NoErr(err)
		is.Equal(page.Number, n)
		is.Equal(page.TotalPages, 3) // five jobs, two a page
		is.Equal(page.PerPage, 2)    // as Prime cut them
		for _, j := range page.Records {
			got = append(got, j.ID)
		}
		is.Equal(e.sim.Stats().ByEndpoint["GET /jobs"], int64(n)) // one call a page
		if page.Last() {
			break
		}
	}
	is.Equal(got, want) // the jobs updated since, newest first
}

func TestNotFound(t *testing.T) {
	e := newEnv(t, primesim.Options{})
	c := e.client(t, nil)
	ctx := context.Background()
	tests := []struct {
		name string
		call func() error
	}{
		{"unknown job", func() error { _, err := c.GetJob(ctx, "00000000-0000-4000-8000-000000000000"); return err }},
		{"unknown numeric reference", func() error { _, err := c.GetJob(ctx, "1"); return err }},
		// §4.2 step 3: a GUID of another type is a 404, which proves what it is not.
		{"job GUID asked for as an appointment", func() error { _, err := c.GetAppointment(ctx, fixtureJob); return err }},
		{"job GUID asked for as an allocation", func() error { _, err := c.GetAllocation(ctx, fixtureJob); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			err := tt.call()
			is.True(errors.Is(err, prime.ErrNotFound))     // a distinct not-found error
			is.True(!errors.Is(err, prime.ErrRateLimited)) // and nothing else
		})
	}
}

func TestServerErrorCarriesStatusAndDetail(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, primesim.Options{})
	c := e.client(t, nil)
	e.sim.SetFaults(primesim.Faults{FailNext: 1, FailStatus: http.StatusServiceUnavailable})

	_, err := c.GetJob(context.Background(), fixtureJob)
	var apiErr *prime.APIError
	is.True(errors.As(err, &apiErr))                               // an APIError
	is.Equal(apiErr.StatusCode, http.StatusServiceUnavailable)     // with the status
	is.Equal(apiErr.Errors[0].Detail, "injected fault")            // and the JSON:API error detail
	is.True(strings.Contains(err.Error(), "jobs.get: 503"))        // named in the message
	is.True(!errors.Is(err, prime.ErrNotFound))                    // not a not-found
	is.Equal(e.sim.Stats().ByEndpoint["GET /jobs/{id}"], int64(1)) // not retried
}

// A redirect is never followed: a 307 from the token endpoint would post
// the client secret and the password to wherever it points. The 3xx is the
// answer, a refusal, whatever client the caller gives.
func TestFollowsNoRedirect(t *testing.T) {
	var reached atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		fmt.Fprint(w, `{"access_token":"t","expires_in":3600}`)
	}))
	defer elsewhere.Close()
	e := newWrappedEnv(t, primesim.Options{}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/oauth/token") {
				http.Redirect(w, r, elsewhere.URL+"/oauth/token", http.StatusTemporaryRedirect)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	for name, opts := range map[string][]prime.Option{"own client": nil, "client given": {prime.WithHTTPClient(&http.Client{})}} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			_, err := e.client(t, nil, opts...).GetJob(context.Background(), fixtureJob)
			var apiErr *prime.APIError
			is.True(errors.As(err, &apiErr))                          // refused
			is.Equal(apiErr.StatusCode, http.StatusTemporaryRedirect) // by the redirect itself
			is.Equal(reached.Load(), int32(0))                        // whose target got nothing, the secrets least of all
		})
	}
}

func TestRateLimitedCallHoldsFurtherCalls(t *testing.T) {
	is := is.New(t)
	clock := newFakeClock(false)
	e := newEnv(t, primesim.Options{Now: clock.Now})
	c := e.client(t, nil, prime.WithClock(clock))
	ctx := context.Background()
	_, err := c.GetJob(ctx, fixtureJob)
	is.NoErr(err) // warm-up: token fetched
	e.sim.SetFaults(primesim.Faults{RateLimitNext: 1, RetryAfter: 30 * time.Second})

	_, err = c.GetJob(ctx, fixtureJob)
	is.True(errors.Is(err, prime.ErrRateLimited)) // a 429 is a distinct error
	var rl *prime.RateLimitedError
	is.True(errors.As(err, &rl))              // that carries the wait
	is.Equal(rl.RetryAfter(), 30*time.Second) // Retry-After as sent
	calls := func() int64 { return e.sim.Stats().ByEndpoint["GET /jobs/{id}"] }
	is.Equal(calls(), int64(2)) // the limited call was not retried by the client

	// A call whose deadline ends before the hold fails fast, without a request.
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = c.GetJob(short, fixtureJob)
	is.True(errors.Is(err, prime.ErrRateLimited)) // fails fast with the same error
	is.Equal(calls(), int64(2))                   // and sent nothing

	// A call marked FailOnHold does not wait, whatever its deadline.
	_, err = c.GetJob(prime.FailOnHold(ctx), fixtureJob)
	is.True(errors.Is(err, prime.ErrRateLimited)) // fails at once
	is.Equal(calls(), int64(2))                   // and sent nothing

	// A call that can wait waits for the hold, then goes out.
	done := make(chan error, 1)
	go func() {
		_, err := c.GetJob(ctx, fixtureJob)
		done <- err
	}()
	clock.waitForWaiters(t, 1)
	is.Equal(calls(), int64(2)) // nothing goes out while the hold runs
	clock.Advance(30 * time.Second)
	is.NoErr(<-done)            // the held call succeeds after Retry-After
	is.Equal(calls(), int64(3)) // having gone out once
}

func TestMinuteRemainingZeroHoldsCallsUntilReset(t *testing.T) {
	is := is.New(t)
	clock := newFakeClock(false)
	e := newEnv(t, primesim.Options{Now: clock.Now, RateLimit: primesim.RateLimit{PerMinute: 3}})
	c := e.client(t, nil, prime.WithClock(clock))
	ctx := context.Background()

	for range 2 { // with the token request, the minute's 3 requests
		_, err := c.GetJob(ctx, fixtureJob)
		is.NoErr(err) // within the budget
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err := c.GetJob(short, fixtureJob)
	is.True(errors.Is(err, prime.ErrRateLimited)) // remaining 0: the client does not call
	is.Equal(e.sim.Stats().Calls, int64(3))       // nothing was sent

	done := make(chan error, 1)
	go func() {
		_, err := c.GetJob(ctx, fixtureJob)
		done <- err
	}()
	clock.waitForWaiters(t, 1)
	is.Equal(e.sim.Stats().Calls, int64(3)) // held until the reset
	clock.Advance(time.Minute)
	is.NoErr(<-done)                              // then it goes out
	is.Equal(e.sim.Stats().Calls, int64(4))       // once
	is.Equal(e.sim.Stats().RateLimited, int64(0)) // and Prime never had to say 429
}

func TestConcurrencyNeverAboveLimit(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, primesim.Options{})
	e.sim.SetFaults(primesim.Faults{Latency: 40 * time.Millisecond})
	c := e.client(t, func(cfg *prime.Config) { cfg.MaxConcurrent = 3 })

	var wg sync.WaitGroup
	errs := make(chan error, 15)
	for range 15 {
		wg.Go(func() {
			_, err := c.GetJob(context.Background(), fixtureJob)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		is.NoErr(err) // every call succeeds
	}
	st := e.sim.Stats()
	is.True(st.MaxInFlight <= 3) // never more in flight than configured
	is.True(st.MaxInFlight > 1)  // while the calls did overlap
}

func TestRatePerMinuteKept(t *testing.T) {
	tests := []struct {
		name       string
		clientRate int
		wantKept   bool
	}{
		{"60 a minute", 60, true},
		{"240 a minute exceeds 60 (the check can fail)", 240, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			clock := newFakeClock(true) // waiting moves the clock: a minute passes at once
			var mu sync.Mutex
			var arrivals []time.Time
			e := newWrappedEnv(t, primesim.Options{Now: clock.Now}, func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					arrivals = append(arrivals, clock.Now())
					mu.Unlock()
					h.ServeHTTP(w, r)
				})
			})
			c := e.client(t, func(cfg *prime.Config) { cfg.RatePerMinute, cfg.RateBurst = tt.clientRate, 1 }, prime.WithClock(clock))
			for range 150 {
				_, err := c.GetJob(context.Background(), fixtureJob)
				is.NoErr(err) // every call succeeds
			}
			mu.Lock()
			defer mu.Unlock()
			is.Equal(len(arrivals), 151)                                                 // the token request and 150 calls
			is.Equal(flowtest.MostInAnyWindow(arrivals, time.Minute) <= 60, tt.wantKept) // at most 60 requests in any minute
		})
	}

	t.Run("against Prime's limit", func(t *testing.T) {
		is := is.New(t)
		clock := newFakeClock(true)
		e := newEnv(t, primesim.Options{Now: clock.Now, RateLimit: primesim.PrimeRateLimit()})
		c := e.client(t, func(cfg *prime.Config) { cfg.RatePerMinute, cfg.RateBurst = 60, 1 }, prime.WithClock(clock))
		start := clock.Now()
		for range 130 {
			_, err := c.GetJob(context.Background(), fixtureJob)
			is.NoErr(err) // never refused
		}
		is.Equal(e.sim.Stats().RateLimited, int64(0))      // Prime never said 429
		is.True(clock.Now().Sub(start) >= 130*time.Second) // 131 requests at one a second
	})
}

func TestStatsAndMetricsCountCalls(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, primesim.Options{})
	c := e.client(t, nil, prime.WithName("test"))
	ctx := context.Background()
	_, err := c.GetJob(ctx, fixtureJob)
	is.NoErr(err)
	_, err = c.GetAppointment(ctx, fixtureJob) // a 404
	is.True(errors.Is(err, prime.ErrNotFound))

	st := c.Stats()
	is.Equal(st.Requests, e.sim.Stats().Calls)            // the client counts every HTTP call Prime saw
	is.Equal(st.Requests, int64(3))                       // token, job, appointment
	is.Equal(st.ByEndpoint["appointments.get"], int64(1)) // by endpoint
	is.Equal(st.ByOutcome["not_found"], int64(1))         // by outcome

	reg := prometheus.NewRegistry()
	is.NoErr(reg.Register(c)) // the client is a collector
	families, err := reg.Gather()
	is.NoErr(err)
	var total float64
	for _, f := range families {
		if f.GetName() != "prime_client_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			total += m.GetCounter().GetValue()
		}
	}
	is.Equal(total, float64(3)) // prime_client_requests_total matches
}

func TestSecretsStayOutOfErrorsAndLogs(t *testing.T) {
	is := is.New(t)
	clock := newFakeClock(true) // the Retry-After below passes at once
	e := newEnv(t, primesim.Options{ClientSecret: "s3cret-client", Password: "s3cret-password", Now: clock.Now})
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	good := e.client(t, nil, prime.WithLogger(logger), prime.WithClock(clock))
	e.sim.SetFaults(primesim.Faults{RateLimitNext: 1, FailNext: 1})
	var errs []error
	for range 3 {
		_, err := good.GetJob(context.Background(), fixtureJob)
		errs = append(errs, err)
	}
	bad := e.client(t, func(cfg *prime.Config) { cfg.Password = "wrong-s3cret" }, prime.WithLogger(logger))
	_, err := bad.GetJob(context.Background(), fixtureJob)
	is.True(errors.Is(err, prime.ErrUnauthorized)) // refused credentials
	errs = append(errs, err)
	logger.Info("config", "prime", e.sim.ClientConfig(e.url))
	text := logs.String() + fmt.Sprint(errs) + fmt.Sprintf("%v %+v", e.sim.ClientConfig(e.url), e.sim.ClientConfig(e.url))

	for _, secret := range []string{"s3cret-client", "s3cret-password", "wrong-s3cret"} {
		is.True(!strings.Contains(text, secret)) // no secret in errors, logs or printed config
	}
}
