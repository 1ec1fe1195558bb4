// Package prime is a client for Prime's JSON:API (Prime EcoSystem,
// primeeco.tech): OAuth2 password grant with a shared, early-refreshed token,
// a limiter that keeps to Prime's budget (requests a minute, requests in
// flight, 429 Retry-After and the x-ratelimit headers) and lets the calls
// that wait for it go by class (WithPriority), and typed records that keep
// their raw attributes for the mirror. The budget is the client's own, or
// one a whole deployment shares (WithBudget, pkg/primebudget).
//
// Every call returns ErrNotFound for a 404, a *RateLimitedError
// (ErrRateLimited) when Prime, or the client's own budget, says to wait,
// and an *UnavailableError (ErrUnavailable) when Prime does not answer and
// the fault is not the record's (outage.go); no call is retried by the
// client.
package prime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/secureurl"
)

// MediaType is the Accept header Prime requires on every request, the token
// request included.
const MediaType = "application/vnd.api.v2+json"

// maxBody bounds how much of a response the client reads.
const maxBody = 32 << 20

// Client calls Prime. It is safe for concurrent use; make one per process
// and share it, because the budget and the token are per client.
type Client struct {
	cfg   Config
	base  string
	hc    *http.Client
	log   *slog.Logger
	clock Clock
	lim   *limiter
	co    *coalescer // nil: every call asks Prime
	out   *outage
	m     *metrics

	tokMu  sync.Mutex
	tok    string
	tokDue time.Time // when to fetch a new token, a little before it expires
	flight *tokenFlight
}

// tokenFlight is one token request that concurrent callers share.
type tokenFlight struct {
	done  chan struct{}
	token string
	err   error
}

// Option changes how New builds a client.
type Option func(*options)

type options struct {
	hc      *http.Client
	log     *slog.Logger
	clock   Clock
	name    string
	budget  Budget
	answers AnswerStore
}

// WithHTTPClient sets the HTTP client (default: a new one). Its Timeout
// should be zero or above Config.Timeout, which bounds each request. The
// client sends through a copy of it that follows no redirect (a 3xx is an
// *APIError): a redirect would take the token call's credentials, or a
// call's bearer token, to wherever it points.
func WithHTTPClient(hc *http.Client) Option { return func(o *options) { o.hc = hc } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithClock sets the time source of the limiter and token cache (default:
// the system clock).
func WithClock(c Clock) Option { return func(o *options) { o.clock = c } }

// WithName sets the "client" label of the client's metrics (default "prime").
func WithName(name string) Option { return func(o *options) { o.name = name } }

// WithBudget has the client spend b, shared with other clients (the
// deployment's budget in NATS, pkg/primebudget), instead of a budget of its
// own made from its Config (NewLocalBudget: RatePerMinute, RateBurst,
// MaxConcurrent).
func WithBudget(b Budget) Option { return func(o *options) { o.budget = b } }

// New checks cfg, fills its defaults and returns a client. It makes no
// request: the first call fetches the token.
func New(cfg Config, opts ...Option) (*Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	o := options{hc: &http.Client{}, log: slog.New(slog.DiscardHandler), clock: realClock{}, name: "prime"}
	for _, opt := range opts {
		opt(&o)
	}
	c := &Client{
		cfg:   cfg,
		base:  strings.TrimRight(cfg.URL, "/"),
		hc:    secureurl.NoRedirectClient(o.hc),
		log:   o.log,
		clock: o.clock,
		m:     newMetrics(o.name),
		out:   newOutage(o.clock, cfg.OutageBackoff, o.log),
	}
	if o.budget == nil {
		o.budget = NewLocalBudget(cfg.RatePerMinute, cfg.RateBurst, cfg.MaxConcurrent, o.clock)
	}
	c.lim = newLimiter(cfg, o.clock, o.budget, c.m.wait)
	if cfg.CoalesceWindow > 0 {
		c.co = &coalescer{window: cfg.CoalesceWindow, keep: cfg.CoalesceKeep, clock: o.clock, shared: o.answers,
			flights: make(map[string]*flight), answers: make(map[string]Answer)}
	}
	return c, nil
}

// Stats returns what the client has done so far; Stats().Requests is the
// number of HTTP calls made to Prime.
func (c *Client) Stats() Stats {
	s := c.m.stats()
	s.Waiting = c.lim.waiting()
	held, waited := c.out.counts()
	s.Unsent, s.Unavailable = int64(held), int64(waited)
	return s
}

// Unreachable is when Prime stopped answering this client's calls (5xx or
// no answer, none answered since: outage.go); zero while it answers.
func (c *Client) Unreachable() time.Time { return c.out.unreachable() }

// response is a Prime answer read in full.
type response struct {
	status int
	header http.Header
	body   []byte
}

// get sends an authorised GET and returns a 2xx body. A 401 fetches a new
// token once and retries the call once.
func (c *Client) get(ctx context.Context, endpoint, path string) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		tok, err := c.token(ctx)
		if err != nil {
			return nil, err
		}
		res, err := c.send(ctx, endpoint, http.MethodGet, path, nil, tok)
		if err != nil {
			return nil, err
		}
		switch {
		case res.status >= 200 && res.status < 300:
			return res.body, nil
		case res.status == http.StatusUnauthorized && attempt == 0:
			c.log.DebugContext(ctx, "prime token refused, fetching a new one", "endpoint", endpoint)
			c.dropToken(tok)
			continue
		}
		return nil, c.statusError(endpoint, res)
	}
}

