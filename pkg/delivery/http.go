package delivery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/secureurl"
)

// HTTPConfig is where a kind's rows are posted as JSON, read with
// caarlos0/env under the kind's prefix (`envPrefix:"SMS_"` reads
// SMS_SEND_URL, …).
type HTTPConfig struct {
	// URL is where each row is posted.
	URL string `env:"SEND_URL"`
	// AuthHeader names the header that carries AuthValue.
	AuthHeader string `env:"SEND_AUTH_HEADER" envDefault:"Authorization"`
	// AuthValue, when set, is sent in AuthHeader (for example "Basic …" or a
	// token). A secret: never logged.
	AuthValue string `env:"SEND_AUTH" secret:"true"`
	// Timeout bounds one post (SendTimeout).
	Timeout time.Duration `env:"SEND_TIMEOUT" envDefault:"15s"`
	// AlreadyDone are the statuses (409, 422) by which the endpoint says,
	// as its own contract documents, that it has already done the request
	// of this Idempotency-Key: such an answer is a send. Empty (the
	// default) reads them as the IETF idempotency-key draft does: 409 the
	// key's first request still in progress (retried), 422 the key reused
	// for another request (refused for good).
	AlreadyDone []int `env:"SEND_ALREADY_DONE_STATUSES"`
}

// Validate reports a setting a Poster cannot work with, naming its
// variable under prefix ("SMS_"; config.Refusal): a URL that is not https
// (http only to a loopback address: a post carries a customer's name and
// number, and the auth header), or an AlreadyDone status other than 409
// and 422. A blank URL passes: the kind then only logs (its service decides
// whether it may).
func (c HTTPConfig) Validate(prefix string) error {
	var errs []error
	if c.URL != "" {
		if err := secureurl.Check(c.URL); err != nil {
			errs = append(errs, config.Refuse(prefix+"SEND_URL", "%v", err))
		}
	}
	for _, st := range c.AlreadyDone {
		if st != http.StatusConflict && st != http.StatusUnprocessableEntity {
			errs = append(errs, config.Refuse(prefix+"SEND_ALREADY_DONE_STATUSES", "%d is not 409 or 422, the statuses an endpoint answers a repeated Idempotency-Key with", st))
			break
		}
	}
	return errors.Join(errs...)
}

// SendTimeout is how long a Poster gives one post: Timeout, or 15s when it
// is not above zero.
func (c HTTPConfig) SendTimeout() time.Duration {
	if c.Timeout <= 0 {
		return 15 * time.Second
	}
	return c.Timeout
}

// LogValue logs the configuration without its secret, and the URL without
// its query or password, where a key may hide.
func (c HTTPConfig) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("url", redactURL(c.URL)),
		slog.String("auth_header", c.AuthHeader),
		slog.Bool("auth_set", c.AuthValue != ""),
		slog.Duration("timeout", c.Timeout),
		slog.Any("already_done", c.AlreadyDone),
	)
}

// String prints the configuration without its secrets.
func (c HTTPConfig) String() string {
	return fmt.Sprintf("delivery.HTTPConfig{URL:%s AuthHeader:%s AuthSet:%t Timeout:%s AlreadyDone:%v}",
		redactURL(c.URL), c.AuthHeader, c.AuthValue != "", c.Timeout, c.AlreadyDone)
}

// IdempotencyKeyHeader carries a row's reference on every post, the same on
// each attempt, so the receiving end can drop a resend.
const IdempotencyKeyHeader = "Idempotency-Key"

// AttemptHeader carries the attempt a post is (1 for the first). It is a
// header, not part of the body, so that every attempt under one
// Idempotency-Key sends the same body byte for byte: an endpoint that
// follows the IETF idempotency-key draft refuses a key reused with another
// body (422).
const AttemptHeader = "Primeflow-Attempt"

// Poster posts JSON to one URL and reads the outcome in three kinds:
//
//   - accepted: 2xx, and an AlreadyDone status;
//   - a wait, no attempt counted (Unavailable): the endpoint is not there
//     or not taking posts now, whatever the message — the request was never
//     written (no such host, connection refused, a TLS failure, a timeout
//     before it went out), 429 (the endpoint's rate limit), 502, 503 and
//     504 (the endpoint, or a gateway in front of it, says it cannot answer
//     now: a stopped flow behind its proxy answers every post so);
//   - a failed attempt, retried until the last (Config.MaxAttempts): an
//     answer about this post (500 and the other 5xx, 408, 409, a 3xx), and
//     a post that went out and got no answer (SendTimeout, the connection
//     lost after the request was written). The endpoint may have acted on
//     such a post, so a retry may be a second copy where the endpoint does
//     not honour the Idempotency-Key: counting it bounds the copies to
//     MaxAttempts, where a wait would repeat it for as long as the
//     endpoint stays slow;
//   - refused for good (ErrPermanent): any other status.
//
// An *AnswerError says what the endpoint answered and when it asked to be
// tried again (Retry-After). It never follows a redirect: a 3xx would carry
// the body and its auth header to another URL (a 307), or turn the post
// into a GET whose 2xx says nothing of it (a 302).
type Poster struct {
	url         string
	redacted    string
	authHeader  string
	authValue   string
	alreadyDone []int
	hc          *http.Client
}

