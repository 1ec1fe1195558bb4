package config

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Refusal is a setting refused: the variable and why. A Config's Validate
// returns one for each setting it cannot run with, joined (errors.Join), so
// that Load reports them all at once, each with the value it was given.
type Refusal struct {
	// Var is the environment variable, its prefix included (SMS_SEND_URL).
	Var string
	// Reason says what is wrong and what would do ("must be above zero").
	Reason string
	// given is how Load shows the value the variable had ("=\"-1\"", " (not
	// set)"): empty on a Refusal a Validate made, filled on Load's copy.
	given string
	// cause is the Refusal Load's copy was made from, so that errors.Is
	// still finds a sentinel Refusal (jobmirror.ErrNoTriageStatus).
	cause error
}

// Refuse is a Refusal of variable, the reason formatted as fmt.Sprintf
// does. The reason need not repeat the value: Load shows it (never a
// secret's).
func Refuse(variable, format string, args ...any) error {
	return &Refusal{Var: variable, Reason: fmt.Sprintf(format, args...)}
}

// Error is the variable, the value it had when Load shows it, and the
// reason: PRIME_RATE_PER_MINUTE="-1": must be at least 1.
func (r *Refusal) Error() string { return r.Var + r.given + ": " + r.Reason }

// Unwrap is the Refusal Load's copy was made from, if any.
func (r *Refusal) Unwrap() error { return r.cause }

// number is what the range checks compare; time.Duration is one.
type number interface {
	~int | ~int32 | ~int64 | ~uint | ~float64
}

// Positive refuses a v that is not above zero: a count of workers, a
// timeout, an interval, where 0 means nothing that could work.
func Positive[N number](variable string, v N) error {
	if v > 0 {
		return nil
	}
	return Refuse(variable, "must be above zero")
}

// NotNegative refuses a v below zero, where 0 has a meaning of its own (the
// variable's documentation says which).
func NotNegative[N number](variable string, v N) error {
	if v >= 0 {
		return nil
	}
	return Refuse(variable, "must not be negative")
}

// Between refuses a v outside lo to hi, both included.
func Between[N number](variable string, v, lo, hi N) error {
	if v >= lo && v <= hi {
		return nil
	}
	return Refuse(variable, "must be from %v to %v", lo, hi)
}

// Steps refuses a list of waits (a retry.Backoff, a ladder) that is empty
// or holds a wait that is not above zero.
func Steps(variable string, steps []time.Duration) error {
	if len(steps) == 0 {
		return Refuse(variable, "needs at least one duration")
	}
	for _, d := range steps {
		if d <= 0 {
			return Refuse(variable, "every duration must be above zero")
		}
	}
	return nil
}

// Address refuses an addr that cannot be listened on for its form alone
// (host:port, the port a number up to 65535 or a service name; an empty
// host is every interface), without listening: a binary checks it with the
// rest before it binds anything.
func Address(variable, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return Refuse(variable, "want host:port (127.0.0.1:8080, :8080)")
	}
	if n, err := strconv.ParseUint(port, 10, 64); (err == nil && n > 65535) || strings.HasPrefix(port, "-") {
		return Refuse(variable, "port %s: want 0 to 65535", port)
	}
	return nil
}

// shown is how a value is written in a refusal: quoted, cut to a line, and
// a URL only as its scheme and host, since its user, path or query may
// hold a key (an n8n webhook's path, a gateway's ?code=).
func shown(v string) string {
	if strings.Contains(v, "://") {
		u, err := url.Parse(v)
		if err != nil {
			return "(a URL that does not parse; not shown)"
		}
		s := u.Scheme + "://" + u.Host
		if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			s += "/…"
		}
		return fmt.Sprintf("%q", s)
	}
	const most = 80
	if utf8.RuneCountInString(v) > most {
		v = string([]rune(v)[:most]) + "…"
	}
	return fmt.Sprintf("%q", v)
}
