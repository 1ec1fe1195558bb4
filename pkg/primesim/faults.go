package primesim

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"
)

// Faults are injected into the simulated API. Every mode is deterministic, so
// a test needs no luck: "the next N calls" and "every k-th call" rather than
// chance.
type Faults struct {
	// Path limits the faults to API paths that start with it ("/allocations").
	// Empty means every API path except the token endpoint, which is only
	// affected when Path names it ("/oauth/token").
	Path string
	// Latency is added to every matching call.
	Latency time.Duration
	// FailNext answers the next N matching calls with FailStatus.
	FailNext int
	// FailStatus is the status of injected failures (default 500).
	FailStatus int
	// ErrorRate answers that fraction of matching calls with FailStatus,
	// evenly: 0.25 fails every 4th call.
	ErrorRate float64
	// RateLimitNext answers the next N matching calls with 429.
	RateLimitNext int
	// RateLimitFor answers every matching call with 429 for this long from
	// when the faults are set.
	RateLimitFor time.Duration
	// RetryAfter is the Retry-After of injected 429s, whole seconds
	// (default 1s).
	RetryAfter time.Duration
	// Down drops every matching call's connection without an answer, as a
	// Prime that is unreachable does, until the faults are cleared.
	Down bool
}

// faultState is Faults as they run: counters consumed, window fixed in time.
type faultState struct {
	Faults
	rateLimitUntil time.Time
	matched        int64 // matching calls so far, for ErrorRate
}

func newFaultState(f Faults, now time.Time) faultState {
	if f.FailStatus == 0 {
		f.FailStatus = http.StatusInternalServerError
	}
	if f.RetryAfter <= 0 {
		f.RetryAfter = time.Second
	}
	st := faultState{Faults: f}
	if f.RateLimitFor > 0 {
		st.rateLimitUntil = now.Add(f.RateLimitFor)
	}
	return st
}

// current is the faults still to come, as Faults.
func (st faultState) current(now time.Time) Faults {
	f := st.Faults
	f.RateLimitFor = max(0, st.rateLimitUntil.Sub(now))
	return f
}

// faultAction is what the faults decided for one call.
type faultAction struct {
	latency    time.Duration
	status     int           // 0: no injected answer
	retryAfter time.Duration // with status 429
	down       bool          // no answer at all: the connection is dropped
}

func (st *faultState) apply(path string, now time.Time) faultAction {
	if st.Path == "" {
		if path == pathToken {
			return faultAction{}
		}
	} else if !strings.HasPrefix(path, st.Path) {
		return faultAction{}
	}
	st.matched++
	a := faultAction{latency: st.Latency}
	switch {
	case st.Down:
		a.down = true
	case st.RateLimitNext > 0:
		st.RateLimitNext--
		a.status, a.retryAfter = http.StatusTooManyRequests, st.RetryAfter
	case now.Before(st.rateLimitUntil):
		a.status, a.retryAfter = http.StatusTooManyRequests, st.RetryAfter
	case st.FailNext > 0:
		st.FailNext--
		a.status = st.FailStatus
	case st.ErrorRate > 0 && math.Floor(float64(st.matched)*st.ErrorRate) > math.Floor(float64(st.matched-1)*st.ErrorRate):
		a.status = st.FailStatus
	}
	return a
}

// faultsJSON is Faults on the control API, durations as text ("250ms").
type faultsJSON struct {
	Path          string  `json:"path,omitempty"`
	Latency       string  `json:"latency,omitempty"`
	FailNext      int     `json:"failNext,omitempty"`
	FailStatus    int     `json:"failStatus,omitempty"`
	ErrorRate     float64 `json:"errorRate,omitempty"`
	RateLimitNext int     `json:"rateLimitNext,omitempty"`
	RateLimitFor  string  `json:"rateLimitFor,omitempty"`
	RetryAfter    string  `json:"retryAfter,omitempty"`
	Down          bool    `json:"down,omitempty"`
}

func (f Faults) toJSON() faultsJSON {
	dur := func(d time.Duration) string {
		if d == 0 {
			return ""
		}
		return d.String()
	}
	return faultsJSON{Path: f.Path, Latency: dur(f.Latency), FailNext: f.FailNext, FailStatus: f.FailStatus,
		ErrorRate: f.ErrorRate, RateLimitNext: f.RateLimitNext, RateLimitFor: dur(f.RateLimitFor), RetryAfter: dur(f.RetryAfter), Down: f.Down}
}

