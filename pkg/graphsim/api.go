package graphsim

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// routes lists the whole HTTP surface: Graph's API, then the control API.
func (s *Sim) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("POST /{tenant}/oauth2/v2.0/token", s.api("token", s.handleToken()))
	mux.Handle("GET /v1.0/users/{user}/mailFolders", s.api("folders.list", s.handleFolders()))
	mux.Handle("GET /v1.0/users/{user}/mailFolders/{id}", s.api("folders.get", s.handleFolder()))
	mux.Handle("GET /v1.0/users/{user}/mailFolders/{id}/childFolders", s.api("folders.list", s.handleFolders()))
	mux.Handle("GET /v1.0/users/{user}/mailFolders/{id}/messages", s.api("messages.list", s.handleMessages()))
	mux.Handle("GET /v1.0/users/{user}/messages/{id}", s.api("messages.get", s.handleGetMessage()))
	mux.Handle("POST /v1.0/users/{user}/messages/{id}/move", s.api("messages.move", s.handleMove()))

	mux.Handle("POST /_sim/messages", s.handleDeliver())
	mux.Handle("GET /_sim/messages", s.handleList())
	mux.Handle("POST /_sim/folders", s.handleMakeFolder())
	mux.Handle("DELETE /_sim/folders", s.handleDeleteFolder())
	mux.Handle("GET /_sim/stats", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, s.Stats()) }))
	mux.Handle("POST /_sim/faults", s.handleSetFaults())
	mux.Handle("DELETE /_sim/faults", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.SetFaults(Faults{})
		w.WriteHeader(http.StatusNoContent)
	}))
	mux.Handle("POST /_sim/reset", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
	}))
	return mux
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// api wraps a Graph route: it counts the call, applies the faults, checks
// the mailbox user and (but for the token endpoint) the bearer token.
func (s *Sim) api(op string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		s.mu.Lock()
		s.stats.Calls++
		s.stats.ByOp[op]++
		fault := s.fault(r.URL.Path)
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.stats.ByStatus[sw.status]++
			s.mu.Unlock()
		}()
		if fault.hang != nil && !s.held(r, fault.hang) {
			return // the caller gave up: nobody to answer
		}
		switch {
		case fault.down:
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					conn.Close()
					return
				}
			}
			panic(http.ErrAbortHandler) // no hijacker: abort the response all the same
		case fault.status == http.StatusTooManyRequests:
			sw.Header().Set("Retry-After", strconv.FormatInt(max(1, int64((fault.retryAfter+time.Second-1)/time.Second)), 10))
			writeGraphError(sw, fault.status, "TooManyRequests", "Application is over its MailboxConcurrency limit.")
			return
		case fault.status != 0:
			writeGraphError(sw, fault.status, "ServiceUnavailable", "injected fault")
			return
		}
		if op != "token" {
			if !s.authorised(r) {
				writeGraphError(sw, http.StatusUnauthorized, "InvalidAuthenticationToken", "Access token is empty, invalid or expired.")
				return
			}
			if !strings.EqualFold(r.PathValue("user"), s.opts.User) {
				writeGraphError(sw, http.StatusNotFound, "ErrorInvalidUser", fmt.Sprintf("The requested user '%s' is invalid.", r.PathValue("user")))
				return
			}
		}
		h.ServeHTTP(sw, r)
	})
}

type faultAction struct {
	down       bool
	status     int
	retryAfter time.Duration
	// hang is Faults.Hang's release, when the call is to be held.
	hang <-chan struct{}
}

// held holds a call until release is closed, and reports whether it was;
// false: its caller gave up first.
func (s *Sim) held(r *http.Request, release <-chan struct{}) bool {
	s.mu.Lock()
	s.stats.Hanging++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.stats.Hanging--
		s.mu.Unlock()
	}()
	select {
	case <-release:
		return true
	case <-r.Context().Done():
		return false
	}
}

// fault decides what the faults do to one call; s.mu is held.
func (s *Sim) fault(path string) faultAction {
	f := &s.faults
	if f.Path != "" && !strings.Contains(path, f.Path) {
		return faultAction{}
	}
	switch {
	case f.Down:
		return faultAction{down: true}
	case f.Hang:
		return faultAction{hang: s.release}
	case f.ThrottleNext > 0:
		f.ThrottleNext--
		after := time.Duration(f.RetryAfter)
		if after <= 0 {
			after = time.Second
		}
		return faultAction{status: http.StatusTooManyRequests, retryAfter: after}
	case f.FailNext > 0:
		f.FailNext--
		status := f.FailStatus
		if status == 0 {
			status = http.StatusServiceUnavailable
		}
		return faultAction{status: status}
	}
	return faultAction{}
}

func (s *Sim) authorised(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.tokens[tok]
	return ok && s.now().Before(exp)
}

