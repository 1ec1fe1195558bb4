// Package primesim simulates Prime's API for tests, benchmarks and the
// all-in-one process: the OAuth2 token endpoint, the JSON:API endpoints that
// pkg/prime calls, Prime's rate limits, injectable faults, call counting,
// and Prime's webhooks. Records live in memory, loaded from a fixture and
// changed through the Go API or the HTTP control API under /_sim/; with
// Options.StateFile they are kept in a file across restarts too.
//
// A Sim is an http.Handler; mount it under a prefix with http.StripPrefix.
//
// Prime's API (what pkg/prime calls; every request needs
// Accept: application/vnd.api.v2+json and, but for the token, a bearer token):
//
//	POST /oauth/token                      password grant, expires_in = TokenTTL
//	GET  /jobs/{guid or numeric reference}
//	GET  /{collection}/{id}                appointments, allocations, site-forms, estimates,
//	                                       contacts, contact-relationships, status-histories
//	GET  /{collection}?q='jobId'.eq('…'),'objectType'.eq('Job')&page=1&per_page=100
//	GET  /appointments?q='startDate'.gte('2025-02-10 00:00:00'),'startDate'.lt('…')
//	GET  /jobs?q='updatedAt'.gte('2025-02-10 00:00:00')&order=updatedAt|DESC
//	                                       q terms: eq, gt, gte, lt, lte (text order,
//	                                       which is time order for Prime's timestamps);
//	                                       order: field|ASC or field|DESC, by the same text
//
// The control API (JSON only, with the control token as "Authorization:
// Bearer <token>", pkg/simcontrol; still, never expose a simulator
// publicly):
//
//	GET    /_sim/stats                 calls by endpoint and status, tokens, max in flight
//	DELETE /_sim/stats                 zero the counts
//	POST   /_sim/reset                 back to the fixture, no faults, no tokens
//	POST   /_sim/fixture               replace every record with a fixture
//	GET    /_sim/faults                the faults still to come
//	POST   /_sim/faults                {"failNext":2,"failStatus":503,"errorRate":0.25,"latency":"50ms",
//	                                    "rateLimitNext":1,"rateLimitFor":"30s","retryAfter":"30s","path":"/jobs"}
//	DELETE /_sim/faults                no faults
//	GET    /_sim/ratelimit             the simulated budget
//	PUT    /_sim/ratelimit             {"perMinute":60,"perDay":5000,"maxConcurrent":5}; {} is off
//	POST   /_sim/tokens/revoke         every issued token becomes unknown
//	POST   /_sim/webhooks              {"url","apiKey","action","id"[,"jobId","property"]}: fire one;
//	                                   jobId the job's GUID or numeric reference (unset: the
//	                                   record's job's), and a change-job-status's id either too
//	POST   /_sim/jobs/{id}/status      {"statusId"}: move a job to a status as Prime does (version + 1,
//	                                   updatedAt now, a status history); StatusInitialContactMade is
//	                                   the one a triage invite answers
//	POST   /_sim/{collection}          {"jobId","attributes"}: generate a realistic record
//	GET    /_sim/{collection}/{id}     a record as stored
//	PUT    /_sim/{collection}/{id}     {"numericReference","attributes"}: store a record
//	DELETE /_sim/{collection}/{id}     remove a record
package primesim

import (
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/simcontrol"
)

// Options configure a Sim. Zero fields take the defaults given.
type Options struct {
	// The credentials the token endpoint accepts (defaults
	// "primesim-client", "primesim-secret", "primesim", "primesim-password").
	ClientID, ClientSecret, Username, Password string
	// TokenTTL is the lifetime of issued tokens, sent as expires_in
	// (default 6h, as Prime).
	TokenTTL time.Duration
	// Fixture is loaded at start and again on Reset (default: no records;
	// DefaultFixture is a realistic one).
	Fixture Fixture
	// RateLimit is the simulated budget (default: none; PrimeRateLimit is
	// Prime's). Reset restores it.
	RateLimit RateLimit
	// Now is the simulator's clock: token expiry, rate-limit windows and the
	// timestamps of generated records (default time.Now).
	Now func() time.Time
	// Seed seeds the generators, so that a scenario is the same every run
	// (default 1).
	Seed uint64
	// HTTPClient sends webhooks (default: a client with a 10s timeout).
	HTTPClient *http.Client
	// Logger logs control actions (default: discard).
	Logger *slog.Logger
	// StateFile, when set, keeps the records in this file (datadir.WriteFile)
	// across restarts: New loads it, when it exists, instead of Fixture,
	// and every change rewrites it. The generators' random source and the
	// counters of numeric references and job numbers are kept with the
	// records and go on through Reset, so a Sim with a state file never
	// makes an id, a reference or a job number twice. Faults, rate limits,
	// tokens and stats are not kept.
	StateFile string
	// ControlToken is what the control API takes, as "Authorization:
	// Bearer <token>", with JSON bodies only (pkg/simcontrol); default a
	// random token, which ControlToken returns.
	ControlToken string
}

// Sim is a simulated Prime. It is safe for concurrent use.
type Sim struct {
	opts Options
	now  func() time.Time
	log  *slog.Logger
	hc   *http.Client
	mux  *http.ServeMux
	// handler is mux behind the control API's guard.
	handler http.Handler

	mu       sync.RWMutex // guards the records
	store    *store
	nextRef  int64
	nextJob  int64
	src      *rand.PCG // rng's source, kept in the state file
	rng      *rand.Rand
	rngMu    sync.Mutex
	tokensMu sync.Mutex
	tokens   map[string]time.Time // access token → expiry

	limitMu sync.Mutex // guards faults and rate
	faults  faultState
	rate    rateState

	stats *stats
}

