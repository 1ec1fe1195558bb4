package ingest

import (
	"net/http"

	"github.com/ethosbuilding/primeflow/pkg/service"
)

// WebhookPath is Prime's webhook, the one route without Basic auth. Nothing
// else may live under it (§2, §10.1).
const WebhookPath = "/api/prime/webhook"

// ProcessPath runs the relay now (Basic auth). It is deliberately not under
// WebhookPath (§2).
const ProcessPath = "/api/prime/webhooklog/process"

// routes lists ingest's HTTP surface; service.Router adds /healthz,
// /metrics and the 401 catch-all.
func (in *Ingest) routes(r *service.Router) {
	r.Public().Handle(WebhookPath, in.handleWebhook()).Methods(http.MethodPost)
	r.Admin.Handle(ProcessPath, in.handleProcess()).Methods(http.MethodPost)
}
