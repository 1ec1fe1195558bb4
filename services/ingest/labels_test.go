package ingest_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go/jetstream"
)

// Made-up eventActions add no series: primeflow_webhooks_total's action
// label takes the actions a stage handles and _none, _other and _unread
// (never blank, refused webhooks included), while each made-up action is
// still stored, published on its own subject (the token rule) and logged
// by name once.
func TestActionLabelsAreBounded(t *testing.T) {
	is := is.New(t)
	h := start(t)
	const madeUp = 30
	for i := range madeUp {
		for range 2 {
			res := h.post(fmt.Sprintf(`{"eventAction":"made-up-%d"}`, i), "API-Key", apiKey)
			is.Equal(res.StatusCode, http.StatusOK) // stored
		}
	}
	for _, body := range []string{`{"eventAction":"change-job-status"}`, `{}`, `not json`, `{"eventAction":"has space"}`} {
		is.Equal(h.post(body, "API-Key", apiKey).StatusCode, http.StatusOK) // stored too
	}
	is.Equal(h.post(`{}`, "API-Key", "wrong").StatusCode, http.StatusUnauthorized)                                // refused
	is.Equal(h.post(strings.Repeat("x", 65<<10), "API-Key", apiKey).StatusCode, http.StatusRequestEntityTooLarge) // refused

	labels := map[string]bool{}
	sample := regexp.MustCompile(`^primeflow_webhooks_total\{action="([^"]*)",outcome="[a-z_]+"\} `)
	for line := range strings.Lines(h.scrape()) {
		if m := sample.FindStringSubmatch(line); m != nil {
			labels[m[1]] = true
		}
	}
	allowed := append(events.Actions(), events.ActionNone, events.LabelOther, events.LabelUnread)
	for l := range labels {
		is.True(slices.Contains(allowed, l)) // a known action or one of the few labels, never blank
	}
	is.True(labels[events.LabelOther])                                                                       // the made-up actions share one
	is.True(labels[events.LabelUnread])                                                                      // refused webhooks have a label
	is.Equal(h.metric(`primeflow_webhooks_total{action="_other",outcome="stored"}`), fmt.Sprint(2*madeUp+1)) // every one counted

	flowtest.Eventually(t, "published", func() bool { return h.streamMsgs() == 2*madeUp+4 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := h.js.Stream(ctx, events.StreamWebhook)
	is.NoErr(err)
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(events.WebhookSubject("made-up-7")))
	is.NoErr(err)                                                                // the stream answers
	is.Equal(info.State.Subjects[events.WebhookSubject("made-up-7")], uint64(2)) // on the action's own subject: replayable by it

	logs := h.logs.String()
	for i := range madeUp {
		is.Equal(strings.Count(logs, fmt.Sprintf("action=made-up-%d ", i)), 1) // each new action logged once, by name
	}
	is.True(strings.Contains(logs, `action="has space"`))        // an action that cannot be a token too
	is.True(!strings.Contains(logs, "action=change-job-status")) // not the known ones
}

// scrape is ingest's /metrics.
func (h *harness) scrape() string {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, h.url+"/metrics", nil)
	req.SetBasicAuth(adminUser, adminPass)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return string(b)
}
