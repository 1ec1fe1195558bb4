// Package optimoroute is a client of the OptimoRoute Web Service API v1:
// order writes in chunks of 500, planning, and the routes read-back (spec §8).
//
// Every request is <APIURL>/<operation>?key=<APIKey>: GET for reads, POST
// JSON for writes and for get_orders, whose bulk form is a POST. OptimoRoute allows 5 concurrent requests per account, so a
// Client never has more than Config.MaxConcurrent requests in flight. The API
// key never appears in an error the Client returns.
package optimoroute

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/secureurl"
	"github.com/prometheus/client_golang/prometheus"
)

// Operations of the API, as they appear in the URL. Calls is keyed by them.
const (
	OpCreateOrder          = "create_order"
	OpCreateOrUpdateOrders = "create_or_update_orders"
	OpDeleteOrder          = "delete_order"
	OpDeleteOrders         = "delete_orders"
	OpGetOrders            = "get_orders"
	OpStartPlanning        = "start_planning"
	OpGetPlanningStatus    = "get_planning_status"
	OpStopPlanning         = "stop_planning"
	OpGetRoutes            = "get_routes"
	OpGetSchedulingInfo    = "get_scheduling_info"
)

// MaxOrdersPerCall is the most orders OptimoRoute takes in one bulk call.
const MaxOrdersPerCall = 500

// maxBody bounds how much of a response is read; get_routes for a busy day
// is the largest.
const maxBody = 64 << 20

// Config is the client's configuration, read from the environment.
type Config struct {
	// APIURL is the base URL that operations are appended to. Every
	// request carries the key: https only, http to a loopback address
	// alone (secureurl.Check).
	APIURL string `env:"OPTIMOROUTE_API_URL" envDefault:"https://api.optimoroute.com/v1"`
	// APIKey is the account's Web Service API key. A secret: it is sent
	// only in the query string and never logged or put in an error.
	APIKey string `env:"OPTIMOROUTE_API_KEY" secret:"true"`
	// Timeout bounds one request, not the wait for a free slot.
	Timeout time.Duration `env:"OPTIMOROUTE_TIMEOUT" envDefault:"30s"`
	// MaxConcurrent is the most requests in flight. OptimoRoute allows 5
	// per account, so processes sharing a key should split them.
	MaxConcurrent int `env:"OPTIMOROUTE_MAX_CONCURRENT" envDefault:"5"`
}

// Validate refuses the settings a client cannot work with, each naming its
// variable (config.Refusal); a blank key is CheckKey's, since a dry run and
// bin/primeflow's simulator go without one. A zero, which New takes for
// the default in a Config made in code, is refused: read from the
// environment, every number has a default of its own.
func (c Config) Validate() error {
	var bad error
	base, _ := url.Parse(c.APIURL)
	switch insecure := secureurl.Check(c.APIURL); {
	case insecure != nil:
		// Every request carries the key in its query.
		bad = config.Refuse("OPTIMOROUTE_API_URL", "%v", insecure)
	case base.RawQuery != "":
		bad = config.Refuse("OPTIMOROUTE_API_URL", "must not carry a query; the key goes in OPTIMOROUTE_API_KEY")
	}
	return errors.Join(bad, config.Positive("OPTIMOROUTE_TIMEOUT", c.Timeout), config.Positive("OPTIMOROUTE_MAX_CONCURRENT", c.MaxConcurrent))
}

// CheckKey refuses a blank OPTIMOROUTE_API_KEY.
func (c Config) CheckKey() error {
	if c.APIKey == "" {
		return config.Refuse("OPTIMOROUTE_API_KEY", "is required (OPTIMOROUTE_DRY_RUN answers inside the process without it)")
	}
	return nil
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the Client send its requests through a copy of hc
// that follows no redirect (a 3xx is an *APIError): one that kept the
// query would take the key to wherever it points.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.http = hc }
}

// Client calls the OptimoRoute API. It is safe for concurrent use.
type Client struct {
	base    *url.URL
	key     string
	timeout time.Duration
	http    *http.Client
	slots   chan struct{}

	mu    sync.Mutex
	calls map[string]int64

	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
}

// New returns a Client for cfg. It fails when Validate or CheckKey does: a
// URL that is not https (or http to a loopback address), an empty key.
func New(cfg Config, opts ...Option) (*Client, error) {
	if cfg.MaxConcurrent == 0 {
		cfg.MaxConcurrent = 5
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	if err := errors.Join(cfg.Validate(), cfg.CheckKey()); err != nil {
		return nil, err
	}
	base, _ := url.Parse(cfg.APIURL) // Validate parsed it
	c := &Client{
		base:    base,
		key:     cfg.APIKey,
		timeout: cfg.Timeout,
		http:    http.DefaultClient,
		slots:   make(chan struct{}, cfg.MaxConcurrent),
		calls:   make(map[string]int64),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "optimoroute_requests_total",
			Help: "OptimoRoute API requests by operation and result (ok, api_error, http_error, transport_error).",
		}, []string{"operation", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "optimoroute_request_duration_seconds",
			Help:    "Duration of OptimoRoute API requests, from sending to the body read.",
			Buckets: prometheus.DefBuckets,
		}, []string{"operation"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "optimoroute_requests_in_flight",
			Help: "OptimoRoute API requests in flight.",
		}),
	}
	for _, o := range opts {
		o(c)
	}
	c.http = secureurl.NoRedirectClient(c.http)
	return c, nil
}

