package primesim

import (
	"maps"
	"sync"
)

// Stats counts what the simulated API served. Control calls are not counted.
type Stats struct {
	// Calls is every API request, the token endpoint included.
	Calls int64 `json:"calls"`
	// ByEndpoint splits Calls by route ("GET /jobs/{id}", "POST /oauth/token" …).
	ByEndpoint map[string]int64 `json:"byEndpoint"`
	// ByStatus splits Calls by the status answered.
	ByStatus map[int]int64 `json:"byStatus"`
	// TokensIssued is how many tokens the token endpoint issued.
	TokensIssued int64 `json:"tokensIssued"`
	// RateLimited is how many calls were answered 429 (limit or fault).
	RateLimited int64 `json:"rateLimited"`
	// InFlight is the API calls being served now, and MaxInFlight the most
	// ever served at once.
	InFlight    int64 `json:"inFlight"`
	MaxInFlight int64 `json:"maxInFlight"`
	// WebhooksFired is how many webhooks the simulator sent.
	WebhooksFired int64 `json:"webhooksFired"`
}

type stats struct {
	mu sync.Mutex
	s  Stats
}

func newStats() *stats {
	st := &stats{}
	st.reset()
	return st
}

func (st *stats) reset() {
	st.mu.Lock()
	inFlight := st.s.InFlight // calls being served now still end
	st.s = Stats{ByEndpoint: make(map[string]int64), ByStatus: make(map[int]int64), InFlight: inFlight, MaxInFlight: inFlight}
	st.mu.Unlock()
}

// begin counts a call arriving and returns the calls in flight, itself included.
func (st *stats) begin(endpoint string) int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.s.Calls++
	st.s.ByEndpoint[endpoint]++
	st.s.InFlight++
	st.s.MaxInFlight = max(st.s.MaxInFlight, st.s.InFlight)
	return st.s.InFlight
}

func (st *stats) end(status int) {
	st.mu.Lock()
	st.s.InFlight--
	st.s.ByStatus[status]++
	if status == 429 {
		st.s.RateLimited++
	}
	st.mu.Unlock()
}

func (st *stats) tokenIssued() {
	st.mu.Lock()
	st.s.TokensIssued++
	st.mu.Unlock()
}

func (st *stats) webhookFired() {
	st.mu.Lock()
	st.s.WebhooksFired++
	st.mu.Unlock()
}

func (st *stats) snapshot() Stats {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.s
	s.ByEndpoint = maps.Clone(st.s.ByEndpoint)
	s.ByStatus = maps.Clone(st.s.ByStatus)
	return s
}

// Stats returns the counts so far.
func (s *Sim) Stats() Stats { return s.stats.snapshot() }

// ResetStats zeroes the counts (the in-flight gauge keeps the calls being
// served now).
func (s *Sim) ResetStats() { s.stats.reset() }