// send makes one request within the limiter and reads the whole answer.
// A 5xx or no answer that is Prime's, not the record's (outage.go), is an
// *UnavailableError; during an outage a call that is not its probe is not
// sent at all.
func (c *Client) send(ctx context.Context, endpoint, method, path string, form url.Values, token string) (response, error) {
	t, err := c.out.enter(endpoint, endpoint+" "+path)
	if err != nil {
		c.log.DebugContext(ctx, "prime call not sent: Prime is not answering", "endpoint", endpoint, "err", err)
		return response{}, err
	}
	asked := c.clock.Now()
	permit, err := c.lim.acquire(ctx, endpoint)
	if err != nil {
		c.out.abandoned(t)
		if errors.Is(err, ErrRateLimited) {
			c.log.DebugContext(ctx, "prime call held back", "endpoint", endpoint, "err", err)
			return response{}, err
		}
		return response{}, fmt.Errorf("prime: %s: %w", endpoint, err)
	}
	answered := false
	defer func() {
		if !answered {
			permit.Done(0, nil)
		}
	}()
	prio := PriorityOf(ctx)
	now := c.clock.Now()
	c.m.waited(prio, now.Sub(asked))
	c.m.call(callerOf(ctx), prio)
	if f := flightOf(ctx); f != nil {
		f.sent.CompareAndSwap(0, now.UnixNano()) // the answer is Prime's state from now
	}

	caller := ctx
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		c.out.abandoned(t)
		return response{}, fmt.Errorf("prime: %s: request: %w", endpoint, unwrapURLError(err))
	}
	req.Header.Set("Accept", MediaType)
	req.Header.Set("User-Agent", userAgent(callerOf(ctx)))
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}

	t.sent = c.clock.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		c.m.request(endpoint, outcomeError)
		return response{}, c.unanswered(caller, t, endpoint, fmt.Errorf("prime: %s: %w", endpoint, unwrapURLError(err)))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	c.m.request(endpoint, outcomeOf(resp.StatusCode))
	answered = true
	c.observe(ctx, endpoint, resp, permit)
	if err != nil {
		return response{}, c.unanswered(caller, t, endpoint, fmt.Errorf("prime: %s: read: %w", endpoint, unwrapURLError(err)))
	}
	res := response{status: resp.StatusCode, header: resp.Header, body: b}
	if res.status < http.StatusInternalServerError {
		c.out.answered(t)
		return res, nil
	}
	after := retry.ParseRetryAfter(res.header.Get(headerRetryAfter), c.clock.Now())
	if err := c.out.failed(t, endpoint, after, c.statusError(endpoint, res)); err != nil {
		return response{}, err
	}
	return res, nil // the record's: the caller fails with its *APIError
}

// unanswered is the error of a call Prime gave no answer to: cause itself
// when the caller cancelled it (a shutdown) or it is the record's, an
// *UnavailableError when it is Prime's (outage.go). A caller's deadline
// that passes while it waits for the answer is Prime not answering in
// time, like PRIME_TIMEOUT.
func (c *Client) unanswered(caller context.Context, t *ticket, endpoint string, cause error) error {
	if errors.Is(caller.Err(), context.Canceled) {
		c.out.abandoned(t)
		return cause
	}
	if err := c.out.failed(t, endpoint, 0, cause); err != nil {
		return err
	}
	return cause
}

// userAgent names the client, and who makes the call and what for
// (WithCaller), to Prime and to whoever reads its access log: "primeflow
// (child-mirror; sync-drain)". Both are a few fixed words, never an id.
func userAgent(c caller) string { return "primeflow (" + c.name + "; " + c.purpose + ")" }

// observe ends the call's permit with Prime's answer, and keeps the
// x-ratelimit-*-remaining headers for the metrics.
func (c *Client) observe(ctx context.Context, endpoint string, resp *http.Response, permit Permit) {
	if n, err := strconv.ParseFloat(strings.TrimSpace(resp.Header.Get(headerMinuteRemaining)), 64); err == nil {
		c.m.setRemaining("minute", n)
	}
	if n, err := strconv.ParseFloat(strings.TrimSpace(resp.Header.Get(headerDayRemaining)), 64); err == nil {
		c.m.setRemaining("day", n)
	}
	if d := permit.Done(resp.StatusCode, resp.Header); d > 0 {
		c.log.WarnContext(ctx, "prime rate limited, holding calls", "endpoint", endpoint, "retry_after", d)
		c.lim.wakeAll()
	}
}

