package compose_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"gopkg.in/yaml.v3"
)

// appearWithTraffic are the families whose label values (or, for a gauge
// of a time, whose value) come from the traffic itself (an eventAction, a
// Prime endpoint, an OptimoRoute operation), so no series exists before the
// first one; every other
// family a dashboard queries is exported from the start and must read 0,
// not "no data", before any traffic. A family added later belongs here
// only if its labels cannot be known in advance; otherwise the service
// exports its label values at 0.
var appearWithTraffic = map[string]string{
	"primeflow_webhooks_total":                         "action is the webhook's eventAction",
	"primeflow_resolver_events_total":                  "by the events' action and outcome",
	"primeflow_resolver_prime_probes_total":            "by the entity a GUID turned out to be",
	"prime_client_requests_total":                      "by the Prime endpoints called",
	"prime_client_rate_limit_waits_total":              "by the reason of a wait, once a call waited",
	"prime_client_rate_limit_wait_seconds_total":       "by the reason of a wait, once a call waited",
	"prime_client_ratelimit_remaining":                 "the x-ratelimit headers of Prime's last answer",
	"prime_client_calls_total":                         "by the callers and purposes of the calls made",
	"prime_client_coalesced_total":                     "by the callers and purposes of the calls coalesced",
	"prime_budget_remaining":                           "the day's only once Prime has sent x-ratelimit-day-remaining",
	"optimoroute_requests_total":                       "by the OptimoRoute operations called",
	"optimoroute_request_duration_seconds":             "by the OptimoRoute operations called",
	"primeflow_jobmirror_jobs_sweep_watermark_seconds": "served once a jobs sweep has listed a job: no watermark is known before",
}

// faultAlerts are the alerts the test's faults fire: a capped row, an SMS
// refused for good, Prime's day budget nearly spent.
var faultAlerts = []string{"PrimeflowWebhookRowsCapped", "PrimeflowSMSFailed", "PrimeDailyBudgetLow"}

const (
	liveAPIKey   = "5b0e1f6c-2a7d-4c1e-9f3b-8d6a4e2c1b70"
	liveAdmin    = "ops"
	livePassword = "s3cret-admin"
	// liveSimToken is the simulators' control token (SIM_TOKEN).
	liveSimToken = "live-test-sim-control-token"
	// The Prime simulator's fixture (pkg/primesim): a job, and the Make
	// Safe allocation of a job created out of hours.
	fixtureJob        = "0f8e3c1a-5b7d-4e2f-9a6c-1d3e5f7a9b01"
	fixtureAllocation = "5e6f7a8b-0c1d-4e2f-9a3b-6c7d8e9f0a06"
	// rateInterval stands for Grafana's $__rate_interval: 4 scrape
	// intervals and then some, at the test's 1s.
	rateInterval = "10s"
)

