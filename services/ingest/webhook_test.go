package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/services/ingest"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const jobGUID = "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"

// stored reads the row whose id a 200 answered with.
func (h *harness) stored(res *http.Response) store.WebhookLogRow {
	h.t.Helper()
	var body struct{ ID int64 }
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		h.t.Fatalf("decode 200 body: %v", err)
	}
	row, err := h.store.GetWebhookLog(context.Background(), body.ID)
	if err != nil {
		h.t.Fatalf("row %d after 200: %v", body.ID, err)
	}
	return row
}

func TestAPIKey(t *testing.T) {
	for _, tc := range []struct {
		name       string
		configured string
		header     []string
	}{
		{"missing", apiKey, nil},
		{"wrong", apiKey, []string{"API-Key", "3f0c1a8e-0000-4000-8000-000000000000"}},
		{"prefix of the key", apiKey, []string{"API-Key", apiKey[:10]}},
		{"basic auth instead", apiKey, []string{"Authorization", "Basic b3BzOnMzY3JldC1hZG1pbg=="}},
		{"blank configured key, blank header", "", []string{"API-Key", ""}},
		{"blank configured key, any header", "", []string{"API-Key", apiKey}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			h := start(t, withConfig(func(c *ingest.Config) { c.APIKey = tc.configured }))
			res := h.post(`{"eventAction":"change-job-status","jobId":259047}`, tc.header...)
			is.Equal(res.StatusCode, http.StatusUnauthorized) // rejected
			is.Equal(h.rows(), 0)                             // nothing stored
		})
	}
}

// TestRefusalsAreLogged: a refused webhook is logged — a key rotated on
// Prime's side shows in the log — at most once a minute, never with the key.
func TestRefusalsAreLogged(t *testing.T) {
	is := is.New(t)
	h := start(t)
	const wrong = "3f0c1a8e-0000-4000-8000-00000000beef"
	for range 3 {
		is.Equal(h.post(`{}`, "API-Key", wrong).StatusCode, http.StatusUnauthorized)
	}
	logs := h.logs.String()
	is.Equal(strings.Count(logs, "webhook refused"), 1) // one line for the three
	is.True(strings.Contains(logs, "keySent=true"))     // saying a key came
	is.True(!strings.Contains(logs, wrong))             // but not which
}

func TestStoresTheEventAsReceived(t *testing.T) {
	h := start(t)
	for _, tc := range []struct {
		name, body          string
		wantPayload         string
		wantAction, wantJob string
	}{
		{"change-job-status with the GUID in jobStatusId",
			`{"eventAction":"change-job-status","jobId":259047,"jobStatusId":"` + strings.ToUpper(jobGUID) + `"}`,
			"", "change-job-status", jobGUID},
		{"a GUID jobId",
			`{"eventAction":"create-appointment","jobId":"` + jobGUID + `","appointmentTypeId":"7d3f8e21-9c4b-4d1e-8f6a-5b2c9e0a1d34"}`,
			"", "create-appointment", jobGUID},
		{"numeric jobId is not promoted",
			`{"eventAction":"create-appointment","jobId":2402073,"appointmentTypeId":"7d3f8e21-9c4b-4d1e-8f6a-5b2c9e0a1d34"}`,
			"", "create-appointment", ""},
		{"jobStatusId only counts for change-job-status",
			`{"eventAction":"create-estimate","jobStatusId":"` + jobGUID + `"}`,
			"", "create-estimate", ""},
		{"empty body is {}", ``, `{}`, "", ""},
		{"blank body is {}", "  \n", `{}`, "", ""},
		{"not JSON is stored as it came", `eventAction=change-job-status&jobId=1`, "", "", ""},
		{"JSON that is not an object", `[1,2,3]`, "", "", ""},
		{"odd eventAction", `{"eventAction":"Change Job.Status","jobId":1}`, "", "Change Job.Status", ""},
		{"numeric eventAction kept as text", `{"eventAction":42}`, "", "42", ""},
		{"no eventAction", `{"jobId":1}`, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			res := h.post(tc.body, "API-Key", apiKey, "X-Request-Id", "abc-123")
			is.Equal(res.StatusCode, http.StatusOK) // stored
			row := h.stored(res)
			want := tc.wantPayload
			if want == "" {
				want = tc.body
			}
			is.Equal(row.Payload, want)              // the raw body
			is.Equal(row.EventAction, tc.wantAction) // eventAction promoted
			is.Equal(row.JobID, tc.wantJob)          // jobId only when a GUID
			is.True(row.IsAuthenticated)             // isAuthenticated = 1
			is.Equal(row.RemoteIP, "127.0.0.1")      // the remote IP
			is.True(!row.Processed())                // queued

			var headers map[string][]string
			is.NoErr(json.Unmarshal([]byte(row.Headers), &headers)) // headers as JSON
			is.Equal(headers["Api-Key"], []string{"(redacted)"})    // the key is redacted
			is.Equal(headers["X-Request-Id"], []string{"abc-123"})  // other headers kept
			is.True(!strings.Contains(row.Headers, apiKey))         // the key is nowhere
		})
	}
	is := is.New(t)
	is.True(!strings.Contains(h.logs.String(), apiKey)) // and never logged
}

