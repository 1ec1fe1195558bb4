package primesim

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/prime"
)

const (
	pathToken             = "/oauth/token"
	contentTypeJSONAPI    = "application/vnd.api+json"
	headerMinuteRemaining = "X-Ratelimit-Minute-Remaining"
	headerMinuteReset     = "X-Ratelimit-Minute-Reset"
	headerDayRemaining    = "X-Ratelimit-Day-Remaining"
	defaultPerPage        = 100
	maxPerPage            = 500
)

// statusWriter remembers the status a handler wrote, and ends the call
// once when the answer starts: from then on it is on its way to the
// client, which may read it all and send its next request before the
// handler returns. Counting the call in flight until then would count more
// at once than the client ever had.
type statusWriter struct {
	http.ResponseWriter
	status int
	end    func(status int)
}

func (w *statusWriter) WriteHeader(code int) {
	w.answer(code)
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.answer(http.StatusOK)
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) answer(code int) {
	if w.status != 0 {
		return
	}
	w.status = code
	w.end(code)
}

// api wraps an API route: it counts the call, requires Prime's Accept
// header, applies the rate limit and the faults, and (except for the token
// endpoint) checks the bearer token, in that order.
func (s *Sim) api(endpoint string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight := s.stats.begin(endpoint)
		sw := &statusWriter{ResponseWriter: w, end: s.stats.end}
		defer func() {
			if sw.status == 0 { // no answer at all: the client went away
				sw.answer(http.StatusServiceUnavailable)
			}
		}()

		if !acceptsPrime(r.Header.Values("Accept")) {
			writeError(sw, http.StatusNotAcceptable, "Accept must be "+prime.MediaType)
			return
		}
		now := s.now()
		s.limitMu.Lock()
		ok, retryAfter := s.rate.admit(now, inFlight, sw.Header())
		var fault faultAction
		if ok {
			fault = s.faults.apply(r.URL.Path, now)
		}
		s.limitMu.Unlock()
		if !ok {
			writeRateLimited(sw, retryAfter)
			return
		}
		if fault.down {
			// No answer: the connection is dropped, as for a Prime that
			// is unreachable (counted as the 503 of a call unanswered).
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					conn.Close()
					return
				}
			}
			panic(http.ErrAbortHandler) // no hijacker: abort the response all the same
		}
		if fault.latency > 0 {
			t := time.NewTimer(fault.latency)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return // the client went away
			}
		}
		switch fault.status {
		case 0:
		case http.StatusTooManyRequests:
			writeRateLimited(sw, fault.retryAfter)
			return
		default:
			writeError(sw, fault.status, "injected fault")
			return
		}
		if r.URL.Path != pathToken && !s.authorised(r) {
			writeError(sw, http.StatusUnauthorized, "invalid or expired access token")
			return
		}
		h.ServeHTTP(sw, r)
	})
}

func acceptsPrime(values []string) bool {
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			if strings.EqualFold(strings.TrimSpace(mt), prime.MediaType) {
				return true
			}
		}
	}
	return false
}

func (s *Sim) authorised(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		return false
	}
	s.tokensMu.Lock()
	defer s.tokensMu.Unlock()
	exp, ok := s.tokens[tok]
	return ok && s.now().Before(exp)
}

// handleToken serves the OAuth2 password grant.
func (s *Sim) handleToken() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			writeOAuthError(w, http.StatusBadRequest, "invalid_request", "the body is not a form")
			return
		}
		same := func(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
		switch {
		case r.PostForm.Get("grant_type") != "password":
			writeOAuthError(w, http.StatusBadRequest, "unsupported_grant_type", "only the password grant is supported")
			return
		case !same(r.PostForm.Get("client_id"), s.opts.ClientID) || !same(r.PostForm.Get("client_secret"), s.opts.ClientSecret):
			writeOAuthError(w, http.StatusUnauthorized, "invalid_client", "client authentication failed")
			return
		case !same(r.PostForm.Get("username"), s.opts.Username) || !same(r.PostForm.Get("password"), s.opts.Password):
			writeOAuthError(w, http.StatusBadRequest, "invalid_grant", "the user credentials were incorrect")
			return
		}
		access, refresh := rand.Text(), rand.Text()
		now := s.now()
		s.tokensMu.Lock()
		for t, exp := range s.tokens {
			if !now.Before(exp) {
				delete(s.tokens, t)
			}
		}
		s.tokens[access] = now.Add(s.opts.TokenTTL)
		s.tokensMu.Unlock()
		s.stats.tokenIssued()
		writeJSON(w, http.StatusOK, "application/json", map[string]any{
			"token_type":    "Bearer",
			"expires_in":    int64(s.opts.TokenTTL / time.Second),
			"access_token":  access,
			"refresh_token": refresh,
		})
	})
}

