package graphsim

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/graph"
	"github.com/ethosbuilding/primeflow/pkg/simcontrol"
	"github.com/matryer/is"
)

// send makes a control request of sim's, with its token and a JSON body.
func send(t *testing.T, sim *Sim, method, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	simcontrol.Authorize(req, sim.ControlToken())
	resp, err := http.DefaultClient.Do(req)
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
	post := func(t *testing.T, url, body string) *http.Response { return send(t, sim, http.MethodPost, url, body) }

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

	get := send(t, sim, http.MethodGet, srv.URL+"/_sim/messages?folder=Inbox/Other", "")
	var ms []Message
	is.NoErr(json.NewDecoder(get.Body).Decode(&ms))
	is.Equal(len(ms), 1)

	is.Equal(post(t, srv.URL+"/_sim/faults", `{"throttleNext":2,"retryAfter":"3s","path":"/messages"}`).StatusCode, http.StatusNoContent)
	sim.mu.Lock()
	f := sim.faults
	sim.mu.Unlock()
	is.Equal(f, Faults{ThrottleNext: 2, RetryAfter: Duration(3 * time.Second), Path: "/messages"}) // read as given
}

// A page on another origin cannot drop an email into the mailbox: the
// text/plain POST a browser sends without asking (once used to have
// job-mirror ask the real Prime about a GUID of the sender's choosing), and
// any other request without the simulator's token, is refused (issue 27 §6).
func TestControlAPINeedsTheTokenAndJSON(t *testing.T) {
	is := is.New(t)
	sim := New(Options{ControlToken: "graphsim-test-token"})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	body := `{"subject":"New job","body":"JobID: 0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"}`
	for _, req := range simcontrol.Forged(http.MethodPost, srv.URL+"/_sim/messages", body, "graphsim-test-token") {
		resp, err := http.DefaultClient.Do(req)
		is.NoErr(err)
		resp.Body.Close()
		is.True(resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusUnsupportedMediaType) // refused
	}
	is.Equal(len(sim.Messages(DefaultFolders[0])), 0) // nothing delivered
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

// A hang takes the call and answers nothing until it is released: the call
// then goes on as if it had just come. A caller that gives up ends its
// call, and one the hang's path does not match is answered as usual.
func TestHang(t *testing.T) {
	is := is.New(t)
	sim := New(Options{})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	client, err := graph.New(sim.ClientConfig(srv.URL), nil)
	is.NoErr(err)
	m, err := sim.Deliver(NewMessage{Subject: "New job", Body: "JobID: 2262480"})
	is.NoErr(err)
	is.Equal(send(t, sim, http.MethodPost, srv.URL+"/_sim/faults", `{"hang":true,"path":"/messages/`+m.ID+`"}`).StatusCode, http.StatusNoContent)

	answered := make(chan error, 1)
	go func() {
		_, err := client.GetBody(context.Background(), sim.User(), m.ID, 1<<20)
		answered <- err
	}()
	flowtest.Eventually(t, "the call held", func() bool { return sim.Stats().Hanging == 1 })
	_, err = client.ResolveFolder(context.Background(), sim.User(), DefaultFolders[0])
	is.NoErr(err) // another path is answered meanwhile
	select {
	case err := <-answered:
		t.Fatalf("a held call was answered: %v", err)
	default: // still held
	}

	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := client.Locate(ctx, sim.User(), m.ID)
		gaveUp <- err
	}()
	flowtest.Eventually(t, "the second call held", func() bool { return sim.Stats().Hanging == 2 })
	cancel()
	is.True(errors.Is(<-gaveUp, context.Canceled))                                                         // its caller gave up
	flowtest.Eventually(t, "the call given up on let go", func() bool { return sim.Stats().Hanging == 1 }) // and the simulator let it go

	is.Equal(send(t, sim, http.MethodDelete, srv.URL+"/_sim/faults", "").StatusCode, http.StatusNoContent)
	is.NoErr(<-answered) // released, it is answered
	is.Equal(sim.Stats().Hanging, int64(0))
}
