package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/natsserver"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/services/ingest"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestNATSDownStill200AndRelayPublishesEveryRowOnce(t *testing.T) {
	is := is.New(t)
	addr, dir := flowtest.FreeAddr(t), t.TempDir()
	ns := natstest.ServerAt(t, addr, dir)
	h := startOn(t, ns)
	h.post(`{"eventAction":"change-job-status","jobId":1}`, "API-Key", apiKey)
	flowtest.Eventually(t, "the first event published", func() bool { return h.streamMsgs() == 1 })

	natstest.Stop(ns)
	flowtest.Eventually(t, "the client sees NATS gone", func() bool { return !h.nc.IsConnected() })
	const down = 25
	for i := range down {
		res := h.post(fmt.Sprintf(`{"eventAction":"create-appointment","jobId":%d}`, 1000+i), "API-Key", apiKey)
		is.Equal(res.StatusCode, http.StatusOK) // NATS down never fails the 200
	}
	is.Equal(h.rows(), down+1) // every event stored

	h.nats = natstest.ServerAt(t, addr, dir) // NATS is back, same port and data
	flowtest.Eventually(t, "the relay publishes the rows stored while NATS was down", func() bool {
		n, err := h.store.CountWebhookLog(context.Background(), store.LogFilter{Unpublished: true})
		return err == nil && n == 0
	})
	is.Equal(h.streamMsgs(), uint64(down+1)) // each row exactly once
}

func TestProcessRunsTheRelayAndReplaysResetRows(t *testing.T) {
	is := is.New(t)
	h := start(t)
	ctx := context.Background()
	row := h.stored(h.post(`{"eventAction":"change-job-status","jobId":7}`, "API-Key", apiKey))
	flowtest.Eventually(t, "published", func() bool { return h.streamMsgs() == 1 })
	flowtest.Eventually(t, "publishedUTC recorded", func() bool {
		r, err := h.store.GetWebhookLog(ctx, row.ID)
		return err == nil && !r.PublishedUTC.IsZero()
	})

	res, sum := h.process()
	is.Equal(res.StatusCode, http.StatusOK) // the relay ran
	is.Equal(sum["published"], float64(0))  // nothing was waiting

	n, err := h.store.ResetWebhookLog(ctx, store.LogFilter{IDs: []int64{row.ID}})
	is.NoErr(err)
	is.Equal(n, 1)
	res, sum = h.process()
	is.Equal(res.StatusCode, http.StatusOK)
	is.Equal(sum["published"], float64(1)) // the reset row went out again
	is.Equal(sum["remaining"], float64(0)) // and nothing waits
	is.Equal(h.streamMsgs(), uint64(2))    // as a new message
	s, err := h.js.Stream(ctx, "PRIME_WEBHOOK")
	is.NoErr(err)
	msg, err := s.GetLastMsgForSubject(ctx, "prime.webhook.change-job-status")
	is.NoErr(err)
	is.Equal(msg.Header.Get("Nats-Msg-Id"), fmt.Sprintf("ethPrimeWebhookLog:%d:replay1", row.ID)) // a replay has its own id
}

// blockingStore holds the relay's first read until released.
type blockingStore struct {
	store.Store
	entered chan struct{}
	release chan struct{}
}

func (b blockingStore) GetWebhookLogUnpublished(ctx context.Context, after int64, before time.Time, limit int) ([]store.WebhookLogRow, error) {
	select {
	case b.entered <- struct{}{}:
		<-b.release
	default:
	}
	return b.Store.GetWebhookLogUnpublished(ctx, after, before, limit)
}

func TestProcessAnswers409WhileARunIsUnderWay(t *testing.T) {
	is := is.New(t)
	b := blockingStore{entered: make(chan struct{}), release: make(chan struct{})}
	h := start(t, withStore(func(s store.Store) store.Store { b.Store = s; return b }))
	first := make(chan int)
	go func() {
		res, _ := h.process()
		first <- res.StatusCode
	}()
	<-b.entered // the first run is under way
	res, body := h.process()
	is.Equal(res.StatusCode, http.StatusConflict)               // a second run is refused
	is.Equal(body["error"], "a relay run is already under way") // saying why
	close(b.release)
	is.Equal(<-first, http.StatusOK) // the first run finishes
}

