package ingest

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

// handleProcess is POST /api/prime/webhooklog/process: run the relay now and
// answer with what it did; 409 while a run is under way (§3.1).
func (in *Ingest) handleProcess() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A run over a long backlog may outlast HTTP_WRITE_TIMEOUT: this
		// route needs Basic auth, and its answer is the run's summary.
		http.NewResponseController(w).SetWriteDeadline(time.Time{})
		sum, err := in.relay.runOnce(r.Context())
		w.Header().Set("Content-Type", "application/json")
		switch {
		case errors.Is(err, errRelayBusy):
			w.WriteHeader(http.StatusConflict)
			json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		case err != nil:
			w.WriteHeader(http.StatusInternalServerError)
		}
		json.NewEncoder(w).Encode(sum)
	})
}
