package prime

import (
	"maps"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of a request, as counted in Stats and the metrics.
const (
	outcomeOK           = "ok"
	outcomeNotFound     = "not_found"
	outcomeRateLimited  = "rate_limited"
	outcomeUnauthorized = "unauthorized"
	outcomeClientError  = "client_error"
	outcomeServerError  = "server_error"
	outcomeError        = "error" // no HTTP answer
)

func outcomeOf(status int) string {
	switch {
	case status >= 200 && status < 300:
		return outcomeOK
	case status == http.StatusNotFound:
		return outcomeNotFound
	case status == http.StatusTooManyRequests:
		return outcomeRateLimited
	case status == http.StatusUnauthorized:
		return outcomeUnauthorized
	case status >= 500:
		return outcomeServerError
	default:
		return outcomeClientError
	}
}

// Stats counts what a client did since it was made.
type Stats struct {
	// Requests is every HTTP request sent to Prime, token requests included:
	// each one counts against Prime's budget.
	Requests int64
	// ByEndpoint splits Requests by call ("token", "jobs.get" …).
	ByEndpoint map[string]int64
	// ByOutcome splits Requests by result ("ok", "not_found",
	// "rate_limited", "unauthorized", "client_error", "server_error", "error").
	ByOutcome map[string]int64
	// TokenFetches is how many tokens were requested.
	TokenFetches int64
	// Waits is how many times a call waited for the limiter, and WaitTime
	// how long in all (on the client's clock).
	Waits    int64
	WaitTime time.Duration
}

type requestKey struct{ endpoint, outcome string }

// metrics holds the client's counters; Stats and the Prometheus collector
// both read them.
type metrics struct {
	name string

	mu        sync.Mutex
	requests  map[requestKey]int64
	waits     map[string]int64
	waitTime  map[string]time.Duration
	remaining map[string]float64 // last x-ratelimit-*-remaining seen, by window

	requestsDesc, waitsDesc, waitSecondsDesc, remainingDesc *prometheus.Desc
}

func newMetrics(name string) *metrics {
	labels := prometheus.Labels{"client": name}
	return &metrics{
		name:      name,
		requests:  make(map[requestKey]int64),
		waits:     make(map[string]int64),
		waitTime:  make(map[string]time.Duration),
		remaining: make(map[string]float64),
		requestsDesc: prometheus.NewDesc("prime_client_requests_total",
			"HTTP requests sent to Prime, by endpoint and outcome.", []string{"endpoint", "outcome"}, labels),
		waitsDesc: prometheus.NewDesc("prime_client_rate_limit_waits_total",
			"Calls that waited for the rate limiter, by reason (rate, server_hold).", []string{"reason"}, labels),
		waitSecondsDesc: prometheus.NewDesc("prime_client_rate_limit_wait_seconds_total",
			"Time calls spent waiting for the rate limiter, by reason.", []string{"reason"}, labels),
		remainingDesc: prometheus.NewDesc("prime_client_ratelimit_remaining",
			"The last x-ratelimit-<window>-remaining Prime sent.", []string{"window"}, labels),
	}
}

func (m *metrics) request(endpoint, outcome string) {
	m.mu.Lock()
	m.requests[requestKey{endpoint, outcome}]++
	m.mu.Unlock()
}

func (m *metrics) wait(reason string, d time.Duration) {
	m.mu.Lock()
	m.waits[reason]++
	m.waitTime[reason] += d
	m.mu.Unlock()
}

func (m *metrics) setRemaining(window string, n float64) {
	m.mu.Lock()
	m.remaining[window] = n
	m.mu.Unlock()
}

func (m *metrics) stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := Stats{ByEndpoint: make(map[string]int64), ByOutcome: make(map[string]int64)}
	for k, n := range m.requests {
		s.Requests += n
		s.ByEndpoint[k.endpoint] += n
		s.ByOutcome[k.outcome] += n
		if k.endpoint == endpointToken {
			s.TokenFetches += n
		}
	}
	for _, n := range m.waits {
		s.Waits += n
	}
	for _, d := range m.waitTime {
		s.WaitTime += d
	}
	return s
}

// Describe implements prometheus.Collector.
func (c *Client) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.m.requestsDesc, c.m.waitsDesc, c.m.waitSecondsDesc, c.m.remainingDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector, so a process can register its
// client: metrics.Replace(reg, client). Clients in one process need distinct
// names (WithName).
func (c *Client) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	m.mu.Lock()
	requests := maps.Clone(m.requests)
	waits := maps.Clone(m.waits)
	waitTime := maps.Clone(m.waitTime)
	remaining := maps.Clone(m.remaining)
	m.mu.Unlock()
	for k, n := range requests {
		ch <- prometheus.MustNewConstMetric(m.requestsDesc, prometheus.CounterValue, float64(n), k.endpoint, k.outcome)
	}
	for reason, n := range waits {
		ch <- prometheus.MustNewConstMetric(m.waitsDesc, prometheus.CounterValue, float64(n), reason)
		ch <- prometheus.MustNewConstMetric(m.waitSecondsDesc, prometheus.CounterValue, waitTime[reason].Seconds(), reason)
	}
	for window, n := range remaining {
		ch <- prometheus.MustNewConstMetric(m.remainingDesc, prometheus.GaugeValue, n, window)
	}
}
