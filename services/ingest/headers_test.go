package ingest

import (
	"encoding/json"
	"net/http"
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
