package prime_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/matryer/is"
)

// coalescing turns coalescing on, as the services run it.
func coalescing(cfg *prime.Config) {
	cfg.CoalesceWindow, cfg.CoalesceKeep = 2*time.Second, 5*time.Minute
}

func TestCoalescingNeverCrossesJobsOrRecordTypes(t *testing.T) {
	is := is.New(t)
	g := &gate{}
	e := newWrappedEnv(t, primesim.Options{}, g.wrap)
	c := e.client(t, coalescing)
	ctx := context.Background()
	_, err := c.GetJob(ctx, fixtureJob2)
	is.NoErr(err) // warm-up: the token

	// Calls for two jobs, as a job, as an appointment and as its
	// allocations, three times each, all waiting on the first of each.
	g.close(t)
	type call struct {
		name string
		do   func() (string, error)
	}
	calls := []call{
		{"job", func() (string, error) { j, err := c.GetJob(ctx, fixtureJob); return j.ID, err }},
		{"job 3", func() (string, error) { j, err := c.GetJob(ctx, fixtureJob3); return j.ID, err }},
		{"appointment", func() (string, error) { a, err := c.GetAppointment(ctx, fixtureAppointment); return a.ID, err }},
		{"a job's id as an appointment", func() (string, error) { _, err := c.GetAppointment(ctx, fixtureJob); return "", err }},
		{"job 3's allocations", func() (string, error) {
			as, err := c.ListJobAllocations(ctx, fixtureJob3)
			ids := make([]string, len(as))
			for i, a := range as {
				ids[i] = a.JobID
			}
			return strings.Join(ids, ","), err
		}},
	}
	type result struct {
		name, got string
		err       error
	}
	results := make(chan result, 3*len(calls))
	var wg sync.WaitGroup
	for range 3 {
		for _, cl := range calls {
			wg.Go(func() {
				got, err := cl.do()
				results <- result{cl.name, got, err}
			})
		}
	}
	waitFor(t, "one request of each at the simulator", func() bool { return len(g.arrived()) == 2+len(calls) })
	g.open()
	wg.Wait()
	close(results)
	for r := range results {
		switch r.name {
		case "job":
			is.NoErr(r.err)
			is.Equal(r.got, fixtureJob) // each caller gets its own job
		case "job 3":
			is.NoErr(r.err)
			is.Equal(r.got, fixtureJob3) // not the other job's answer
		case "appointment":
			is.NoErr(r.err)
			is.Equal(r.got, fixtureAppointment) // its own record
		case "a job's id as an appointment":
			is.True(errors.Is(r.err, prime.ErrNotFound)) // not the job's answer for the same id
		case "job 3's allocations":
			is.NoErr(r.err)
			is.Equal(r.got, fixtureJob3) // the job's own allocations
		}
	}
	is.Equal(len(g.arrived()), 2+len(calls)) // one request for each record asked, none for the repeats
	// A repeat that reached the client after its first call had its answer
	// takes that answer as a recent one rather than joining the flight (the
	// gate cannot tell when every repeat is waiting): either way it reused
	// its own record's answer, which the checks above prove.
	co := c.Stats().Coalesced
	is.Equal(co["in_flight"]+co["recent"], int64(2*len(calls))) // the repeats reused the first answer
	delete(co, "in_flight")
	delete(co, "recent")
	is.Equal(len(co), 0) // and no other way of coalescing was counted
}

