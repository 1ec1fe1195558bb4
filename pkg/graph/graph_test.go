package graph_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
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
	ms, err := c.ListMessages(ctx, sim.User(), folder.ID, 50)
	is.NoErr(err)
	is.Equal(len(ms), 120) // every page
	for i, m := range ms {
		is.Equal(m.Subject, fmt.Sprint(i)) // oldest first
		is.True(m.HTML())
		is.True(m.InternetMessageID != "")
		is.Equal(m.ReceivedDateTime.Time, start.Add(time.Duration(i)*time.Minute))
	}
	st := sim.Stats()
	is.Equal(st.ByOp["messages.list"], int64(3)) // 50 + 50 + 20, by @odata.nextLink
	q, err := url.ParseQuery(st.LastListQuery)
	is.NoErr(err)
	is.Equal(q.Get("$select"), "id,subject,body,bodyPreview,receivedDateTime,internetMessageId,from")
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
	moved, err := c.Move(ctx, sim.User(), m.ID, processed.ID)
	is.NoErr(err)
	is.True(moved.ID != m.ID)                                  // a new id in the destination
	is.Equal(moved.InternetMessageID, m.InternetMessageID)     // the same message
	is.Equal(len(sim.Messages(graphsim.DefaultFolders[0])), 0) // gone from the folder
	is.Equal(len(sim.Messages(graphsim.DefaultFolders[1])), 1)
	_, err = c.Move(ctx, sim.User(), m.ID, processed.ID)
	is.True(errors.Is(err, graph.ErrNotFound)) // the old id is no more
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
	_, err = c.ListMessages(context.Background(), "u", "f", 10)
	is.True(err != nil && strings.Contains(err.Error(), "is not under")) // the token does not follow a link elsewhere
}
