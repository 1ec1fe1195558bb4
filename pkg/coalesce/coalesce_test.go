package coalesce_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/coalesce"
	"github.com/matryer/is"
)

// recorder is a job that records its runs and can be held mid-run.
type recorder struct {
	mu      sync.Mutex
	starts  []int // how many requests had been made when each run started
	made    int
	running chan struct{} // receives when a run starts
	release chan struct{} // a run ends when it receives
}

func newRecorder() *recorder {
	return &recorder{running: make(chan struct{}, 100), release: make(chan struct{}, 100)}
}

func (r *recorder) job(ctx context.Context) {
	r.mu.Lock()
	r.starts = append(r.starts, r.made)
	r.mu.Unlock()
	r.running <- struct{}{}
	select {
	case <-r.release:
	case <-ctx.Done():
	}
}

func (r *recorder) request(l *coalesce.Loop) {
	r.mu.Lock()
	r.made++
	r.mu.Unlock()
	l.Request()
}

func (r *recorder) runs() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.starts...)
}

func start(t *testing.T, l *coalesce.Loop) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ctx
}

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// A burst that arrives while a run is in progress owes exactly one more run,
// and that run starts after the whole burst.
func TestBurstDuringRunCausesOneFollowUp(t *testing.T) {
	is := is.New(t)
	r := newRecorder()
	l := coalesce.New(r.job, nil)
	start(t, l)

	r.request(l)
	wait(t, r.running, "the first run")
	for range 99 {
		r.request(l) // arrive during the first run
	}
	r.release <- struct{}{}
	wait(t, r.running, "the follow-up run")
	r.release <- struct{}{}

	r.request(l) // a later request gets a run of its own
	wait(t, r.running, "the third run")
	r.release <- struct{}{}
	is.Equal(r.runs(), []int{1, 100, 101}) // 1 run, 1 follow-up after all 100, then one for the next request
}

// A burst that arrives before the loop gets to it is one run.
func TestBurstBeforeRunIsOneRun(t *testing.T) {
	is := is.New(t)
	r := newRecorder()
	l := coalesce.New(r.job, nil)
	for range 100 {
		r.request(l)
	}
	start(t, l)
	wait(t, r.running, "the run")
	r.release <- struct{}{}
	r.request(l)
	wait(t, r.running, "the next run")
	r.release <- struct{}{}
	is.Equal(r.runs(), []int{100, 101}) // the 100 coalesced into one run
}

// The schedule requests runs on its own.
func TestScheduleRequestsRuns(t *testing.T) {
	r := newRecorder()
	l := coalesce.New(r.job, coalesce.Every(time.Millisecond))
	start(t, l)
	for range 3 {
		wait(t, r.running, "a scheduled run")
		r.release <- struct{}{}
	}
}

// A Schedule's runs come at the times it gives, never before them, each
// next time asked for once the one before has come; a zero Time ends it.
func TestScheduledRunsComeWhenDue(t *testing.T) {
	is := is.New(t)
	r := newRecorder()
	var (
		mu      sync.Mutex
		due     []time.Time
		reached []bool // whether each due time had come when the next was asked for
	)
	next := func(now time.Time) time.Time {
		mu.Lock()
		defer mu.Unlock()
		if len(due) > 0 {
			reached = append(reached, !now.Before(due[len(due)-1]))
		}
		if len(due) == 3 {
			return time.Time{}
		}
		due = append(due, now.Add(time.Millisecond))
		return due[len(due)-1]
	}
	l := coalesce.New(r.job, next)
	start(t, l)
	for range 3 {
		wait(t, r.running, "a scheduled run")
		r.release <- struct{}{}
	}
	mu.Lock()
	defer mu.Unlock()
	is.Equal(reached, []bool{true, true, true}) // each run came at its time, and the schedule was asked for the next
}

// Run returns when its context ends, after the run in progress.
func TestRunEndsWithContext(t *testing.T) {
	is := is.New(t)
	r := newRecorder()
	l := coalesce.New(r.job, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	l.Request()
	wait(t, r.running, "the run")
	cancel()
	select {
	case err := <-done:
		is.NoErr(err) // Run ends cleanly
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// With a window, requests that come one by one, each after the one before
// would have had a run of its own, share one run: 20 plan requests in a
// third of a second are one run even when a run takes less than the gap.
func TestWindowCoalescesABurst(t *testing.T) {
	is := is.New(t)
	r := newRecorder()
	l := coalesce.New(r.job, nil, coalesce.Window(time.Second))
	windows := make(chan chan time.Time, 4) // the windows the loop opened, ended by the test
	l.SetAfter(func(time.Duration) <-chan time.Time {
		end := make(chan time.Time, 1)
		windows <- end
		return end
	})
	start(t, l)

	r.request(l)
	end := waitWindow(t, windows) // the first request opens the window; no run yet
	for range 19 {
		r.request(l)
	}
	end <- time.Now()
	wait(t, r.running, "the run after the window")
	r.release <- struct{}{}

	r.request(l) // after the run: a window and a run of its own
	waitWindow(t, windows) <- time.Now()
	wait(t, r.running, "the next run")
	r.release <- struct{}{}
	is.Equal(r.runs(), []int{20, 21}) // the burst of 20 was one run; the next request another
}

func waitWindow(t *testing.T, windows <-chan chan time.Time) chan time.Time {
	t.Helper()
	select {
	case end := <-windows:
		return end
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for the loop to open a window")
		return nil
	}
}
