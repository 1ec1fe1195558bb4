package graph_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/graph"
	"github.com/ethosbuilding/primeflow/pkg/graphsim"
	"github.com/matryer/is"
)

// newSim serves a Graph simulator (mounted under /graph, as bin/primeflow
// mounts it) and returns a client for it.
func newSim(t *testing.T) (*graphsim.Sim, *graph.Client) {
	t.Helper()
	sim := graphsim.New(graphsim.Options{})
	mux := http.NewServeMux()
	mux.Handle("/graph/", http.StripPrefix("/graph", sim))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c, err := graph.New(sim.ClientConfig(srv.URL+"/graph"), srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return sim, c
}

func TestResolveFolder(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	sim, c := newSim(t)
	is.NoErr(sim.MakeFolder("Jobs 'A'/Done"))

	inbox, err := c.ResolveFolder(ctx, sim.User(), "Inbox")
	is.NoErr(err)
	is.True(inbox.ID != "" && inbox.ID != "inbox") // the well-known name resolves to the folder's id
	jobs, err := c.ResolveFolder(ctx, sim.User(), "inbox/prime jobs")
	is.NoErr(err)
	is.Equal(jobs.DisplayName, "Prime Jobs")
	is.Equal(jobs.ParentFolderID, inbox.ID) // a child of the inbox
	processed, err := c.ResolveFolder(ctx, sim.User(), "Inbox/Prime Jobs/Processed")
	is.NoErr(err)
	is.Equal(processed.ParentFolderID, jobs.ID)
	done, err := c.ResolveFolder(ctx, sim.User(), "Jobs 'A'/Done")
	is.NoErr(err)          // a quote in a name is escaped in the filter
	is.True(done.ID != "") // at the top of the mailbox

	_, err = c.ResolveFolder(ctx, sim.User(), "Inbox/Prime Jobs/Archive")
	is.True(errors.Is(err, graph.ErrNotFound))                      // a folder that is not there
	is.True(strings.Contains(err.Error(), `"Archive"`))             // is named
	is.True(strings.Contains(err.Error(), `in "Inbox/Prime Jobs"`)) // with where it was looked for
	_, err = c.ResolveFolder(ctx, "someone@example.com", "Inbox")
	is.True(errors.Is(err, graph.ErrNotFound)) // another mailbox
}

func TestListMessagesPagesOldestFirst(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	sim, c := newSim(t)
	start := time.Date(2026, 10, 1, 8, 0, 0, 0, time.UTC)
	for i := range 120 {
		// delivered newest first, so the order must come from $orderby
		_, err := sim.Deliver(graphsim.NewMessage{Subject: fmt.Sprint(119 - i), Body: "<p>x</p>", ReceivedDateTime: start.Add(time.Duration(119-i) * time.Minute)})
		is.NoErr(err)
	}
	folder, err := c.ResolveFolder(ctx, sim.User(), graphsim.DefaultFolders[0])
	is.NoErr(err)
	var ms []graph.Message
	var sizes []int
	for link := ""; ; {
		page, err := c.ListPage(ctx, sim.User(), folder.ID, 50, link)
		is.NoErr(err)
		ms, sizes = append(ms, page.Messages...), append(sizes, len(page.Messages))
		if link = page.Next; link == "" {
			break
		}
	}
	is.Equal(sizes, []int{50, 50, 20}) // a page at a time, by @odata.nextLink
	for i, m := range ms {
		is.Equal(m.Subject, fmt.Sprint(i)) // oldest first
		is.True(m.InternetMessageID != "")
		is.Equal(m.ReceivedDateTime.Time, start.Add(time.Duration(i)*time.Minute))
	}
	st := sim.Stats()
	is.Equal(st.ByOp["messages.list"], int64(3))
	q, err := url.ParseQuery(st.LastListQuery)
	is.NoErr(err)
	is.Equal(q.Get("$select"), "id,subject,bodyPreview,receivedDateTime,internetMessageId,from,internetMessageHeaders") // no body
	is.Equal(q.Get("$orderby"), "receivedDateTime")
	is.Equal(q.Get("$top"), "50")
	is.Equal(st.TokensIssued, int64(1)) // one token for every call
}

func TestMoveGivesANewID(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	sim, c := newSim(t)
	m, err := sim.Deliver(graphsim.NewMessage{Subject: "job", Body: "x"})
	is.NoErr(err)
	processed, err := c.ResolveFolder(ctx, sim.User(), graphsim.DefaultFolders[1])
	is.NoErr(err)
	is.NoErr(c.Move(ctx, sim.User(), m.ID, processed.ID))
	is.Equal(len(sim.Messages(graphsim.DefaultFolders[0])), 0) // gone from the folder
	moved := sim.Messages(graphsim.DefaultFolders[1])
	is.Equal(len(moved), 1)
	is.True(moved[0].ID != m.ID)                                                       // a new id in the destination
	is.Equal(moved[0].InternetMessageID, m.InternetMessageID)                          // the same message
	is.True(errors.Is(c.Move(ctx, sim.User(), m.ID, processed.ID), graph.ErrNotFound)) // the old id is no more
	_, err = c.Locate(ctx, sim.User(), m.ID)
	is.True(errors.Is(err, graph.ErrNotFound)) // nor is a message found by it
	at, err := c.Locate(ctx, sim.User(), moved[0].ID)
	is.NoErr(err)
	is.Equal(at, processed.ID) // the new id is in the destination
}

func TestGetBodyWithinItsCap(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	sim, c := newSim(t)
	small, err := sim.Deliver(graphsim.NewMessage{Subject: "job", Body: "<p>JobID: 1</p>"})
	is.NoErr(err)
	large, err := sim.Deliver(graphsim.NewMessage{Subject: "large", Body: "<p>JobID: 2</p>", PadTo: 2 << 20})
	is.NoErr(err)
	body, err := c.GetBody(ctx, sim.User(), small.ID, 1<<20)
	is.NoErr(err)
	is.True(body.HTML())
	is.Equal(body.Content, "<p>JobID: 1</p>")
	_, err = c.GetBody(ctx, sim.User(), large.ID, 1<<20)
	var tooLarge *graph.TooLargeError
	is.True(errors.As(err, &tooLarge))                        // over the cap: not read
	is.True(errors.Is(err, graph.ErrTooLarge))                //
	is.True(tooLarge.Size > 2<<20 && tooLarge.Limit == 1<<20) // its size, from Content-Length
	body, err = c.GetBody(ctx, sim.User(), large.ID, 4<<20)
	is.NoErr(err) // within a larger cap
	is.True(len(body.Content) >= 2<<20 && strings.HasPrefix(body.Content, "<p>JobID: 2</p>"))
	_, err = c.GetBody(ctx, sim.User(), "AAMkNoSuchMessage", 1<<20)
	is.True(errors.Is(err, graph.ErrNotFound))
}

// An answer that does not say its length is cut at the cap all the same.
func TestGetBodyCapWithoutContentLength(t *testing.T) {
	is := is.New(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/token") {
			fmt.Fprint(w, `{"access_token":"t","expires_in":3600}`)
			return
		}
		w.(http.Flusher).Flush() // chunked: no Content-Length
		fmt.Fprintf(w, `{"body":{"contentType":"text","content":"%s"}}`, strings.Repeat("x", 4096))
	}))
	defer srv.Close()
	c, err := graph.New(graph.Config{TenantID: "t", ClientID: "c", ClientSecret: "s", APIURL: srv.URL + "/v1.0", TokenURL: srv.URL + "/token", Timeout: time.Second}, nil)
	is.NoErr(err)
	_, err = c.GetBody(context.Background(), "u", "m", 1024)
	var tooLarge *graph.TooLargeError
	is.True(errors.As(err, &tooLarge)) // read to the cap and no further
	is.Equal(tooLarge.Size, int64(0))  // of a size Graph did not say
	body, err := c.GetBody(context.Background(), "u", "m", 8192)
	is.NoErr(err)
	is.Equal(len(body.Content), 4096)
}

