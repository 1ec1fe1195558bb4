package prime_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/matryer/is"
	"github.com/prometheus/client_golang/prometheus"
)

// unavailable is err's *prime.UnavailableError, or nil.
func unavailable(err error) *prime.UnavailableError {
	var u *prime.UnavailableError
	if errors.As(err, &u) {
		return u
	}
	return nil
}

// Prime answering 503 to every call is an outage: every failure is a wait
// (no attempt for the work), the second failure in a row starts the
// outage, and from then on one call at a time goes out, as a probe, after
// a wait that grows with each failed probe; the rest are not sent. The
// first answer ends it.
func TestPrimeDownIsAWaitWithOneProbeAtATime(t *testing.T) {
	is := is.New(t)
	clock := newFakeClock(false)
	e := newEnv(t, primesim.Options{Now: clock.Now})
	c := e.client(t, func(cfg *prime.Config) {
		cfg.OutageBackoff = retry.Backoff{time.Second, 2 * time.Second, 4 * time.Second}
	}, prime.WithClock(clock))
	ctx := context.Background()
	_, err := c.GetJob(ctx, fixtureJob)
	is.NoErr(err) // warm-up: the token
	calls := func() int64 { return e.sim.Stats().ByEndpoint["GET /jobs/{id}"] }
	e.sim.SetFaults(primesim.Faults{FailNext: 1 << 20, FailStatus: http.StatusServiceUnavailable})

	_, err = c.GetJob(ctx, fixtureJob)
	u := unavailable(err)
	is.True(u != nil)                             // a 503 is Prime's until told otherwise
	is.True(errors.Is(err, prime.ErrUnavailable)) // matched by the sentinel
	is.True(retry.Delay(err) > 0)                 // a wait: no attempt for the work
	is.True(u.Since.IsZero())                     // one failure is no outage yet
	is.True(c.Unreachable().IsZero())             // and holds up nothing
	var apiErr *prime.APIError
	is.True(errors.As(err, &apiErr)) // it carries Prime's answer
	is.Equal(apiErr.StatusCode, http.StatusServiceUnavailable)
	first := clock.Now()

	clock.Advance(time.Second)
	_, err = c.GetJob(ctx, fixtureJob2)
	u = unavailable(err)
	is.True(u != nil)                // a second call in a row fails
	is.Equal(u.Since, first)         // Prime unreachable since the first
	is.Equal(c.Unreachable(), first) // which the client says
	is.Equal(u.Wait, time.Second)    // the first step of the ladder
	is.Equal(calls(), int64(3))

	_, err = c.GetJob(ctx, fixtureJob3)
	u = unavailable(err)
	is.True(u != nil && u.Err == nil) // not sent while the wait runs
	is.Equal(u.Wait, time.Second)     // and told when the next probe goes
	is.Equal(calls(), int64(3))       // Prime was not asked
	is.Equal(c.Stats().Unsent, int64(1))

	clock.Advance(time.Second)
	_, err = c.GetJob(ctx, fixtureJob3)
	u = unavailable(err)
	is.True(u != nil && u.Err != nil) // the probe went out and failed
	is.Equal(u.Wait, 2*time.Second)   // the wait grows
	is.Equal(calls(), int64(4))
	clock.Advance(2 * time.Second)
	_, err = c.GetJob(ctx, fixtureJob)
	is.Equal(unavailable(err).Wait, 4*time.Second) // and grows
	clock.Advance(4 * time.Second)
	_, err = c.GetJob(ctx, fixtureJob)
	is.Equal(unavailable(err).Wait, 4*time.Second) // up to the last step, which repeats
	is.Equal(calls(), int64(6))

	e.sim.SetFaults(primesim.Faults{}) // Prime is back
	_, err = c.GetJob(ctx, fixtureJob)
	is.True(unavailable(err) != nil) // nothing goes before the probe is due
	clock.Advance(4 * time.Second)
	_, err = c.GetJob(ctx, fixtureJob)
	is.NoErr(err)                     // the probe is answered
	is.True(c.Unreachable().IsZero()) // the outage is over
	_, err = c.GetJob(ctx, fixtureJob2)
	is.NoErr(err) // and every call goes out again
	st := c.Stats()
	is.Equal(st.Unavailable, int64(5)) // failed calls that made their work wait
	is.Equal(st.Unsent, int64(2))      // calls not sent
}

// A 5xx for one record while Prime answers the others is the record's
// failure from its second in a row: the caller gets Prime's error, and the
// work counts an attempt (§9, §3's cap). Its first failure, and one while
// other calls fail too, is a wait.
func TestARecordsFailureIsTheRecordsWhilePrimeAnswersOthers(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, primesim.Options{})
	c := e.client(t, nil)
	ctx := context.Background()
	_, err := c.GetJob(ctx, fixtureJob2)
	is.NoErr(err) // warm-up: the token
	e.sim.SetFaults(primesim.Faults{Path: "/jobs/" + fixtureJob, FailNext: 1 << 20, FailStatus: http.StatusInternalServerError})

	_, err = c.GetJob(ctx, fixtureJob)
	is.True(unavailable(err) != nil) // the record's first failure waits
	_, err = c.GetJob(ctx, fixtureJob2)
	is.NoErr(err) // Prime answers another call
	_, err = c.GetJob(ctx, fixtureJob)
	var apiErr *prime.APIError
	is.True(errors.As(err, &apiErr))               // the record's failure: Prime's error as it came
	is.Equal(apiErr.StatusCode, 500)               // with its status
	is.True(!errors.Is(err, prime.ErrUnavailable)) // and no wait
	is.Equal(retry.Delay(err), time.Duration(0))   // so the work counts an attempt
	is.True(c.Unreachable().IsZero())              // and Prime is not said to be down

	for range 3 {
		_, err = c.GetAppointment(ctx, fixtureAppointment)
		is.NoErr(err) // Prime answers others
		_, err = c.GetJob(ctx, fixtureJob)
		is.True(unavailable(err) == nil && err != nil) // the record fails each time, each an attempt
	}
	is.True(c.Unreachable().IsZero())
}

