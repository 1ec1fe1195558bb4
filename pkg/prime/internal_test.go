package prime

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/matryer/is"
)

func TestBucketKeepsThePace(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		perMinute   int
		burst       int
		at          []time.Duration // when each request asks, from t0
		wantAllowed []time.Duration // when each may go, from t0
	}{
		{"evenly spaced at burst 1", 60, 1, []time.Duration{0, 0, 0}, []time.Duration{0, time.Second, 2 * time.Second}},
		{"idle time is not saved up at burst 1", 60, 1, []time.Duration{0, 10 * time.Second, 10 * time.Second}, []time.Duration{0, 10 * time.Second, 11 * time.Second}},
		{"a burst of 3 goes at once, then the pace", 60, 3, []time.Duration{0, 0, 0, 0}, []time.Duration{0, 0, 0, time.Second}},
		{"120 a minute is every half second", 120, 1, []time.Duration{0, 0}, []time.Duration{0, 500 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			b := newBucket(tt.perMinute, tt.burst)
			for i, at := range tt.at {
				got := b.next(t0.Add(at))
				is.Equal(got, t0.Add(tt.wantAllowed[i])) // at the paced time
				b.take(got)
			}
		})
	}

	t.Run("a token looked at is not taken", func(t *testing.T) {
		is := is.New(t)
		b := newBucket(60, 1)
		b.take(t0)
		is.Equal(b.next(t0), t0.Add(time.Second)) // the next slot
		is.Equal(b.next(t0), t0.Add(time.Second)) // still free for whoever takes it
	})
}

func TestRateLimitHeaders(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		status int
		header map[string]string
		hold   time.Duration // the hold a 429 started
		spent  time.Duration // the wait for the minute's reset
	}{
		{"429 with Retry-After seconds", 429, map[string]string{"Retry-After": "7"}, 7 * time.Second, 0},
		{"429 with Retry-After date", 429, map[string]string{"Retry-After": now.Add(9 * time.Second).Format(http.TimeFormat)}, 9 * time.Second, 0},
		{"429 without Retry-After uses the minute reset", 429, map[string]string{"X-Ratelimit-Minute-Reset": "12"}, 12 * time.Second, 0},
		{"429 with nothing waits a minute", 429, nil, time.Minute, 0},
		{"remaining 0 waits for the reset (seconds)", 200, map[string]string{"X-Ratelimit-Minute-Remaining": "0", "X-Ratelimit-Minute-Reset": "20"}, 0, 20 * time.Second},
		{"remaining 0 waits for the reset (Unix time)", 200, map[string]string{"X-Ratelimit-Minute-Remaining": "0", "X-Ratelimit-Minute-Reset": "1735689630"}, 0, 30 * time.Second},
		{"remaining above 0 does not wait", 200, map[string]string{"X-Ratelimit-Minute-Remaining": "1", "X-Ratelimit-Minute-Reset": "20"}, 0, 0},
		// Found by FuzzRateLimitHeaders: each held every call for 292 years.
		{"a reset in the far future waits a day at most", 200, map[string]string{"X-Ratelimit-Minute-Remaining": " 0 ", "X-Ratelimit-Minute-Reset": "1e18"}, 0, maxHold},
		{"a Retry-After date in the year 9999 holds a day at most", 429, map[string]string{"Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"}, maxHold, 0},
		{"a Retry-After past what a Duration holds, a day", 429, map[string]string{"Retry-After": "1e300"}, maxHold, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			clock := fixedClock{now}
			b := NewLocalBudget(60, 1, 1, clock)
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			p, _, err := b.Admit(context.Background(), Turn{})
			is.NoErr(err)
			is.Equal(p.Done(tt.status, h), tt.hold) // Done tells a 429's hold
			is.Equal(b.Held(), tt.hold)             // the hold Prime asked for
			l := ReadLimits(tt.status, h, now)
			is.Equal(l.Hold, tt.hold)   // as ReadLimits reads it
			is.Equal(l.Spent, tt.spent) // and the minute spent
			_, wait, err := b.Admit(context.Background(), Turn{FailOnHold: true})
			switch {
			case tt.hold > 0:
				is.True(errors.Is(err, ErrRateLimited)) // a hold refuses a call that must not wait
			case tt.spent > 0:
				is.NoErr(err)                                       // a minute spent refuses none...
				is.Equal(wait, Wait{D: tt.spent, Reason: WaitRate}) // it waits for the reset
			}
		})
	}
	t.Run("the day's remaining", func(t *testing.T) {
		is := is.New(t)
		h := http.Header{}
		h.Set("X-Ratelimit-Day-Remaining", "4210")
		is.Equal(ReadLimits(200, h, now), Limits{MinuteRemaining: -1, DayRemaining: 4210}) // read when sent
		is.Equal(ReadLimits(0, nil, now), Limits{MinuteRemaining: -1, DayRemaining: -1})   // -1 when not
	})
}