// TestLivePrometheus runs the real thing: Debian's Prometheus (PROMETHEUS,
// which make test unpacks into .tools) scrapes a bin/primeflow built from
// this workspace, with compose's alert rules loaded, while the test drives
// webhooks and faults through the Prime simulator (a 429, a refused
// webhook, and the three of faultAlerts). Through
// Prometheus's HTTP API:
//   - before any traffic, every dashboard query whose labels are known in
//     advance returns series (a counter reads 0, not "no data");
//   - after it, every query of every dashboard returns series, and every
//     legend's labels are on every series it names (no blank legends);
//   - every alert rule loads and evaluates, every alert expression is a
//     query Prometheus answers, each fault fires its alert, and no other
//     alert fires.
//
// The queries of prometheus-nats-exporter's series cannot return any here:
// the exporter is not to be had (the Go module proxy refuses
// github.com/nats-io/prometheus-nats-exporter, and Debian does not package
// it). They are evaluated all the same, and the embedded server's /jsz on
// NATS_MONITOR_LISTEN, which the exporter reads, is checked to serve every
// consumer's counts.
func TestLivePrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("builds bin/primeflow and runs Prometheus: not with -short")
	}
	prometheus := tool(t, "PROMETHEUS", "prometheus")
	promtool := tool(t, "PROMTOOL", "promtool")
	started := time.Now()
	out, err := exec.Command(prometheus, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("prometheus --version: %v\n%s", err, out)
	}
	version, _, _ := strings.Cut(string(out), "\n")
	t.Logf("%s (compose pins %s)", version, service(t, loadProject(t), "prometheus").Image)

	dir := t.TempDir()
	bin := filepath.Join(dir, "primeflow")
	build := exec.Command("go", "build", "-o", bin, "./cmd/primeflow")
	build.Dir = filepath.Join(repoRoot(t), "services", "primeflow")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build primeflow: %v\n%s", err, out)
	}

	// The SMS endpoint refuses every message for good (400): the make-safe
	// SMS fails, the fault PrimeflowSMSFailed is for.
	sms := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "refused", http.StatusBadRequest)
	}))
	defer sms.Close()

	pf := &livePrimeflow{
		http: fmt.Sprintf("127.0.0.1:%d", freePort(t)), sim: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		monitor: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
	}
	pf.start(t, bin, []string{
		"NATS_LISTEN=" + fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"DATA_DIR=" + filepath.Join(dir, "data"),
		"PRIME_RATE_PER_MINUTE=100000", "PRIME_RATE_BURST=100", // the simulator's own limits still apply
		"RESOLVER_BACKOFF=10ms,10ms,10ms,10ms", // a failing event reaches the cap at once
		"MAKESAFE_LADDER=1s,2s,3s,4s",          // the re-check rungs fire within the test
		"SMS_SEND_URL=" + sms.URL, "SMS_MAX_ATTEMPTS=1", "MAKESAFE_SMS_TO=+61400000000",
		"JOBS_SWEEP_EVERY=2s", // the backstop lists the traffic's new job within the test
	})

	prom := startPrometheus(t, prometheus, promtool, dir, pf.http)
	prom.waitScraped(t)

	queries := dashboardQueries(t)
	t.Run("from the start", func(t *testing.T) {
		metrics, _ := knownMetrics(t)
		for f := range appearWithTraffic {
			if _, ok := metrics[f]; !ok {
				if _, histogram := metrics[f+"_bucket"]; !histogram {
					t.Errorf("appearWithTraffic names %s, which the code does not declare", f)
				}
			}
		}
		checked := 0
		defer func() {
			t.Logf("%d of %d dashboard queries checked before any traffic (the others need traffic or the exporter)", checked, len(queries))
		}()
		for _, q := range queries {
			if q.exporter || q.familyIn(appearWithTraffic) {
				continue
			}
			checked++
			if len(prom.query(t, q.expr)) == 0 {
				t.Errorf("%s: %q returns no series before any traffic: export its label values at 0, or add its family to appearWithTraffic with the reason", q.where, q.expr)
			}
		}
	})

	pf.traffic(t)

	t.Run("every panel", func(t *testing.T) {
		series := make(map[int][]map[string]string) // query → its series
		deadline := time.Now().Add(60 * time.Second)
		for {
			missing := 0
			for i, q := range queries {
				if !q.exporter && len(series[i]) == 0 {
					if series[i] = prom.query(t, q.expr); len(series[i]) == 0 {
						missing++
					}
				}
			}
			if missing == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Second)
		}
		var exporter []string
		for i, q := range queries {
			switch {
			case q.exporter:
				prom.query(t, q.expr) // a query Prometheus answers
				exporter = append(exporter, q.where)
			case len(series[i]) == 0:
				t.Errorf("%s: %q returns no series after the traffic: add a step to livePrimeflow.traffic that makes it appear", q.where, q.expr)
			}
			for _, s := range series[i] {
				for _, m := range legendRE.FindAllStringSubmatch(q.legend, -1) {
					if s[m[1]] == "" {
						t.Errorf("%s: legend %q is blank in {{%s}} for the series %v of %q", q.where, q.legend, m[1], s, q.expr)
					}
				}
			}
		}
		t.Logf("%d queries need prometheus-nats-exporter: evaluated, no series expected here: %s", len(exporter), strings.Join(exporter, "; "))
	})

	t.Run("alerts", func(t *testing.T) {
		is := is.New(t)
		alerts := alertRules(t)
		for _, a := range alerts {
			prom.query(t, a.expr) // a query Prometheus answers
		}
		var loaded map[string]liveRule
		waitFor(t, 30*time.Second, "every rule loaded and evaluated", func() bool {
			loaded = prom.rules(t)
			for _, a := range alerts {
				if r, ok := loaded[a.name]; !ok || r.Health != "ok" {
					return false
				}
			}
			return true
		})
		is.Equal(len(loaded), len(alerts)) // every rule of the files, and no other
		var firing []string
		waitFor(t, 60*time.Second, fmt.Sprintf("alerts %v firing", faultAlerts), func() bool {
			firing = prom.firing(t)
			return !slices.ContainsFunc(faultAlerts, func(a string) bool { return !slices.Contains(firing, a) })
		})
		for _, a := range firing {
			if !slices.Contains(faultAlerts, a) {
				t.Errorf("%s fires, and no fault of the test is for it: %v", a, loaded[a])
			}
		}
	})

	t.Run("NATS monitoring", func(t *testing.T) {
		is := is.New(t)
		consumers := jszConsumers(t, pf.monitor)
		for consumer := range durables(t, filepath.Join(repoRoot(t), "services")) {
			is.True(consumers[consumer]) // /jsz serves its num_pending, num_ack_pending, num_redelivered
		}
	})
	t.Logf("%s, bin/primeflow and the checks: %s", version, time.Since(started).Round(time.Second))
}

