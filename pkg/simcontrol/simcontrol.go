// Package simcontrol guards the simulators' control APIs (every path under
// /_sim/ of pkg/primesim, pkg/optimosim and pkg/graphsim): each request
// needs the simulator's token as "Authorization: Bearer <token>", and each
// request but a GET or HEAD needs Content-Type application/json. A page in
// a browser on another origin can send neither without a CORS preflight,
// which no simulator answers, so it cannot drive a simulator that a local
// run serves (a cross-origin text/plain POST once put an email of a
// stranger's choosing into the mail intake's mailbox); and a process on the
// host needs the token.
package simcontrol

import (
	"crypto/rand"
	"crypto/subtle"
	"mime"
	"net/http"
	"strings"
)

// Prefix is the control API's path prefix.
const Prefix = "/_sim/"

// NewToken is a token for a simulator whose caller gives none: 256 random
// bits, so its control API is never open to whoever guesses.
func NewToken() string { return rand.Text() + rand.Text() }

// Guard serves the control API's requests on to next only with token, and
// those that carry a body only as JSON; every other path goes on to next
// as it is. A blank token refuses every control request.
func Guard(token string, next http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, Prefix) && r.URL.Path != strings.TrimSuffix(Prefix, "/") {
			next.ServeHTTP(w, r)
			return
		}
		if token == "" || subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="simulator control"`)
			http.Error(w, "the control API needs the simulator's token: Authorization: Bearer <token>", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
				http.Error(w, "the control API takes JSON only: Content-Type: application/json", http.StatusUnsupportedMediaType)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// Authorize makes req a control request a Guard with token serves: the
// token, and JSON as its body's type.
func Authorize(req *http.Request, token string) {
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
}

// Forged are requests to url that a Guard with token refuses, for the
// simulators' tests of their control APIs: the text/plain POST a page in a
// browser on another origin sends without asking, JSON without the token,
// and the token with a body that is not JSON.
func Forged(method, url, body, token string) []*http.Request {
	var out []*http.Request
	for _, h := range []struct{ auth, contentType string }{
		{"", "text/plain"},
		{"", "application/json"},
		{"Bearer " + token, "text/plain"},
	} {
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			panic(err) // a test's URL
		}
		req.Header.Set("Content-Type", h.contentType)
		req.Header.Set("Origin", "https://elsewhere.example")
		if h.auth != "" {
			req.Header.Set("Authorization", h.auth)
		}
		out = append(out, req)
	}
	return out
}
