package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/opshttp"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// redacted replaces secret header values in the stored headers (§2).
const redacted = "(redacted)"

// secretWords make a header's value a secret when its name holds one of
// them, whatever its case and separators: API-Key (§2), X-Api-Key, API_Key,
// Authorization, X-Auth-Token, Cookie, Set-Cookie, X-Hub-Signature-256 …
// A list of names missed the ones nobody thought of.
var secretWords = [][]byte{[]byte("key"), []byte("token"), []byte("secret"), []byte("auth"),
	[]byte("cookie"), []byte("password"), []byte("signature")}

// secretHeader reports whether a header's value is stored as (redacted):
// its name, lower-cased and with every ASCII character that is not a letter
// or a digit left out, holds a secret word.
func secretHeader(name string) bool {
	var buf [64]byte
	folded := buf[:0]
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'A' <= c && c <= 'Z':
			folded = append(folded, c+'a'-'A')
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c >= utf8.RuneSelf:
			folded = append(folded, c)
		}
	}
	for _, w := range secretWords {
		if bytes.Contains(folded, w) {
			return true
		}
	}
	return false
}

// handleWebhook is POST /api/prime/webhook (§2): authenticate by API-Key,
// store the raw event, answer 200 only after the row is committed, then
// publish it without making Prime wait.
func (in *Ingest) handleWebhook() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received := time.Now().UTC()
		if !opshttp.Equal(in.cfg.APIKey, r.Header.Get("API-Key")) {
			in.metrics.webhooks.WithLabelValues(events.LabelUnread, outcomeUnauthorized).Inc()
			in.refused.note(in.log, received, remoteIP(r), r.Header.Get("API-Key") != "")
			// Its body is never read: the connection closes after the answer.
			opshttp.Refuse(w, http.StatusUnauthorized, "unauthorized")
			return
		}
		var body []byte
		var err error
		var tooLarge *http.MaxBytesError
		if r.ContentLength > in.cfg.MaxBodyBytes {
			err = &http.MaxBytesError{Limit: in.cfg.MaxBodyBytes} // said so up front: nothing to read
		} else {
			body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, in.cfg.MaxBodyBytes))
		}
		switch {
		case errors.As(err, &tooLarge):
			in.metrics.webhooks.WithLabelValues(events.LabelUnread, outcomeTooLarge).Inc()
			in.log.Warn("webhook body over the limit: not stored", "limit", in.cfg.MaxBodyBytes,
				"contentLength", r.ContentLength, "remoteIP", remoteIP(r))
			opshttp.Refuse(w, http.StatusRequestEntityTooLarge, "request body too large")
			return
		case err != nil:
			in.metrics.webhooks.WithLabelValues(events.LabelUnread, outcomeBadRequest).Inc()
			in.log.Warn("webhook body unreadable: not stored", "err", err, "remoteIP", remoteIP(r))
			opshttp.Refuse(w, http.StatusBadRequest, "unreadable body")
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
			in.metrics.webhooks.WithLabelValues(events.ActionLabel(action), outcomeStoreError).Inc()
			in.log.Error("webhook insert failed: answered 500 so Prime retries", "action", action, "err", err)
			http.Error(w, "could not store the event", http.StatusInternalServerError)
			return
		}
		in.metrics.webhooks.WithLabelValues(events.ActionLabel(action), outcomeStored).Inc()
		in.unhandled.note(in.log, action, id)
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

// headersJSON is every request header as JSON, secrets replaced (§2): what
// json.Marshal makes of the headers, keys sorted, written without the
// reflection and the copy of the headers that cost more than the rest of
// the handler.
func headersJSON(r *http.Request) string {
	keys := make([]string, 0, len(r.Header)+1)
	for k := range r.Header {
		if k != "Host" || r.Host == "" {
			keys = append(keys, k)
		}
	}
	if r.Host != "" {
		keys = append(keys, "Host")
	}
	slices.Sort(keys)
	b := make([]byte, 0, 512)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(appendJSONString(b, k), ':')
		values := r.Header[k]
		switch {
		case secretHeader(k):
			values = []string{redacted}
		case k == "Host" && r.Host != "":
			values = []string{r.Host}
		case values == nil:
			b = append(b, "null"...)
			continue
		}
		b = append(b, '[')
		for j, v := range values {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, v)
		}
		b = append(b, ']')
	}
	return string(append(b, '}'))
}

// appendJSONString appends s as a JSON string, exactly as json.Marshal
// writes it.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // escapes, HTML-safe characters and UTF-8: the rare case
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// unhandledActions logs each eventAction no stage handles the first time it
// is stored: the metrics count them all under one label (LabelOther), so the
// log is where a new action Prime starts sending is seen by name. At most
// maxLoggedActions are remembered; past that, one line says so and the rest
// go unlogged, so made-up actions cannot grow the log or the memory.
type unhandledActions struct {
	mu   sync.Mutex
	seen map[string]bool
	full bool
}

const maxLoggedActions = 256

func (u *unhandledActions) note(log *slog.Logger, action string, logID int64) {
	if events.ActionLabel(action) != events.LabelOther {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case u.seen[action]:
		return
	case len(u.seen) >= maxLoggedActions:
		if !u.full {
			u.full = true
			log.Warn("more eventActions no stage handles than are logged one by one: the rest are counted under _other only",
				"logged", maxLoggedActions)
		}
		return
	}
	if u.seen == nil {
		u.seen = make(map[string]bool)
	}
	u.seen[action] = true
	log.Warn("new eventAction: no stage handles it; stored and counted under action=\"_other\", the resolver finishes it as \"No handler\"; "+
		"once a handler exists, primectl replay --action puts its rows back",
		"action", action, "subject", events.WebhookSubject(action), "logId", logID)
}

// refusals logs refused webhooks at most once a refusalLogEvery, with how
// many were refused since its last line: a key rotated on Prime's side shows
// in the log, not only in metrics, and a flood of bad requests does not
// flood the log. The key sent is never logged, only whether there was one.
type refusals struct {
	mu      sync.Mutex
	next    time.Time
	refused int
}

const refusalLogEvery = time.Minute

func (f *refusals) note(log *slog.Logger, now time.Time, remoteIP string, keySent bool) {
	f.mu.Lock()
	f.refused++
	if now.Before(f.next) {
		f.mu.Unlock()
		return
	}
	n := f.refused
	f.refused, f.next = 0, now.Add(refusalLogEvery)
	f.mu.Unlock()
	log.Warn("webhook refused: API-Key missing or not PRIME_WEBHOOK_API_KEY; answered 401, nothing stored",
		"refused", n, "remoteIP", remoteIP, "keySent", keySent, "nextLineAfter", refusalLogEvery)
}

func remoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