// query is one dashboard query and where it is.
type query struct {
	where, expr, legend string
	families            []string
	exporter            bool // it selects what only prometheus-nats-exporter exports
}

func (q query) familyIn(m map[string]string) bool {
	return slices.ContainsFunc(q.families, func(f string) bool { _, ok := m[f]; return ok })
}

// dashboardQueries is every query of every dashboard, with Grafana's
// $__rate_interval made a duration.
func dashboardQueries(t *testing.T) []query {
	t.Helper()
	metrics, _ := knownMetrics(t)
	exporter := exporterMetrics()
	var out []query
	for _, file := range dashboardFiles(t) {
		for _, p := range readDashboard(t, file).Panels {
			for _, tg := range p.Targets {
				q := query{where: file + ": " + p.Title, expr: strings.ReplaceAll(tg.Expr, "$__rate_interval", rateInterval), legend: tg.LegendFormat}
				for _, n := range exprMetrics(tg.Expr) {
					q.families = append(q.families, familyOf(n, metrics))
					if _, ok := exporter[n]; ok && n != "up" {
						q.exporter = true
					}
				}
				// up{job="nats"}: the exporters' job (prometheus.yml).
				q.exporter = q.exporter || strings.Contains(tg.Expr, `job="nats"`)
				out = append(out, q)
			}
		}
	}
	return out
}

type alertRule struct{ name, expr string }

func alertRules(t *testing.T) []alertRule {
	t.Helper()
	var out []alertRule
	for _, file := range ruleFiles(t) {
		var rf ruleFile
		readYAML(t, file, &rf)
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				out = append(out, alertRule{r.Alert, r.Expr})
			}
		}
	}
	return out
}

// livePrimeflow is a running bin/primeflow on the Prime and OptimoRoute
// simulators.
type livePrimeflow struct {
	http, sim, monitor string
}