// unwrapURLError drops the URL from a transport error so that an error
// message never carries one.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// statusError turns a non-2xx answer into the error the caller sees.
func (c *Client) statusError(endpoint string, res response) error {
	if res.status == http.StatusTooManyRequests {
		d := c.lim.budget.Held()
		if d <= 0 {
			d = retry.ParseRetryAfter(res.header.Get(headerRetryAfter), c.clock.Now())
		}
		return &RateLimitedError{Wait: d, Endpoint: endpoint}
	}
	return &APIError{StatusCode: res.status, Endpoint: endpoint, Errors: decodeErrors(res.body)}
}

// token returns a token that is not due for refresh, fetching one when
// needed. Concurrent callers share one fetch.
func (c *Client) token(ctx context.Context) (string, error) {
	for {
		c.tokMu.Lock()
		if c.tok != "" && c.clock.Now().Before(c.tokDue) {
			tok := c.tok
			c.tokMu.Unlock()
			return tok, nil
		}
		f := c.flight
		leader := f == nil
		if leader {
			f = &tokenFlight{done: make(chan struct{})}
			c.flight = f
		}
		c.tokMu.Unlock()

		if leader {
			tok, due, err := c.fetchToken(ctx)
			c.tokMu.Lock()
			if err == nil {
				c.tok, c.tokDue = tok, due
			}
			c.flight = nil
			c.tokMu.Unlock()
			f.token, f.err = tok, err
			close(f.done)
			return tok, err
		}

		select {
		case <-f.done:
		case <-ctx.Done():
			return "", fmt.Errorf("prime: token: %w", ctx.Err())
		}
		if f.err == nil {
			return f.token, nil
		}
		// The leader's own context ended its fetch: fetch again for this caller.
		if ctx.Err() == nil && (errors.Is(f.err, context.Canceled) || errors.Is(f.err, context.DeadlineExceeded)) {
			continue
		}
		return "", f.err
	}
}

// dropToken forgets tok after Prime refused it, unless another caller has
// already replaced it.
func (c *Client) dropToken(tok string) {
	c.tokMu.Lock()
	if c.tok == tok {
		c.tok = ""
	}
	c.tokMu.Unlock()
}

// tokenRefreshMargin is how early a token is replaced: a tenth of its
// lifetime, at most five minutes.
func tokenRefreshMargin(lifetime time.Duration) time.Duration {
	return min(lifetime/10, 5*time.Minute)
}

// defaultTokenLifetime is assumed when Prime sends no expires_in.
const defaultTokenLifetime = 5 * time.Minute

// fetchToken runs the OAuth2 password grant (POST {base}/oauth/token).
func (c *Client) fetchToken(ctx context.Context) (string, time.Time, error) {
	form := url.Values{
		"grant_type":    {"password"},
		"client_id":     {c.cfg.ClientID},
		"client_secret": {c.cfg.ClientSecret},
		"username":      {c.cfg.Username},
		"password":      {c.cfg.Password},
	}
	res, err := c.send(ctx, endpointToken, http.MethodPost, pathToken, form, "")
	if err != nil {
		return "", time.Time{}, err
	}
	if res.status < 200 || res.status >= 300 {
		return "", time.Time{}, c.statusError(endpointToken, res)
	}
	token, lifetime, err := decodeToken(res.body)
	if err != nil {
		return "", time.Time{}, err
	}
	c.log.DebugContext(ctx, "prime token fetched", "expires_in", lifetime)
	return token, c.clock.Now().Add(lifetime - tokenRefreshMargin(lifetime)), nil
}

// decodeToken reads the token endpoint's answer: the access token and how
// long it lives (expires_in, defaultTokenLifetime when absent or not a
// positive number).
func decodeToken(b []byte) (token string, lifetime time.Duration, err error) {
	var body struct {
		AccessToken string      `json:"access_token"`
		TokenType   string      `json:"token_type"`
		ExpiresIn   json.Number `json:"expires_in"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		return "", 0, fmt.Errorf("prime: %s: decode: %w", endpointToken, err)
	}
	if body.AccessToken == "" {
		return "", 0, fmt.Errorf("prime: %s: response has no access_token", endpointToken)
	}
	lifetime = defaultTokenLifetime
	if secs, err := body.ExpiresIn.Float64(); err == nil && secs > 0 {
		lifetime = retry.Seconds(secs)
	}
	return body.AccessToken, lifetime, nil
}
