package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
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

func (b blockingStore) GetWebhookLogUnpublished(ctx context.Context, before time.Time, limit int) ([]store.WebhookLogRow, error) {
	select {
	case b.entered <- struct{}{}:
		<-b.release
	default:
	}
	return b.Store.GetWebhookLogUnpublished(ctx, before, limit)
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