func (j faultsJSON) faults() (Faults, error) {
	f := Faults{Path: j.Path, FailNext: j.FailNext, FailStatus: j.FailStatus, ErrorRate: j.ErrorRate, RateLimitNext: j.RateLimitNext, Down: j.Down}
	for _, d := range []struct {
		name string
		text string
		into *time.Duration
	}{{"latency", j.Latency, &f.Latency}, {"rateLimitFor", j.RateLimitFor, &f.RateLimitFor}, {"retryAfter", j.RetryAfter, &f.RetryAfter}} {
		if d.text == "" {
			continue
		}
		v, err := time.ParseDuration(d.text)
		if err != nil {
			return Faults{}, fmt.Errorf("%s: %w", d.name, err)
		}
		*d.into = v
	}
	if f.ErrorRate < 0 || f.ErrorRate > 1 {
		return Faults{}, fmt.Errorf("errorRate %v: want 0 to 1", f.ErrorRate)
	}
	if f.FailStatus != 0 && (f.FailStatus < 400 || f.FailStatus > 599) {
		return Faults{}, fmt.Errorf("failStatus %d: want 400 to 599", f.FailStatus)
	}
	return f, nil
}

// MarshalJSON writes Faults in the control API's form.
func (f Faults) MarshalJSON() ([]byte, error) { return json.Marshal(f.toJSON()) }

// UnmarshalJSON reads Faults in the control API's form.
func (f *Faults) UnmarshalJSON(b []byte) error {
	var j faultsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	v, err := j.faults()
	if err != nil {
		return err
	}
	*f = v
	return nil
}

// RateLimit is the simulated Prime budget. A zero field is no limit; the zero
// RateLimit turns limiting off. PrimeRateLimit is Prime's own.
type RateLimit struct {
	// PerMinute is the requests allowed in each fixed one-minute window (on
	// the simulator's clock), the token request included.
	PerMinute int `json:"perMinute,omitempty"`
	// PerDay is the requests allowed in each fixed day window.
	PerDay int `json:"perDay,omitempty"`
	// MaxConcurrent is the requests allowed in flight at once.
	MaxConcurrent int `json:"maxConcurrent,omitempty"`
}

// PrimeRateLimit is Prime's published budget: 60 a minute, 5,000 a day, 5
// concurrent.
func PrimeRateLimit() RateLimit { return RateLimit{PerMinute: 60, PerDay: 5000, MaxConcurrent: 5} }

func (r RateLimit) enabled() bool { return r.PerMinute > 0 || r.PerDay > 0 || r.MaxConcurrent > 0 }

// rateState counts requests in the current windows.
type rateState struct {
	RateLimit
	minuteStart, dayStart time.Time
	minuteCount, dayCount int
}

// admit decides whether a call that arrives at now, with inFlight calls in
// flight (itself included), may proceed; it sets the x-ratelimit headers
// either way and returns the Retry-After of a refusal.
func (st *rateState) admit(now time.Time, inFlight int64, h http.Header) (ok bool, retryAfter time.Duration) {
	if !st.enabled() {
		return true, 0
	}
	if now.Sub(st.minuteStart) >= time.Minute || now.Before(st.minuteStart) {
		st.minuteStart, st.minuteCount = now, 0
	}
	if now.Sub(st.dayStart) >= 24*time.Hour || now.Before(st.dayStart) {
		st.dayStart, st.dayCount = now, 0
	}
	minuteReset := st.minuteStart.Add(time.Minute).Sub(now)
	switch {
	case st.MaxConcurrent > 0 && inFlight > int64(st.MaxConcurrent):
		ok, retryAfter = false, time.Second
	case st.PerMinute > 0 && st.minuteCount >= st.PerMinute:
		ok, retryAfter = false, minuteReset
	case st.PerDay > 0 && st.dayCount >= st.PerDay:
		ok, retryAfter = false, st.dayStart.Add(24*time.Hour).Sub(now)
	default:
		ok = true
		st.minuteCount++
		st.dayCount++
	}
	if st.PerMinute > 0 {
		h.Set(headerMinuteRemaining, fmt.Sprint(max(0, st.PerMinute-st.minuteCount)))
		h.Set(headerMinuteReset, fmt.Sprint(ceilSeconds(minuteReset)))
	}
	if st.PerDay > 0 {
		h.Set(headerDayRemaining, fmt.Sprint(max(0, st.PerDay-st.dayCount)))
	}
	return ok, retryAfter
}

// ceilSeconds is d in whole seconds, rounded up, as Retry-After and
// x-ratelimit-minute-reset carry it (seconds from now).
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(math.Ceil(d.Seconds()))
}