// handleGet serves GET /{kind}/{id}; for jobs the id may be the numeric
// reference (§4.1).
func (s *Sim) handleGet(k Kind) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		s.mu.RLock()
		var e *entry
		var ok bool
		if k == KindJobs {
			e, ok = s.store.job(id)
		} else {
			e, ok = s.store.get(k, id)
		}
		var buf bytes.Buffer
		if ok {
			buf.Grow(len(e.doc) + 10)
			buf.WriteString(`{"data":`)
			buf.Write(e.doc)
			buf.WriteString("}")
		}
		s.mu.RUnlock()
		if !ok {
			writeError(w, http.StatusNotFound, fmt.Sprintf("no %s with id %s", k, id))
			return
		}
		writeBody(w, http.StatusOK, contentTypeJSONAPI, buf.Bytes())
	})
}

// handleList serves GET /{kind}?q=…&order=…&page=…&per_page=… with meta.pagination.
func (s *Sim) handleList(k Kind) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		filters, err := parseQuery(q.Get("q"))
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		page, err1 := intParam(q.Get("page"), 1)
		perPage, err2 := intParam(q.Get("per_page"), defaultPerPage)
		if err1 != nil || err2 != nil || page < 1 || perPage < 1 || perPage > maxPerPage {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("page must be 1 or more and per_page 1 to %d", maxPerPage))
			return
		}
		order, err := parseOrder(q.Get("order"))
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		var buf bytes.Buffer
		s.mu.RLock()
		all := order.sort(s.store.list(k, filters))
		from := min((page-1)*perPage, len(all))
		items := all[from:min(from+perPage, len(all))]
		buf.WriteString(`{"data":[`)
		for i, e := range items {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.Write(e.doc)
		}
		s.mu.RUnlock()
		totalPages := (len(all) + perPage - 1) / perPage
		fmt.Fprintf(&buf, `],"meta":{"pagination":{"total":%d,"count":%d,"per_page":%d,"current_page":%d,"total_pages":%d}}}`,
			len(all), len(items), perPage, page, totalPages)
		writeBody(w, http.StatusOK, contentTypeJSONAPI, buf.Bytes())
	})
}

func intParam(v string, def int) (int, error) {
	if v == "" {
		return def, nil
	}
	return strconv.Atoi(v)
}

func writeRateLimited(w http.ResponseWriter, retryAfter time.Duration) {
	w.Header().Set("Retry-After", strconv.FormatInt(max(1, ceilSeconds(retryAfter)), 10))
	writeError(w, http.StatusTooManyRequests, "rate limit exceeded")
}

// writeError answers with a JSON:API errors document.
func writeError(w http.ResponseWriter, status int, detail string) {
	writeJSON(w, status, contentTypeJSONAPI, map[string]any{"errors": []map[string]string{{
		"status": strconv.Itoa(status),
		"title":  http.StatusText(status),
		"detail": detail,
	}}})
}

func writeOAuthError(w http.ResponseWriter, status int, code, description string) {
	writeJSON(w, status, "application/json", map[string]string{"error": code, "error_description": description})
}

func writeJSON(w http.ResponseWriter, status int, contentType string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeBody(w, status, contentType, b)
}

func writeBody(w http.ResponseWriter, status int, contentType string, b []byte) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b) // the client may have gone; nothing to do about it
}
