package ingest_test

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/services/ingest"
	"github.com/matryer/is"
)

// TestStartsOnlyWhenTheServerTakesABodyAtTheLimit runs ingest as its binary
// does against servers with a given max_payload: one that cannot take a
// webhook at INGEST_MAX_BODY_BYTES plus its headers is refused at start, with
// an error naming the setting.
func TestStartsOnlyWhenTheServerTakesABodyAtTheLimit(t *testing.T) {
	const limit = 1 << 20 // INGEST_MAX_BODY_BYTES's default
	for _, tc := range []struct {
		name       string
		maxPayload int32
		starts     bool
	}{
		{"NATS's default of 1 MB", 1 << 20, false},
		{"one byte short of the limit and the headers", limit + ingest.HeaderRoom - 1, false},
		{"the limit and the headers", limit + ingest.HeaderRoom, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ns := natstest.ServerWithMaxPayload(t, tc.maxPayload)
			addr := flowtest.FreeAddr(t)
			env := map[string]string{
				"NATS_URL": ns.ClientURL(), "DATA_DIR": t.TempDir(), "HTTP_ADDR": addr,
				"PRIME_WEBHOOK_API_KEY": apiKey, "ADMIN_USER": adminUser, "ADMIN_PASSWORD": adminPass,
			}
			var stderr flowtest.Buffer
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- ingest.Main(ctx, func(k string) string { return env[k] }, &stderr) }()
			if tc.starts {
				h := &harness{t: t, url: "http://" + addr}
				h.waitHealthy()
				cancel()
				is.NoErr(<-done) // started and stopped cleanly
				return
			}
			select {
			case err := <-done:
				is.True(err != nil)                                                      // refused to start
				is.True(strings.Contains(err.Error(), "INGEST_MAX_BODY_BYTES"))          // naming the setting
				is.True(strings.Contains(err.Error(), strconv.Itoa(int(tc.maxPayload)))) // and what the server takes
			case <-time.After(20 * time.Second):
				t.Fatal("ingest started against a server that cannot take a webhook at the body limit")
			}
		})
	}
}

// TestABodyAtTheLimitIsPublished posts a body of exactly the default
// INGEST_MAX_BODY_BYTES to ingest on the embedded server as bin/primeflow
// starts it: stored, answered 200 and published.
func TestABodyAtTheLimitIsPublished(t *testing.T) {
	is := is.New(t)
	defaults := ingest.DefaultConfig()
	h := start(t, withConfig(func(c *ingest.Config) { c.MaxBodyBytes = defaults.MaxBodyBytes }))
	head := `{"eventAction":"change-job-status","jobId":259047,"pad":"`
	body := head + strings.Repeat("a", int(defaults.MaxBodyBytes)-len(head)-2) + `"}`
	is.Equal(int64(len(body)), defaults.MaxBodyBytes) // exactly the limit

	res := h.post(body, "API-Key", apiKey)
	is.Equal(res.StatusCode, http.StatusOK) // stored
	row := h.stored(res)
	flowtest.Eventually(t, "the webhook in the stream", func() bool { return h.streamMsgs() == 1 })
	flowtest.Eventually(t, "publishedUTC recorded", func() bool { return h.published(row.ID) })
	s, err := h.js.Stream(context.Background(), "PRIME_WEBHOOK")
	is.NoErr(err)
	got, err := s.GetMsg(context.Background(), 1)
	is.NoErr(err)
	is.Equal(len(got.Data), len(body)) // the whole body
}

// TestHeaderRoomCoversTheLargestHeaders: the room ingest leaves above the
// body limit holds the headers of any webhook's message.
func TestHeaderRoomCoversTheLargestHeaders(t *testing.T) {
	is := is.New(t)
	action := strings.Repeat("\U0001F600", 100) // eventAction is clipped to 100 characters
	m := events.NewWebhookMsg(math.MaxInt64, math.MaxInt, action, "")
	headers := m.Size() - len(m.Subject)
	is.True(headers <= ingest.HeaderRoom) // fits
	t.Logf("largest headers: %d bytes of %d", headers, ingest.HeaderRoom)
}
