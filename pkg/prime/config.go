package prime

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/secureurl"
)

// Config is the client's configuration, read from the environment with
// caarlos0/env (pkg/config). New gives a zero numeric field its default, for
// a Config made in code; Validate, what a binary checks the environment's
// with, refuses a 0 there, where every number has a default of its own.
//
// RatePerMinute, RateBurst and MaxConcurrent are the budget of the client's
// own (NewLocalBudget) or, given one with WithBudget, of the budget it
// shares: the services spend the account's budget together through NATS
// (pkg/primebudget), so each is given the whole account's.
type Config struct {
	// URL is Prime's API base, e.g. https://www.primeeco.tech/api.prime/v2.
	// The token call posts the credentials there: https only, http to a
	// loopback address alone (secureurl.Check).
	URL string `env:"PRIME_API_URL"`
	// ClientID, ClientSecret, Username and Password are the OAuth2
	// password-grant credentials. Never log them.
	ClientID     string `env:"PRIME_CLIENT_ID"`
	ClientSecret string `env:"PRIME_CLIENT_SECRET" secret:"true"`
	Username     string `env:"PRIME_USERNAME"`
	Password     string `env:"PRIME_PASSWORD" secret:"true"`
	// RatePerMinute is the most requests sent in a minute.
	RatePerMinute int `env:"PRIME_RATE_PER_MINUTE" envDefault:"60"`
	// RateBurst is how many requests may go out back to back before the
	// per-minute pace applies. With 1 (the default) a client's own budget
	// spaces requests evenly, so no minute ever holds more than
	// RatePerMinute of them; a larger burst lets short bursts out sooner at
	// the cost of up to RateBurst-1 extra in one minute. The shared budget
	// (pkg/primebudget) counts a sliding window besides the pace, so no
	// minute holds more whatever the burst.
	RateBurst int `env:"PRIME_RATE_BURST" envDefault:"1"`
	// MaxConcurrent is the most requests in flight at once.
	MaxConcurrent int `env:"PRIME_MAX_CONCURRENT" envDefault:"5"`
	// PriorityAging is how long a drain or a sweep call waits before it
	// moves up a class, and again each time it has waited as long, up to
	// PriorityEvent's (never above make-safe work): so that steady webhook
	// traffic never starves it for good.
	PriorityAging time.Duration `env:"PRIME_PRIORITY_AGING" envDefault:"30s"`
	// CoalesceWindow: a call reuses the answer of a call for the same
	// record (the same endpoint, path and query) sent after the event it
	// is made for reached us (WithEventTime): Prime's answer already holds
	// the change the event tells of. A call that names no event reuses one
	// sent no earlier than this before now. Zero turns coalescing off.
	CoalesceWindow time.Duration `env:"PRIME_COALESCE_WINDOW" envDefault:"2s"`
	// CoalesceKeep is how long answers are kept for the calls of events
	// that reached us before them; it bounds how old a reused answer is.
	CoalesceKeep time.Duration `env:"PRIME_COALESCE_KEEP" envDefault:"5m"`
	// Timeout bounds each HTTP request.
	Timeout time.Duration `env:"PRIME_TIMEOUT" envDefault:"30s"`
	// PageSize is per_page on list calls (Prime allows up to 500).
	PageSize int `env:"PRIME_PAGE_SIZE" envDefault:"100"`
	// OutageBackoff is how long calls wait while Prime does not answer
	// (5xx or no answer: outage.go), after each call that tried it again
	// and failed, the last step repeating; a 5xx's longer Retry-After is
	// honoured. Meanwhile the work waits with no attempt counted.
	OutageBackoff retry.Backoff `env:"PRIME_OUTAGE_BACKOFF" envDefault:"1s,2s,4s,8s,15s,30s,1m" envSeparator:","`
}

// Enabled reports whether Prime is real: its URL or any of its
// credentials given (Given). Without them the all-in-one process runs
// primesim instead; with a credential and no URL, Validate refuses to
// start rather than run the simulator beside a real Prime's secrets.
func (c Config) Enabled() bool { return c.Given() != "" }

// Given names the first of Prime's address and credentials that is set,
// "" when none is.
func (c Config) Given() string {
	if c.URL != "" {
		return "PRIME_API_URL"
	}
	for _, f := range c.credentials() {
		if f.value != "" {
			return f.name
		}
	}
	return ""
}

// credentials are Prime's credentials by their variables.
func (c Config) credentials() []struct{ name, value string } {
	return []struct{ name, value string }{
		{"PRIME_CLIENT_ID", c.ClientID}, {"PRIME_CLIENT_SECRET", c.ClientSecret},
		{"PRIME_USERNAME", c.Username}, {"PRIME_PASSWORD", c.Password},
	}
}