func TestAnAnswerServesTheEventsThatArrivedBeforeIt(t *testing.T) {
	is := is.New(t)
	clock := newFakeClock(false)
	e := newEnv(t, primesim.Options{Now: clock.Now})
	c := e.client(t, coalescing, prime.WithClock(clock))
	ctx := context.Background()
	requests := func() int64 { return e.sim.Stats().ByEndpoint["GET /jobs/{id}"] }
	before := clock.Now()
	_, err := c.GetJob(ctx, fixtureJob)
	is.NoErr(err)
	is.Equal(requests(), int64(1))

	clock.Advance(time.Minute) // the answer is a minute old
	_, err = c.GetJob(prime.WithEventTime(ctx, before.Add(-time.Second)), fixtureJob)
	is.NoErr(err)
	is.Equal(requests(), int64(1)) // an event from before the call reuses its answer, however old
	_, err = c.GetJob(prime.WithEventTime(ctx, before), fixtureJob)
	is.NoErr(err)
	is.Equal(requests(), int64(1)) // as does one that arrived as it was sent
	// Found by the chaos harness: a status change's GetJob reused the
	// answer of a call sent a second before the webhook reached ingest, and
	// mirrored the status from before the change.
	_, err = c.GetJob(prime.WithEventTime(ctx, before.Add(time.Millisecond)), fixtureJob)
	is.NoErr(err)
	is.Equal(requests(), int64(2)) // an event that arrived after it was sent asks Prime again, however soon after
	_, err = c.GetJob(ctx, fixtureJob)
	is.NoErr(err)
	is.Equal(requests(), int64(2)) // the answer it got is fresh for a call about now
	clock.Advance(3 * time.Second)
	_, err = c.GetJob(ctx, fixtureJob)
	is.NoErr(err)
	is.Equal(requests(), int64(3)) // but not 3s later

	clock.Advance(6 * time.Minute) // past PRIME_COALESCE_KEEP
	_, err = c.GetJob(prime.WithEventTime(ctx, before), fixtureJob)
	is.NoErr(err)
	is.Equal(requests(), int64(4)) // no answer is kept that long
	is.Equal(c.Stats().Coalesced, map[string]int64{"recent": 3})
}

func TestOnlyAnswersAreReused(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, primesim.Options{})
	c := e.client(t, coalescing)
	ctx := context.Background()
	_, err := c.GetJob(ctx, fixtureJob2)
	is.NoErr(err) // warm-up: the token
	e.sim.SetFaults(primesim.Faults{FailNext: 1, Path: "/jobs"})
	_, err = c.GetJob(ctx, fixtureJob)
	is.True(err != nil) // Prime failed
	_, err = c.GetJob(ctx, fixtureJob)
	is.NoErr(err) // the next call asks again: a failure is not an answer
	missing := "9f0e1d2c-3b4a-4958-8776-a5b4c3d2e1f0"
	for range 2 {
		_, err = c.GetJob(ctx, missing)
		is.True(errors.Is(err, prime.ErrNotFound)) // Prime has no such job...
	}
	is.Equal(e.sim.Stats().ByEndpoint["GET /jobs/{id}"], int64(4)) // and said so once
}

func TestAJoinedCallWaitsInTheHighestClassOfItsCallers(t *testing.T) {
	is := is.New(t)
	g := &gate{}
	e := newWrappedEnv(t, primesim.Options{}, g.wrap)
	c := e.client(t, func(cfg *prime.Config) { coalescing(cfg); cfg.MaxConcurrent = 1 })
	ctx := context.Background()
	_, err := c.GetJob(ctx, fixtureJob2)
	is.NoErr(err) // warm-up: the token

	g.close(t)
	done := make(chan error, 4)
	go func() { _, err := c.GetJob(ctx, "1"); done <- err }() // holds the only slot
	waitFor(t, "the first call in flight", func() bool { return len(g.arrived()) == 3 })
	go func() { _, err := c.GetJob(ctx, fixtureJob3); done <- err }() // an event's call
	waitFor(t, "the event's call waiting", func() bool { return total(c.Stats().Waiting) == 1 })
	go func() { _, err := c.GetJob(prime.WithPriority(ctx, prime.PrioritySweep), fixtureJob); done <- err }() // a sweep's
	waitFor(t, "the sweep's call waiting", func() bool { return total(c.Stats().Waiting) == 2 })
	go func() { _, err := c.GetJob(prime.WithPriority(ctx, prime.PriorityMakesafe), fixtureJob); done <- err }() // make-safe work joins it
	waitFor(t, "the make-safe call joined, raising the sweep's class", func() bool {
		w := c.Stats().Waiting
		return w[prime.PriorityMakesafe] == 1 && w[prime.PriorityEvent] == 1 && len(g.arrived()) == 3
	})
	g.open()
	for range 4 {
		<-done
	}
	got := g.arrived()[2:]
	is.Equal(got, []string{"/api.prime/v2/jobs/1", "/api.prime/v2/jobs/" + fixtureJob, "/api.prime/v2/jobs/" + fixtureJob3}) // the sweep's call goes before the event's, for the make-safe call that waits on it
	is.Equal(c.Stats().Coalesced["in_flight"], int64(1))
}

