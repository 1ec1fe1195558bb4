package primeflow_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/mirror"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/pkg/proctest"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
	"github.com/ethosbuilding/primeflow/services/ingest"
	"github.com/nats-io/nats.go"
)

// BenchmarkPrimeBudget measures the deployment's Prime budget against the
// Prime simulator at Prime's own limits (60 calls a minute, 5 at once, 5,000
// a day), counting every call it serves: 500 webhooks over 100 jobs, each
// job's events in a burst as Prime sends them, a job every 1.2s, while the
// appointment sweep runs, through the services as separate processes (one
// NATS, one SQLite file) and through bin/primeflow, side by side. It
// reports the most calls in any 60 seconds, the calls answered 429, the
// time to drain against the bound (the calls made at 60 a minute), Prime
// calls per event overall and for the events after each job's first (with
// the re-check ladder's and the sync drains' calls beside them), and the
// p95 of make-safe calls' wait for their turn. It builds the binaries and
// runs them with pkg/proctest.
func BenchmarkPrimeBudget(b *testing.B) {
	bin := buildBinaries(b)
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { // the SMS and the triage invites
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	b.Cleanup(gateway.Close)
	for range b.N {
		var wg sync.WaitGroup
		results := make([]budgetRun, 2)
		for i, separate := range []bool{true, false} {
			wg.Go(func() { results[i] = runDeployment(b, bin, gateway.URL, separate) })
		}
		wg.Wait()
		for _, r := range results {
			r.report(b)
		}
	}
}

// The workload.
const (
	benchJobs     = 100
	benchJobGap   = 1200 * time.Millisecond // between two jobs' bursts
	benchSweepGap = 5 * time.Second         // between a sweep that stopped and the next
	benchAdmin    = "bench"
	benchPassword = "bench-password"
	benchAPIKey   = "7d2c1e4b-9a3f-4e8d-b6c5-1f0a2e3d4c5b"
	benchTriage   = "3c1f4e2a-7b6d-4c8e-9a0f-1d2e3f4a5b6c"
)

// benchSaturdayNight is out of hours in Melbourne: a job created then needs
// its Make Safe within minutes (§6); the other jobs were created on a
// weekday morning, whenever the benchmark runs.
var (
	benchSaturdayNight  = time.Date(2026, 10, 3, 12, 14, 0, 0, time.UTC)
	benchTuesdayMorning = time.Date(2026, 10, 6, 0, 30, 0, 0, time.UTC) // 10:30 in Melbourne
)

// template is a job's life as a burst of webhooks. A known job is in the
// mirror before the run (its first status change in the run is a GetJob);
// a new one is first seen in the run, from its first status change, and
// the new-job pipeline puts it on the re-check ladder (§6) until a Make
// Safe arrives, and queues its objects for the sync drains (§7). The mix:
// 300 status changes (60%), 70 appointment events, 70 site form changes,
// 30 allocations (10 of them Make Safe, of jobs created out of hours), 30
// estimates; 70 known jobs, 30 new.
type template struct {
	jobs       int
	known      bool
	outOfHours bool
	actions    []string
}

var templates = []template{
	{25, true, false, []string{events.ActionChangeJobStatus, events.ActionChangeJobStatus, events.ActionCreateAppointment, events.ActionChangeJobStatus, events.ActionCompleteAppointment}},
	{25, true, false, []string{events.ActionChangeJobStatus, events.ActionChangeCustomFormStatus, events.ActionChangeCustomFormStatus, events.ActionChangeJobStatus, events.ActionChangeJobStatus}},
	{20, true, false, []string{events.ActionChangeJobStatus, events.ActionCreateAllocation, events.ActionChangeJobStatus, events.ActionCreateEstimate, events.ActionChangeJobStatus}},
	{20, false, false, []string{events.ActionChangeJobStatus, events.ActionChangeJobStatus, events.ActionCreateAppointment, events.ActionChangeJobStatus, events.ActionChangeCustomFormStatus}},
	{10, false, true, []string{events.ActionChangeJobStatus, events.ActionCreateAllocation, events.ActionChangeJobStatus, events.ActionChangeJobStatus, events.ActionCreateEstimate}},
}

// load is the workload of one run: each job's burst of webhook bodies,
// interleaved across the templates; the jobs to mirror before the run; and
// the range the sweep covers: ten jobs no webhook told of, two
// appointments each, three days out.
type load struct {
	bursts   [][]string
	known    []primesim.Job
	from, to time.Time
}

// workload makes the jobs and their records in sim.
func workload(b *testing.B, sim *primesim.Sim) load {
	b.Helper()
	body := func(action, id string) string {
		raw, err := sim.WebhookBody(action, id)
		if err != nil {
			b.Fatal(err)
		}
		return string(raw)
	}
	var l load
	var byTemplate [][][]string
	for _, t := range templates {
		var jobs [][]string
		for range t.jobs {
			j := sim.NewJob(func(j *prime.Job) {
				j.CreatedAt = prime.Time{Time: benchTuesdayMorning}
				if t.outOfHours {
					j.CreatedAt = prime.Time{Time: benchSaturdayNight}
				}
			})
			sim.NewContact(j.ID)
			sim.NewStatusHistory(j.ID, j.StatusID) // a job has the status it was created in
			if t.known {
				stored, _ := sim.Job(j.ID) // with the raw attributes the mirror keeps
				l.known = append(l.known, stored)
			}
			var appt, form string
			var burst []string
			for _, action := range t.actions {
				id := j.ID
				switch action {
				case events.ActionCreateAppointment:
					appt = sim.NewAppointment(j.ID).ID
					id = appt
				case events.ActionCompleteAppointment:
					id = appt
				case events.ActionChangeCustomFormStatus:
					if form == "" {
						form = sim.NewSiteForm(j.ID).ID
					}
					id = form
				case events.ActionCreateEstimate:
					id = sim.NewEstimate(j.ID).ID
				case events.ActionCreateAllocation:
					if t.outOfHours {
						id = sim.NewMakeSafeAllocation(j.ID).ID
					} else {
						id = sim.NewAllocation(j.ID, "Builder").ID
					}
				}
				burst = append(burst, body(action, id))
			}
			jobs = append(jobs, burst)
		}
		byTemplate = append(byTemplate, jobs)
	}
	for i := 0; len(l.bursts) < benchJobs; i++ {
		for _, jobs := range byTemplate {
			if i < len(jobs) {
				l.bursts = append(l.bursts, jobs[i])
			}
		}
	}
	start := time.Now().UTC().Add(72 * time.Hour).Truncate(time.Hour)
	for range 10 {
		j := sim.NewJob()
		sim.NewContact(j.ID)
		for h := range 2 {
			sim.NewAppointment(j.ID, func(a *prime.Appointment) {
				a.StartDate = prime.Time{Time: start.Add(time.Duration(h) * time.Hour)}
				a.EndDate = prime.Time{Time: start.Add(time.Duration(h+1) * time.Hour)}
			})
		}
	}
	l.from, l.to = start.Add(-24*time.Hour), start.Add(24*time.Hour)
	return l
}

// premirror writes the known jobs into the database at path, as job-mirror
// would have before the run: the row and the numeric reference.
func premirror(b *testing.B, path string, jobs []primesim.Job) {
	b.Helper()
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	for _, j := range jobs {
		if _, err := st.UpsertJob(context.Background(), mirror.Job(j.Job)); err != nil {
			b.Fatal(err)
		}
		if _, err := st.SaveJobReference(context.Background(), j.Ref, j.ID); err != nil {
			b.Fatal(err)
		}
	}
}

// budgetRun is what one deployment measured.
type budgetRun struct {
	name               string
	events, repeats    int
	calls, inDrain     int
	mostIn60s          int
	rateLimited        int64
	drain, bound       time.Duration
	eventCalls         float64 // the events' own calls: neither the sweep's, the ladder's nor the drains'
	firstCalls         float64 // for status changes: one a job, its burst's first event
	rungCalls          float64 // the re-check ladder's (§6)
	drainCalls         float64 // the ethSyncQueue drains' of the new jobs (§7), their ensure-jobs included
	makesafeP95        float64
	makesafeCalls      float64
	coalesced          map[string]float64
	profile            []int // the calls of each 10s while draining
	sweeps, sweepCalls float64
	failedAttempts     int
	err                error
}

func (r budgetRun) report(b *testing.B) {
	if r.name == "" {
		return // the run stopped on a failure, reported where it happened
	}
	if r.err != nil {
		b.Errorf("%s: %v", r.name, r.err)
		return
	}
	perEvent := r.eventCalls / float64(r.events)
	perRepeat := (r.eventCalls - r.firstCalls) / float64(r.repeats)
	ratio := r.drain.Seconds() / r.bound.Seconds()
	b.ReportMetric(float64(r.mostIn60s), r.name+"-max-calls/60s")
	b.ReportMetric(float64(r.rateLimited), r.name+"-429s")
	b.ReportMetric(ratio, r.name+"-drain/bound")
	b.ReportMetric(perEvent, r.name+"-calls/event")
	b.ReportMetric(perRepeat, r.name+"-calls/repeat")
	b.ReportMetric(r.rungCalls, r.name+"-ladder-calls")
	b.ReportMetric(r.drainCalls, r.name+"-drain-calls")
	b.ReportMetric(r.makesafeP95, r.name+"-makesafe-wait-p95-s")
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	b.Logf("%s: %d calls (%d while draining), at most %d in any 60s (target ≤ 60: %s), %d answered 429 (target 0: %s)",
		r.name, r.calls, r.inDrain, r.mostIn60s, met(r.mostIn60s <= 60), r.rateLimited, met(r.rateLimited == 0))
	b.Logf("%s: drained %d webhooks in %s, bound %s (the %d calls at 60 a minute): %.3f (target ≤ 1.1: %s)",
		r.name, r.events, r.drain.Round(time.Second), r.bound.Round(time.Second), r.inDrain, ratio, met(ratio <= 1.1))
	if ratio > 1.1 {
		b.Logf("%s: calls every 10s while draining: %v", r.name, r.profile) // where the time went
	}
	b.Logf("%s: the events' Prime calls per event %.3f (%.0f calls, target ≤ 1.0: %s); per repeated-job event %.3f (%.0f calls less the %.0f of the status changes, one a job, over the %d events after each job's first; target ≤ 0.6: %s)",
		r.name, perEvent, r.eventCalls, met(perEvent <= 1.0), perRepeat, r.eventCalls-r.firstCalls, r.firstCalls, r.repeats, met(perRepeat <= 0.6))
	setOff := (r.eventCalls + r.rungCalls + r.drainCalls) / float64(r.events)
	b.Logf("%s: with the calls the events set off beside them, the re-check ladder's %.0f and the sync drains' %.0f: %.3f an event",
		r.name, r.rungCalls, r.drainCalls, setOff)
	b.Logf("%s: make-safe calls' wait for their turn p95 %.2fs over %.0f calls, with the sweep running (target < 2s: %s); coalesced %v; sweeps %.0f (%.0f calls); failed attempts %d",
		r.name, r.makesafeP95, r.makesafeCalls, met(r.makesafeP95 < 2), r.coalesced, r.sweeps, r.sweepCalls, r.failedAttempts)
}

// runDeployment runs the workload through one deployment and measures it.
func runDeployment(b *testing.B, bin, gatewayURL string, separate bool) (r budgetRun) {
	r.name = "primeflow"
	if separate {
		r.name = "processes"
	}
	defer func() {
		if p := recover(); p != nil {
			r.err = fmt.Errorf("%v", p)
		}
	}()
	arrivals := &arrivalLog{}
	sim, err := primesim.New(primesim.Options{RateLimit: primesim.PrimeRateLimit(), Seed: 16})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(arrivals.wrap(sim))
	b.Cleanup(srv.Close)
	l := workload(b, sim)

	dir := b.TempDir()
	dbPath := filepath.Join(dir, "primeflow.db")
	premirror(b, dbPath, l.known)
	pc := sim.ClientConfig(srv.URL)
	common := []string{
		"ADMIN_USER=" + benchAdmin, "ADMIN_PASSWORD=" + benchPassword, "LOG_FORMAT=json", "LOG_LEVEL=info", "DATA_DIR=" + dir,
		"PRIME_API_URL=" + pc.URL, "PRIME_CLIENT_ID=" + pc.ClientID, "PRIME_CLIENT_SECRET=" + pc.ClientSecret,
		"PRIME_USERNAME=" + pc.Username, "PRIME_PASSWORD=" + pc.Password,
		"PRIME_WEBHOOK_API_KEY=" + benchAPIKey, "TRIAGE_INITIAL_CONTACT_MADE_STATUS_ID=" + benchTriage,
		"MAKESAFE_SMS_TO=+61400000000", "SMS_SEND_URL=" + gatewayURL + "/sms", "TRIAGE_INVITE_SEND_URL=" + gatewayURL + "/invite",
		"AI_SUMMARY_NUDGE_URL=off", "JOBS_SWEEP_EVERY=off",
	}
	var ingestAddr, natsURL string
	var metricsAddrs []string
	if separate {
		ns := natstest.Server(b)
		natsURL = ns.ClientURL()
		common = slices.Concat(common, []string{"NATS_URL=" + natsURL, "DATABASE_URL=sqlite:" + dbPath})
		for _, name := range []string{"ingest", "resolver", "job-mirror", "child-mirror", "newjob-pipeline", "makesafe"} {
			addr := freeAddr(b)
			startProc(b, bin, name, dir, slices.Concat(common, []string{"HTTP_ADDR=" + addr}), addr)
			if name == "ingest" {
				ingestAddr = addr
			}
			if name != "ingest" && name != "newjob-pipeline" {
				metricsAddrs = append(metricsAddrs, addr)
			}
		}
	} else {
		addr, natsAddr := freeAddr(b), freeAddr(b)
		natsURL = "nats://" + natsAddr
		startProc(b, bin, "primeflow", dir, slices.Concat(common, []string{"HTTP_ADDR=" + addr, "NATS_LISTEN=" + natsAddr, "SIM_ADDR=" + freeAddr(b),
			"SIMULATE=optimoroute,graph", "NATS_MONITOR_LISTEN=off", "OPTIMO_CREATE_EVERY=off", "OPTIMO_CREATE_ON_START=false", "OPTIMO_PLAN_ON_START=false"}), addr)
		ingestAddr, metricsAddrs = addr, []string{addr}
	}
	st, err := sqlite.Open(context.Background(), dbPath)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()

	// The webhooks, a job's burst every benchJobGap, and the sweep beside
	// them from the tenth job on.
	sweeps := make(chan float64, 1)
	stopSweeps := make(chan struct{})
	for i, burst := range l.bursts {
		if i == 10 {
			go func() { sweeps <- sweepUntilDone(b, natsURL, l.from, l.to, stopSweeps) }()
		}
		for _, body := range burst {
			flowtest.PostWebhook(b, http.DefaultClient, "http://"+ingestAddr+ingest.WebhookPath, benchAPIKey, body)
		}
		time.Sleep(benchJobGap)
	}
	r.events, r.repeats = benchJobs*5, benchJobs*4
	flowtest.Poll(b, 30*time.Minute, time.Second, "every webhook processed", func() bool {
		n, err := st.CountWebhookLog(context.Background(), store.LogFilter{State: store.Processed})
		return err == nil && n == r.events
	})
	rows, err := st.ListWebhookLog(context.Background(), store.LogFilter{Limit: 2 * r.events})
	if err != nil {
		b.Fatal(err)
	}
	first, last := rows[0].ReceivedUTC, rows[0].ProcessedUTC
	for _, row := range rows {
		first = minTime(first, row.ReceivedUTC)
		last = maxTime(last, row.ProcessedUTC)
		if row.ProcessAttempts > 0 {
			r.failedAttempts++
		}
	}
	r.drain = last.Sub(first)
	select {
	case r.sweeps = <-sweeps:
	case <-time.After(15 * time.Minute):
		b.Errorf("%s: the sweep did not finish within 15 minutes of the drain", r.name)
	}
	close(stopSweeps)
	time.Sleep(2 * time.Second) // the last calls' metrics

	times := arrivals.all()
	r.calls, r.mostIn60s = len(times), flowtest.MostInAnyWindow(times, time.Minute)
	r.profile = make([]int, int(r.drain/(10*time.Second))+1)
	for _, at := range times {
		if !at.Before(first) && !at.After(last) {
			r.inDrain++
			r.profile[int(at.Sub(first)/(10*time.Second))]++
		}
	}
	r.bound = time.Duration(r.inDrain) * time.Second // 60 a minute
	r.rateLimited = sim.Stats().RateLimited
	m := scrape(b, metricsAddrs)
	calls := func(keep func(l map[string]string) bool) float64 { return m.sum("prime_client_calls_total", keep) }
	r.sweepCalls = calls(func(l map[string]string) bool { return l["priority"] == prime.PrioritySweep.String() })
	r.rungCalls = calls(func(l map[string]string) bool { return l["caller"] == "makesafe" })
	r.drainCalls = calls(func(l map[string]string) bool { return l["priority"] == prime.PriorityDrain.String() })
	r.eventCalls = calls(func(l map[string]string) bool {
		return l["priority"] != prime.PrioritySweep.String() && l["priority"] != prime.PriorityDrain.String() && l["caller"] != "makesafe"
	})
	r.firstCalls = calls(func(l map[string]string) bool { return l["purpose"] == events.ActionChangeJobStatus })
	r.makesafeP95, r.makesafeCalls = m.quantile("prime_client_budget_wait_seconds", prime.PriorityMakesafe.String(), 0.95)
	r.coalesced = map[string]float64{}
	for _, how := range []string{"in_flight", "recent", "shared"} {
		r.coalesced[how] = m.sum("prime_client_coalesced_total", func(l map[string]string) bool { return l["how"] == how })
	}
	return r
}

// sweepUntilDone asks child-mirror for the appointment sweep until one goes
// through the whole range, as optimo-create's schedule would, sooner: one
// that stops (its ensure-jobs get no turn while the events' calls come
// first) is asked again. It returns how many it asked for.
func sweepUntilDone(b *testing.B, natsURL string, from, to time.Time, stop <-chan struct{}) float64 {
	nc, err := nats.Connect(natsURL)
	if err != nil {
		b.Error(err)
		return 0
	}
	defer nc.Close()
	n := 0.0
	for {
		n++
		req, _ := json.Marshal(events.SweepRequest{FromUTC: from, ToUTC: to, TimeoutMS: (10 * time.Minute).Milliseconds(), Source: "bench"})
		msg, err := nc.Request(events.SubjectSweepAppointments, req, 11*time.Minute)
		if err == nil && msg.Header.Get("Nats-Service-Error-Code") == "" {
			return n
		}
		select {
		case <-stop:
			return n
		case <-time.After(benchSweepGap):
		}
	}
}

// arrivalLog records when each of Prime's API calls reached the simulator.
type arrivalLog struct {
	mu    sync.Mutex
	times []time.Time
}

func (a *arrivalLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/_sim/") {
			a.mu.Lock()
			a.times = append(a.times, time.Now())
			a.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

func (a *arrivalLog) all() []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.times)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// benchServices are the binaries the benchmark runs as processes.
var benchServices = []string{"ingest", "resolver", "job-mirror", "child-mirror", "newjob-pipeline", "makesafe", "primeflow"}

// buildBinaries builds benchServices into a folder of the benchmark's.
func buildBinaries(b *testing.B) string {
	b.Helper()
	_, file, _, _ := runtime.Caller(0)
	bin := b.TempDir()
	var pkgs []string
	for _, name := range benchServices {
		pkgs = append(pkgs, "./services/"+name+"/cmd/"+name)
	}
	if err := proctest.Build(context.Background(), filepath.Join(filepath.Dir(file), "..", ".."), bin, pkgs...); err != nil {
		b.Fatal(err)
	}
	return bin
}

// startProc runs a binary until the benchmark ends, its log in dir, once
// its /healthz answers; a failed benchmark logs the tail of each log.
func startProc(b *testing.B, bin, name, dir string, env []string, addr string) {
	b.Helper()
	p, err := proctest.Start(context.Background(), proctest.Spec{
		Name:    name,
		Path:    filepath.Join(bin, name),
		Env:     env,
		LogFile: filepath.Join(dir, name+".log"),
		Healthz: &proctest.Healthz{URL: "http://" + addr + "/healthz", User: benchAdmin, Password: benchPassword},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		p.Stop(20 * time.Second)
		if b.Failed() {
			b.Logf("%s's log:\n%s", name, p.LogTail(40))
		}
	})
}

// freeAddr is an address for a process to listen on (proctest.FreeAddr).
func freeAddr(b *testing.B) string {
	b.Helper()
	addr, err := proctest.FreeAddr()
	if err != nil {
		b.Fatal(err)
	}
	return addr
}

// samples are the series of the processes' /metrics.
type samples []sample

type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape reads every process's /metrics (Prometheus's text format).
func scrape(b *testing.B, addrs []string) samples {
	b.Helper()
	var out samples
	for _, addr := range addrs {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
		req.SetBasicAuth(benchAdmin, benchPassword)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if s, ok := parseSample(sc.Text()); ok {
				out = append(out, s)
			}
		}
		res.Body.Close()
	}
	return out
}

