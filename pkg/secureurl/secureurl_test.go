package secureurl_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/secureurl"
	"github.com/matryer/is"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://sms.example.com/send", true},
		{"https://10.0.0.8/send", true},
		{"http://127.0.0.1:8080/sms", true},
		{"http://127.5.6.7/sms", true},
		{"http://localhost:8080/sms", true},
		{"http://LOCALHOST/sms", true},
		{"http://[::1]:8080/sms", true},
		{"http://sms.example.com/send", false},
		{"http://10.0.0.8/send", false},
		{"http://localhost.example.com/send", false},
		{"http://127.0.0.1.example.com/send", false},
		{"ftp://127.0.0.1/send", false},
		{"/send", false},
		{"", false},
	} {
		t.Run(tc.url, func(t *testing.T) {
			is := is.New(t)
			is.Equal(secureurl.Check(tc.url) == nil, tc.ok) // https, or http to this machine alone
		})
	}
}

func TestNoRedirectClient(t *testing.T) {
	is := is.New(t)
	var reached atomic.Bool
	elsewhere := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Store(true) }))
	defer elsewhere.Close()
	redirecting := httptest.NewServer(http.RedirectHandler(elsewhere.URL, http.StatusTemporaryRedirect))
	defer redirecting.Close()

	given := &http.Client{Timeout: time.Minute}
	hc := secureurl.NoRedirectClient(given)
	resp, err := hc.Get(redirecting.URL)
	is.NoErr(err)
	resp.Body.Close()
	is.Equal(resp.StatusCode, http.StatusTemporaryRedirect)       // the 3xx is the answer
	is.True(!reached.Load())                                      // and its target got nothing
	is.Equal(hc.Timeout, given.Timeout)                           // the client given, copied
	is.True(given.CheckRedirect == nil)                           // and left as it was
	is.True(secureurl.NoRedirectClient(nil).CheckRedirect != nil) // nil: a client of its own
}