// store is an AnswerStore in memory, whose answers the client believes.
type store struct {
	mu      sync.Mutex
	answers map[string]prime.Answer
}

func (s *store) Get(_ context.Context, _, key string) (prime.Answer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.answers[key]
	return a, ok
}

func (s *store) Put(_ context.Context, _, key string, a prime.Answer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers[key] = a
}

// An answer another process says it got after now is none Prime gave: it
// is not taken, and not kept. On `make run` one said sent 2099 (issue 27's
// follow-up) was taken as fresh and kept by each process that read it, so
// no newer answer replaced it in their memory.
func TestAnAnswerFromTheFutureIsNoAnswer(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, primesim.Options{})
	key := prime.EndpointJob + " /jobs/" + fixtureJob
	forged := []byte(`{"data":{"type":"jobs","id":"` + fixtureJob + `","attributes":{"jobNumber":"FORGED","version":9007199254740992}}}`)
	shared := &store{answers: map[string]prime.Answer{key: {Sent: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), Pages: [][]byte{forged}}}}
	c := e.client(t, coalescing, prime.WithSharedAnswers(shared))
	ctx := context.Background()
	requests := func() int64 { return e.sim.Stats().ByEndpoint["GET /jobs/{id}"] }

	for i := range 2 {
		job, err := c.GetJob(ctx, fixtureJob)
		is.NoErr(err)
		is.True(job.JobNumber != "FORGED") // Prime's job
		is.Equal(requests(), int64(1))     // asked of Prime once, then its answer reused
		if i == 0 {
			is.True(time.Since(shared.answers[key].Sent) >= 0) // and shared in its place
		}
	}
	is.Equal(c.Stats().Coalesced, map[string]int64{"recent": 1})

	// A clock a little ahead is a clock, not a forgery.
	other := prime.EndpointJob + " /jobs/" + fixtureJob3
	shared.Put(ctx, prime.EndpointJob, other, prime.Answer{Sent: time.Now().Add(prime.AnswerSkew / 2), Pages: [][]byte{forged}})
	_, err := c.GetJob(ctx, fixtureJob3)
	is.NoErr(err)
	is.Equal(requests(), int64(1)) // taken from the store
	is.Equal(c.Stats().Coalesced["shared"], int64(1))
}

// A job says when the call Prime answered went out, with coalescing or
// without: the mirror lets an answer to a call sent after its row was
// written overwrite a version Prime never gave (pkg/store's UpsertJob). A
// reused answer says when its own call went out.
func TestAJobSaysWhenItWasAsked(t *testing.T) {
	is := is.New(t)
	clock := newFakeClock(false)
	e := newEnv(t, primesim.Options{Now: clock.Now})
	ctx := context.Background()
	for _, edit := range []func(*prime.Config){nil, coalescing} {
		c := e.client(t, edit, prime.WithClock(clock))
		clock.Advance(time.Minute)
		asked := clock.Now()
		job, err := c.GetJob(ctx, fixtureJob)
		is.NoErr(err)
		is.True(job.Asked.Equal(asked)) // when its call went out
		clock.Advance(time.Second)
		again, err := c.GetJob(prime.WithEventTime(ctx, asked), fixtureJob)
		is.NoErr(err)
		is.True(again.Asked.Equal(asked) || edit == nil) // a reused answer: its call's time
		is.True(!again.Asked.Before(asked))
	}
	fetched, err := prime.FromResource[prime.Job](fixtureJob, []byte(`{"version":3}`))
	is.NoErr(err)
	is.True(fetched.Asked.IsZero()) // a job handed on says nothing of when it was asked
}