// New returns a simulator loaded with opts.Fixture. It fails only if the
// fixture is invalid.
func New(opts Options) (*Sim, error) {
	if opts.ClientID == "" {
		opts.ClientID = "primesim-client"
	}
	if opts.ClientSecret == "" {
		opts.ClientSecret = "primesim-secret"
	}
	if opts.Username == "" {
		opts.Username = "primesim"
	}
	if opts.Password == "" {
		opts.Password = "primesim-password"
	}
	if opts.TokenTTL <= 0 {
		opts.TokenTTL = 6 * time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ControlToken == "" {
		opts.ControlToken = simcontrol.NewToken()
	}
	s := &Sim{opts: opts, now: opts.Now, log: opts.Logger, hc: opts.HTTPClient, stats: newStats()}
	if err := s.Reset(); err != nil {
		return nil, err
	}
	if opts.StateFile != "" {
		restored, err := s.restore()
		if err != nil {
			return nil, err
		}
		if !restored {
			s.mu.Lock()
			s.saveLocked()
			s.mu.Unlock()
		}
	}
	s.mux = s.routes()
	s.handler = simcontrol.Guard(opts.ControlToken, s.mux)
	return s, nil
}

// ServeHTTP serves Prime's API and the control API, the latter only to a
// request with the control token (pkg/simcontrol).
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// ControlToken is the token the control API takes (Options.ControlToken).
func (s *Sim) ControlToken() string { return s.opts.ControlToken }

// Reset puts the simulator back as New left it: the fixture's records only,
// no faults, the configured rate limit, no tokens, zero stats. With a state
// file the generators and counters go on where they were (Options.StateFile).
func (s *Sim) Reset() error {
	st := newStore()
	if err := st.load(s.opts.Fixture); err != nil {
		return err
	}
	s.mu.Lock()
	// New's own Reset (no store yet) neither keeps nor saves: New restores
	// the state file, or saves the fixture's state when there is none.
	started := s.store != nil
	keep := s.opts.StateFile != "" && started
	if !keep {
		s.nextRef, s.nextJob = 2400000, 12000
	}
	s.useLocked(st)
	s.rngMu.Lock()
	if !keep {
		s.src = rand.NewPCG(s.opts.Seed, s.opts.Seed^0x9e3779b97f4a7c15)
		s.rng = rand.New(s.src)
	}
	s.rngMu.Unlock()
	if started {
		s.saveLocked()
	}
	s.mu.Unlock()
	s.tokensMu.Lock()
	s.tokens = make(map[string]time.Time)
	s.tokensMu.Unlock()
	s.limitMu.Lock()
	s.faults = newFaultState(Faults{}, s.now())
	s.rate = rateState{RateLimit: s.opts.RateLimit}
	s.limitMu.Unlock()
	s.stats.reset()
	return nil
}

// Load replaces every record with the fixture's (faults, limits, tokens and
// stats stay).
func (s *Sim) Load(f Fixture) error {
	st := newStore()
	if err := st.load(f); err != nil {
		return err
	}
	s.mu.Lock()
	s.useLocked(st)
	s.saveLocked()
	s.mu.Unlock()
	return nil
}

// useLocked makes st's the records, the numeric references going on from
// the highest of them. s.mu is held.
func (s *Sim) useLocked(st *store) {
	s.store = st
	for ref := range st.refs {
		s.nextRef = max(s.nextRef, ref)
	}
}

// ClientConfig is a pkg/prime configuration that talks to this simulator at
// baseURL (where it is mounted), with Prime's default budget.
func (s *Sim) ClientConfig(baseURL string) prime.Config {
	return prime.Config{
		URL:           baseURL,
		ClientID:      s.opts.ClientID,
		ClientSecret:  s.opts.ClientSecret,
		Username:      s.opts.Username,
		Password:      s.opts.Password,
		RatePerMinute: 60,
		RateBurst:     1,
		MaxConcurrent: 5,
		Timeout:       30 * time.Second,
		PageSize:      100,
	}
}

// SetFaults replaces the injected faults; Faults{} clears them.
func (s *Sim) SetFaults(f Faults) {
	s.limitMu.Lock()
	s.faults = newFaultState(f, s.now())
	s.limitMu.Unlock()
}

// Faults returns the faults still to come (counters consumed so far taken
// off).
func (s *Sim) Faults() Faults {
	s.limitMu.Lock()
	defer s.limitMu.Unlock()
	return s.faults.current(s.now())
}

// SetRateLimit switches the simulated budget; RateLimit{} turns it off.
// Counting starts afresh.
func (s *Sim) SetRateLimit(r RateLimit) {
	s.limitMu.Lock()
	s.rate = rateState{RateLimit: r}
	s.limitMu.Unlock()
}

// RateLimit returns the simulated budget in force.
func (s *Sim) RateLimit() RateLimit {
	s.limitMu.Lock()
	defer s.limitMu.Unlock()
	return s.rate.RateLimit
}

// RevokeTokens makes every issued token unknown, so the next API call with
// one gets 401.
func (s *Sim) RevokeTokens() {
	s.tokensMu.Lock()
	clear(s.tokens)
	s.tokensMu.Unlock()
}
