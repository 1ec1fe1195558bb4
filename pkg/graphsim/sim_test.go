package graphsim

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
)

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestControlAPI(t *testing.T) {
	is := is.New(t)
	sim := New(Options{})
	srv := httptest.NewServer(sim)
	defer srv.Close()

	resp := post(t, srv.URL+"/_sim/messages", `{"subject":"New job","body":"<p>{ &quot;JobID&quot;: &#39;2262480&#39; }</p>"}`)
	is.Equal(resp.StatusCode, http.StatusCreated)
	var m Message
	is.NoErr(json.NewDecoder(resp.Body).Decode(&m))
	is.Equal(m.Folder, "Inbox/Prime Jobs")               // the first folder by default
	is.Equal(m.BodyPreview, `{ "JobID": '2262480' }`)    // the preview is the body's text
	is.True(strings.HasSuffix(m.InternetMessageID, ">")) // an RFC 5322 Message-ID
	is.Equal(post(t, srv.URL+"/_sim/messages", `{"folder":"Nowhere"}`).StatusCode, http.StatusBadRequest)
	is.Equal(post(t, srv.URL+"/_sim/folders", `{"path":"Inbox/Other"}`).StatusCode, http.StatusNoContent)
	is.Equal(post(t, srv.URL+"/_sim/messages", `{"folder":"inbox/other","contentType":"text"}`).StatusCode, http.StatusCreated)

	get, err := http.Get(srv.URL + "/_sim/messages?folder=Inbox/Other")
	is.NoErr(err)
	defer get.Body.Close()
	var ms []Message
	is.NoErr(json.NewDecoder(get.Body).Decode(&ms))
	is.Equal(len(ms), 1)

	is.Equal(post(t, srv.URL+"/_sim/faults", `{"throttleNext":2,"retryAfter":"3s","path":"/messages"}`).StatusCode, http.StatusNoContent)
	sim.mu.Lock()
	f := sim.faults
	sim.mu.Unlock()
	is.Equal(f, Faults{ThrottleNext: 2, RetryAfter: Duration(3 * time.Second), Path: "/messages"}) // read as given
}

func TestSelectIsHonoured(t *testing.T) {
	is := is.New(t)
	sim := New(Options{})
	m, err := sim.Deliver(NewMessage{Subject: "s", Body: "b"})
	is.NoErr(err)
	got := selectFields(&m, "folder", []string{"id", "subject"})
	is.Equal(len(got), 2) // only what $select names
	is.Equal(got["id"], m.ID)
	_, hasBody := got["body"]
	is.True(!hasBody)
}
