package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/opshttp"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// redacted replaces secret header values in the stored headers (§2).
const redacted = "(redacted)"

// secretHeaders are never stored as sent.
var secretHeaders = []string{"Api-Key", "Authorization", "Cookie", "Proxy-Authorization"}

// handleWebhook is POST /api/prime/webhook (§2): authenticate by API-Key,
// store the raw event, answer 200 only after the row is committed, then
// publish it without making Prime wait.
func (in *Ingest) handleWebhook() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received := time.Now().UTC()
		if !opshttp.Equal(in.cfg.APIKey, r.Header.Get("API-Key")) {
			in.metrics.webhooks.WithLabelValues("", outcomeUnauthorized).Inc()
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, in.cfg.MaxBodyBytes))
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			in.metrics.webhooks.WithLabelValues("", outcomeTooLarge).Inc()
			in.log.Warn("webhook body over the limit: not stored", "limit", in.cfg.MaxBodyBytes,
				"contentLength", r.ContentLength, "remoteIP", remoteIP(r))
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return
		case err != nil:
			in.metrics.webhooks.WithLabelValues("", outcomeBadRequest).Inc()
			in.log.Warn("webhook body unreadable: not stored", "err", err, "remoteIP", remoteIP(r))
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		if len(bytes.TrimSpace(body)) == 0 {
			body = []byte("{}")
		}
		action, jobID := promote(body)
		row := store.NewWebhookLogRow{
			ReceivedUTC:     received,
			EventAction:     action,
			JobID:           jobID,
			Payload:         string(body),
			Headers:         headersJSON(r),
			RemoteIP:        remoteIP(r),
			IsAuthenticated: true,
		}
		// §2: 200 only after the row is committed. Concurrent webhooks share
		// commits (the store groups transactions).
		// A body received in full is stored even if Prime hangs up before
		// the answer: nothing it sent is dropped (a retry stores it again).
		// With no cancellation the driver also runs the insert without a
		// watcher goroutine.
		ctx := context.WithoutCancel(r.Context())
		var id int64
		err = in.store.InTx(ctx, func(tx store.Store) error {
			var err error
			id, err = tx.InsertWebhookLog(ctx, row)
			return err
		})
		in.metrics.insertSeconds.Observe(time.Since(received).Seconds())
		if err != nil {
			in.metrics.webhooks.WithLabelValues(events.ActionToken(action), outcomeStoreError).Inc()
			in.log.Error("webhook insert failed: answered 500 so Prime retries", "action", action, "err", err)
			http.Error(w, "could not store the event", http.StatusInternalServerError)
			return
		}
		in.metrics.webhooks.WithLabelValues(events.ActionToken(action), outcomeStored).Inc()
		answer := []byte(`{"id":` + strconv.FormatInt(id, 10) + `}`)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		w.Write(answer)
		// The 200 leaves now, before the publish: publishing never delays
		// it (a publish can wait for room among the unacknowledged ones).
		http.NewResponseController(w).Flush()
		in.publisher.publishAsync(publication{id: id, action: action, payload: row.Payload})
	})
}

// headersJSON is every request header as JSON, secrets replaced (§2).
func headersJSON(r *http.Request) string {
	h := r.Header.Clone()
	for _, k := range secretHeaders {
		if _, ok := h[k]; ok {
			h[k] = []string{redacted}
		}
	}
	if r.Host != "" {
		h["Host"] = []string{r.Host}
	}
	b, err := json.Marshal(h)
	if err != nil {
		return "{}"
	}
	return string(b)
}

func remoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