func TestHeadersAndAuthentication(t *testing.T) {
	is := is.New(t)
	var m graph.Message
	is.NoErr(json.Unmarshal([]byte(`{"id":"x","internetMessageHeaders":[
		{"name":"Received","value":"from a"},
		{"name":"Authentication-Results","value":"spf=pass (sender IP is 40.107.22.110) smtp.mailfrom=primeeco.tech; dkim=pass (signature was verified) header.d=primeeco.tech;dmarc=pass action=none header.from=primeeco.tech;compauth=pass reason=100"},
		{"name":"Authentication-Results","value":"dmarc=fail header.from=primeeco.tech"},
		{"name":7}, "noise"]}`), &m))
	is.Equal(len(m.Headers), 3) // the entries that are not {name, value} are skipped
	got, ok := m.Authentication()
	is.True(ok) // the message has one
	is.Equal(got, []graph.AuthResult{
		{Method: "spf", Result: "pass", Props: map[string]string{"smtp.mailfrom": "primeeco.tech"}},
		{Method: "dkim", Result: "pass", Props: map[string]string{"header.d": "primeeco.tech"}},
		{Method: "dmarc", Result: "pass", Props: map[string]string{"action": "none", "header.from": "primeeco.tech"}},
		{Method: "compauth", Result: "pass", Props: map[string]string{"reason": "100"}},
	}) // the first header's, Exchange's own

	is.Equal(graph.ParseAuthResults(`mx.example.net 1; dkim=fail (bad (nested) \) sig) header.d="a.example"; none`),
		[]graph.AuthResult{{Method: "dkim", Result: "fail", Props: map[string]string{"header.d": "a.example"}}}) // an authserv-id, comments, quotes

	for _, doc := range []string{`{"internetMessageHeaders":"nope"}`, `{"internetMessageHeaders":{"a":1}}`, `{}`} {
		var m graph.Message
		is.NoErr(json.Unmarshal([]byte(doc), &m)) // another shape is no headers, not a failed page
		_, ok := m.Authentication()
		is.True(!ok)
	}
}

