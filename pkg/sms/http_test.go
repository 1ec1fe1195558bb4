package sms_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/ethosbuilding/primeflow/pkg/delivery"
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
	is.Equal(p.payload, sms.Payload{ID: 42, Reference: "primeflow-sms-42", To: "+61400000000", Message: "MAKE SAFE", Source: "makesafe", Attempt: 2}) // the message as JSON
	is.Equal(p.header.Get("Content-Type"), "application/json")                                                                                        // labelled JSON
	is.Equal(p.header.Get(delivery.IdempotencyKeyHeader), "primeflow-sms-42")                                                                         // the same key on every attempt
	is.Equal(p.header.Get("X-Api-Key"), "s3cret")                                                                                                     // with the configured auth header
}

func TestHTTPSenderStatuses(t *testing.T) {
	for _, tc := range []struct {
		status    int
		ok, final bool
	}{
		{http.StatusOK, true, false},
		{http.StatusAccepted, true, false},
		{http.StatusInternalServerError, false, false},
		{http.StatusBadGateway, false, false},
		{http.StatusServiceUnavailable, false, false},
		{http.StatusRequestTimeout, false, false},
		{http.StatusTooManyRequests, false, false},
		{http.StatusBadRequest, false, true},
		{http.StatusUnauthorized, false, true},
		{http.StatusNotFound, false, true},
		{http.StatusUnprocessableEntity, false, true},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			is := is.New(t)
			ep := &endpoint{statuses: []int{tc.status}}
			srv := httptest.NewServer(ep)
			defer srv.Close()
			s, err := sms.NewHTTPSender(delivery.HTTPConfig{URL: srv.URL}, nil)
			is.NoErr(err)
			err = s.Send(context.Background(), sms.Message{ID: 1, To: "+61400000000", Body: "x"})
			is.Equal(err == nil, tc.ok)                               // 2xx is sent
			is.Equal(errors.Is(err, delivery.ErrPermanent), tc.final) // other 4xx are refused for good, the rest retried
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
