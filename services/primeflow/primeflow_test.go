package primeflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/dryrun"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/pkg/simcontrol"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
	"github.com/ethosbuilding/primeflow/pkg/version"
	"github.com/ethosbuilding/primeflow/services/ingest"
	"github.com/ethosbuilding/primeflow/services/primeflow"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

const (
	apiKey   = "5b0e1f6c-2a7d-4c1e-9f3b-8d6a4e2c1b70"
	admin    = "ops"
	password = "s3cret-admin"
	// From the Prime simulator's default fixture.
	fixtureJob        = "0f8e3c1a-5b7d-4e2f-9a6c-1d3e5f7a9b01"
	fixtureAllocation = "5e6f7a8b-0c1d-4e2f-9a3b-6c7d8e9f0a06" // a Make Safe of a job created out of hours (fixtureMakeSafeJob)
	fixtureJob2       = "1a2b3c4d-6e7f-4a8b-9c0d-2e3f4a5b6c02" // numeric reference 2410965, J012346
	// fixtureMakeSafeJob is the job of fixtureAllocation.
	fixtureMakeSafeJob = "2b3c4d5e-7f8a-4b9c-8d1e-3f4a5b6c7d03"
)

// simToken is the simulators' control token the tests give (SIM_TOKEN).
const simToken = "sim-control-token-of-the-tests"

// post posts body to a simulator's control API (url), with simToken.
func post(t *testing.T, url, body string) map[string]any {
	t.Helper()
	return simCall(t, http.MethodPost, url, body)
}

// simCall sends a request to a simulator's control API with simToken and
// decodes its JSON answer; any answer but a 2xx fails the test.
func simCall(t *testing.T, method, url, body string) map[string]any {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	simcontrol.Authorize(req, simToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, url, res.StatusCode, b)
	}
	var out map[string]any
	json.Unmarshal(b, &out)
	return out
}

