package primesim

import "net/http"

// routes lists the whole HTTP surface: Prime's API, then the control API.
func (s *Sim) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("POST "+pathToken, s.api("POST "+pathToken, s.handleToken()))
	for _, k := range Kinds() {
		mux.Handle("GET /"+string(k)+"/{id}", s.api("GET /"+string(k)+"/{id}", s.handleGet(k)))
		mux.Handle("GET /"+string(k), s.api("GET /"+string(k), s.handleList(k)))
	}

	mux.Handle("GET /_sim/stats", s.handleStats())
	mux.Handle("DELETE /_sim/stats", s.handleResetStats())
	mux.Handle("POST /_sim/reset", s.handleReset())
	mux.Handle("POST /_sim/fixture", s.handleLoadFixture())
	mux.Handle("GET /_sim/faults", s.handleGetFaults())
	mux.Handle("POST /_sim/faults", s.handleSetFaults())
	mux.Handle("DELETE /_sim/faults", s.handleClearFaults())
	mux.Handle("GET /_sim/ratelimit", s.handleGetRateLimit())
	mux.Handle("PUT /_sim/ratelimit", s.handleSetRateLimit())
	mux.Handle("POST /_sim/tokens/revoke", s.handleRevokeTokens())
	mux.Handle("POST /_sim/webhooks", s.handleFireWebhook())
	mux.Handle("POST /_sim/jobs/{id}/status", s.handleChangeJobStatus())
	mux.Handle("POST /_sim/{kind}", s.handleGenerate())
	mux.Handle("GET /_sim/{kind}/{id}", s.handleGetRecord())
	mux.Handle("PUT /_sim/{kind}/{id}", s.handlePutRecord())
	mux.Handle("DELETE /_sim/{kind}/{id}", s.handleDeleteRecord())
	return mux
}
