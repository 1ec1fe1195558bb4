package ingest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func FuzzHeadersJSON(f *testing.F) {
	f.Add("X-Request-Id", "abc-123", "5b0e1f6c-2a7d-4c1e-9f3b-8d6a4e2c1b70", "127.0.0.1:8080")
	f.Add("Content-Type", "application/json; charset=utf-8", "", "")
	f.Add("Host", "<script>&\"\\\u2028\x00\xff", "key\n", "exämple.com")
	f.Add("Authorization", "Bearer secret", "k", "h")
	f.Fuzz(func(t *testing.T, name, value, apiKey, host string) {
		r := &http.Request{Host: host, Header: http.Header{
			name:           {value, value + "2"},
			"Api-Key":      {apiKey},
			"Cookie":       {"session=secret"},
			"User-Agent":   {"Prime"},
			"X-Empty":      {},
			"X-Not-Set":    nil,
			"Content-Type": {"application/json"},
		}}
		if got, want := headersJSON(r), headersThroughMarshal(r); got != want {
			t.Fatalf("headersJSON = %s\nthrough json.Marshal: %s", got, want)
		}
	})
}

// headersThroughMarshal is headersJSON as it was written first, through a
// copy of the headers and json.Marshal: the reference headersJSON must
// agree with.
func headersThroughMarshal(r *http.Request) string {
	h := r.Header.Clone()
	for k := range h {
		if secretHeader(k) {
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

func TestSecretHeader(t *testing.T) {
	for _, tc := range []struct {
		name   string
		secret bool
	}{
		{"Api-Key", true}, // §2
		{"X-Api-Key", true},
		{"Api_key", true}, // API_Key as net/http keeps it
		{"APIKEY", true},
		{"X-Auth-Token", true},
		{"Authorization", true},
		{"Proxy-Authorization", true},
		{"Cookie", true},
		{"Set-Cookie", true},
		{"X-Hub-Signature-256", true},
		{"X-Webhook-Secret", true},
		{"X-Pass-Word", true}, // separators ignored
		{"x.session.TOKEN", true},
		{"X-Csrf Token", true},
		{"Password", true},
		{"Content-Type", false},
		{"Content-Length", false},
		{"User-Agent", false},
		{"Accept-Encoding", false},
		{"Host", false},
		{"X-Forwarded-For", false},
		{"X-Request-Id", false},
		{"Keep-Alive", false},
		{"Traceparent", false},
		{"X-Prime-Event", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := secretHeader(tc.name); got != tc.secret {
				t.Errorf("secretHeader(%q) = %v, want %v", tc.name, got, tc.secret)
			}
			r := &http.Request{Header: http.Header{tc.name: {"s3cret-value"}}}
			stored := headersJSON(r)
			if tc.secret == strings.Contains(stored, "s3cret-value") {
				t.Errorf("%s stored as %s", tc.name, stored)
			}
		})
	}
}