// TestMakeRunPipelineEndToEnd starts the all-in-one process the way `make
// run` does — embedded NATS, SQLite, both simulators — and drives it the
// way Prime does: webhooks over HTTP with the API-Key, fired by the Prime
// simulator. A job, an appointment planned in OptimoRoute, and an after-hours
// Make Safe that reaches the SMS sender.
func TestMakeRunPipelineEndToEnd(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	httpAddr, natsAddr, simAddr, monitorAddr := flowtest.FreeAddr(t), flowtest.FreeAddr(t), flowtest.FreeAddr(t), flowtest.FreeAddr(t)
	env := map[string]string{
		"DATA_DIR":              dir,
		"HTTP_ADDR":             httpAddr,
		"NATS_LISTEN":           natsAddr,
		"NATS_MONITOR_LISTEN":   monitorAddr,
		"SIM_ADDR":              simAddr,
		"PRIME_WEBHOOK_API_KEY": apiKey,
		"ADMIN_USER":            admin,
		"ADMIN_PASSWORD":        password,
		"PRIME_RATE_PER_MINUTE": "100000", // the simulator's own 60/minute still applies
		"PRIME_RATE_BURST":      "100",
		"MAIL_POLL_INTERVAL":    "100ms",
		"SIM_TOKEN":             simToken,
	}
	stderr := running(t, env)
	drive(t, simAddr, httpAddr)
	st := driven(t, dir)
	job, found, err := st.GetJob(context.Background(), fixtureJob)
	is.NoErr(err)
	is.True(found)                     // the job is mirrored
	is.Equal(job.JobNumber, "J012345") // with its attributes
	flowtest.Poll(t, 30*time.Second, 20*time.Millisecond, "planning started in OptimoRoute", func() bool {
		calls, _ := simCall(t, http.MethodGet, "http://"+simAddr+"/optimoroute/_sim/stats", "")["calls"].(map[string]any)
		started, _ := calls["start_planning"].(float64)
		return started > 0
	})
	flowtest.Poll(t, 30*time.Second, 20*time.Millisecond, "the make-safe SMS handed to the sender", func() bool {
		return strings.Contains(stderr.String(), "sms logged")
	})

	// A new-job email (§7) in the Graph simulator's mailbox: the job comes
	// in by the email path, and the message is filed.
	post(t, "http://"+simAddr+"/graph/_sim/messages", `{"subject":"New Job J012346","body":"<p>{ &quot;JobID&quot;: &#39;2410965&#39;, &quot;JobNumber&quot;: &#39;J012346&#39; }</p>"}`)
	flowtest.Poll(t, 30*time.Second, 20*time.Millisecond, "the emailed job seen first by the email", func() bool {
		f, found, err := st.GetFirstSeen(context.Background(), fixtureJob2)
		return err == nil && found && f.Via == store.ViaEmail && f.Completed()
	})
	flowtest.Poll(t, 30*time.Second, 20*time.Millisecond, "the email filed as processed", func() bool {
		return metric(t, httpAddr, `primeflow_mailintake_messages_total{outcome="processed"}`) == "1"
	})

	// The fixture's jobs are recent: primectl coverage's 7 days count the
	// webhook that brought the job.
	week, err := st.ListJobCoverage(context.Background(), time.Now().Add(-7*24*time.Hour))
	is.NoErr(err)
	byWebhook := map[string]bool{}
	for _, c := range week {
		byWebhook[c.JobID] = !c.Webhook.IsZero()
	}
	is.True(byWebhook[fixtureJob])         // seen by its webhook, in the window
	is.True(byWebhook[fixtureMakeSafeJob]) // and the Make Safe job by its allocation's

	// A job's arrival in the simulator's Initial Contact Made status, which
	// make run takes as TRIAGE_INITIAL_CONTACT_MADE_STATUS_ID, queues a
	// triage invite (§5.1 step 6) for its primary contact, which the log
	// sender logs: Logged, never Sent.
	post(t, "http://"+simAddr+"/prime/_sim/jobs/"+fixtureJob+"/status", `{"statusId":"`+primesim.StatusInitialContactMade+`"}`)
	post(t, "http://"+simAddr+"/prime/_sim/webhooks", fmt.Sprintf(`{"url":"http://%s/api/prime/webhook","apiKey":"%s","action":"change-job-status","id":%q}`,
		httpAddr, apiKey, fixtureJob))
	flowtest.Poll(t, 60*time.Second, 50*time.Millisecond, "the triage invite logged", func() bool {
		invites, err := st.ListTriageInviteQueue(context.Background(), store.InvitesAll, 10)
		return err == nil && len(invites) == 1 && invites[0].JobID == fixtureJob && invites[0].State == store.SendLogged
	})
	is.True(strings.Contains(stderr.String(), "triage invite logged (not sent: no TRIAGE_INVITE_SEND_URL)")) // as the tour shows

	// The appointment sweep of §8.1 is served too, as optimo-create asks it.
	nc, err := nats.Connect("nats://" + natsAddr)
	is.NoErr(err)
	defer nc.Close()
	from := time.Now().UTC().Truncate(24 * time.Hour)
	req, err := json.Marshal(events.SweepRequest{FromUTC: from, ToUTC: from.Add(8 * 24 * time.Hour), Source: "test"})
	is.NoErr(err)
	msg, err := nc.Request(events.SubjectSweepAppointments, req, 30*time.Second)
	is.NoErr(err) // child-mirror answers
	var sweep events.SweepReply
	is.NoErr(json.Unmarshal(msg.Data, &sweep))
	is.Equal(sweep.Error, "") // having swept

	// Every NATS micro service reports the build's version.
	for _, name := range []string{"job-mirror", "child-mirror"} {
		subject, err := micro.ControlSubject(micro.InfoVerb, name, "")
		is.NoErr(err)
		msg, err := nc.Request(subject, nil, 10*time.Second)
		is.NoErr(err) // the service answers $SRV.INFO
		var info micro.Info
		is.NoErr(json.Unmarshal(msg.Data, &info))
		is.Equal(info.Version, version.Semver()) // name: the one version
	}

	// Stream lag as prometheus-nats-exporter reads it: the embedded
	// server's /jsz on NATS_MONITOR_LISTEN, every consumer with its pending
	// count.
	res, err := http.Get("http://" + monitorAddr + "/jsz?consumers=true")
	is.NoErr(err)
	defer res.Body.Close()
	is.Equal(res.StatusCode, http.StatusOK) // the monitoring port answers
	var jsz struct {
		AccountDetails []struct {
			StreamDetail []struct {
				Name           string `json:"name"`
				ConsumerDetail []struct {
					Name       string  `json:"name"`
					NumPending *uint64 `json:"num_pending"`
				} `json:"consumer_detail"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	is.NoErr(json.NewDecoder(res.Body).Decode(&jsz))
	consumers := map[string]bool{}
	for _, a := range jsz.AccountDetails {
		for _, st := range a.StreamDetail {
			for _, c := range st.ConsumerDetail {
				consumers[st.Name+"/"+c.Name] = c.NumPending != nil
			}
		}
	}
	is.True(consumers["PRIME_WEBHOOK/resolver"])    // the resolver's consumer, with its pending count
	is.True(consumers["PRIME_RESOLVED/job-mirror"]) // and every stage's

	if cli := os.Getenv("NATS_CLI"); cli != "" {
		out, err := exec.Command(cli, "--server", "nats://"+natsAddr, "micro", "ls").CombinedOutput()
		is.NoErr(err)
		is.True(strings.Contains(string(out), "job-mirror"))   // the ensure-job micro service, as an operator sees it
		is.True(strings.Contains(string(out), "child-mirror")) // and the sweep's
		out, err = exec.Command(cli, "--server", "nats://"+natsAddr, "stream", "ls").CombinedOutput()
		is.NoErr(err)
		is.True(strings.Contains(string(out), "PRIME_WEBHOOK")) // the nats CLI works against make run
	}
	is.True(!strings.Contains(stderr.String(), apiKey))   // the key is never logged
	is.True(!strings.Contains(stderr.String(), password)) // nor the admin password
	is.True(!strings.Contains(stderr.String(), simToken)) // nor the simulators' token
	// PRIME_RATE_* hold with the simulator too: at 100,000 a minute and a
	// burst of 100, no call waited for the pace (at the default 60 a minute
	// every call after the first does).
	is.Equal(metric(t, httpAddr, `prime_client_rate_limit_waits_total{client="prime",reason="rate"}`), "")
	// The OptimoRoute client's metrics are served too.
	is.True(metric(t, httpAddr, `optimoroute_requests_total{operation="start_planning",result="ok"}`) != "")
	// Failure counters are served at 0 before their first failure, so an
	// alert on them reads 0, not "no data".
	for _, series := range []string{
		`primeflow_webhook_publish_failures_total{reason="rejected"}`,
		`primeflow_resolver_payload_shape_changed_total{action="create-estimate"}`,
		`primeflow_childmirror_swallowed_failures_total{step="ai_summary_nudge"}`,
		`primeflow_childmirror_sweeps_total{result="rate_limited"}`,
		`primeflow_outbox_sweep_failures_total{reason="disconnected"}`,
		`primeflow_outbox_sweep_failures_total{reason="error"}`,
		`primeflow_outbox_sweep_failures_total{reason="rejected"}`,
		`primeflow_optimocreate_sweeps_total{result="timeout"}`,
		`primeflow_optimocreate_orders_total{outcome="refused"}`,
		`primeflow_optimocreate_runs_total{result="lock_busy"}`,
		`primeflow_optimoplan_runs_total{result="lock_busy"}`,
		`primeflow_optimoplan_runs_total{result="poll_limit"}`,
		`primeflow_optimoplan_dates_total{outcome="start_failed"}`,
		`primeflow_childmirror_events_total{action="create-estimate",outcome="unavailable"}`,
		`primeflow_makesafe_detections_total{result="failed",trigger="recheck"}`,
		`primeflow_makesafe_rungs_fired_total{outcome="failed"}`,
		`primeflow_newjob_pipeline_runs_total{result="failed"}`,
		`primeflow_jobmirror_ensure_total{result="error"}`,
		`primeflow_consumer_messages_total{consumer="makesafe-sms",result="drop"}`,
		`primeflow_mailintake_messages_total{outcome="failed"}`,
		`primeflow_jobs_first_seen_total{via="backstop"}`,
	} {
		is.Equal(metric(t, httpAddr, series), "0") // series
	}
}

// running runs primeflow.Main with env until the test ends, once it answers
// /healthz, and returns its logs.
func running(t *testing.T, env map[string]string) *flowtest.Buffer {
	t.Helper()
	var stdout, stderr flowtest.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- primeflow.Main(ctx, func(k string) string { return env[k] }, &stdout, &stderr) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("primeflow did not stop cleanly: %v", err)
		}
		if t.Failed() {
			t.Logf("logs:\n%s", stderr.String())
		}
	})
	flowtest.Poll(t, 30*time.Second, 20*time.Millisecond, "healthy", func() bool {
		req, _ := http.NewRequest(http.MethodGet, "http://"+env["HTTP_ADDR"]+"/healthz", nil)
		req.SetBasicAuth(admin, password)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	return &stderr
}

// drive has the Prime simulator (at simAddr) fire webhooks at primeflow
// (at httpAddr) the way Prime does: a job's status change, an appointment
// tomorrow, an after-hours Make Safe. It returns tomorrow's date.
func drive(t *testing.T, simAddr, httpAddr string) string {
	t.Helper()
	prime := "http://" + simAddr + "/prime/_sim"
	fire := func(action, id string) {
		post(t, prime+"/webhooks", fmt.Sprintf(`{"url":"http://%s/api/prime/webhook","apiKey":"%s","action":%q,"id":%q}`, httpAddr, apiKey, action, id))
	}
	fire("change-job-status", fixtureJob)
	tomorrow := time.Now().UTC().Add(24 * time.Hour).Format(time.DateOnly)
	appt := post(t, prime+"/appointments", fmt.Sprintf(`{"jobId":%q,"attributes":{"startDate":"%s 01:00:00","endDate":"%s 02:00:00"}}`, fixtureJob, tomorrow, tomorrow))
	fire("create-appointment", appt["id"].(string))
	fire("create-allocation", fixtureAllocation)
	return tomorrow
}

// driven opens the database of the process drive drove, once the three
// webhooks are processed.
func driven(t *testing.T, dir string) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "primeflow.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	flowtest.Poll(t, 30*time.Second, 20*time.Millisecond, "three webhooks processed", func() bool {
		n, err := st.CountWebhookLog(context.Background(), store.LogFilter{State: store.Processed})
		return err == nil && n == 3
	})
	return st
}

// metric is the value /metrics shows for a series, "" when it shows none.
func metric(t *testing.T, httpAddr, series string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+httpAddr+"/metrics", nil)
	req.SetBasicAuth(admin, password)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			return v
		}
	}
	return ""
}

// TestMakeRunKeepsItsCredentials: with no key or admin login configured, a
// local run makes them up once and keeps them under DATA_DIR (mode 0600),
// saying where, never what; a restart uses the same ones, so Prime's
// webhook, scripts and monitoring keep working.
func TestMakeRunKeepsItsCredentials(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	httpAddr := flowtest.FreeAddr(t)
	env := map[string]string{
		"DATA_DIR": dir, "HTTP_ADDR": httpAddr, "NATS_LISTEN": flowtest.FreeAddr(t), "SIM_ADDR": flowtest.FreeAddr(t),
		"NATS_MONITOR_LISTEN": "off",
	}
	keyFile, passwordFile := filepath.Join(dir, primeflow.APIKeyFile), filepath.Join(dir, primeflow.AdminPasswordFile)
	stdout, logs := startAndStop(t, env)
	is.True(strings.Contains(stdout, "the webhook key is in "+keyFile+" (made now"))                         // where the key is
	is.True(strings.Contains(stdout, "the login is admin, with the password in "+passwordFile+" (made now")) // and the password
	is.True(strings.Contains(logs, "monitoring=off"))                                                        // NATS_MONITOR_LISTEN=off: no monitoring port
	key, password := secretIn(t, keyFile), secretIn(t, passwordFile)
	is.True(!strings.Contains(stdout+logs, key))      // the key itself is not printed
	is.True(!strings.Contains(stdout+logs, password)) // nor the password

	// A restart: the same key and login, which the process answers to.
	var out, errs flowtest.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- primeflow.Main(ctx, func(k string) string { return env[k] }, &out, &errs) }()
	defer func() { cancel(); is.NoErr(<-done) }()
	flowtest.Poll(t, 30*time.Second, 20*time.Millisecond, "healthy, with the kept login", func() bool {
		req, _ := http.NewRequest(http.MethodGet, "http://"+httpAddr+"/healthz", nil)
		req.SetBasicAuth("admin", password)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	// The first run's key is the webhook's still (PostWebhook fails unless 200).
	flowtest.PostWebhook(t, http.DefaultClient, "http://"+httpAddr+ingest.WebhookPath, key,
		`{"eventAction":"change-job-status","jobId":2402073,"jobStatusId":"`+fixtureJob+`"}`)
	is.True(strings.Contains(out.String(), keyFile+" (kept from an earlier run")) // said so
	is.Equal(secretIn(t, keyFile), key)                                           // and unchanged
}

// The simulators' clients speak plain http, which goes to this machine
// alone (secureurl.Check): SIM_ADDR on every interface (:port) serves them
// to clients that dial 127.0.0.1, and SIM_ADDR on another host is refused,
// naming it, before anything binds.
func TestSimulatorsAreReachedOverLoopback(t *testing.T) {
	t.Run("every interface", func(t *testing.T) {
		is := is.New(t)
		_, port, err := net.SplitHostPort(flowtest.FreeAddr(t))
		is.NoErr(err)
		env := map[string]string{
			"DATA_DIR": t.TempDir(), "HTTP_ADDR": flowtest.FreeAddr(t), "NATS_LISTEN": flowtest.FreeAddr(t), "SIM_ADDR": ":" + port,
			"NATS_MONITOR_LISTEN": "off",
		}
		_, logs := startAndStop(t, env)
		for _, sim := range []string{"prime", "optimoroute", "graph"} {
			is.True(strings.Contains(logs, "url=http://127.0.0.1:"+port+"/"+sim)) // its clients dial loopback
		}
	})
	t.Run("another host", func(t *testing.T) {
		is := is.New(t)
		env := map[string]string{
			"DATA_DIR": t.TempDir(), "HTTP_ADDR": flowtest.FreeAddr(t), "NATS_LISTEN": flowtest.FreeAddr(t), "SIM_ADDR": "192.0.2.1:8081",
			"NATS_MONITOR_LISTEN": "off",
		}
		var stdout, stderr flowtest.Buffer
		err := primeflow.Main(context.Background(), func(k string) string { return env[k] }, &stdout, &stderr)
		var ce *config.Error
		is.True(errors.As(err, &ce))                                        // refused as a setting, before the bind
		is.True(strings.Contains(err.Error(), `SIM_ADDR="192.0.2.1:8081"`)) // naming it
	})
}

// secretIn is the secret kept in path, which only its owner may read.
func secretIn(t *testing.T, path string) string {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: mode %v, want 0600", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestNATSMonitorListenRefused: a monitoring address that cannot be served
// stops the start, naming the variable, before any port is bound (the
// others here are free ports, which another test may take meanwhile).
func TestNATSMonitorListenRefused(t *testing.T) {
	for _, bad := range []string{"8222", "127.0.0.1:0"} {
		t.Run(bad, func(t *testing.T) {
			is := is.New(t)
			env := map[string]string{
				"DATA_DIR": t.TempDir(), "HTTP_ADDR": flowtest.FreeAddr(t), "NATS_LISTEN": flowtest.FreeAddr(t), "SIM_ADDR": flowtest.FreeAddr(t),
				"NATS_MONITOR_LISTEN": bad,
			}
			var stdout, stderr flowtest.Buffer
			err := primeflow.Main(context.Background(), func(k string) string { return env[k] }, &stdout, &stderr)
			is.True(err != nil) // refused
			if !strings.Contains(err.Error(), "NATS_MONITOR_LISTEN") {
				t.Fatalf("refused for another reason: %v", err)
			}
		})
	}
}

// TestRealPrimeNeedsAnSMSSenderAndATriageStatus: with a real Prime, a blank
// SMS_SEND_URL would only log the make-safe SMS of real jobs, and a blank
// TRIAGE_INITIAL_CONTACT_MADE_STATUS_ID would queue no triage invite, so the
// process refuses to start and says why; only a run on the simulator goes
// without them.
func TestRealPrimeNeedsAnSMSSenderAndATriageStatus(t *testing.T) {
	for _, tc := range []struct {
		set  map[string]string
		says string
	}{
		{nil, "SMS_SEND_URL (not set): is required"},
		{map[string]string{"SMS_SEND_URL": "https://sms.invalid/send"}, "TRIAGE_INITIAL_CONTACT_MADE_STATUS_ID (not set): is required"},
	} {
		t.Run(tc.says, func(t *testing.T) {
			is := is.New(t)
			env := map[string]string{
				"DATA_DIR": t.TempDir(), "HTTP_ADDR": flowtest.FreeAddr(t), "NATS_LISTEN": flowtest.FreeAddr(t), "SIM_ADDR": flowtest.FreeAddr(t),
				"PRIME_API_URL": "https://prime.invalid/api.prime/v2",
			}
			maps.Copy(env, tc.set)
			var stdout, stderr flowtest.Buffer
			err := primeflow.Main(context.Background(), func(k string) string { return env[k] }, &stdout, &stderr)
			is.True(err != nil)                             // refused
			is.True(strings.Contains(err.Error(), tc.says)) // naming the setting
		})
	}
}

// TestNATSURLIsSaid: with NATS_URL set there is no embedded server, and the
// log says so at once, naming the server without its credentials.
func TestNATSURLIsSaid(t *testing.T) {
	is := is.New(t)
	ns := natstest.Server(t)
	host := strings.TrimPrefix(ns.ClientURL(), "nats://")
	env := map[string]string{
		"DATA_DIR": t.TempDir(), "HTTP_ADDR": flowtest.FreeAddr(t), "SIM_ADDR": flowtest.FreeAddr(t),
		"NATS_URL": "nats://primeflow:s3cret@" + host,
	}
	_, logs := startAndStop(t, env)
	is.True(strings.Contains(logs, "NATS_URL is set")) // said
	is.True(strings.Contains(logs, host))              // naming the server
	is.True(!strings.Contains(logs, "s3cret"))         // not its password
	is.True(!strings.Contains(logs, "embedded nats-server url"))
}

// startAndStop runs bin/primeflow's Main with env until it has started,
// stops it, checks that it stopped cleanly, and returns what it printed.
func startAndStop(t *testing.T, env map[string]string) (stdout, stderr string) {
	t.Helper()
	var out, logs flowtest.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- primeflow.Main(ctx, func(k string) string { return env[k] }, &out, &logs) }()
	flowtest.Poll(t, 30*time.Second, 20*time.Millisecond, "started", func() bool { return strings.Contains(logs.String(), "primeflow started") })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("primeflow did not stop cleanly: %v", err)
	}
	return out.String(), logs.String()
}

// A shadow run (the runbook's first phase): with OPTIMOROUTE_DRY_RUN and
// SEND_DRY_RUN the pipeline does all its work in its own database, and
// nothing reaches OptimoRoute or the SMS endpoint, configured as they would
// be in production; every write and every SMS is recorded instead (the SMS
// Logged in smsQueue, never Sent), and the log says so at start.
func TestShadowRunSendsNothing(t *testing.T) {
	is := is.New(t)
	var reached atomic.Int64
	outside := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { reached.Add(1) }))
	defer outside.Close()
	dir, records := t.TempDir(), t.TempDir()
	httpAddr, simAddr := flowtest.FreeAddr(t), flowtest.FreeAddr(t)
	env := map[string]string{
		"DATA_DIR": dir, "HTTP_ADDR": httpAddr, "NATS_LISTEN": flowtest.FreeAddr(t), "SIM_ADDR": simAddr, "NATS_MONITOR_LISTEN": "off",
		"PRIME_WEBHOOK_API_KEY": apiKey, "ADMIN_USER": admin, "ADMIN_PASSWORD": password,
		"PRIME_RATE_PER_MINUTE": "100000", "PRIME_RATE_BURST": "100",
		"OPTIMOROUTE_API_URL": outside.URL + "/v1", "OPTIMOROUTE_API_KEY": "the-real-key",
		"SMS_SEND_URL": outside.URL + "/sms", "MAKESAFE_SMS_TO": "+61400000000",
		"OPTIMOROUTE_DRY_RUN": "true", "SEND_DRY_RUN": "true", "DRY_RUN_DIR": records, "SIM_TOKEN": simToken,
	}
	stderr := running(t, env)
	is.True(strings.Contains(stderr.String(), "OPTIMOROUTE_DRY_RUN is on")) // said loudly at start
	is.True(strings.Contains(stderr.String(), "SEND_DRY_RUN is on"))
	tomorrow := drive(t, simAddr, httpAddr)

	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "primeflow.db"))
	is.NoErr(err)
	defer st.Close()
	flowtest.Poll(t, 60*time.Second, 50*time.Millisecond, "tomorrow planned and its routes read back", func() bool {
		p, found, err := st.GetPlan(context.Background(), tomorrow)
		return err == nil && found && p.PlanStatus == store.PlanRoutesCompleted
	})
	flowtest.Poll(t, 30*time.Second, 50*time.Millisecond, "the make-safe SMS recorded", func() bool {
		recs, err := dryrun.Read(filepath.Join(records, "sms.jsonl"))
		return err == nil && len(recs) == 1
	})
	// Recorded is not sent: smsQueue, which primectl status and the status
	// page count, holds it Logged.
	flowtest.Poll(t, 30*time.Second, 50*time.Millisecond, "the recorded SMS Logged in smsQueue", func() bool {
		n, err := st.CountSMS(context.Background())
		return err == nil && n[store.SendLogged] == 1
	})
	n, err := st.CountSMS(context.Background())
	is.NoErr(err)
	is.Equal(n[store.SendSent], 0) // none counted sent
	recs, err := dryrun.Read(filepath.Join(records, dryrun.KindOptimoRoute+".jsonl"))
	is.NoErr(err)
	ops := map[string]int{}
	for _, r := range recs {
		ops[r.Op]++
	}
	is.True(ops["create_or_update_orders"] >= 1) // the order recorded
	is.True(ops["start_planning"] >= 1)          // and the planning
	is.Equal(reached.Load(), int64(0))           // nothing left the process
}

// A port in use stops the start naming its variable, and nothing is
// written first: no data folder, no database, no JetStream store.
func TestPortInUseStopsTheStartBeforeAnythingIsWritten(t *testing.T) {
	for _, variable := range []string{"HTTP_ADDR", "OPS_ADDR", "SIM_ADDR", "NATS_LISTEN", "NATS_MONITOR_LISTEN"} {
		t.Run(variable, func(t *testing.T) {
			is := is.New(t)
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			is.NoErr(err)
			defer taken.Close()
			dir := filepath.Join(t.TempDir(), "data")
			env := map[string]string{
				"DATA_DIR": dir, "HTTP_ADDR": flowtest.FreeAddr(t), "OPS_ADDR": flowtest.FreeAddr(t), "NATS_LISTEN": flowtest.FreeAddr(t),
				"SIM_ADDR": flowtest.FreeAddr(t), "NATS_MONITOR_LISTEN": flowtest.FreeAddr(t),
			}
			env[variable] = taken.Addr().String()
			var stdout, stderr flowtest.Buffer
			err = primeflow.Main(context.Background(), func(k string) string { return env[k] }, &stdout, &stderr)
			is.True(err != nil)                              // refused
			is.True(strings.Contains(err.Error(), variable)) // naming the variable
			_, statErr := os.Stat(dir)
			is.True(errors.Is(statErr, os.ErrNotExist)) // with nothing written
		})
	}
}

// Two bin/primeflow on one DATA_DIR would share a SQLite file and a
// JetStream store: the second refuses to start, naming the first.
func TestSecondPrimeflowOnOneDataDirIsRefused(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	env := func() map[string]string {
		return map[string]string{
			"DATA_DIR": dir, "HTTP_ADDR": flowtest.FreeAddr(t), "NATS_LISTEN": flowtest.FreeAddr(t), "SIM_ADDR": flowtest.FreeAddr(t),
			"NATS_MONITOR_LISTEN": "off", "PRIME_WEBHOOK_API_KEY": apiKey, "ADMIN_USER": admin, "ADMIN_PASSWORD": password,
		}
	}
	first := env()
	running(t, first)
	second := env()
	var stdout, stderr flowtest.Buffer
	err := primeflow.Main(context.Background(), func(k string) string { return second[k] }, &stdout, &stderr)
	is.True(err != nil)                                                                         // refused
	is.True(strings.Contains(err.Error(), "DATA_DIR "+dir+": in use by another process (pid ")) // naming the holder
}
