package optimoroute_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
	"github.com/ethosbuilding/primeflow/pkg/optimosim"
	"github.com/matryer/is"
)

// leaks reports whether s carries the key in any of the forms a URL or a
// body might hold it.
func leaks(s string) bool {
	for _, k := range []string{testKey, url.QueryEscape(testKey), url.PathEscape(testKey), strings.ReplaceAll(url.QueryEscape(testKey), "+", "%20")} {
		if strings.Contains(s, k) {
			return true
		}
	}
	return false
}

func TestAPIKeyNeverInErrors(t *testing.T) {
	// A port that nothing listens on: connection refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String() + "/v1"
	l.Close()

	// A server that echoes the request URL, as some proxies' error pages do.
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/get_routes":
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprintf(w, "bad gateway for %s (key=%s)", r.URL.String(), r.URL.Query().Get("key"))
		case "/v1/start_planning":
			fmt.Fprintf(w, `{"success":false,"code":"ERR_INTERNAL","message":"key %s is odd"}`, r.URL.Query().Get("key"))
		case "/v1/create_or_update_orders":
			fmt.Fprintf(w, `{"success":true,"orders":[{"success":false,"code":"ERR_INTERNAL","message":"key %s"}]}`, r.URL.Query().Get("key"))
		case "/v1/stop_planning":
			http.Redirect(w, r, r.URL.String(), http.StatusFound) // a redirect loop
		}
	}))
	defer echo.Close()

	sim := optimosim.New(optimosim.Options{APIKey: testKey})
	sim.SetLatency(optimoroute.OpGetPlanningStatus, time.Minute)
	slow := httptest.NewServer(sim)
	defer slow.Close()

	tests := []struct {
		name    string
		baseURL string
		timeout time.Duration
		call    func(context.Context, *optimoroute.Client) error
	}{
		{"connection refused", refused, 0, func(ctx context.Context, c *optimoroute.Client) error {
			_, err := c.GetRoutes(ctx, "2026-03-02")
			return err
		}},
		{"timeout", slow.URL, 100 * time.Millisecond, func(ctx context.Context, c *optimoroute.Client) error {
			_, err := c.GetPlanningStatus(ctx, 1)
			return err
		}},
		{"non-JSON body echoing the URL", echo.URL + "/v1", 0, func(ctx context.Context, c *optimoroute.Client) error {
			_, err := c.GetRoutes(ctx, "2026-03-02")
			return err
		}},
		{"message echoing the key", echo.URL + "/v1", 0, func(ctx context.Context, c *optimoroute.Client) error {
			_, err := c.StartPlanning(ctx, optimoroute.StartPlanningRequest{Date: "2026-03-02"})
			return err
		}},
		{"per-order message echoing the key", echo.URL + "/v1", 0, func(ctx context.Context, c *optimoroute.Client) error {
			res, err := c.CreateOrUpdateOrders(ctx, []optimoroute.Order{order("K1", "2026-03-02")})
			if err != nil {
				return err
			}
			return res[0].Err
		}},
		{"redirect loop", echo.URL + "/v1", 0, func(ctx context.Context, c *optimoroute.Client) error {
			return c.StopPlanning(ctx, 1)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			c, err := optimoroute.New(optimoroute.Config{APIURL: tt.baseURL, APIKey: testKey, Timeout: tt.timeout})
			is.NoErr(err) // configured
			err = tt.call(ctx(t), c)
			is.True(err != nil)                               // the call failed
			is.True(!leaks(err.Error()))                      // without the key in the message
			is.True(!leaks(fmt.Sprintf("%+v %#v", err, err))) // nor in its detailed forms
			for e := err; e != nil; e = errors.Unwrap(e) {
				is.True(!leaks(e.Error())) // nor anywhere down the chain
			}
			var ue *url.Error
			if errors.As(err, &ue) {
				is.True(!leaks(ue.URL))                           // the URL is redacted
				is.True(strings.Contains(ue.URL, "key=REDACTED")) // visibly
			}
		})
	}
}

func TestTimeoutStaysRecognisable(t *testing.T) {
	is := is.New(t)
	sim := optimosim.New(optimosim.Options{APIKey: testKey})
	sim.SetLatency("", time.Minute)
	srv := httptest.NewServer(sim)
	defer srv.Close()
	c, err := optimoroute.New(optimoroute.Config{APIURL: srv.URL, APIKey: testKey, Timeout: 50 * time.Millisecond})
	is.NoErr(err) // configured
	_, err = c.GetRoutes(ctx(t), "2026-03-02")
	is.True(errors.Is(err, context.DeadlineExceeded)) // redaction keeps the cause
}

// TestErrorPageSnippets: the start of an error page that an error carries
// is cut after the key is redacted, and between characters. Both were found
// by FuzzAnswer (its crasher is kept in testdata/fuzz/FuzzAnswer): a key
// across the cut left its first bytes in the message, and an "é" across it
// left half a character, which the log and the database then carry.
func TestErrorPageSnippets(t *testing.T) {
	for name, page := range map[string]string{
		"the key across the cut":      strings.Repeat("x", 192) + testKey,
		"a character across the cut":  "0" + strings.Repeat("é", 120),
		"a short page is kept whole":  "<html>Bad Gateway</html>",
		"a long page in ASCII is cut": strings.Repeat("y", 500),
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusBadGateway)
				fmt.Fprint(w, page)
			}))
			defer srv.Close()
			c, err := optimoroute.New(optimoroute.Config{APIURL: srv.URL, APIKey: testKey})
			is.NoErr(err)
			_, err = c.GetRoutes(ctx(t), "2026-03-02")
			is.True(err != nil) // a 502
			msg := err.Error()
			is.True(!strings.Contains(msg, testKey[:6])) // no piece of the key
			is.True(utf8.ValidString(msg))               // and no piece of a character
			is.True(len(msg) < 300)                      // a snippet, not the page
		})
	}
}