func (s *Sim) handleToken() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			writeOAuthError(w, http.StatusBadRequest, "invalid_request", "The request body must contain a form.")
			return
		}
		same := func(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
		switch f := r.PostForm; {
		case r.PathValue("tenant") != s.opts.Tenant:
			writeOAuthError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("Tenant '%s' not found.", r.PathValue("tenant")))
		case f.Get("grant_type") != "client_credentials":
			writeOAuthError(w, http.StatusBadRequest, "unsupported_grant_type", "Only client_credentials is supported.")
		case !strings.HasSuffix(f.Get("scope"), "/.default"):
			writeOAuthError(w, http.StatusBadRequest, "invalid_scope", "The scope must end in /.default for the client credentials flow.")
		case !same(f.Get("client_id"), s.opts.ClientID) || !same(f.Get("client_secret"), s.opts.ClientSecret):
			writeOAuthError(w, http.StatusUnauthorized, "invalid_client", "Invalid client secret provided.")
		default:
			tok := rand.Text()
			s.mu.Lock()
			s.tokens[tok] = s.now().Add(s.opts.TokenTTL)
			s.stats.TokensIssued++
			s.mu.Unlock()
			writeJSON(w, http.StatusOK, map[string]any{"token_type": "Bearer", "expires_in": int64(s.opts.TokenTTL / time.Second), "access_token": tok})
		}
	})
}

// folderJSON is a folder as Graph serves it.
func (s *Sim) folderJSON(f *folder) map[string]any {
	return map[string]any{"id": f.id, "displayName": f.name, "parentFolderId": f.parent, "totalItemCount": len(f.messages)}
}

// lookup finds a folder by id or well-known name; s.mu is held.
func (s *Sim) lookup(id string) *folder {
	if strings.EqualFold(id, "inbox") {
		id = s.inbox
	}
	return s.folders[id]
}

func (s *Sim) handleFolder() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		f := s.lookup(r.PathValue("id"))
		var body map[string]any
		if f != nil {
			body = s.folderJSON(f)
		}
		s.mu.Unlock()
		if f == nil {
			writeGraphError(w, http.StatusNotFound, "ErrorItemNotFound", "The specified object was not found in the store.")
			return
		}
		writeJSON(w, http.StatusOK, body)
	})
}

// handleFolders lists the top-level folders, or a folder's children, with
// the only $filter the email path sends: displayName eq '…'.
func (s *Sim) handleFolders() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, filtered, err := displayNameFilter(r.URL.Query().Get("$filter"))
		if err != nil {
			writeGraphError(w, http.StatusBadRequest, "BadRequest", err.Error())
			return
		}
		s.mu.Lock()
		parent := ""
		if id := r.PathValue("id"); id != "" {
			p := s.lookup(id)
			if p == nil {
				s.mu.Unlock()
				writeGraphError(w, http.StatusNotFound, "ErrorItemNotFound", "The specified object was not found in the store.")
				return
			}
			parent = p.id
		}
		value := []map[string]any{}
		for _, f := range s.sortedFolders() {
			if f.parent == parent && (!filtered || strings.EqualFold(f.name, name)) {
				value = append(value, s.folderJSON(f))
			}
		}
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"value": value})
	})
}

func displayNameFilter(f string) (name string, filtered bool, err error) {
	if f == "" {
		return "", false, nil
	}
	rest, ok := strings.CutPrefix(f, "displayName eq '")
	if !ok || !strings.HasSuffix(rest, "'") {
		return "", false, fmt.Errorf("the simulator knows only $filter=displayName eq '…', not %q", f)
	}
	return strings.ReplaceAll(strings.TrimSuffix(rest, "'"), "''", "'"), true, nil
}

// The fields a message has, for $select (and parentFolderId).
var messageFields = []string{"id", "subject", "body", "bodyPreview", "receivedDateTime", "internetMessageId", "from", "internetMessageHeaders"}

// handleMessages lists a folder's messages: $orderby must be
// receivedDateTime (ascending), $top is 1 to 1000 (default 10, as Graph),
// $skip pages, and only the $select fields are returned.
func (s *Sim) handleMessages() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if o := q.Get("$orderby"); o != "" && o != "receivedDateTime" && o != "receivedDateTime asc" {
			writeGraphError(w, http.StatusBadRequest, "BadRequest", "the simulator orders only by receivedDateTime")
			return
		}
		top, err := intParam(q.Get("$top"), 10)
		skip, err2 := intParam(q.Get("$skip"), 0)
		if err != nil || err2 != nil || top < 1 || top > 1000 || skip < 0 {
			writeGraphError(w, http.StatusBadRequest, "BadRequest", "$top must be 1 to 1000 and $skip 0 or more")
			return
		}
		fields := messageFields
		if sel := q.Get("$select"); sel != "" {
			fields = strings.Split(sel, ",")
		}
		s.mu.Lock()
		s.stats.LastListQuery = r.URL.RawQuery
		f := s.lookup(r.PathValue("id"))
		if f == nil {
			s.mu.Unlock()
			writeGraphError(w, http.StatusNotFound, "ErrorItemNotFound", "The specified object was not found in the store.")
			return
		}
		all := sortedMessages(f.messages)
		page := all[min(skip, len(all)):min(skip+top, len(all))]
		value := make([]map[string]any, 0, len(page))
		for _, m := range page {
			value = append(value, selectFields(m, f.id, fields))
		}
		s.mu.Unlock()
		body := map[string]any{"value": value}
		if skip+top < len(all) {
			q.Set("$skip", strconv.Itoa(skip+top))
			body["@odata.nextLink"] = selfURL(r, q)
		}
		writeJSON(w, http.StatusOK, body)
	})
}