func TestBodyOverTheLimit(t *testing.T) {
	is := is.New(t)
	h := start(t, withConfig(func(c *ingest.Config) { c.MaxBodyBytes = 1024 }))
	res := h.post(`{"eventAction":"x","pad":"`+strings.Repeat("a", 2048)+`"}`, "API-Key", apiKey)
	is.Equal(res.StatusCode, http.StatusRequestEntityTooLarge)   // 413
	is.Equal(h.rows(), 0)                                        // nothing stored
	is.True(strings.Contains(h.logs.String(), "over the limit")) // and it is logged
	res = h.post(`{"eventAction":"x","pad":"`+strings.Repeat("a", 900)+`"}`, "API-Key", apiKey)
	is.Equal(res.StatusCode, http.StatusOK) // under the limit is fine
}

func TestPublishesAfterCommit(t *testing.T) {
	h := start(t)
	for _, tc := range []struct{ body, subject, action string }{
		{`{"eventAction":"change-job-status","jobId":259047}`, "prime.webhook.change-job-status", "change-job-status"},
		{`{"jobId":259047}`, "prime.webhook._none", ""},
		{`not json`, "prime.webhook._none", ""},
		{`{"eventAction":"a.b c"}`, "prime.webhook._invalid", "a.b c"},
	} {
		t.Run(tc.subject, func(t *testing.T) {
			is := is.New(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			row := h.stored(h.post(tc.body, "API-Key", apiKey))
			var msg *jetstream.RawStreamMsg
			flowtest.Eventually(t, "the event on its subject", func() bool {
				s, err := h.js.Stream(ctx, "PRIME_WEBHOOK")
				is.NoErr(err)
				msg, err = s.GetLastMsgForSubject(ctx, tc.subject)
				return err == nil && msg.Header.Get("Primeflow-Log-Id") == fmt.Sprint(row.ID)
			})
			is.Equal(string(msg.Data), row.Payload)                                               // the payload as stored
			is.Equal(msg.Header.Get("Nats-Msg-Id"), fmt.Sprintf("ethPrimeWebhookLog:%d", row.ID)) // derived from the log id
			is.Equal(msg.Header.Get("Primeflow-Event-Action"), tc.action)                         // the action as stored
			flowtest.Eventually(t, "publishedUTC recorded", func() bool {
				r, err := h.store.GetWebhookLog(ctx, row.ID)
				return err == nil && !r.PublishedUTC.IsZero()
			})
		})
	}
}

// heldJetStream holds every async publish until release is closed, as a
// JetStream whose acknowledgements are all outstanding does.
type heldJetStream struct {
	jetstream.JetStream
	release chan struct{}
}

func (j heldJetStream) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	<-j.release
	return j.JetStream.PublishMsgAsync(m, opts...)
}