func (pf *livePrimeflow) start(t *testing.T, bin string, env []string) {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(env, "HTTP_ADDR="+pf.http, "SIM_ADDR="+pf.sim, "NATS_MONITOR_LISTEN="+pf.monitor,
		"PRIME_WEBHOOK_API_KEY="+liveAPIKey, "ADMIN_USER="+liveAdmin, "ADMIN_PASSWORD="+livePassword,
		"SIM_TOKEN="+liveSimToken, "PATH="+os.Getenv("PATH"))
	cmd.Stdout = io.Discard
	proc := startProcess(t, "bin/primeflow", cmd)
	waitFor(t, 60*time.Second, "bin/primeflow's /healthz 200", func() bool {
		proc.failIfExited(t)
		req, _ := http.NewRequest(http.MethodGet, "http://"+pf.http+"/healthz", nil)
		req.SetBasicAuth(liveAdmin, livePassword)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// traffic drives the pipeline the way Prime does, webhooks fired by the
// simulator, and its faults: a 429, a refused webhook, and the three
// faults of faultAlerts. A family that appears only with traffic
// needs a step here that makes it appear.
func (pf *livePrimeflow) traffic(t *testing.T) {
	t.Helper()
	// A job no webhook brings, which the backstop's next sweep lists: its
	// watermark is known, and served (before Prime's day budget is cut
	// below, which holds the sweeps' class).
	pf.do(t, http.MethodPost, "http://"+pf.sim+"/prime/_sim/jobs", `{}`, "")
	waitFor(t, 60*time.Second, "the jobs sweep's watermark served", func() bool {
		req, _ := http.NewRequest(http.MethodGet, "http://"+pf.http+"/metrics", nil)
		req.SetBasicAuth(liveAdmin, livePassword)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), "\nprimeflow_jobmirror_jobs_sweep_watermark_seconds ")
	})
	// Fault: Prime's day budget nearly spent (PrimeDailyBudgetLow), the
	// minute's wide enough for the test.
	pf.do(t, http.MethodPut, "http://"+pf.sim+"/prime/_sim/ratelimit", `{"perMinute":600,"perDay":450,"maxConcurrent":5}`, "")
	// Prime answers the next call 429 with a Retry-After: the client holds
	// every call for it (prime_client_rate_limit_waits_total{reason="server_hold"}).
	pf.do(t, http.MethodPost, "http://"+pf.sim+"/prime/_sim/faults", `{"rateLimitNext":1,"retryAfter":"1s"}`, "")
	fire := func(action, id string) {
		pf.do(t, http.MethodPost, "http://"+pf.sim+"/prime/_sim/webhooks",
			fmt.Sprintf(`{"url":"http://%s/api/prime/webhook","apiKey":%q,"action":%q,"id":%q}`, pf.http, liveAPIKey, action, id), "")
	}
	// A job (job-mirror, first sight, the new-job pipeline, make-safe's
	// first-sight detection), an appointment tomorrow (child-mirror, an
	// order in OptimoRoute, the day planned), an after-hours Make Safe (a
	// phone call, its SMS, the re-check rungs).
	fire("change-job-status", fixtureJob)
	tomorrow := time.Now().UTC().Add(24 * time.Hour).Format(time.DateOnly)
	appt := pf.do(t, http.MethodPost, "http://"+pf.sim+"/prime/_sim/appointments",
		fmt.Sprintf(`{"jobId":%q,"attributes":{"startDate":"%s 01:00:00","endDate":"%s 02:00:00"}}`, fixtureJob, tomorrow, tomorrow), "")
	var rec struct{ ID string }
	if err := json.Unmarshal(appt, &rec); err != nil || rec.ID == "" {
		t.Fatalf("appointment: %v %s", err, appt)
	}
	fire("create-appointment", rec.ID)
	fire("create-allocation", fixtureAllocation)
	// Fault: a job Prime does not have; its event fails 5 times and the row
	// is capped (PrimeflowWebhookRowsCapped).
	pf.do(t, http.MethodPost, "http://"+pf.http+"/api/prime/webhook",
		`{"eventAction":"change-job-status","jobId":990001,"jobStatusId":"7d1c2b3a-4e5f-4a6b-8c7d-9e0f1a2b3c4d"}`, liveAPIKey)
	// A webhook with the wrong key, refused.
	req, _ := http.NewRequest(http.MethodPost, "http://"+pf.http+"/api/prime/webhook", strings.NewReader(`{"eventAction":"change-job-status"}`))
	req.Header.Set("API-Key", "not-the-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong API-Key: %d, want 401", resp.StatusCode)
	}
}

