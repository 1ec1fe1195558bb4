package prime_test

import (
	"sync"
	"testing"
	"time"
)

// fakeClock is a hand-written clock for the client and the simulator. In
// auto mode After moves time forward at once, so a minute of budget passes
// instantly; otherwise After waits until the test calls Advance, so a test can
// prove a call is being held and then let it go.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	auto    bool
	waiters []fakeWaiter
}

type fakeWaiter struct {
	until time.Time
	ch    chan time.Time
}

func newFakeClock(auto bool) *fakeClock {
	return &fakeClock{now: time.Date(2025, 2, 7, 4, 14, 33, 0, time.UTC), auto: auto}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if c.auto && d > 0 {
		c.now = c.now.Add(d)
	}
	if c.auto || d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, fakeWaiter{until: c.now.Add(d), ch: ch})
	return ch
}

// Advance moves time forward and wakes the waiters that are due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.until.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.now
	}
	c.waiters = kept
}

// waitForWaiters blocks until n calls wait on the clock, or fails the test.
func (c *fakeClock) waitForWaiters(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		got := len(c.waiters)
		c.mu.Unlock()
		if got >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no %d calls waiting on the clock within 10s", n)
}
