package ingest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/services/ingest"
	"github.com/gorilla/mux"
	"github.com/matryer/is"
)

// TestEveryRouteButTheWebhookNeedsBasicAuth walks the router (§10.1): every
// route but POST /api/prime/webhook answers 401 without Basic auth, and so
// does every path and method that no route takes.
func TestEveryRouteButTheWebhookNeedsBasicAuth(t *testing.T) {
	h := start(t)
	type probe struct{ method, path string }
	var probes []probe
	walk := func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		path, err := route.GetPathTemplate()
		if err != nil {
			return nil // a route without a path of its own (a subrouter)
		}
		methods, err := route.GetMethods()
		if err != nil {
			methods = []string{http.MethodGet, http.MethodPost}
		}
		for _, m := range methods {
			probes = append(probes, probe{m, path})
		}
		return nil
	}
	is := is.New(t)
	is.NoErr(h.router.Public().Walk(walk))
	is.NoErr(h.router.Admin.Walk(walk))
	is.True(len(probes) >= 4) // the webhook, process, healthz, metrics at least
	probes = append(probes,
		probe{http.MethodGet, ingest.WebhookPath},
		probe{http.MethodPut, ingest.WebhookPath},
		probe{http.MethodDelete, ingest.WebhookPath},
		probe{http.MethodPost, ingest.WebhookPath + "/process"},
		probe{http.MethodPost, ingest.WebhookPath + "log/process"},
		probe{http.MethodGet, "/no/such/route"},
		probe{http.MethodGet, ingest.ProcessPath},
	)
	public := 0
	for _, p := range probes {
		t.Run(p.method+" "+p.path, func(t *testing.T) {
			is := is.New(t)
			req, err := http.NewRequest(p.method, h.url+p.path, strings.NewReader("{}"))
			is.NoErr(err)
			res, err := http.DefaultClient.Do(req)
			is.NoErr(err)
			res.Body.Close()
			if p.method == http.MethodPost && p.path == ingest.WebhookPath {
				public++
				is.Equal(res.StatusCode, http.StatusUnauthorized) // the webhook wants its API-Key, not Basic auth
				is.Equal(res.Header.Get("WWW-Authenticate"), "")  // and does not ask for Basic auth
				return
			}
			is.Equal(res.StatusCode, http.StatusUnauthorized)                              // Basic auth demanded
			is.True(strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Basic realm=")) // by the Basic auth gate

			req.SetBasicAuth(adminUser, "wrong")
			req.Body = io.NopCloser(strings.NewReader("{}"))
			res, err = http.DefaultClient.Do(req)
			is.NoErr(err)
			res.Body.Close()
			is.Equal(res.StatusCode, http.StatusUnauthorized) // a wrong password too
		})
	}
	is.Equal(public, 1) // exactly one public route
}

func TestBlankAdminPasswordRejectsEverything(t *testing.T) {
	is := is.New(t)
	h := start(t)
	for _, creds := range [][2]string{{adminUser, ""}, {"", ""}, {"", adminPass}} {
		req, _ := http.NewRequest(http.MethodPost, h.url+ingest.ProcessPath, nil)
		req.SetBasicAuth(creds[0], creds[1])
		res, err := http.DefaultClient.Do(req)
		is.NoErr(err)
		res.Body.Close()
		is.Equal(res.StatusCode, http.StatusUnauthorized) // blank user or password never matches
	}
}

func (h *harness) process() (*http.Response, map[string]any) {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.url+ingest.ProcessPath, nil)
	req.SetBasicAuth(adminUser, adminPass)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		h.t.Fatalf("process answered %d with a body that is not JSON: %v", res.StatusCode, err)
	}
	return res, body
}
