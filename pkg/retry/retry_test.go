package retry_test

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/matryer/is"
)

func TestBackoffAfter(t *testing.T) {
	b := retry.Backoff{time.Second, 5 * time.Second, 30 * time.Second}
	for _, tc := range []struct {
		attempt int
		want    time.Duration
	}{
		{0, time.Second}, // before any attempt: the first step
		{1, time.Second},
		{2, 5 * time.Second},
		{3, 30 * time.Second},
		{4, 30 * time.Second}, // the last step repeats
		{1000, 30 * time.Second},
	} {
		t.Run(fmt.Sprint(tc.attempt), func(t *testing.T) {
			is.New(t).Equal(b.After(tc.attempt), tc.want) // the step of the attempt
		})
	}
}

func TestBackoffAfterWaiting(t *testing.T) {
	b := retry.Backoff{time.Second, 5 * time.Second, time.Minute}
	for _, tc := range []struct {
		waited, want time.Duration
	}{
		{0, time.Second},                      // a first wait: the first step
		{300 * time.Millisecond, time.Second}, // never less
		{7 * time.Second, 7 * time.Second},    // as long again as it has waited
		{40 * time.Second, 40 * time.Second},  //
		{time.Hour, time.Minute},              // never more than the last step
		{-time.Minute, time.Second},           // a clock that went back
	} {
		t.Run(tc.waited.String(), func(t *testing.T) {
			is.New(t).Equal(b.AfterWaiting(tc.waited), tc.want) // the next wait
		})
	}
}

// A Config reads a Backoff from its variable like any list of durations.
func TestBackoffFromTheEnvironment(t *testing.T) {
	is := is.New(t)
	var cfg struct {
		Backoff retry.Backoff `env:"X_BACKOFF" envDefault:"2s,10s" envSeparator:","`
	}
	is.NoErr(config.Parse(func(string) string { return "" }, &cfg))
	is.Equal(cfg.Backoff, retry.Backoff{2 * time.Second, 10 * time.Second}) // the default
	is.NoErr(config.Parse(func(string) string { return "50ms,1m" }, &cfg))
	is.Equal(cfg.Backoff, retry.Backoff{50 * time.Millisecond, time.Minute}) // as set
}

type waiting struct{ d time.Duration }

func (w *waiting) Error() string             { return "wait " + w.d.String() }
func (w *waiting) RetryAfter() time.Duration { return w.d }

func TestDelay(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want time.Duration
	}{
		{"no error", nil, 0},
		{"a failure waits not: it counts an attempt", errors.New("prime answered 503"), 0},
		{"a wait, wrapped", fmt.Errorf("get job: %w", &waiting{3 * time.Second}), 3 * time.Second},
		{"a wait below the least", &waiting{30 * time.Millisecond}, retry.MinWait},
		{"a wait of nothing", &waiting{0}, retry.MinWait},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is.New(t).Equal(retry.Delay(tc.err), tc.want) // how long the work waits
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		v    string
		want time.Duration
	}{
		{"", 0},
		{"soon", 0},
		{"0", 0},
		{"-5", 0},
		{" 2.5 ", 2500 * time.Millisecond},
		{"1e30", math.MaxInt64}, // never overflows
		{"Tue, 01 Dec 2026 10:00:30 GMT", 30 * time.Second},
		{"Tue, 01 Dec 2026 09:59:00 GMT", 0}, // past
	} {
		if got := retry.ParseRetryAfter(tt.v, now); got != tt.want {
			t.Errorf("ParseRetryAfter(%q) = %v, want %v", tt.v, got, tt.want)
		}
	}
}