func TestThe200DoesNotWaitForThePublish(t *testing.T) {
	is := is.New(t)
	held := heldJetStream{release: make(chan struct{})}
	h := start(t, withJetStream(func(js jetstream.JetStream) jetstream.JetStream { held.JetStream = js; return held }))
	answered := make(chan struct{})
	go func() {
		select {
		case <-answered:
		case <-time.After(30 * time.Second):
			t.Error("no answer while the publish was held: the 200 waited for NATS")
		}
		close(held.release)
	}()
	res := h.post(`{"eventAction":"new-job"}`, "API-Key", apiKey)
	close(answered)
	is.Equal(res.StatusCode, http.StatusOK)
	row := h.stored(res)
	flowtest.Eventually(t, "the held publish goes out once released", func() bool {
		r, err := h.store.GetWebhookLog(context.Background(), row.ID)
		return err == nil && !r.PublishedUTC.IsZero()
	})
	is.Equal(h.streamMsgs(), uint64(1))
}

// failingStore fails every transaction, as a database that is down does.
type failingStore struct {
	store.Store
	err error
}

func (f failingStore) InTx(context.Context, func(store.Store) error) error { return f.err }

func TestDatabaseFailureIs500AndNothingPublished(t *testing.T) {
	is := is.New(t)
	h := start(t, withStore(func(s store.Store) store.Store {
		return failingStore{Store: s, err: errors.New("disk I/O error")}
	}))
	res := h.post(`{"eventAction":"change-job-status","jobId":259047}`, "API-Key", apiKey)
	is.Equal(res.StatusCode, http.StatusInternalServerError) // Prime retries a 500
	is.Equal(h.rows(), 0)                                    // nothing stored
	is.Equal(h.streamMsgs(), uint64(0))                      // and nothing published
}

// stallingStore holds each transaction until its context ends or a second
// has passed, and says when one arrived.
type stallingStore struct {
	store.Store
	arrived chan struct{}
}

func (s stallingStore) InTx(ctx context.Context, fn func(store.Store) error) error {
	select {
	case s.arrived <- struct{}{}:
	default:
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
	}
	return s.Store.InTx(ctx, fn)
}

// A webhook received in full is stored and published even when Prime hangs
// up before the answer.
func TestStoredWhenPrimeHangsUpBeforeTheAnswer(t *testing.T) {
	is := is.New(t)
	arrived := make(chan struct{}, 1)
	h := start(t, withStore(func(s store.Store) store.Store { return stallingStore{Store: s, arrived: arrived} }))
	ctx, hangUp := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url+ingest.WebhookPath,
		strings.NewReader(`{"eventAction":"change-job-status","jobId":259047}`))
	is.NoErr(err)
	req.Header.Set("API-Key", apiKey)
	done := make(chan error, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	<-arrived // the body is read; the insert is under way
	hangUp()
	is.True(<-done != nil) // the client gave up on the answer
	flowtest.Eventually(t, "the row stored", func() bool { return h.rows() == 1 })
	flowtest.Eventually(t, "the row published", func() bool { return h.streamMsgs() == 1 })
}

func TestConcurrentPostsAreStoredExactlyOnce(t *testing.T) {
	is := is.New(t)
	h := start(t)
	const n = 400
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		wg.Go(func() {
			res := h.post(fmt.Sprintf(`{"eventAction":"change-job-status","jobId":%d}`, 100000+i), "API-Key", apiKey)
			io.Copy(io.Discard, res.Body)
			codes[i] = res.StatusCode
		})
	}
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Fatalf("post %d answered %d", i, c)
		}
	}
	rows, err := h.store.ListWebhookLog(context.Background(), store.LogFilter{Limit: 2 * n})
	is.NoErr(err)
	is.Equal(len(rows), n) // one row a post
	seen := map[string]bool{}
	for _, r := range rows {
		is.True(!seen[r.Payload]) // no payload twice
		seen[r.Payload] = true
	}
	flowtest.Eventually(t, "every row published once", func() bool { return h.streamMsgs() == n })
}