func TestWaits(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		faults graphsim.Faults
		status int
		after  time.Duration
	}{
		{"throttled", graphsim.Faults{ThrottleNext: 1, RetryAfter: graphsim.Duration(7 * time.Second)}, http.StatusTooManyRequests, 7 * time.Second},
		{"unavailable", graphsim.Faults{FailNext: 1, FailStatus: http.StatusServiceUnavailable}, http.StatusServiceUnavailable, 0},
		{"gateway timeout", graphsim.Faults{FailNext: 1, FailStatus: http.StatusGatewayTimeout}, http.StatusGatewayTimeout, 0},
		{"no answer", graphsim.Faults{Down: true}, 0, 0},
		{"token endpoint down", graphsim.Faults{Down: true, Path: "/oauth2"}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			sim, c := newSim(t)
			sim.SetFaults(tc.faults)
			_, err := c.ResolveFolder(ctx, sim.User(), "Inbox")
			var w *graph.WaitError
			is.True(errors.As(err, &w)) // a wait, not a failure
			is.True(errors.Is(err, graph.ErrWait))
			is.Equal(w.Status, tc.status)
			is.Equal(w.RetryAfter(), tc.after) // Graph's Retry-After, when it gave one
			sim.SetFaults(graphsim.Faults{})
			_, err = c.ResolveFolder(ctx, sim.User(), "Inbox")
			is.NoErr(err) // and then it answers
		})
	}
}

func TestToken(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	sim, c := newSim(t)
	_, err := c.ResolveFolder(ctx, sim.User(), "Inbox")
	is.NoErr(err)
	sim.RevokeTokens()
	_, err = c.ResolveFolder(ctx, sim.User(), "Inbox")
	is.NoErr(err) // a 401 fetches a new token and tries again
	is.Equal(sim.Stats().TokensIssued, int64(2))

	srv := httptest.NewServer(http.StripPrefix("/graph", sim))
	defer srv.Close()
	cfg := sim.ClientConfig(srv.URL + "/graph")
	cfg.ClientSecret = "wrong"
	bad, err := graph.New(cfg, nil)
	is.NoErr(err)
	_, err = bad.ResolveFolder(ctx, sim.User(), "Inbox")
	var api *graph.APIError
	is.True(errors.As(err, &api))                    // refused: not a wait
	is.Equal(api.Code, "invalid_client")             // with Entra's reason
	is.True(!strings.Contains(err.Error(), "wrong")) // and never the secret
}