// NewPoster makes a poster for cfg, refusing what cfg.Validate refuses, and
// a blank URL; prefix ("SMS_") names the variables in the error. hc nil is a
// client with cfg's timeout; a client given is used as a copy that follows
// no redirect, and its transport must report net/http/httptrace's
// WroteRequest (an *http.Transport does) for a post that went out to be
// told from one that did not.
func NewPoster(cfg HTTPConfig, prefix string, hc *http.Client) (*Poster, error) {
	if cfg.URL == "" {
		return nil, config.Refuse(prefix+"SEND_URL", "is not set")
	}
	if err := cfg.Validate(prefix); err != nil {
		return nil, err
	}
	if hc == nil {
		hc = &http.Client{Timeout: cfg.SendTimeout()}
	}
	header := cfg.AuthHeader
	if header == "" {
		header = "Authorization"
	}
	return &Poster{url: cfg.URL, redacted: redactURL(cfg.URL), authHeader: header, authValue: cfg.AuthValue,
		alreadyDone: slices.Clone(cfg.AlreadyDone), hc: secureurl.NoRedirectClient(hc)}, nil
}

// AnswerError is an answer the endpoint gave that is not a send: its status,
// and the wait its Retry-After asked for (0 when none).
type AnswerError struct {
	Status     int
	RetryAfter time.Duration
	msg        string
}

func (e *AnswerError) Error() string { return e.msg }

// Post posts body, JSON, as the attempt-th attempt under key, its
// Idempotency-Key. The caller sends the same body on every attempt.
func (p *Poster) Post(ctx context.Context, key string, attempt int, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return Permanent(fmt.Errorf("post to %s: request: %w", p.redacted, unwrapURLError(err)))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(IdempotencyKeyHeader, key)
	req.Header.Set(AttemptHeader, strconv.Itoa(attempt))
	if p.authValue != "" {
		req.Header.Set(p.authHeader, p.authValue)
	}
	var wrote atomic.Bool
	req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(w httptrace.WroteRequestInfo) {
			if w.Err == nil {
				wrote.Store(true)
			}
		},
	}))
	resp, err := p.hc.Do(req)
	if err != nil {
		// url.Error quotes the URL, query and all: keep only its cause.
		err = fmt.Errorf("post to %s: %w", p.redacted, unwrapURLError(err))
		if !wrote.Load() {
			return Unavailable(fmt.Errorf("%w: the request was not sent", err), 0)
		}
		return fmt.Errorf("%w: the request was sent, and no answer came", err)
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, maxBodyInError+1))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // let the connection be reused
	status := resp.StatusCode
	if status >= 200 && status < 300 || slices.Contains(p.alreadyDone, status) {
		return nil
	}
	err = &AnswerError{Status: status, RetryAfter: retry.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()),
		msg: fmt.Sprintf("post to %s: HTTP %d: %s", p.redacted, status, bodyInError(head))}
	if status >= 300 && status < 400 {
		err = &AnswerError{Status: status, msg: fmt.Sprintf("post to %s: HTTP %d redirect to %s not followed: the URL must name the endpoint itself",
			p.redacted, status, redactURL(resp.Header.Get("Location")))}
	}
	switch status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return Unavailable(err, RetryAfter(err))
	case http.StatusRequestTimeout, http.StatusConflict:
		return err
	}
	if status < 400 || status >= 500 {
		return err
	}
	return Permanent(err)
}

// RetryAfter is the wait the endpoint's answer in err asked for (its
// Retry-After), 0 when it asked for none.
func RetryAfter(err error) time.Duration {
	var a *AnswerError
	if errors.As(err, &a) {
		return a.RetryAfter
	}
	return 0
}

// maxBodyInError is how much of an error answer's body its error keeps: what
// an endpoint says is wrong, not a whole HTML error page in the log.
const maxBodyInError = 200

// bodyInError is the start of an answer's body on one line: at most its
// first maxBodyInError bytes (a character cut there dropped), then "…" when
// there was more.
func bodyInError(body []byte) string {
	more := len(body) > maxBodyInError
	body = body[:min(len(body), maxBodyInError)]
	text := strings.Join(strings.Fields(strings.ToValidUTF8(string(body), "")), " ")
	if more {
		text += "…"
	}
	return text
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// redactURL hides the user information, query and fragment of a URL, where
// keys hide; what is left says where rows go.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable URL)"
	}
	if u.User != nil {
		u.User = url.User("redacted")
	}
	if u.RawQuery != "" {
		u.RawQuery = "redacted"
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}