// selectFields is a message as Graph serves it, with the fields $select
// names; folderID is the id of its folder.
func selectFields(m *Message, folderID string, fields []string) map[string]any {
	out := map[string]any{}
	for _, f := range fields {
		switch strings.TrimSpace(f) {
		case "parentFolderId":
			out["parentFolderId"] = folderID
		case "internetMessageHeaders":
			headers := []map[string]string{}
			for _, h := range m.Headers {
				headers = append(headers, map[string]string{"name": h.Name, "value": h.Value})
			}
			out["internetMessageHeaders"] = headers
		case "id":
			out["id"] = m.ID
		case "subject":
			out["subject"] = m.Subject
		case "body":
			out["body"] = map[string]string{"contentType": m.ContentType, "content": m.Body}
		case "bodyPreview":
			out["bodyPreview"] = m.BodyPreview
		case "receivedDateTime":
			out["receivedDateTime"] = m.ReceivedDateTime.UTC().Format(time.RFC3339)
		case "internetMessageId":
			out["internetMessageId"] = m.InternetMessageID
		case "from":
			out["from"] = map[string]any{"emailAddress": map[string]string{"address": m.From, "name": m.From}}
		}
	}
	return out
}

// selfURL is the URL of this request, as the client sent it, with the query q.
func selfURL(r *http.Request, q url.Values) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	path := r.URL.Path
	if u, err := url.ParseRequestURI(r.RequestURI); err == nil {
		path = u.Path // with the prefix the simulator is mounted under
	}
	u := url.URL{Scheme: scheme, Host: r.Host, Path: path}
	return u.String() + "?" + strings.NewReplacer("%24", "$", "%2C", ",").Replace(q.Encode())
}

func (s *Sim) handleMove() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			DestinationID string `json:"destinationId"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil || req.DestinationID == "" {
			writeGraphError(w, http.StatusBadRequest, "ErrorInvalidRequest", "The body must be {\"destinationId\":\"…\"}.")
			return
		}
		s.mu.Lock()
		dest := s.lookup(req.DestinationID)
		var from *folder
		var at int
		for _, f := range s.folders {
			for i, m := range f.messages {
				if m.ID == r.PathValue("id") {
					from, at = f, i
				}
			}
		}
		if dest == nil || from == nil {
			s.mu.Unlock()
			writeGraphError(w, http.StatusNotFound, "ErrorItemNotFound", "The specified object was not found in the store.")
			return
		}
		// A move is a copy into the destination and a delete of the
		// original: the message has a new id there.
		m := from.messages[at]
		from.messages = append(from.messages[:at], from.messages[at+1:]...)
		moved := *m
		moved.ID = newID("AAMkMessage")
		dest.messages = append(dest.messages, &moved)
		s.stats.Moves++
		body := selectFields(&moved, dest.id, slices.Concat(messageFields, []string{"parentFolderId"}))
		s.mu.Unlock()
		writeJSON(w, http.StatusCreated, body)
	})
}

func (s *Sim) handleDeliver() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n NewMessage
		if err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&n); err != nil && err != io.EOF {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body: " + err.Error()})
			return
		}
		m, err := s.Deliver(n)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusCreated, m)
	})
}

func (s *Sim) handleList() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.Query().Get("folder")
		ms := s.Messages(path)
		if ms == nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no folder %q", path)})
			return
		}
		writeJSON(w, http.StatusOK, ms)
	})
}

func (s *Sim) handleMakeFolder() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Path string `json:"path"`
		}
		err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req)
		if err == nil {
			err = s.MakeFolder(req.Path)
		}
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

func (s *Sim) handleSetFaults() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var f Faults
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&f); err != nil && err != io.EOF {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body: " + err.Error()})
			return
		}
		s.SetFaults(f)
		w.WriteHeader(http.StatusNoContent)
	})
}

// Duration is a time.Duration written as text ("2s") in JSON.
type Duration time.Duration

// MarshalJSON writes the duration as text.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads "2s", or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		v, err := time.ParseDuration(s)
		*d = Duration(v)
		return err
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("a duration: %q or seconds", "2s")
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

func intParam(v string, def int) (int, error) {
	if v == "" {
		return def, nil
	}
	return strconv.Atoi(v)
}

func writeGraphError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": message}})
}

func writeOAuthError(w http.ResponseWriter, status int, code, description string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": description})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b) // the client may have gone
}