// flakyBookkeeping fails recording published rows a number of times.
type flakyBookkeeping struct {
	store.Store
	failures *atomic.Int32
}

func (f flakyBookkeeping) SetWebhookLogPublished(ctx context.Context, ids []int64, at time.Time) error {
	if f.failures.Add(-1) >= 0 {
		return errors.New("database is locked")
	}
	return f.Store.SetWebhookLogPublished(ctx, ids, at)
}

func TestRepublishOfAPublishedRowIsDeduplicated(t *testing.T) {
	is := is.New(t)
	var failures atomic.Int32
	failures.Store(1) // the publisher's bookkeeping fails once
	h := start(t, withStore(func(s store.Store) store.Store { return flakyBookkeeping{Store: s, failures: &failures} }))
	h.post(`{"eventAction":"change-job-status","jobId":9}`, "API-Key", apiKey)
	flowtest.Eventually(t, "the publish and its failed bookkeeping", func() bool { return failures.Load() == 0 })
	n, err := h.store.CountWebhookLog(context.Background(), store.LogFilter{Unpublished: true})
	is.NoErr(err)
	is.Equal(n, 1) // the row looks unpublished

	res, sum := h.process()
	is.Equal(res.StatusCode, http.StatusOK)
	is.Equal(sum["published"], float64(1)) // the relay publishes it again
	is.Equal(h.streamMsgs(), uint64(1))    // and JetStream keeps one message: same Nats-Msg-Id
}

// insertUnpublished stores rows the way ingest does, without publishing
// them: what the relay finds after the publish that follows a commit failed.
func (h *harness) insertUnpublished(payloads ...string) []int64 {
	h.t.Helper()
	rows := make([]store.NewWebhookLogRow, len(payloads))
	for i, p := range payloads {
		rows[i] = store.NewWebhookLogRow{ReceivedUTC: time.Now().UTC(), EventAction: "change-job-status", Payload: p, IsAuthenticated: true}
	}
	ids, err := h.store.InsertWebhookLogs(context.Background(), rows)
	if err != nil {
		h.t.Fatalf("insert rows: %v", err)
	}
	return ids
}