// do sends body and returns the answer's, failing the test on a non-2xx;
// a simulator's control request goes with the control token.
func (pf *livePrimeflow) do(t *testing.T, method, url, body, apiKey string) []byte {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if apiKey != "" {
		req.Header.Set("API-Key", apiKey)
	}
	if strings.Contains(url, "/_sim/") {
		req.Header.Set("Authorization", "Bearer "+liveSimToken)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return b
}

// livePrometheus is a running Prometheus.
type livePrometheus struct{ addr string }

// startPrometheus runs prometheus with compose's prometheus.yml made to
// scrape bin/primeflow at target: its primeflow job (Basic auth from
// files) with the one target, its rule files, a 1s scrape and evaluation
// interval; no nats job (no exporter here). A Prometheus older than
// basic_auth.username_file (added after 2.42; compose pins one that reads
// it) gets the user in username instead: promtool check config says which.
func startPrometheus(t *testing.T, prometheus, promtool, dir, target string) *livePrometheus {
	t.Helper()
	p := &livePrometheus{addr: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	user, password := filepath.Join(dir, "admin_user"), filepath.Join(dir, "admin_password")
	for f, v := range map[string]string{user: liveAdmin, password: livePassword} {
		if err := os.WriteFile(f, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := readPrometheus(t)
	var job *promScrape
	for i, sc := range c.ScrapeConfigs {
		if sc.JobName == "primeflow" {
			job = &c.ScrapeConfigs[i]
		}
	}
	if job == nil || job.BasicAuth == nil || job.BasicAuth.UsernameFile == "" {
		t.Fatal("prometheus.yml: no primeflow job with basic_auth.username_file")
	}
	rules, err := filepath.Abs(filepath.Join("prometheus", "rules", "*.yml"))
	if err != nil {
		t.Fatal(err)
	}
	config := func(auth map[string]string) string {
		b, err := yaml.Marshal(map[string]any{
			"global":     map[string]string{"scrape_interval": "1s", "evaluation_interval": "1s"},
			"rule_files": []string{rules},
			"scrape_configs": []map[string]any{{
				"job_name":       job.JobName,
				"basic_auth":     auth,
				"static_configs": []map[string]any{{"targets": []string{target}}},
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, "prometheus.yml")
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	file := config(map[string]string{"username_file": user, "password_file": password})
	if out, err := exec.Command(promtool, "check", "config", file).CombinedOutput(); err != nil {
		if !strings.Contains(string(out), "field username_file not found") {
			t.Fatalf("promtool check config: %v\n%s", err, out)
		}
		t.Log("this Prometheus predates basic_auth.username_file, which compose's prometheus.yml uses (and compose's Prometheus reads): the test's config names the user in username")
		file = config(map[string]string{"username": liveAdmin, "password_file": password})
	}

	cmd := exec.Command(prometheus, "--config.file="+file, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+p.addr)
	proc := startProcess(t, "prometheus", cmd)
	waitFor(t, 60*time.Second, "prometheus ready", func() bool {
		proc.failIfExited(t)
		resp, err := http.Get("http://" + p.addr + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// waitScraped waits until bin/primeflow has been scraped a few times, so
// that a rate over rateInterval has its samples.
func (p *livePrometheus) waitScraped(t *testing.T) {
	t.Helper()
	waitFor(t, 60*time.Second, "bin/primeflow scraped 4 times", func() bool {
		s := p.query(t, `count_over_time(up{job="primeflow"}[`+rateInterval+`]) >= 4 and up{job="primeflow"} == 1`)
		return len(s) == 1
	})
}

// query evaluates expr now and returns the labels of its series; an error
// answer fails the test.
func (p *livePrometheus) query(t *testing.T, expr string) []map[string]string {
	t.Helper()
	var data struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
		} `json:"result"`
	}
	p.api(t, "/api/v1/query?query="+url.QueryEscape(expr), &data)
	if data.ResultType != "vector" {
		t.Fatalf("%q: a %s, not a vector", expr, data.ResultType)
	}
	var out []map[string]string
	for _, r := range data.Result {
		out = append(out, r.Metric)
	}
	return out
}

type liveRule struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	Health    string `json:"health"`
	LastError string `json:"lastError"`
	State     string `json:"state"`
}

// rules are the rules Prometheus loaded, by name.
func (p *livePrometheus) rules(t *testing.T) map[string]liveRule {
	t.Helper()
	var data struct {
		Groups []struct {
			Rules []liveRule `json:"rules"`
		} `json:"groups"`
	}
	p.api(t, "/api/v1/rules", &data)
	out := make(map[string]liveRule)
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			out[r.Name] = r
		}
	}
	return out
}

// firing names the alerts firing now.
func (p *livePrometheus) firing(t *testing.T) []string {
	t.Helper()
	var data struct {
		Alerts []struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		} `json:"alerts"`
	}
	p.api(t, "/api/v1/alerts", &data)
	var out []string
	for _, a := range data.Alerts {
		if a.State == "firing" && !slices.Contains(out, a.Labels["alertname"]) {
			out = append(out, a.Labels["alertname"])
		}
	}
	slices.Sort(out)
	return out
}

func (p *livePrometheus) api(t *testing.T, path string, data any) {
	t.Helper()
	resp, err := http.Get("http://" + p.addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if body.Status != "success" {
		t.Fatalf("%s: %s", path, body.Error)
	}
	if err := json.Unmarshal(body.Data, data); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// jszConsumers are the consumers the embedded server's /jsz lists with
// the counts prometheus-nats-exporter exports (num_pending,
// num_ack_pending, num_redelivered).
func jszConsumers(t *testing.T, monitor string) map[string]bool {
	t.Helper()
	resp, err := http.Get("http://" + monitor + "/jsz?consumers=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var jsz struct {
		AccountDetails []struct {
			StreamDetail []struct {
				ConsumerDetail []struct {
					Name           string  `json:"name"`
					NumPending     *uint64 `json:"num_pending"`
					NumAckPending  *int    `json:"num_ack_pending"`
					NumRedelivered *int    `json:"num_redelivered"`
				} `json:"consumer_detail"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&jsz); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]bool)
	for _, a := range jsz.AccountDetails {
		for _, s := range a.StreamDetail {
			for _, c := range s.ConsumerDetail {
				out[c.Name] = c.NumPending != nil && c.NumAckPending != nil && c.NumRedelivered != nil
			}
		}
	}
	return out
}