func TestConfig(t *testing.T) {
	is := is.New(t)
	_, err := graph.New(graph.Config{APIURL: graph.DefaultAPIURL, TokenURL: graph.DefaultTokenURL, Timeout: time.Second}, nil)
	is.True(err != nil)
	for _, name := range []string{"GRAPH_TENANT_ID", "GRAPH_CLIENT_ID", "GRAPH_CLIENT_SECRET"} {
		is.True(strings.Contains(err.Error(), name)) // every missing variable is named
	}
	_, err = graph.New(graph.Config{TenantID: "t", ClientID: "c", ClientSecret: "s", APIURL: "ftp://x", TokenURL: graph.DefaultTokenURL, Timeout: time.Second}, nil)
	is.True(err != nil && strings.Contains(err.Error(), "GRAPH_API_URL"))
	is.True(!strings.Contains(graph.Config{ClientSecret: "hush"}.String(), "hush")) // %v never shows the secret
}

// The token endpoint is given the client secret, and Graph every call's
// bearer token: both go over https only (http to this machine alone, a
// simulator), as every URL a secret is sent to (secureurl.Check).
func TestConfigWantsHTTPS(t *testing.T) {
	for _, tc := range []struct {
		api, token string
		refused    []string
	}{
		{graph.DefaultAPIURL, graph.DefaultTokenURL, nil},
		{"http://127.0.0.1:8081/graph/v1.0", "http://localhost:8081/graph/{tenant}/oauth2/v2.0/token", nil},
		{"http://graph.example.com/v1.0", graph.DefaultTokenURL, []string{"GRAPH_API_URL"}},
		{graph.DefaultAPIURL, "http://login.example.com/{tenant}/oauth2/v2.0/token", []string{"GRAPH_TOKEN_URL"}},
		{"http://10.0.0.8/v1.0", "http://10.0.0.8/{tenant}/token", []string{"GRAPH_API_URL", "GRAPH_TOKEN_URL"}},
	} {
		t.Run(tc.api+" "+tc.token, func(t *testing.T) {
			is := is.New(t)
			err := graph.Config{TenantID: "t", ClientID: "c", ClientSecret: "s", APIURL: tc.api, TokenURL: tc.token, Timeout: time.Second}.Check()
			is.Equal(err != nil, tc.refused != nil) // https, or http to a loopback address
			for _, name := range tc.refused {
				is.True(strings.Contains(err.Error(), name+": must be https")) // naming the variable
			}
		})
	}
}

// A redirect is never followed: a 307 from the token endpoint would post
// the client secret to wherever it points, and one from Graph would carry
// the bearer token (to a host of the same domain). The 3xx is the answer,
// a refusal.
func TestFollowsNoRedirect(t *testing.T) {
	is := is.New(t)
	var reached atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		fmt.Fprint(w, `{"access_token":"t","expires_in":3600}`)
	}))
	defer elsewhere.Close()
	redirecting := httptest.NewServer(http.RedirectHandler(elsewhere.URL+"/token", http.StatusTemporaryRedirect))
	defer redirecting.Close()
	for _, hc := range []*http.Client{nil, redirecting.Client()} {
		c, err := graph.New(graph.Config{TenantID: "t", ClientID: "c", ClientSecret: "s3cret", APIURL: redirecting.URL + "/v1.0",
			TokenURL: redirecting.URL + "/token", Timeout: 5 * time.Second}, hc)
		is.NoErr(err)
		_, err = c.ListPage(context.Background(), "u", "f", 10, "")
		var api *graph.APIError
		is.True(errors.As(err, &api))                      // refused
		is.Equal(api.Status, http.StatusTemporaryRedirect) // by the redirect itself
		is.Equal(reached.Load(), int32(0))                 // whose target got nothing, the secret least of all
	}
}

func TestNextLinkElsewhereIsRefused(t *testing.T) {
	is := is.New(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/token") {
			fmt.Fprint(w, `{"access_token":"t","expires_in":3600}`)
			return
		}
		fmt.Fprint(w, `{"value":[],"@odata.nextLink":"https://evil.example.com/v1.0/users/u/messages?$skip=1"}`)
	}))
	defer srv.Close()
	c, err := graph.New(graph.Config{TenantID: "t", ClientID: "c", ClientSecret: "s", APIURL: srv.URL + "/v1.0", TokenURL: srv.URL + "/token", Timeout: time.Second}, nil)
	is.NoErr(err)
	page, err := c.ListPage(context.Background(), "u", "f", 10, "")
	is.NoErr(err)
	_, err = c.ListPage(context.Background(), "u", "f", 10, page.Next)
	is.True(err != nil && strings.Contains(err.Error(), "is not under")) // the token does not follow a link elsewhere
}