func (h *harness) published(id int64) bool {
	h.t.Helper()
	r, err := h.store.GetWebhookLog(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return !r.PublishedUTC.IsZero()
}

// TestARowNATSRefusesDoesNotHoldBackTheRest: two rows over the server's
// max_payload (stored when a server took more, or by an older ingest) fill
// the relay's first page; the rows after them are published all the same,
// and the refused ones are counted, logged and tried again every run.
func TestARowNATSRefusesDoesNotHoldBackTheRest(t *testing.T) {
	is := is.New(t)
	h := start(t, withRelayPage(2))
	huge := `{"eventAction":"change-job-status","pad":"` + strings.Repeat("a", int(natsserver.MaxPayload)) + `"}`
	ids := h.insertUnpublished(huge, huge,
		`{"eventAction":"change-job-status","jobId":1}`,
		`{"eventAction":"change-job-status","jobId":2}`,
		`{"eventAction":"change-job-status","jobId":3}`)

	for run := 1; run <= 2; run++ {
		res, sum := h.process()
		is.Equal(res.StatusCode, http.StatusOK)                                                                // a row's failure does not fail the run (§3.1)
		is.Equal(sum["failed"], float64(2))                                                                    // the refused rows, each run
		is.Equal(sum["remaining"], float64(2))                                                                 // and they stay unpublished
		is.Equal(h.streamMsgs(), uint64(3))                                                                    // the rows behind them went out, once
		is.True(!h.published(ids[0]))                                                                          // the refused rows wait
		is.True(!h.published(ids[1]))                                                                          //
		is.True(h.published(ids[2]))                                                                           // the others are recorded
		is.True(h.published(ids[4]))                                                                           //
		is.Equal(sum["published"], float64(3*(2-run)))                                                         // in the first run only
		is.Equal(h.metric(`primeflow_webhook_publish_failures_total{reason="rejected"}`), strconv.Itoa(2*run)) // counted, each run
	}
	is.Equal(h.metric(`primeflow_webhooklog_rows{state="unpublished"}`), "2")                        // visible on the gauge
	is.True(strings.Contains(h.logs.String(), fmt.Sprintf("id=%d", ids[0])))                         // logged with the row id
	is.True(strings.Contains(h.logs.String(), "maximum payload exceeded"))                           // and why
	is.True(strings.Contains(h.logs.String(), fmt.Sprintf("failedIds=\"[%d %d]\"", ids[0], ids[1]))) // the run says which rows wait
}

// TestADeliveredRowIsRecordedNotPublishedAgain: a row whose message reached
// the resolver (processed, or an attempt recorded) but whose publish was
// never recorded is marked published without a second message; a row reset
// for replay goes out again.
func TestADeliveredRowIsRecordedNotPublishedAgain(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	h := start(t)
	ids := h.insertUnpublished(
		`{"eventAction":"change-job-status","jobId":1}`, // processed
		`{"eventAction":"change-job-status","jobId":2}`, // failed an attempt
		`{"eventAction":"change-job-status","jobId":3}`, // never delivered
		`{"eventAction":"change-job-status","jobId":4}`, // processed, then reset for replay
	)
	is.NoErr(h.store.SetWebhookLogProcessed(ctx, ids[0], "", "Processed"))
	_, err := h.store.IncrementWebhookLogAttempt(ctx, ids[1], "", "prime: 503")
	is.NoErr(err)
	is.NoErr(h.store.SetWebhookLogProcessed(ctx, ids[3], "", "Processed"))
	n, err := h.store.ResetWebhookLog(ctx, store.LogFilter{IDs: ids[3:]})
	is.NoErr(err)
	is.Equal(n, 1)

	res, sum := h.process()
	is.Equal(res.StatusCode, http.StatusOK)
	is.Equal(sum["published"], float64(2))        // the undelivered row and the reset one
	is.Equal(sum["alreadyDelivered"], float64(2)) // the delivered rows only recorded
	is.Equal(sum["remaining"], float64(0))        // nothing waits
	is.Equal(h.streamMsgs(), uint64(2))           // no second message for a delivered row
	for _, id := range ids {
		is.True(h.published(id)) // every row recorded as published
	}
}

// heldAck is a publish whose ack reaches ingest only once release is closed.
type heldAck struct {
	jetstream.PubAckFuture
	release <-chan struct{}
	once    sync.Once
	ok      chan *jetstream.PubAck
}

func (f *heldAck) Ok() <-chan *jetstream.PubAck {
	f.once.Do(func() {
		f.ok = make(chan *jetstream.PubAck, 1)
		go func() {
			<-f.release
			f.ok <- <-f.PubAckFuture.Ok()
		}()
	})
	return f.ok
}

// heldAcksJetStream publishes at once and holds every ack until release.
type heldAcksJetStream struct {
	jetstream.JetStream
	release chan struct{}
}

func (j heldAcksJetStream) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	fut, err := j.JetStream.PublishMsgAsync(m, opts...)
	if err != nil {
		return nil, err
	}
	return &heldAck{PubAckFuture: fut, release: j.release}, nil
}

// TestAnAckDueAtShutdownIsRecorded: ingest stops while an ack is on its way;
// it waits for it and records the row, which the relay would otherwise
// publish again (a second message once the duplicate window has passed).
func TestAnAckDueAtShutdownIsRecorded(t *testing.T) {
	is := is.New(t)
	held := heldAcksJetStream{release: make(chan struct{})}
	h := start(t,
		withConfig(func(c *ingest.Config) { c.PublishTimeout = time.Minute }),
		withJetStream(func(js jetstream.JetStream) jetstream.JetStream { held.JetStream = js; return held }))
	row := h.stored(h.post(`{"eventAction":"change-job-status","jobId":5}`, "API-Key", apiKey))
	flowtest.Eventually(t, "the message stored in the stream", func() bool { return h.streamMsgs() == 1 })

	stopped := make(chan error, 1)
	go func() { stopped <- h.stop() }()
	flowtest.Eventually(t, "ingest's HTTP server gone", func() bool {
		res, err := http.Get(h.url + "/healthz")
		if err == nil {
			res.Body.Close()
		}
		return err != nil
	})
	time.Sleep(200 * time.Millisecond) // the runners' context ends right after the HTTP server
	close(held.release)                // the ack arrives during the shutdown
	is.NoErr(<-stopped)
	is.True(h.published(row.ID)) // recorded before ingest stopped
}
