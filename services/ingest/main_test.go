package ingest_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/services/ingest"
	"github.com/matryer/is"
)

// TestMainRunsTheService starts ingest the way its binary does, from the
// environment, and sends it a webhook.
func TestMainRunsTheService(t *testing.T) {
	is := is.New(t)
	ns := natstest.Server(t)
	addr := flowtest.FreeAddr(t)
	env := map[string]string{
		"NATS_URL":              ns.ClientURL(),
		"DATA_DIR":              t.TempDir(),
		"HTTP_ADDR":             addr,
		"PRIME_WEBHOOK_API_KEY": apiKey,
		"ADMIN_USER":            adminUser,
		"ADMIN_PASSWORD":        adminPass,
		"LOG_FORMAT":            "json",
	}
	var stderr flowtest.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ingest.Main(ctx, func(k string) string { return env[k] }, &stderr) }()
	h := &harness{t: t, url: "http://" + addr}
	h.waitHealthy()

	res := h.post(`{"eventAction":"change-job-status","jobId":259047}`, "API-Key", apiKey)
	is.Equal(res.StatusCode, http.StatusOK) // stored
	_, js := natstest.Connect(t, ns)
	h.js = js
	flowtest.Eventually(t, "published", func() bool { return h.streamMsgs() == 1 })

	cancel()
	is.NoErr(<-done)                                        // a clean shutdown
	is.True(strings.Contains(stderr.String(), `"started"`)) // logs as JSON on stderr
	is.True(!strings.Contains(stderr.String(), apiKey))     // never the key
	is.True(!strings.Contains(stderr.String(), adminPass))  // nor the admin password
}