// While other calls fail as well, a record's repeated failure is not taken
// for its own: it needs answersPerFailure answers to other calls for each
// other call that failed since.
func TestARecordsFailureNeedsMostOtherCallsAnswered(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, primesim.Options{})
	c := e.client(t, nil)
	ctx := context.Background()
	_, err := c.GetJob(ctx, fixtureJob3)
	is.NoErr(err) // warm-up: the token
	e.sim.SetFaults(primesim.Faults{Path: "/jobs/", FailNext: 1 << 20, FailStatus: http.StatusBadGateway})

	_, err = c.GetJob(ctx, fixtureJob) // the record's first failure
	is.True(unavailable(err) != nil)
	_, err = c.GetAppointment(ctx, fixtureAppointment)
	is.NoErr(err)                       // an answer
	_, err = c.GetJob(ctx, fixtureJob2) // another call fails
	is.True(unavailable(err) != nil)
	_, err = c.GetAppointment(ctx, fixtureAppointment)
	is.NoErr(err)
	_, err = c.GetJob(ctx, fixtureJob)
	is.True(unavailable(err) != nil) // 2 answers for 1 other failure: Prime's, still
	for range 3 {
		_, err = c.GetAppointment(ctx, fixtureAppointment)
		is.NoErr(err)
	}
	_, err = c.GetJob(ctx, fixtureJob)
	is.True(err != nil && unavailable(err) == nil) // 3 answers, no other failure since: the record's
}

// No answer at all — the connection refused — is Prime not answering like
// a 5xx; the caller's own cancellation (a shutdown) is not, and leaves no
// trace.
func TestNoAnswerIsPrimesButACancellationIsNot(t *testing.T) {
	is := is.New(t)
	sim, err := primesim.New(primesim.Options{})
	is.NoErr(err)
	srv := httptest.NewServer(sim)
	cfg := sim.ClientConfig(srv.URL)
	cfg.RatePerMinute, cfg.RateBurst = 600000, 1000
	c, err := prime.New(cfg)
	is.NoErr(err)
	ctx := context.Background()
	job := sim.NewJob()
	_, err = c.GetJob(ctx, job.ID)
	is.NoErr(err) // warm-up: the token

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = c.GetJob(cancelled, job.ID)
	is.True(errors.Is(err, context.Canceled)) // the caller's cancellation, as it was
	is.True(unavailable(err) == nil)          // not Prime's

	srv.Close() // connections refused from now on
	_, err = c.GetJob(ctx, job.ID)
	is.True(unavailable(err) != nil) // no answer: a wait
	_, err = c.GetJob(ctx, job.ID)
	u := unavailable(err)
	is.True(u != nil && !u.Since.IsZero()) // and, again, an outage
	is.True(!c.Unreachable().IsZero())
}

// A 5xx's Retry-After longer than the ladder's step is honoured.
func TestAnOutagesRetryAfterIsHonoured(t *testing.T) {
	is := is.New(t)
	var down atomic.Bool
	e := newWrappedEnv(t, primesim.Options{}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if down.Load() && r.URL.Path != simPrefix+"/oauth/token" {
				w.Header().Set("Retry-After", "90")
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	c := e.client(t, nil)
	ctx := context.Background()
	_, err := c.GetJob(ctx, fixtureJob)
	is.NoErr(err)
	down.Store(true)
	_, err = c.GetJob(ctx, fixtureJob)
	is.Equal(unavailable(err).Wait, 90*time.Second) // the first failure waits as Prime asks
	_, err = c.GetJob(ctx, fixtureJob2)
	u := unavailable(err)
	is.True(!u.Since.IsZero())       // the outage begins
	is.Equal(u.Wait, 90*time.Second) // and its probe waits as Prime asks, not the ladder's 1 s
}

// The gauge says since when Prime has not answered, and 0 once it does.
func TestUnreachableSinceGauge(t *testing.T) {
	is := is.New(t)
	clock := newFakeClock(false)
	e := newEnv(t, primesim.Options{Now: clock.Now})
	c := e.client(t, nil, prime.WithClock(clock))
	reg := prometheus.NewRegistry()
	is.NoErr(reg.Register(c))
	gauge := func() float64 {
		families, err := reg.Gather()
		is.NoErr(err)
		for _, f := range families {
			if f.GetName() == "prime_client_unreachable_since_seconds" {
				return f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no prime_client_unreachable_since_seconds")
		return 0
	}
	ctx := context.Background()
	_, err := c.GetJob(ctx, fixtureJob)
	is.NoErr(err)
	is.Equal(gauge(), 0.0) // Prime answers
	e.sim.SetFaults(primesim.Faults{FailNext: 2})
	start := clock.Now()
	for range 2 {
		_, err = c.GetJob(ctx, fixtureJob)
		is.True(unavailable(err) != nil)
	}
	is.Equal(gauge(), float64(start.Unix())) // unreachable since the first failure
	clock.Advance(time.Minute)
	_, err = c.GetJob(ctx, fixtureJob)
	is.NoErr(err)          // the probe is answered
	is.Equal(gauge(), 0.0) // and the gauge says so
}
