package sms_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ethosbuilding/primeflow/pkg/delivery"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/sms"
	"github.com/matryer/is"
)

// endpoint is an SMS endpoint over real HTTP that answers each post with the
// next status of a script (the last one repeats) and records what it got.
type endpoint struct {
	mu       sync.Mutex
	statuses []int
	posts    []post
	// arrived, when set, hears of each post as it arrives; hold, when set,
	// keeps each post unanswered until it is closed or the client gives up.
	arrived chan int64
	hold    chan struct{}
}

type post struct {
	header  http.Header
	payload sms.Payload
	status  int
}

func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var p sms.Payload
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil || r.Method != http.MethodPost {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if e.arrived != nil {
		e.arrived <- p.ID
	}
	if e.hold != nil {
		select {
		case <-e.hold:
		case <-r.Context().Done():
			return // the client gave up: nothing was answered
		}
	}
	e.mu.Lock()
	status := http.StatusOK
	if len(e.statuses) > 0 {
		status = e.statuses[min(len(e.posts), len(e.statuses)-1)]
	}
	e.posts = append(e.posts, post{header: r.Header.Clone(), payload: p, status: status})
	e.mu.Unlock()
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"status":%d}`, status)
}

func (e *endpoint) got() []post {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]post(nil), e.posts...)
}

// accepted counts the posts of a message that were answered 2xx.
func (e *endpoint) accepted(id int64) int {
	n := 0
	for _, p := range e.got() {
		if p.payload.ID == id && p.status/100 == 2 {
			n++
		}
	}
	return n
}

func TestHTTPSenderPostsJSON(t *testing.T) {
	is := is.New(t)
	ep := &endpoint{}
	srv := httptest.NewServer(ep)
	defer srv.Close()
	s, err := sms.NewHTTPSender(delivery.HTTPConfig{URL: srv.URL + "/webhook/sms", AuthHeader: "X-Api-Key", AuthValue: "s3cret"}, nil)
	is.NoErr(err)
	is.NoErr(s.Send(context.Background(), sms.Message{ID: 42, To: "+61400000000", Body: "MAKE SAFE", Source: "makesafe", Attempt: 2}))
	posts := ep.got()
	is.Equal(len(posts), 1) // one post
	p := posts[0]
	is.Equal(p.payload, sms.Payload{ID: 42, Reference: "primeflow-sms-42", To: "+61400000000", Message: "MAKE SAFE", Source: "makesafe"}) // the message as JSON
	is.Equal(p.header.Get("Content-Type"), "application/json")                                                                            // labelled JSON
	is.Equal(p.header.Get(delivery.IdempotencyKeyHeader), "primeflow-sms-42")                                                             // the same key on every attempt
	is.Equal(p.header.Get("X-Api-Key"), "s3cret")                                                                                         // with the configured auth header
	is.Equal(p.header.Get(delivery.AttemptHeader), "2")                                                                                   // and the attempt beside the body
}

func TestHTTPSenderStatuses(t *testing.T) {
	for _, tc := range []struct {
		status          int
		ok, wait, final bool
	}{
		{http.StatusOK, true, false, false},
		{http.StatusAccepted, true, false, false},
		{http.StatusInternalServerError, false, false, false}, // the endpoint's answer about this post: an attempt
		{http.StatusNotImplemented, false, false, false},
		{http.StatusBadGateway, false, true, false}, // the endpoint, or a gateway in front of it, not taking posts: a wait
		{http.StatusServiceUnavailable, false, true, false},
		{http.StatusGatewayTimeout, false, true, false},
		{http.StatusTooManyRequests, false, true, false}, // its rate limit: a wait
		{http.StatusRequestTimeout, false, false, false},
		{http.StatusBadRequest, false, false, true},
		{http.StatusUnauthorized, false, false, true},
		{http.StatusNotFound, false, false, true},
		{http.StatusUnprocessableEntity, false, false, true},
		{http.StatusConflict, false, false, false}, // the key's first request still in progress (IETF idempotency-key draft)
		{http.StatusTemporaryRedirect, false, false, false},
		{http.StatusFound, false, false, false},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			is := is.New(t)
			ep := &endpoint{statuses: []int{tc.status}}
			srv := httptest.NewServer(ep)
			defer srv.Close()
			s, err := sms.NewHTTPSender(delivery.HTTPConfig{URL: srv.URL}, nil)
			is.NoErr(err)
			err = s.Send(context.Background(), sms.Message{ID: 1, To: "+61400000000", Body: "x"})
			is.Equal(err == nil, tc.ok)                                 // 2xx is sent
			is.Equal(errors.Is(err, delivery.ErrUnavailable), tc.wait)  // 429, 502, 503, 504 are waits
			is.Equal(errors.Is(err, delivery.ErrPermanent), tc.final)   // other 4xx are refused for good, the rest retried
			is.Equal(retry.Delay(err) > 0, tc.wait)                     // a wait is a retry.Waiter, and only a wait is
			is.True(!tc.wait || strings.Contains(err.Error(), "HTTP ")) // saying what the endpoint answered
		})
	}
}

// A post that never went out — no such host, nothing listening, a TLS
// handshake nobody answers — is a wait: the endpoint cannot have acted on
// it. One that went out and got no answer, or whose connection was lost
// before the answer, counts an attempt: the endpoint may have acted on it.
func TestHTTPSenderTellsAPostThatWentOutFromOneThatDidNot(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + closed.Addr().String() + "/sms"
	closed.Close()

	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts, and never says a word
	if err != nil {
		t.Fatal(err)
	}
	hung := make(chan struct{})
	t.Cleanup(func() { silent.Close(); close(hung) })
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			go func() { <-hung; c.Close() }()
		}
	}()

	held := &endpoint{hold: make(chan struct{})}
	heldURL := mustServer(t, held)
	t.Cleanup(func() { close(held.hold) })
	hangUp := mustServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			c.Close() // the post read, and no answer
		}
	}))

	for _, tc := range []struct {
		name, url string
		wait      bool
	}{
		{"connection refused", refused, true},
		{"no such host", "https://primeflow-sms.invalid/send", true},
		{"a TLS handshake with no answer", "https://" + silent.Addr().String() + "/sms", true},
		{"sent, and no answer before the timeout", heldURL, false},
		{"sent, and the connection lost before the answer", hangUp, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			s, err := sms.NewHTTPSender(delivery.HTTPConfig{URL: tc.url, Timeout: 300 * time.Millisecond}, nil)
			is.NoErr(err)
			err = s.Send(context.Background(), sms.Message{ID: 1, To: "+61400000000", Body: "x"})
			is.True(err != nil)                                        // not sent
			is.Equal(errors.Is(err, delivery.ErrUnavailable), tc.wait) // a wait only when the request never went out
			is.True(!errors.Is(err, delivery.ErrPermanent))            // and retried either way
			if tc.wait {
				is.True(strings.Contains(err.Error(), "the request was not sent")) // saying so
			} else {
				is.True(strings.Contains(err.Error(), "the request was sent")) // saying so
			}
		})
	}
}

// An error answer's body is kept in the error (and so in the log and the
// row's LastError) as its start, on one line, marked when cut.
func TestHTTPSenderKeepsTheStartOfAnErrorBody(t *testing.T) {
	// The page's 200th byte is the first of a "ü".
	page := "<!DOCTYPE html>\n<html>\n<head><title>502 Bad Gateway</title></head>\n<body>\n<hr><hr><hr>" +
		strings.Repeat("<p>upstream went away: ü</p>\n", 200) + "<p>THE END</p></body></html>"
	for _, tc := range []struct {
		name, body, want string
		cut              bool
	}{
		{"a short answer", `{"error":"try later"}`, `{"error":"try later"}`, false},
		{"an HTML error page", page, "<!DOCTYPE html> <html> <head><title>502 Bad Gateway</title></head> <body> <hr><hr><hr><p>upstream went away: ü</p>", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusBadGateway)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			s, err := sms.NewHTTPSender(delivery.HTTPConfig{URL: srv.URL}, nil)
			is.NoErr(err)
			err = s.Send(context.Background(), sms.Message{ID: 1, To: "+61400000000", Body: "x"})
			is.True(err != nil) // a 502
			_, body, found := strings.Cut(err.Error(), "HTTP 502: ")
			is.True(found)                                     // the status
			is.True(strings.HasPrefix(body, tc.want))          // then the start of the body, on one line
			is.Equal(strings.HasSuffix(body, "…"), tc.cut)     // marked when cut
			is.True(len(strings.TrimSuffix(body, "…")) <= 200) // at most 200 bytes of it
			is.True(!strings.Contains(body, "\n"))             // one line
			is.True(utf8.ValidString(body))                    // no character cut in two
		})
	}
}

func TestHTTPSenderNeverLeaksItsSecrets(t *testing.T) {
	is := is.New(t)
	ep := &endpoint{statuses: []int{http.StatusInternalServerError}}
	srv := httptest.NewServer(ep)
	cfg := delivery.HTTPConfig{URL: strings.Replace(srv.URL, "http://", "http://user:pa55@", 1) + "/sms?key=k3y-in-query", AuthValue: "Bearer t0ken"}
	s, err := sms.NewHTTPSender(cfg, nil)
	is.NoErr(err)
	err = s.Send(context.Background(), sms.Message{ID: 7, To: "+61400000000", Body: "x"})
	is.True(err != nil) // a 500
	srv.Close()
	err2 := s.Send(context.Background(), sms.Message{ID: 7, To: "+61400000000", Body: "x"})
	is.True(err2 != nil) // nobody answers
	for _, text := range []string{err.Error(), err2.Error(), cfg.String(), fmt.Sprintf("%v %+v", cfg, cfg)} {
		for _, secret := range []string{"k3y-in-query", "pa55", "t0ken"} {
			if strings.Contains(text, secret) {
				t.Errorf("%q shows %q", text, secret)
			}
		}
	}
	is.True(strings.Contains(err.Error(), "HTTP 500")) // the error still says what happened
	is.True(strings.Contains(err2.Error(), "/sms"))    // and where

	_, err = sms.NewHTTPSender(delivery.HTTPConfig{URL: "ftp://example.com/?key=k3y"}, nil)
	is.True(err != nil)                            // only http(s)
	is.True(!strings.Contains(err.Error(), "k3y")) // and the refusal shows no key either
	err = s.Send(context.Background(), sms.Message{ID: 8, Body: "x"})
	is.True(errors.Is(err, delivery.ErrPermanent)) // no recipient: refused for good without a post
}

// A redirect is never followed (issue 27: a 307 forwarded the SMS body and
// its custom auth header to another host; a 302 turned the post into a GET
// whose 200 was recorded sent): the other host gets nothing, and the post is
// a failure.
func TestHTTPSenderFollowsNoRedirect(t *testing.T) {
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusFound, http.StatusMovedPermanently, http.StatusSeeOther} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			is := is.New(t)
			var reached []string
			var mu sync.Mutex
			elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				reached = append(reached, r.Method+" "+r.Header.Get("X-Api-Key"))
				mu.Unlock()
				w.WriteHeader(http.StatusOK) // a GET's 200 says nothing of the SMS
			}))
			defer elsewhere.Close()
			redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, elsewhere.URL+"/collect?token=t0ken", status)
			}))
			defer redirecting.Close()
			s, err := sms.NewHTTPSender(delivery.HTTPConfig{URL: redirecting.URL + "/sms", AuthHeader: "X-Api-Key", AuthValue: "s3cret"}, nil)
			is.NoErr(err)
			err = s.Send(context.Background(), sms.Message{ID: 3, To: "+61400000000", Body: "MAKE SAFE"})
			is.True(err != nil) // not sent
			mu.Lock()
			is.Equal(len(reached), 0) // the other host got nothing: no body, no auth header
			mu.Unlock()
			is.True(strings.Contains(err.Error(), fmt.Sprintf("HTTP %d redirect", status))) // saying why
			is.True(!strings.Contains(err.Error(), "t0ken"))                                // the Location's query redacted
		})
	}
}

// A post carries a customer's number and the endpoint's credentials: the
// URL must be https, or http to this machine alone; the refusal names the
// variable.
func TestHTTPSenderNeedsHTTPS(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://sms.example.com/send", true},
		{"http://127.0.0.1:8080/sms", true},
		{"http://127.5.6.7/sms", true},
		{"http://localhost:8080/sms", true},
		{"http://[::1]:8080/sms", true},
		{"http://sms.example.com/send", false},
		{"http://10.0.0.8/send", false},
		{"http://localhost.example.com/send", false},
		{"ftp://127.0.0.1/send", false},
	} {
		t.Run(tc.url, func(t *testing.T) {
			is := is.New(t)
			_, err := sms.NewHTTPSender(delivery.HTTPConfig{URL: tc.url}, nil)
			is.Equal(err == nil, tc.ok)
			err = delivery.HTTPConfig{URL: tc.url}.Validate("SMS_")
			is.Equal(err == nil, tc.ok) // what the services check at start
			if err != nil {
				is.True(strings.Contains(err.Error(), "SMS_SEND_URL")) // naming the variable
			}
		})
	}
}

// 409 and 422 with the key are "already done" only where the endpoint's
// contract says so (SMS_SEND_ALREADY_DONE_STATUSES); otherwise they are read
// as the IETF idempotency-key draft has them.
func TestHTTPSenderAlreadyDone(t *testing.T) {
	for _, tc := range []struct {
		status      int
		alreadyDone []int
		ok, final   bool
	}{
		{http.StatusConflict, nil, false, false},
		{http.StatusUnprocessableEntity, nil, false, true},
		{http.StatusConflict, []int{409}, true, false},
		{http.StatusUnprocessableEntity, []int{409, 422}, true, false},
		{http.StatusUnprocessableEntity, []int{409}, false, true},
	} {
		t.Run(fmt.Sprint(tc.status, tc.alreadyDone), func(t *testing.T) {
			is := is.New(t)
			ep := &endpoint{statuses: []int{tc.status}}
			srv := httptest.NewServer(ep)
			defer srv.Close()
			s, err := sms.NewHTTPSender(delivery.HTTPConfig{URL: srv.URL, AlreadyDone: tc.alreadyDone}, nil)
			is.NoErr(err)
			err = s.Send(context.Background(), sms.Message{ID: 1, To: "+61400000000", Body: "x"})
			is.Equal(err == nil, tc.ok)
			is.Equal(errors.Is(err, delivery.ErrPermanent), tc.final)
		})
	}
	is := is.New(t)
	err := delivery.HTTPConfig{URL: "https://sms.example.com", AlreadyDone: []int{200}}.Validate("SMS_")
	is.True(err != nil && strings.Contains(err.Error(), "SMS_SEND_ALREADY_DONE_STATUSES")) // only 409 and 422
}