type fixedClock struct{ now time.Time }

func (c fixedClock) Now() time.Time                         { return c.now }
func (c fixedClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// TestTokenLifetime: expires_in as Prime may send it. The last case was
// found by FuzzTokenAnswer: a lifetime past what a Duration holds came out
// below zero, so the token counted as expired on arrival and every call
// fetched a new one.
func TestTokenLifetime(t *testing.T) {
	for _, tt := range []struct {
		body string
		want time.Duration
	}{
		{`{"access_token":"a","expires_in":21600}`, 6 * time.Hour},
		{`{"access_token":"a","expires_in":"3600"}`, time.Hour},
		{`{"access_token":"a"}`, defaultTokenLifetime},
		{`{"access_token":"a","expires_in":-5}`, defaultTokenLifetime},
		{`{"access_token":"a","expires_in":1e300}`, math.MaxInt64},
	} {
		t.Run(tt.body, func(t *testing.T) {
			is := is.New(t)
			token, lifetime, err := decodeToken([]byte(tt.body))
			is.NoErr(err)
			is.Equal(token, "a")
			is.Equal(lifetime, tt.want) // how long the token lives
		})
	}
}

func TestConfig(t *testing.T) {
	env := map[string]string{
		"PRIME_API_URL":       "https://www.primeeco.tech/api.prime/v2",
		"PRIME_CLIENT_ID":     "id",
		"PRIME_CLIENT_SECRET": "secret-value",
		"PRIME_USERNAME":      "user",
		"PRIME_PASSWORD":      "password-value",
	}
	t.Run("defaults from the environment", func(t *testing.T) {
		is := is.New(t)
		var cfg Config
		is.NoErr(config.Parse(func(k string) string { return env[k] }, &cfg))
		is.Equal(cfg.RatePerMinute, 60)       // PRIME_RATE_PER_MINUTE default
		is.Equal(cfg.MaxConcurrent, 5)        // PRIME_MAX_CONCURRENT default
		is.Equal(cfg.RateBurst, 1)            // PRIME_RATE_BURST default
		is.Equal(cfg.Timeout, 30*time.Second) // PRIME_TIMEOUT default
		is.Equal(cfg.PageSize, 100)           // PRIME_PAGE_SIZE default
		is.True(cfg.Enabled())                // a URL is set
		_, err := New(cfg)
		is.NoErr(err) // a complete configuration is accepted
		cfg.URL = "http://127.0.0.1:8081/prime"
		is.NoErr(cfg.Validate()) // and plain http to this machine (make run's simulator)
		printed := cfg.String() + cfg.LogValue().String()
		is.True(!strings.Contains(printed, "secret-value") && !strings.Contains(printed, "password-value")) // secrets not printed
	})
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no URL", func(c *Config) { c.URL = "" }, "PRIME_API_URL: is required"},
		{"not http", func(c *Config) { c.URL = "ftp://x" }, "not an http(s) URL"},
		{"credentials in the URL", func(c *Config) { c.URL = "https://u:p@x/api" }, "must not carry credentials"},
		// The token call posts the client secret and the password there.
		{"plain http elsewhere", func(c *Config) { c.URL = "http://www.primeeco.tech/api.prime/v2" }, "PRIME_API_URL: must be https"},
		{"no password", func(c *Config) { c.Password = "" }, "PRIME_PASSWORD: is required with PRIME_API_URL"},
		{"negative rate", func(c *Config) { c.RatePerMinute = -1 }, "PRIME_RATE_PER_MINUTE: must be above zero"},
		{"page too big", func(c *Config) { c.PageSize = 501 }, "PRIME_PAGE_SIZE: must be from 1 to 500"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			cfg := Config{URL: env["PRIME_API_URL"], ClientID: "id", ClientSecret: "s", Username: "u", Password: "p"}
			tt.edit(&cfg)
			_, err := New(cfg)
			is.True(err != nil)                             // refused
			is.True(strings.Contains(err.Error(), tt.want)) // saying why
			is.True(!strings.Contains(err.Error(), "u:p@")) // without echoing the URL
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		body string
		want []ErrorObject
	}{
		{"JSON:API", `{"errors":[{"status":"422","code":"invalid","title":"Unprocessable","detail":"bad field"}]}`,
			[]ErrorObject{{Status: "422", Code: "invalid", Title: "Unprocessable", Detail: "bad field"}}},
		{"numeric status", `{"errors":[{"status":500,"detail":"boom"}]}`, []ErrorObject{{Status: "500", Detail: "boom"}}},
		{"OAuth", `{"error":"invalid_grant","error_description":"wrong password"}`, []ErrorObject{{Code: "invalid_grant", Detail: "wrong password"}}},
		{"message", `{"message":"Server Error"}`, []ErrorObject{{Detail: "Server Error"}}},
		{"not JSON", `<html>502</html>`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			is.Equal(decodeErrors([]byte(tt.body)), tt.want) // the error detail is read
		})
	}
}