// Collectors returns the client's Prometheus collectors, for the caller to
// register: optimoroute_requests_total, optimoroute_request_duration_seconds
// and optimoroute_requests_in_flight.
func (c *Client) Collectors() []prometheus.Collector {
	return []prometheus.Collector{c.requests, c.duration, c.inFlight}
}

// Calls returns how many requests were sent per operation (a bulk call of
// 1,201 orders counts 3). Requests that failed in transit count too.
func (c *Client) Calls() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.calls))
	for op, n := range c.calls {
		out[op] = n
	}
	return out
}

// envelope is the part every response shares.
type envelope struct {
	Success          *bool           `json:"success"`
	Code             Code            `json:"code"`
	Message          string          `json:"message"`
	GeocodingResults json.RawMessage `json:"geocodingResults"`
}

// get calls op with query parameters and decodes the body into out.
func (c *Client) get(ctx context.Context, op string, query url.Values, out any) error {
	return c.do(ctx, http.MethodGet, op, query, nil, out)
}

// post calls op with body as JSON and decodes the response into out.
func (c *Client) post(ctx context.Context, op string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("optimoroute %s: encode request: %w", op, err)
	}
	return c.do(ctx, http.MethodPost, op, nil, b, out)
}

func (c *Client) do(ctx context.Context, method, op string, query url.Values, body []byte, out any) error {
	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("optimoroute %s: wait for a free connection: %w", op, ctx.Err())
	}
	defer func() { <-c.slots }()

	c.mu.Lock()
	c.calls[op]++
	c.mu.Unlock()
	c.inFlight.Inc()
	defer c.inFlight.Dec()
	start := time.Now()
	result, err := c.roundTrip(ctx, method, op, query, body, out)
	c.duration.WithLabelValues(op).Observe(time.Since(start).Seconds())
	c.requests.WithLabelValues(op, result).Inc()
	return err
}

// roundTrip sends one request and returns the metrics result label.
func (c *Client) roundTrip(ctx context.Context, method, op string, query url.Values, body []byte, out any) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()

	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	q.Set("key", c.key)
	u := c.base.JoinPath(op)
	u.RawQuery = q.Encode()

	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return "transport_error", fmt.Errorf("optimoroute %s: %w", op, c.scrub(err))
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "transport_error", fmt.Errorf("optimoroute %s: %w", op, c.scrub(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return "transport_error", fmt.Errorf("optimoroute %s: read response: %w", op, c.scrub(err))
	}
	return c.answer(op, resp.StatusCode, raw, out)
}

// answer reads a response of op: an error, or its body decoded into out.
// The body decides, whatever the status: OptimoRoute sends errors with
// HTTP 200 too. It returns the metrics result label.
func (c *Client) answer(op string, status int, raw []byte, out any) (string, error) {
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return "http_error", &APIError{Operation: op, HTTPStatus: status, Message: c.snippet(raw, status)}
	}
	if env.Code != "" || (env.Success != nil && !*env.Success) || status >= 300 {
		msg := c.redact(env.Message)
		if env.Code == "" && msg == "" {
			msg = c.snippet(raw, status)
		}
		return "api_error", &APIError{
			Operation:        op,
			Code:             env.Code,
			Message:          msg,
			HTTPStatus:       status,
			GeocodingResults: env.GeocodingResults,
		}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return "http_error", fmt.Errorf("optimoroute %s: decode response: %w", op, err)
		}
	}
	return "ok", nil
}

// snippet is the start of a body that is not an OptimoRoute answer, for an
// error message: redacted before it is cut, so that no piece of the key is
// left at the cut, and cut between characters.
func (c *Client) snippet(raw []byte, status int) string {
	s := c.redact(strings.TrimSpace(string(raw)))
	if len(s) > 200 {
		cut := 200
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	if s == "" {
		s = http.StatusText(status)
	}
	return s
}

// redact removes the key, raw or query-escaped, from s.
func (c *Client) redact(s string) string {
	for _, k := range []string{c.key, url.QueryEscape(c.key), url.PathEscape(c.key)} {
		if k != "" {
			s = strings.ReplaceAll(s, k, "REDACTED")
		}
	}
	return s
}

// scrub returns err without the key: net/http's *url.Error prints the
// request URL, query string and all.
func (c *Client) scrub(err error) error {
	if ue, ok := err.(*url.Error); ok {
		u, perr := url.Parse(ue.URL)
		redacted := "REDACTED-URL"
		if perr == nil {
			q := u.Query()
			if q.Has("key") {
				q.Set("key", "REDACTED")
			}
			u.RawQuery = q.Encode()
			redacted = u.String()
		}
		return &url.Error{Op: ue.Op, URL: c.redact(redacted), Err: c.scrub(ue.Err)}
	}
	if msg := err.Error(); c.redact(msg) != msg {
		// Unwrapping would hand the key back to whoever prints the cause.
		return errors.New(c.redact(msg))
	}
	return err
}