// LogValue logs the configuration without its secrets.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("url", c.URL),
		slog.String("client_id", c.ClientID),
		slog.String("username", c.Username),
		slog.Int("rate_per_minute", c.RatePerMinute),
		slog.Int("rate_burst", c.RateBurst),
		slog.Int("max_concurrent", c.MaxConcurrent),
		slog.Duration("priority_aging", c.PriorityAging),
		slog.Duration("coalesce_window", c.CoalesceWindow),
		slog.Duration("coalesce_keep", c.CoalesceKeep),
		slog.Duration("timeout", c.Timeout),
		slog.Int("page_size", c.PageSize),
		slog.Any("outage_backoff", c.OutageBackoff),
	)
}

// String prints the configuration without its secrets, so that %v and %+v
// cannot leak them.
func (c Config) String() string {
	return fmt.Sprintf("prime.Config{URL:%s ClientID:%s Username:%s RatePerMinute:%d RateBurst:%d MaxConcurrent:%d PriorityAging:%s CoalesceWindow:%s CoalesceKeep:%s Timeout:%s PageSize:%d OutageBackoff:%v}",
		c.URL, c.ClientID, c.Username, c.RatePerMinute, c.RateBurst, c.MaxConcurrent, c.PriorityAging, c.CoalesceWindow, c.CoalesceKeep, c.Timeout, c.PageSize, c.OutageBackoff)
}

// withDefaults fills zero fields and checks them all (Validate).
func (c Config) withDefaults() (Config, error) {
	if c.RatePerMinute == 0 {
		c.RatePerMinute = 60
	}
	if c.RateBurst == 0 {
		c.RateBurst = 1
	}
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = 5
	}
	if c.PriorityAging == 0 {
		c.PriorityAging = 30 * time.Second
	}
	if c.Timeout == 0 {
		c.Timeout = 30 * time.Second
	}
	if c.PageSize == 0 {
		c.PageSize = 100
	}
	if len(c.OutageBackoff) == 0 {
		c.OutageBackoff = DefaultOutageBackoff()
	}
	return c, c.Validate()
}

// Validate refuses the settings a client cannot work with, each naming its
// variable (config.Refusal): Prime's address and credentials, and the rest
// (ValidateLimits). Read from the environment, where every number has its
// default, a 0 is refused as any value out of range is.
func (c Config) Validate() error {
	var errs []error
	u, _ := url.Parse(c.URL)
	switch insecure := secureurl.Check(c.URL); {
	case c.URL == "" && c.Given() != "":
		errs = append(errs, config.Refuse("PRIME_API_URL", "is required: %s is set, so Prime is real", c.Given()))
	case c.URL == "":
		errs = append(errs, config.Refuse("PRIME_API_URL", "is required"))
	case insecure != nil:
		// The token call posts the client secret and the password there.
		errs = append(errs, config.Refuse("PRIME_API_URL", "%v", insecure))
	case u.User != nil || u.RawQuery != "":
		errs = append(errs, config.Refuse("PRIME_API_URL", "must not carry credentials or a query"))
	}
	for _, f := range c.credentials() {
		if f.value == "" {
			errs = append(errs, config.Refuse(f.name, "is required with PRIME_API_URL"))
		}
	}
	return errors.Join(append(errs, c.ValidateLimits())...)
}

// ValidateLimits is Validate of every setting but Prime's address and
// credentials, which bin/primeflow's Prime simulator gives when
// PRIME_API_URL is unset.
func (c Config) ValidateLimits() error {
	errs := []error{
		config.Positive("PRIME_RATE_PER_MINUTE", c.RatePerMinute),
		config.Positive("PRIME_RATE_BURST", c.RateBurst),
		config.Positive("PRIME_MAX_CONCURRENT", c.MaxConcurrent),
		config.Positive("PRIME_PRIORITY_AGING", c.PriorityAging),
		config.Positive("PRIME_TIMEOUT", c.Timeout),
		config.Between("PRIME_PAGE_SIZE", c.PageSize, 1, 500),
		config.NotNegative("PRIME_COALESCE_WINDOW", c.CoalesceWindow),
		config.Steps("PRIME_OUTAGE_BACKOFF", c.OutageBackoff),
	}
	switch {
	case c.CoalesceKeep < 0:
		errs = append(errs, config.NotNegative("PRIME_COALESCE_KEEP", c.CoalesceKeep))
	case c.CoalesceWindow > 0 && c.CoalesceKeep < c.CoalesceWindow:
		errs = append(errs, config.Refuse("PRIME_COALESCE_KEEP", "must not be shorter than PRIME_COALESCE_WINDOW (%s)", c.CoalesceWindow))
	}
	return errors.Join(errs...)
}
