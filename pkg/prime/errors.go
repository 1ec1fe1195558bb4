package prime

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Sentinel errors; test for them with errors.Is.
var (
	// ErrNotFound: Prime answered 404. For a GUID this proves the value is
	// not a record of the type asked for (§4.2 step 3).
	ErrNotFound = errors.New("prime: not found")
	// ErrRateLimited: Prime answered 429, or the client is holding its calls
	// (a Retry-After, a minute Prime says is spent, the budget's pace) past
	// the call's deadline. The error is a
	// *RateLimitedError that says how long to wait. It is not a failure of
	// the event: make the event wait and redeliver it, without counting an
	// attempt.
	ErrRateLimited = errors.New("prime: rate limited")
	// ErrUnauthorized: Prime answered 401 to a fresh token, or refused the
	// credentials at the token endpoint.
	ErrUnauthorized = errors.New("prime: unauthorized")
	// ErrUnavailable: Prime did not answer the call — a 5xx, or no answer
	// at all (a refused connection, a reset, PRIME_TIMEOUT) — and the fault
	// is not yet the record's, or the call was not sent because Prime is
	// not answering (outage.go has the rule). The error is an
	// *UnavailableError that says how long to wait. Like ErrRateLimited it
	// is not a failure of the event: make the work wait, without counting
	// an attempt.
	ErrUnavailable = errors.New("prime: unavailable")
)

// RateLimitedError is returned when a call hit a 429, or did not go out
// because the client is holding its calls and the call's context deadline
// comes before the hold ends. It matches ErrRateLimited, and is a
// retry.Waiter: retry.Delay turns it into the work's wait.
type RateLimitedError struct {
	// Wait is how long to wait before calling Prime again.
	Wait time.Duration
	// Endpoint names the call that was limited.
	Endpoint string
}

// Error says which call was limited and for how long.
func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("prime: %s: rate limited, retry after %s", e.Endpoint, e.Wait)
}

// RetryAfter is Wait: how long the work that called Prime waits before it
// runs again, no attempt counted.
func (e *RateLimitedError) RetryAfter() time.Duration { return e.Wait }

// Is makes errors.Is(err, ErrRateLimited) true.
func (e *RateLimitedError) Is(target error) bool { return target == ErrRateLimited }

// UnavailableError is returned when Prime did not answer a call (a 5xx,
// a transport error, the request's timeout) and the client cannot tell the
// fault is the record's, or when the call was not sent because Prime has
// not answered since an earlier call failed (outage.go). It matches
// ErrUnavailable, unwraps to the call's own error (an *APIError with the
// 5xx, or the transport's), and is a retry.Waiter: retry.Delay turns it
// into the work's wait.
type UnavailableError struct {
	// Endpoint names the call.
	Endpoint string
	// Wait is how long to wait before the work calls Prime again.
	Wait time.Duration
	// Since is when Prime stopped answering: zero when other calls are
	// answered and only this call failed (a first failure: it is tried
	// again before it counts as the record's).
	Since time.Time
	// Err is the call's own error; nil for a call that was not sent.
	Err error
}

// Error says which call, why and how long the work waits.
func (e *UnavailableError) Error() string {
	since := ""
	if !e.Since.IsZero() {
		since = ", Prime unreachable since " + e.Since.UTC().Format(time.RFC3339)
	}
	if e.Err == nil {
		return fmt.Sprintf("prime: %s: not sent%s; retry after %s", e.Endpoint, since, e.Wait)
	}
	return fmt.Sprintf("%v%s; retry after %s", e.Err, since, e.Wait)
}

// RetryAfter is Wait: how long the work that called Prime waits before it
// runs again, no attempt counted.
func (e *UnavailableError) RetryAfter() time.Duration { return e.Wait }

// Unwrap returns the call's own error.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// ErrorObject is one entry of a JSON:API errors document (assumed shape:
// {"errors":[{"status","code","title","detail"}]}); OAuth errors
// ({"error","error_description"}) are read into Code and Detail.
type ErrorObject struct {
	Status string `json:"status"`
	Code   string `json:"code"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
}

// APIError is a non-2xx answer from Prime other than 429. A 404 matches
// ErrNotFound and a 401 matches ErrUnauthorized.
type APIError struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Endpoint names the call ("jobs.get", "token" …).
	Endpoint string
	// Errors is the JSON:API error document, when Prime sent one.
	Errors []ErrorObject
}

// Error gives the call, the status and Prime's error detail.
func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "prime: %s: %d %s", e.Endpoint, e.StatusCode, http.StatusText(e.StatusCode))
	for _, o := range e.Errors {
		msg := o.Detail
		if msg == "" {
			msg = o.Title
		}
		if o.Code != "" {
			msg = o.Code + ": " + msg
		}
		if msg != "" {
			b.WriteString(": ")
			b.WriteString(msg)
		}
	}
	return b.String()
}

// Is maps the status to ErrNotFound and ErrUnauthorized.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrUnauthorized:
		// The token endpoint refuses bad credentials with 400 invalid_grant.
		return e.StatusCode == http.StatusUnauthorized ||
			(e.Endpoint == endpointToken && e.StatusCode == http.StatusBadRequest)
	}
	return false
}
