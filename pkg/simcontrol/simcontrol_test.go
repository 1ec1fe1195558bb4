package simcontrol_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/simcontrol"
	"github.com/matryer/is"
)

func TestGuard(t *testing.T) {
	const token = "0123456789abcdef"
	served := 0
	h := simcontrol.Guard(token, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served++ }))
	for _, tc := range []struct {
		name, method, path, auth, contentType string
		want                                  int
	}{
		{"the API itself is not the guard's", http.MethodPost, "/jobs", "", "text/plain", http.StatusOK},
		{"a browser's cross-origin text/plain POST", http.MethodPost, "/_sim/messages", "", "text/plain", http.StatusUnauthorized},
		{"a form POST", http.MethodPost, "/_sim/messages", "", "application/x-www-form-urlencoded", http.StatusUnauthorized},
		{"JSON without the token", http.MethodPost, "/_sim/messages", "", "application/json", http.StatusUnauthorized},
		{"a wrong token", http.MethodPost, "/_sim/messages", "Bearer nope", "application/json", http.StatusUnauthorized},
		{"the token as Basic auth", http.MethodGet, "/_sim/stats", "Basic " + token, "", http.StatusUnauthorized},
		{"the token, text/plain", http.MethodPost, "/_sim/messages", "Bearer " + token, "text/plain", http.StatusUnsupportedMediaType},
		{"the token, no body type", http.MethodDelete, "/_sim/faults", "Bearer " + token, "", http.StatusUnsupportedMediaType},
		{"the token and JSON", http.MethodPost, "/_sim/messages", "Bearer " + token, "application/json; charset=utf-8", http.StatusOK},
		{"the token, a GET", http.MethodGet, "/_sim/stats", "Bearer " + token, "", http.StatusOK},
		{"/_sim alone", http.MethodGet, "/_sim", "", "", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			before := served
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(`{}`))
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			is.Equal(rec.Code, tc.want)                            // answered so
			is.Equal(served-before == 1, tc.want == http.StatusOK) // and served on only then
		})
	}
}

// A guard with no token refuses every control request, even one with the
// blank token.
func TestGuardWithoutAToken(t *testing.T) {
	is := is.New(t)
	h := simcontrol.Guard("", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	req := httptest.NewRequest(http.MethodGet, "/_sim/stats", nil)
	simcontrol.Authorize(req, "")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	is.Equal(rec.Code, http.StatusUnauthorized)
	is.True(simcontrol.NewToken() != simcontrol.NewToken()) // and the tokens made are not guessed
	is.True(len(simcontrol.NewToken()) >= 50)
}
