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
	// Waits is how many times a call waited for the limiter's pace or a
	// hold, and WaitTime how long in all (on the client's clock).
	Waits    int64
	WaitTime time.Duration
	// ByPriority splits Requests by the class of the call that made them.
	ByPriority map[Priority]int64
	// Waiting is the calls waiting for their turn now, by class.
	Waiting map[Priority]int
	// Coalesced counts the calls that reused another's answer instead of
	// asking Prime, by how: "in_flight", "recent", "shared".
	Coalesced map[string]int64
	// Unavailable counts the calls Prime answered 5xx or not at all that
	// were Prime's fault, not the record's (the work waited), and Unsent
	// the calls not sent because Prime was not answering (outage.go).
	Unavailable, Unsent int64
}

type requestKey struct{ endpoint, outcome string }

// coalesceKey labels prime_client_coalesced_total.
type coalesceKey struct{ caller, purpose, how string }

// callKey labels prime_client_calls_total.
type callKey struct {
	caller, purpose string
	prio            Priority
}

// metrics holds the client's counters; Stats and the Prometheus collector
// both read them.
type metrics struct {
	name string

	mu        sync.Mutex
	requests  map[requestKey]int64
	waits     map[string]int64
	waitTime  map[string]time.Duration
	remaining map[string]float64 // last x-ratelimit-*-remaining seen, by window
	calls     map[callKey]int64
	coalesces map[coalesceKey]int64

	requestsDesc, waitsDesc, waitSecondsDesc, remainingDesc, callsDesc, waitingDesc, coalescedDesc *prometheus.Desc
	unreachableDesc, unavailableDesc                                                               *prometheus.Desc
	// budgetWait is the time each call waited for its turn, by class.
	budgetWait *prometheus.HistogramVec
}

func newMetrics(name string) *metrics {
	labels := prometheus.Labels{"client": name}
	m := &metrics{
		name:      name,
		requests:  make(map[requestKey]int64),
		waits:     make(map[string]int64),
		waitTime:  make(map[string]time.Duration),
		remaining: make(map[string]float64),
		calls:     make(map[callKey]int64),
		coalesces: make(map[coalesceKey]int64),
		requestsDesc: prometheus.NewDesc("prime_client_requests_total",
			"HTTP requests sent to Prime, by endpoint and outcome.", []string{"endpoint", "outcome"}, labels),
		waitsDesc: prometheus.NewDesc("prime_client_rate_limit_waits_total",
			"Calls that waited for the rate limiter, by reason (rate, server_hold).", []string{"reason"}, labels),
		waitSecondsDesc: prometheus.NewDesc("prime_client_rate_limit_wait_seconds_total",
			"Time calls spent waiting for the rate limiter, by reason.", []string{"reason"}, labels),
		remainingDesc: prometheus.NewDesc("prime_client_ratelimit_remaining",
			"The last x-ratelimit-<window>-remaining Prime sent.", []string{"window"}, labels),
		callsDesc: prometheus.NewDesc("prime_client_calls_total",
			"HTTP requests sent to Prime, by the caller and purpose the call's context names (prime.WithCaller) and its priority class.",
			[]string{"caller", "purpose", "priority"}, labels),
		coalescedDesc: prometheus.NewDesc("prime_client_coalesced_total",
			"Calls that reused the answer of another call for the same record instead of asking Prime, by caller, purpose and how (in_flight: joined a call under way; recent: an answer this process had; shared: one another process had).",
			[]string{"caller", "purpose", "how"}, labels),
		unreachableDesc: prometheus.NewDesc("prime_client_unreachable_since_seconds",
			"When Prime stopped answering this client's calls (a 5xx or no answer, none answered since), as a Unix time; 0 while it answers. Meanwhile the work that calls Prime waits, no attempt counted, and one call at a time tries Prime again.",
			nil, labels),
		unavailableDesc: prometheus.NewDesc("prime_client_unavailable_total",
			"Calls that made their work wait because Prime did not answer, by how: failed (Prime answered 5xx or not at all, and the fault was not the record's), unsent (not sent: Prime was not answering).",
			[]string{"how"}, labels),
		waitingDesc: prometheus.NewDesc("prime_client_waiting",
			"Calls waiting for their turn at Prime's budget now, by priority class.", []string{"priority"}, labels),
		budgetWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:        "prime_client_budget_wait_seconds",
			Help:        "How long each call that went out waited for its turn at Prime's budget, by priority class.",
			ConstLabels: labels,
			Buckets:     []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 1.5, 2, 3, 5, 10, 30, 60, 120, 300},
		}, []string{"priority"}),
	}
	for _, p := range Priorities() {
		m.budgetWait.WithLabelValues(p.String()) // served at 0 from the start
	}
	return m
}

// call counts a request sent for c at class p.
func (m *metrics) call(c caller, p Priority) {
	m.mu.Lock()
	m.calls[callKey{c.name, c.purpose, p}]++
	m.mu.Unlock()
}

// coalesced counts a call for c that reused another's answer.
func (m *metrics) coalesced(c caller, how string) {
	m.mu.Lock()
	m.coalesces[coalesceKey{c.name, c.purpose, how}]++
	m.mu.Unlock()
}

// waited records how long a call of class p waited for its turn.
func (m *metrics) waited(p Priority, d time.Duration) {
	m.budgetWait.WithLabelValues(p.String()).Observe(d.Seconds())
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
	s := Stats{ByEndpoint: make(map[string]int64), ByOutcome: make(map[string]int64), ByPriority: make(map[Priority]int64),
		Coalesced: make(map[string]int64)}
	for k, n := range m.coalesces {
		s.Coalesced[k.how] += n
	}
	for k, n := range m.calls {
		s.ByPriority[k.prio] += n
	}
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
	for _, d := range []*prometheus.Desc{c.m.requestsDesc, c.m.waitsDesc, c.m.waitSecondsDesc, c.m.remainingDesc, c.m.callsDesc, c.m.waitingDesc, c.m.coalescedDesc,
		c.m.unreachableDesc, c.m.unavailableDesc} {
		ch <- d
	}
	c.m.budgetWait.Describe(ch)
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
	calls := maps.Clone(m.calls)
	coalesces := maps.Clone(m.coalesces)
	m.mu.Unlock()
	for k, n := range coalesces {
		ch <- prometheus.MustNewConstMetric(m.coalescedDesc, prometheus.CounterValue, float64(n), k.caller, k.purpose, k.how)
	}
	for k, n := range calls {
		ch <- prometheus.MustNewConstMetric(m.callsDesc, prometheus.CounterValue, float64(n), k.caller, k.purpose, k.prio.String())
	}
	m.budgetWait.Collect(ch)
	waiting := c.lim.waiting()
	for _, p := range Priorities() {
		ch <- prometheus.MustNewConstMetric(m.waitingDesc, prometheus.GaugeValue, float64(waiting[p]), p.String())
	}
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
	since := 0.0
	if t := c.out.unreachable(); !t.IsZero() {
		since = float64(t.UnixMilli()) / 1e3
	}
	ch <- prometheus.MustNewConstMetric(m.unreachableDesc, prometheus.GaugeValue, since)
	held, waited := c.out.counts()
	ch <- prometheus.MustNewConstMetric(m.unavailableDesc, prometheus.CounterValue, float64(waited), "failed")
	ch <- prometheus.MustNewConstMetric(m.unavailableDesc, prometheus.CounterValue, float64(held), "unsent")
}
