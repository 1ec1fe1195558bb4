package prime_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/matryer/is"
	"github.com/prometheus/client_golang/prometheus"
)

// gate holds every request that arrives while it is shut, and records the
// paths in the order they reached the simulator.
type gate struct {
	mu    sync.Mutex
	shut  chan struct{} // nil: open
	order []string
}

func (g *gate) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.order = append(g.order, r.URL.Path)
		shut := g.shut
		g.mu.Unlock()
		if shut != nil {
			<-shut
		}
		h.ServeHTTP(w, r)
	})
}

// close shuts the gate until open, or until the test ends (before the
// simulator's server closes, which waits for the requests it holds).
func (g *gate) close(t *testing.T) {
	g.mu.Lock()
	g.shut = make(chan struct{})
	g.mu.Unlock()
	t.Cleanup(g.open)
}

func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut != nil {
		close(g.shut)
		g.shut = nil
	}
}

func (g *gate) arrived() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.order...)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func total(waiting map[prime.Priority]int) int {
	n := 0
	for _, k := range waiting {
		n += k
	}
	return n
}

func TestWaitingCallsGoOutByPriority(t *testing.T) {
	is := is.New(t)
	g := &gate{}
	e := newWrappedEnv(t, primesim.Options{}, g.wrap)
	c := e.client(t, func(cfg *prime.Config) { cfg.MaxConcurrent = 1 })
	ctx := context.Background()
	_, err := c.GetJob(ctx, fixtureJob)
	is.NoErr(err) // warm-up: the token is fetched

	// One call holds the only slot while the others queue up, the lowest
	// class first.
	g.close(t)
	done := make(chan error, 6)
	go func() { _, err := c.GetJob(ctx, "1"); done <- err }()
	waitFor(t, "the first call in flight", func() bool { return len(g.arrived()) == 3 })
	queued := []struct {
		id   string
		prio prime.Priority
	}{
		{"2", prime.PrioritySweep}, {"3", prime.PriorityDrain}, {"4", prime.PriorityEvent},
		{"5", prime.PriorityMakesafe}, {"6", prime.PriorityEvent},
	}
	for i, q := range queued {
		go func() { _, err := c.GetJob(prime.WithPriority(ctx, q.prio), q.id); done <- err }()
		waitFor(t, "the call queued", func() bool { return total(c.Stats().Waiting) == i+1 })
	}
	is.Equal(c.Stats().Waiting, map[prime.Priority]int{prime.PrioritySweep: 1, prime.PriorityDrain: 1, prime.PriorityEvent: 2, prime.PriorityMakesafe: 1}) // waiting, by class
	g.open()
	for range 6 {
		<-done // a 404 for most of them: only the order matters
	}
	got := strings.Join(g.arrived()[3:], " ")
	is.Equal(got, "/api.prime/v2/jobs/5 /api.prime/v2/jobs/4 /api.prime/v2/jobs/6 /api.prime/v2/jobs/3 /api.prime/v2/jobs/2") // make-safe, the events in arrival order, drain, sweep

	st := c.Stats()
	is.Equal(st.ByPriority[prime.PriorityMakesafe], int64(1)) // requests by class
	is.Equal(st.ByPriority[prime.PriorityEvent], int64(5))    // token, warm-up, "1" (no class: event), "4", "6"
}

func TestCallsCountedByCallerAndPurpose(t *testing.T) {
	is := is.New(t)
	var mu sync.Mutex
	var agents []string
	e := newWrappedEnv(t, primesim.Options{}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			agents = append(agents, r.UserAgent())
			mu.Unlock()
			h.ServeHTTP(w, r)
		})
	})
	c := e.client(t, nil, prime.WithName("test"))
	ctx := prime.WithCaller(prime.WithPriority(context.Background(), prime.PriorityMakesafe), "makesafe", "recheck")
	_, err := c.ListJobAllocations(ctx, fixtureJob)
	is.NoErr(err)
	_, err = c.GetJob(context.Background(), fixtureJob)
	is.NoErr(err)

	reg := prometheus.NewRegistry()
	is.NoErr(reg.Register(c))
	families, err := reg.Gather()
	is.NoErr(err)
	calls := map[string]float64{}
	var waits uint64
	for _, f := range families {
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			switch f.GetName() {
			case "prime_client_calls_total":
				calls[l["caller"]+"/"+l["purpose"]+"/"+l["priority"]] = m.GetCounter().GetValue()
			case "prime_client_budget_wait_seconds":
				waits += m.GetHistogram().GetSampleCount()
			}
		}
	}
	is.Equal(calls["makesafe/recheck/makesafe"], float64(2)) // the token request and the list, for the caller that made them
	is.Equal(calls["unnamed/unnamed/event"], float64(1))     // a context that names nothing
	is.Equal(waits, uint64(3))                               // every call's wait for its turn is observed
	mu.Lock()
	defer mu.Unlock()
	is.Equal(agents, []string{"primeflow (makesafe; recheck)", "primeflow (makesafe; recheck)", "primeflow (unnamed; unnamed)"}) // and Prime is told too
}

// askingBudget grants every make-safe call, and keeps any other call
// asking until the test lets it go, then tells it to wait an hour: the pace
// of a budget whose minute the events have spent.
type askingBudget struct {
	asking  chan struct{} // an event's call is asking
	release chan struct{}
}

type grant struct{}

func (grant) Done(int, http.Header) time.Duration { return 0 }

func (b askingBudget) Admit(_ context.Context, t prime.Turn) (prime.Permit, prime.Wait, error) {
	if t.Priority == prime.PriorityMakesafe {
		return grant{}, prime.Wait{}, nil
	}
	select {
	case b.asking <- struct{}{}:
	default: // asking again, once released
	}
	<-b.release
	return nil, prime.Wait{D: time.Hour, Reason: prime.WaitRate}, nil
}

func (askingBudget) Changed() <-chan struct{} { return nil } // nothing else changes
func (askingBudget) Held() time.Duration      { return 0 }
func (askingBudget) Idle()                    {}

// A make-safe call that arrives while an event's call is asking the budget
// asks as soon as that ask ends, rather than wait for the event's turn.
func TestAHigherClassAsksOnceTheAskBeforeItEnds(t *testing.T) {
	is := is.New(t)
	e := newEnv(t, primesim.Options{})
	b := askingBudget{asking: make(chan struct{}, 1), release: make(chan struct{})}
	c := e.client(t, nil, prime.WithBudget(b))
	makesafe := prime.WithPriority(context.Background(), prime.PriorityMakesafe)
	_, err := c.GetJob(makesafe, fixtureJob)
	is.NoErr(err) // warm-up: the token is fetched

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.GetJob(ctx, fixtureJob2) // an event's call...
	<-b.asking                    // asking the budget
	done := make(chan error, 1)
	go func() { _, err := c.GetJob(makesafe, fixtureJob3); done <- err }()
	waitFor(t, "the make-safe call waiting", func() bool { return c.Stats().Waiting[prime.PriorityMakesafe] == 1 })
	close(b.release) // the event's call is told to wait an hour
	var got error
	waitFor(t, "the make-safe call out", func() bool {
		select {
		case got = <-done:
			return true
		default:
			return false
		}
	})
	is.NoErr(got) // it went out at once, not after the event's hour
}
