package primeflow_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/matryer/is"
)

// The status page at / is bin/primeflow's pipeline at a glance, behind the
// admin login; in a real browser (Debian's chromium, headless, when it is
// installed: CHROMIUM names another) it renders the tour's state, and the
// test keeps a screenshot (PRIMEFLOW_SCREENSHOT names where; else the
// test's folder).
func TestStatusPage(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	httpAddr, simAddr := flowtest.FreeAddr(t), flowtest.FreeAddr(t)
	env := map[string]string{
		"DATA_DIR": dir, "HTTP_ADDR": httpAddr, "NATS_LISTEN": flowtest.FreeAddr(t), "SIM_ADDR": simAddr,
		"NATS_MONITOR_LISTEN": "off", "PRIME_WEBHOOK_API_KEY": apiKey, "ADMIN_USER": admin, "ADMIN_PASSWORD": password,
		"PRIME_RATE_PER_MINUTE": "100000", "PRIME_RATE_BURST": "100", "SIM_TOKEN": simToken,
	}
	running(t, env)
	drive(t, simAddr, httpAddr)
	driven(t, dir)

	get := func(auth bool) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+httpAddr+"/", nil)
		if auth {
			req.SetBasicAuth(admin, password)
		}
		res, err := http.DefaultClient.Do(req)
		is.NoErr(err)
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	code, _ := get(false)
	is.Equal(code, http.StatusUnauthorized) // behind the login
	code, page := get(true)
	is.Equal(code, http.StatusOK)
	for _, want := range []string{"<title>primeflow status", "Webhook log", "Consumer lag", "PRIME_WEBHOOK/resolver", "lock <code>optimo-plan</code>",
		"SMS Queued", "triage invites pending", "Plan dates", "Prime budget", "left this minute", "processes spending it", "calls today", "down to the reserve",
		"Last error of each stage"} {
		is.True(strings.Contains(page, want)) // every part, want
	}

	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium, _ = exec.LookPath("chromium")
	}
	if chromium == "" {
		t.Skip("NOTE: chromium is not installed (apt-get install chromium, or CHROMIUM=<path>): the page was checked over HTTP, not in a browser")
	}
	url := "http://" + admin + ":" + password + "@" + httpAddr + "/"
	browse := func(args ...string) []byte {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, chromium, append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
			"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
			"--user-data-dir=" + t.TempDir(), "--window-size=1280,1400"}, append(args, url)...)...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("chromium %v: %v", args, err)
		}
		return out
	}
	dom := string(browse("--dump-dom"))
	is.True(strings.Contains(dom, "Consumer lag"))                                                           // the browser rendered the page
	is.True(strings.Contains(dom, "PRIME_RESOLVED/job-mirror"))                                              // with what JetStream said
	is.True(strings.Contains(dom, "Nothing waits for a person.") || strings.Contains(dom, "Needs a person")) // and its summary
	shot := os.Getenv("PRIMEFLOW_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "status.png")
	}
	browse("--screenshot=" + shot)
	fi, err := os.Stat(shot)
	is.NoErr(err)
	is.True(fi.Size() > 10_000) // a picture of the page, not a blank
	t.Logf("screenshot of the status page: %s", shot)
}