// parseSample reads `name{a="x",b="y"} 1.5`.
func parseSample(line string) (sample, bool) {
	if line == "" || strings.HasPrefix(line, "#") {
		return sample{}, false
	}
	sp := strings.LastIndexByte(line, ' ')
	v, err := strconv.ParseFloat(line[sp+1:], 64)
	if sp < 0 || err != nil {
		return sample{}, false
	}
	head := line[:sp]
	s := sample{name: head, labels: map[string]string{}, value: v}
	if i := strings.IndexByte(head, '{'); i >= 0 {
		s.name = head[:i]
		for _, kv := range strings.Split(strings.TrimSuffix(head[i+1:], "}"), ",") {
			k, val, ok := strings.Cut(kv, "=")
			if ok {
				s.labels[k] = strings.Trim(val, `"`)
			}
		}
	}
	return s, true
}

func (ss samples) sum(name string, keep func(map[string]string) bool) float64 {
	total := 0.0
	for _, s := range ss {
		if s.name == name && keep(s.labels) {
			total += s.value
		}
	}
	return total
}

// quantile is q of histogram name's series for priority, summed over the
// processes, read as Prometheus's histogram_quantile reads it, and the
// observations' count.
func (ss samples) quantile(name, priority string, q float64) (float64, float64) {
	buckets := map[float64]float64{}
	for _, s := range ss {
		if s.name != name+"_bucket" || s.labels["priority"] != priority {
			continue
		}
		le, err := strconv.ParseFloat(s.labels["le"], 64)
		if err != nil {
			le = math.Inf(1)
		}
		buckets[le] += s.value
	}
	les := slices.Sorted(maps.Keys(buckets))
	if len(les) == 0 {
		return 0, 0
	}
	count := buckets[les[len(les)-1]]
	if count == 0 {
		return 0, 0
	}
	rank, lower, below := q*count, 0.0, 0.0
	for _, le := range les {
		if buckets[le] >= rank {
			if math.IsInf(le, 1) {
				return lower, count
			}
			return lower + (le-lower)*(rank-below)/(buckets[le]-below), count
		}
		lower, below = le, buckets[le]
	}
	return lower, count
}
