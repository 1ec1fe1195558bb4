package ingest_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/services/ingest"
	"github.com/matryer/is"
)

// runMain runs ingest as its binary does, with env added to what it needs,
// and returns its HTTP address once it is healthy.
func runMain(t *testing.T, env map[string]string) string {
	t.Helper()
	addr := flowtest.FreeAddr(t)
	vars := map[string]string{
		"NATS_URL":              natstest.Server(t).ClientURL(),
		"DATA_DIR":              t.TempDir(),
		"HTTP_ADDR":             addr,
		"PRIME_WEBHOOK_API_KEY": apiKey,
		"ADMIN_USER":            adminUser,
		"ADMIN_PASSWORD":        adminPass,
	}
	maps.Copy(vars, env)
	var stderr flowtest.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ingest.Main(ctx, func(k string) string { return vars[k] }, &stderr) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ingest stopped with: %v", err)
		}
		if t.Failed() {
			t.Logf("ingest logs:\n%s", stderr.String())
		}
	})
	h := &harness{t: t, url: "http://" + addr}
	if vars["OPS_ADDR"] != "" {
		h.url = "http://" + vars["OPS_ADDR"]
	}
	h.waitHealthy()
	return addr
}

// dial opens a raw connection and sends what a client has sent so far.
func dial(t *testing.T, addr, sent string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, sent); err != nil {
		t.Fatal(err)
	}
	return c
}

// closedByServer reads c until the server closes it (answers it may send
// first are read and dropped), and fails the test if it has not within a
// generous deadline.
func closedByServer(t *testing.T, what string, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := io.Copy(io.Discard, c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("%s: still open after 30s", what)
	}
}

const webhookHead = "POST " + ingest.WebhookPath + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"

// Connections that hold the server without finishing a request — headers
// that never end, an authenticated body that never arrives, keep-alive
// connections that send nothing more — are closed by the server's timeouts,
// more of them than HTTP_MAX_CONNS wait their turn rather than take a file
// descriptor each, and a real webhook still gets its 200 while they are held.
func TestHeldConnectionsAreClosed(t *testing.T) {
	is := is.New(t)
	addr := runMain(t, map[string]string{
		"HTTP_READ_HEADER_TIMEOUT": "1s",
		"HTTP_READ_TIMEOUT":        "2s",
		"HTTP_WRITE_TIMEOUT":       "5s",
		"HTTP_IDLE_TIMEOUT":        "1s",
		"HTTP_MAX_CONNS":           "4",
	})
	held := map[string]net.Conn{}
	for i, name := range []string{"headers a", "headers b", "headers c", "headers d", "headers e"} {
		held[name] = dial(t, addr, webhookHead[:20+i]) // part of a request line or header
	}
	held["body"] = dial(t, addr, webhookHead+"API-Key: "+apiKey+"\r\nContent-Length: 1000\r\n\r\n{\"eventAc")
	for _, name := range []string{"idle a", "idle b"} {
		body := `{"eventAction":"change-job-status"}`
		c := dial(t, addr, webhookHead+"API-Key: "+apiKey+"\r\nContent-Length: 35\r\n\r\n"+body)
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		is.NoErr(err)                           // answered
		is.Equal(res.StatusCode, http.StatusOK) // stored
		is.True(!res.Close)                     // and kept alive, now idle
		held[name] = c
	}

	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+ingest.WebhookPath, strings.NewReader(`{"eventAction":"create-appointment"}`))
	req.Header.Set("API-Key", apiKey)
	res, err := client.Do(req)
	is.NoErr(err) // the webhook is answered while the others hold their connections
	res.Body.Close()
	is.Equal(res.StatusCode, http.StatusOK) // and stored

	for name, c := range held {
		closedByServer(t, name, c)
	}
}

// A request refused before its body is read — no API-Key, no Basic auth,
// a declared body over the limit — is answered at once and its connection
// closed: the server never waits for a body nobody will read, here for up
// to HTTP_READ_TIMEOUT's minute.
func TestRefusedRequestsAreAnsweredWithoutTheirBody(t *testing.T) {
	addr := runMain(t, map[string]string{"HTTP_READ_TIMEOUT": "1m", "INGEST_MAX_BODY_BYTES": "1000"})
	for _, tc := range []struct {
		name, head string
		status     int
	}{
		{"webhook without the key", webhookHead + "API-Key: wrong\r\nContent-Length: 900\r\n\r\n", http.StatusUnauthorized},
		{"webhook over the limit", webhookHead + "API-Key: " + apiKey + "\r\nContent-Length: 5000\r\n\r\n", http.StatusRequestEntityTooLarge},
		{"process without Basic auth", "POST " + ingest.ProcessPath + " HTTP/1.1\r\nHost: x\r\nContent-Length: 900\r\n\r\n", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			c := dial(t, addr, tc.head) // and no body
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			is.NoErr(err)                       // answered without the body
			is.Equal(res.StatusCode, tc.status) // refused
			is.True(res.Close)                  // Connection: close
			closedByServer(t, tc.name, c)
		})
	}
}

// With OPS_ADDR set, HTTP_ADDR serves the webhook alone, and /healthz,
// /metrics and the relay trigger are on OPS_ADDR, behind Basic auth.
func TestOpsAddrLeavesTheWebhookAlone(t *testing.T) {
	opsAddr := flowtest.FreeAddr(t)
	addr := runMain(t, map[string]string{"OPS_ADDR": opsAddr})
	client := &http.Client{Timeout: 30 * time.Second}
	do := func(method, url string, header ...string) int {
		t.Helper()
		req, _ := http.NewRequest(method, url, strings.NewReader(`{"eventAction":"change-job-status"}`))
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		req.SetBasicAuth(adminUser, adminPass)
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	is := is.New(t)
	public, ops := "http://"+addr, "http://"+opsAddr
	is.Equal(do(http.MethodPost, public+ingest.WebhookPath, "API-Key", apiKey), http.StatusOK) // the webhook, on the public port
	for _, path := range []string{"/healthz", "/metrics", ingest.ProcessPath, "/no/such/route"} {
		is.Equal(do(http.MethodGet, public+path), http.StatusNotFound)  // nothing else there, credentials or not
		is.Equal(do(http.MethodPost, public+path), http.StatusNotFound) // whatever the method
	}
	is.Equal(do(http.MethodGet, public+ingest.WebhookPath), http.StatusNotFound) // the webhook takes POST only

	is.Equal(do(http.MethodGet, ops+"/healthz"), http.StatusOK)          // health on the ops port
	is.Equal(do(http.MethodGet, ops+"/metrics"), http.StatusOK)          // and metrics
	is.Equal(do(http.MethodPost, ops+ingest.ProcessPath), http.StatusOK) // and the relay trigger
	req, _ := http.NewRequest(http.MethodPost, ops+ingest.WebhookPath, strings.NewReader("{}"))
	req.Header.Set("API-Key", apiKey)
	res, err := client.Do(req)
	is.NoErr(err)
	res.Body.Close()
	is.Equal(res.StatusCode, http.StatusUnauthorized) // no webhook on the ops port: Basic auth there for everything
}