func TestJobFilterRefusesQuoting(t *testing.T) {
	is := is.New(t)
	q, err := jobQuery("abc", filterEq("objectType", "Job"))
	is.NoErr(err)                                                    // a plain id
	is.Equal(q.Get("q"), "'jobId'.eq('abc'),'objectType'.eq('Job')") // in Prime's q syntax
	_, err = jobQuery("x'),'statusId'.eq('y")
	is.True(err != nil) // an id that would change the filter is refused
}

func TestQueueOrder(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	const aging = 30 * time.Second
	type call struct {
		prio  Priority
		since time.Duration // from t0
	}
	tests := []struct {
		name  string
		calls []call
		now   time.Duration
		first int // index into calls
	}{
		{"the higher class first", []call{{PrioritySweep, 0}, {PriorityEvent, time.Second}}, 2 * time.Second, 1},
		{"in a class, the longest waiting", []call{{PriorityEvent, time.Second}, {PriorityEvent, 0}}, 2 * time.Second, 1},
		{"a sweep waiting two agings competes as an event, and has waited longer", []call{{PriorityEvent, 10 * time.Second}, {PrioritySweep, 0}}, 61 * time.Second, 1},
		{"a sweep waiting one aging is a drain yet", []call{{PriorityEvent, 10 * time.Second}, {PrioritySweep, 0}}, 31 * time.Second, 0},
		{"no aging passes make-safe work", []call{{PrioritySweep, 0}, {PriorityMakesafe, 10 * time.Minute}}, 10 * time.Minute, 1},
		{"an aged drain before an aged sweep", []call{{PrioritySweep, 0}, {PriorityDrain, time.Second}}, 32 * time.Second, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			var q queue
			var ws []*waiter
			for _, c := range tt.calls {
				ws = append(ws, q.add(c.prio, t0.Add(c.since)))
			}
			is.Equal(q.first(t0.Add(tt.now), aging), ws[tt.first]) // whose turn it is
		})
	}
}
