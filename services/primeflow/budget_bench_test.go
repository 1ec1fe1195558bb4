package primeflow_test

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
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
	"github.com/ethosbuilding/primeflow/pkg/graphsim"
	"github.com/ethosbuilding/primeflow/pkg/mirror"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/pkg/proctest"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
	"github.com/ethosbuilding/primeflow/services/ingest"
	jobmirror "github.com/ethosbuilding/primeflow/services/job-mirror"
	"github.com/nats-io/nats.go"
)

// BenchmarkPrimeBudget spends a day of Prime's budget, compressed, and
// counts every call the Prime simulator serves (at Prime's own limits: 60
// a minute, 5 at once, 5,000 a day), through the services as separate
// processes (one NATS, one SQLite file) and through bin/primeflow, side by
// side, each on simulators of its own.
//
// The day is a sixth of one of ~3,000 webhooks: 500 webhooks over 100
// jobs, each job's events in a burst as Prime sends them, a job every 1.2s
// (70 jobs the mirror knows; 30 new ones, whose allocation Prime makes a
// little after the job and tells of with its create-allocation event, the
// race of §7 and §9; 10 of them created out of hours and given a Make
// Safe); Prime's new-job email for each new job, and 5 jobs that come by
// email alone; 5 jobs only the jobs-by-date backstop finds, which sweeps
// 16 times (a sixth of a day's 96); and the appointment sweep, asked for
// again and again beside the webhooks until one goes through, which finds
// 10 more jobs no webhook told of. The day ends when its work is done:
// every webhook and email handled, the sync queue empty (the grace re-asks
// over), the re-check ladder run out.
//
// It reports, for each deployment: the most calls Prime got in any 60s and
// the calls it answered 429 (with the most the budget let out in any of its
// windows beside them); the time to drain the webhooks against the bound
// (their calls at 60 a minute); the webhooks' own calls per event; every
// call of the day by purpose (the events', ensure-job, the drains with
// their grace re-asks, the ladder, the sweeps, the mail intake); the day's
// calls per event all-in; the calls of each new job all-in — its job, its
// drains with their re-asks, its ladder, its contact syncs — by the path that first saw it;
// and the wait of make-safe calls for their turn, p95 and p99, while the
// webhooks drain with the sweep running. With -benchtime Nx it runs the day
// N times and gives the spread of the make-safe waits. It builds the
// binaries and runs them with pkg/proctest.
func BenchmarkPrimeBudget(b *testing.B) {
	bin := buildBinaries(b)
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { // the SMS and the triage invites
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	b.Cleanup(gateway.Close)
	deployments := []string{"processes", "primeflow"}
	runs := make(map[string][]budgetRun)
	for range b.N {
		var wg sync.WaitGroup
		results := make([]budgetRun, len(deployments))
		for i, name := range deployments {
			wg.Go(func() { results[i] = runDeployment(b, bin, gateway.URL, name) })
		}
		wg.Wait()
		for i, r := range results {
			r.report(b)
			runs[deployments[i]] = append(runs[deployments[i]], r)
		}
	}
	for _, name := range deployments {
		spread(b, name, runs[name])
	}
}

// The day.
const (
	benchJobs      = 100
	benchJobGap    = 1200 * time.Millisecond // between two jobs' bursts
	benchSweepGap  = 5 * time.Second         // between an appointment sweep that stopped and the next
	benchMailOnly  = 5                       // new jobs that come by email alone
	benchBackstop  = 5                       // new jobs only the jobs-by-date backstop finds
	benchSweepJobs = 10                      // jobs only the appointment sweep finds
	benchBackstops = 16                      // jobs-by-date sweeps, a minute apart: a sixth of a day's 96
	benchEmailLag  = 20 * time.Second        // a new job's email after its first webhook
	benchDayLimit  = 45 * time.Minute        // for the day's work to be done
	benchAdmin     = "bench"
	benchPassword  = "bench-password"
	benchAPIKey    = "7d2c1e4b-9a3f-4e8d-b6c5-1f0a2e3d4c5b"
	benchTriage    = "3c1f4e2a-7b6d-4c8e-9a0f-1d2e3f4a5b6c"
)

// benchSaturdayNight is out of hours in Melbourne: a job created then needs
// its Make Safe within minutes (§6); the other jobs were created on a
// weekday morning, whenever the benchmark runs.
var (
	benchSaturdayNight  = time.Date(2026, 10, 3, 12, 14, 0, 0, time.UTC)
	benchTuesdayMorning = time.Date(2026, 10, 6, 0, 30, 0, 0, time.UTC) // 10:30 in Melbourne
)

// allocationLag is how long after a new job's first webhook Prime makes its
// allocation and sends create-allocation: from 15s to 90s, so that a drain
// asks before it now and then (§7: the flow's 35s wait made it unlikely,
// not impossible).
func allocationLag(k int) time.Duration { return time.Duration(15+15*(k%6)) * time.Second }

// template is a job's life as a burst of webhooks. A known job is in the
// mirror before the run (its first status change is a GetJob); a new one
// is made in Prime at its burst and first seen from its first status
// change: the new-job pipeline puts it on the re-check ladder (§6) until a
// Make Safe arrives, and queues its objects for the sync drains (§7). Its
// allocation comes later than the rest of its burst (allocationLag). The
// mix: 300 status changes (60%), 70 appointment events, 70 site form
// changes, 30 allocations (10 of them Make Safe, of the jobs created out of
// hours), 30 estimates; 70 known jobs, 30 new.
type template struct {
	jobs       int
	known      bool
	outOfHours bool
	actions    []string
}

var templates = []template{
	{25, true, false, []string{events.ActionChangeJobStatus, events.ActionChangeJobStatus, events.ActionCreateAppointment, events.ActionChangeJobStatus, events.ActionCompleteAppointment}},
	{25, true, false, []string{events.ActionChangeJobStatus, events.ActionChangeCustomFormStatus, events.ActionChangeCustomFormStatus, events.ActionChangeJobStatus, events.ActionChangeJobStatus}},
	{20, true, false, []string{events.ActionChangeJobStatus, events.ActionChangeJobStatus, events.ActionCreateAppointment, events.ActionChangeJobStatus, events.ActionChangeCustomFormStatus}},
	{20, false, false, []string{events.ActionChangeJobStatus, events.ActionCreateAllocation, events.ActionChangeJobStatus, events.ActionCreateEstimate, events.ActionChangeJobStatus}},
	{10, false, true, []string{events.ActionChangeJobStatus, events.ActionCreateAllocation, events.ActionChangeJobStatus, events.ActionChangeJobStatus, events.ActionCreateEstimate}},
}

// day is one deployment's day: its simulators, the steps of its timeline,
// and, for putting each Prime call down to its job, whose every record is.
type day struct {
	b     *testing.B
	sim   *primesim.Sim
	graph *graphsim.Sim
	post  func(body string)
	steps []step
	known []primesim.Job
	// from, to is the range the appointment sweep covers.
	from, to time.Time

	mu     sync.Mutex
	owner  map[string]string // a record's id, or a job's numeric reference, to its job
	emails []string          // the emails' internetMessageIds
	err    error
}

// step is something that happens at a moment of the day.
type step struct {
	at time.Duration
	do func()
}

func (d *day) at(at time.Duration, do func()) { d.steps = append(d.steps, step{at, do}) }

// own records that the record id belongs to job.
func (d *day) own(id, job string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.owner[strings.ToLower(id)] = strings.ToLower(job)
}

// fail records the day's first failure; the day goes on, and the run
// reports it.
func (d *day) fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err == nil {
		d.err = err
	}
}

func (d *day) body(action, id string) string {
	raw, err := d.sim.WebhookBody(action, id)
	if err != nil {
		d.fail(err)
	}
	return string(raw)
}

// newJob makes a job with one contact and the status history of the
// status it was made in, created at createdAt and, unless fresh, last
// updated two days ago (a job the jobs-by-date backstop does not list).
func (d *day) newJob(createdAt time.Time, fresh bool) primesim.Job {
	j := d.sim.NewJob(func(j *prime.Job) { j.CreatedAt = prime.Time{Time: createdAt} })
	d.own(strconv.FormatInt(j.Ref, 10), j.ID)
	d.own(j.ID, j.ID)
	c, _ := d.sim.NewContact(j.ID) // the job's primary contact: an update of the job
	d.own(c.ID, j.ID)
	d.sim.NewStatusHistory(j.ID, j.StatusID)
	stored, _ := d.sim.Job(j.ID) // with the raw attributes the mirror keeps, and the contact
	if !fresh {
		stored.UpdatedAt = prime.Time{Time: time.Now().UTC().Add(-48 * time.Hour).Truncate(time.Second)}
		if err := d.sim.PutJob(stored); err != nil {
			d.fail(err)
		}
		stored, _ = d.sim.Job(j.ID)
	}
	return stored
}

// allocation makes an allocation of job: a Make Safe for a job created out
// of hours.
func (d *day) allocation(job string, makeSafe bool) prime.Allocation {
	var a prime.Allocation
	if makeSafe {
		a = d.sim.NewMakeSafeAllocation(job)
	} else {
		a = d.sim.NewAllocation(job, "Builder")
	}
	d.own(a.ID, job)
	return a
}

// email drops Prime's new-job email for j into the mailbox.
func (d *day) email(j primesim.Job) {
	m, err := d.graph.Deliver(graphsim.NewMessage{Subject: "New Job " + j.JobNumber,
		Body: fmt.Sprintf(`<html><body><p>{ &quot;JobID&quot;: &#39;%d&#39;, &quot;JobNumber&quot;: &#39;%s&#39; }</p></body></html>`, j.Ref, j.JobNumber)})
	if err != nil {
		d.fail(err)
		return
	}
	d.mu.Lock()
	d.emails = append(d.emails, m.InternetMessageID)
	d.mu.Unlock()
}

// plan makes the known jobs and the appointment sweep's in sim, and lays
// out the day's timeline: the webhooks, the records Prime makes as the day
// goes, the emails.
func (d *day) plan() {
	// The jobs interleaved across the templates, a burst every benchJobGap.
	type slot struct {
		t template
		n int
	}
	var order []slot
	for i := 0; len(order) < benchJobs; i++ {
		for _, t := range templates {
			if i < t.jobs {
				order = append(order, slot{t, i})
			}
		}
	}
	newJobs := 0
	for i, s := range order {
		at := time.Duration(i) * benchJobGap
		if s.t.known {
			d.known = append(d.known, d.knownJob(s.t, at))
			continue
		}
		d.newWebhookJob(s.t, at, newJobs)
		newJobs++
	}
	for k := range benchMailOnly {
		d.at(10*time.Second+time.Duration(k)*25*time.Second, func() {
			j := d.newJob(benchTuesdayMorning, true)
			d.allocation(j.ID, false)
			d.email(j)
		})
	}
	for k := range benchBackstop {
		d.at(20*time.Second+time.Duration(k)*25*time.Second, func() {
			j := d.newJob(benchTuesdayMorning, true)
			d.allocation(j.ID, false)
		})
	}
	// The appointment sweep's range: jobs no webhook told of, well under
	// way (an allocation each), two appointments each, three days out.
	start := time.Now().UTC().Add(72 * time.Hour).Truncate(time.Hour)
	for range benchSweepJobs {
		j := d.newJob(benchTuesdayMorning, false)
		d.allocation(j.ID, false)
		for h := range 2 {
			a := d.sim.NewAppointment(j.ID, func(a *prime.Appointment) {
				a.StartDate = prime.Time{Time: start.Add(time.Duration(h) * time.Hour)}
				a.EndDate = prime.Time{Time: start.Add(time.Duration(h+1) * time.Hour)}
			})
			d.own(a.ID, j.ID)
		}
	}
	d.from, d.to = start.Add(-24*time.Hour), start.Add(24*time.Hour)
	slices.SortStableFunc(d.steps, func(a, b step) int { return cmp.Compare(a.at, b.at) })
}

// knownJob makes a job the mirror knows and its records, and the step that
// posts its burst.
func (d *day) knownJob(t template, at time.Duration) primesim.Job {
	j := d.newJob(benchTuesdayMorning, false)
	bodies := d.burst(j.ID, t)
	d.at(at, func() {
		for _, body := range bodies {
			d.post(body)
		}
	})
	return j
}

// newWebhookJob lays out a new job's day: Prime makes it, with its records
// but its allocation, and sends its burst; its allocation follows, with
// its create-allocation; its email comes after its first webhook.
func (d *day) newWebhookJob(t template, at time.Duration, k int) {
	var j primesim.Job
	d.at(at, func() {
		created := benchTuesdayMorning
		if t.outOfHours {
			created = benchSaturdayNight
		}
		j = d.newJob(created, true)
		for _, body := range d.burst(j.ID, t) {
			d.post(body)
		}
	})
	d.at(at+allocationLag(k), func() {
		a := d.allocation(j.ID, t.outOfHours)
		d.post(d.body(events.ActionCreateAllocation, a.ID))
	})
	d.at(at+benchEmailLag, func() { d.email(j) })
}

// burst makes the records of a job's burst and returns its webhook bodies,
// but for its allocation's (newWebhookJob sends that later).
func (d *day) burst(job string, t template) []string {
	var appt, form string
	var bodies []string
	for _, action := range t.actions {
		id := job
		switch action {
		case events.ActionCreateAllocation:
			continue
		case events.ActionCreateAppointment:
			appt = d.sim.NewAppointment(job).ID
			d.own(appt, job)
			id = appt
		case events.ActionCompleteAppointment:
			id = appt
		case events.ActionChangeCustomFormStatus:
			if form == "" {
				form = d.sim.NewSiteForm(job).ID
				d.own(form, job)
			}
			id = form
		case events.ActionCreateEstimate:
			id = d.sim.NewEstimate(job).ID
			d.own(id, job)
		}
		bodies = append(bodies, d.body(action, id))
	}
	return bodies
}

// run carries the timeline out from now.
func (d *day) run() {
	start := time.Now()
	for _, s := range d.steps {
		time.Sleep(time.Until(start.Add(s.at)))
		s.do()
	}
}

// premirror writes the known jobs into the database at path, as job-mirror
// would have before the run: the row, the numeric reference and the version
// their objects were queued for at their first sight; and the jobs-by-date
// backstop's watermark, as its last sweep left it.
func premirror(b *testing.B, path string, jobs []primesim.Job) {
	b.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	for _, j := range jobs {
		if _, err := st.UpsertJob(ctx, mirror.Job(j.Job)); err != nil {
			b.Fatal(err)
		}
		if _, err := st.SaveJobReference(ctx, j.Ref, j.ID); err != nil {
			b.Fatal(err)
		}
		if err := st.SetJobObjectsQueued(ctx, j.ID, store.JobVersion{Version: j.Version, UpdatedAt: j.UpdatedAt.Time}); err != nil {
			b.Fatal(err)
		}
	}
	if err := st.SetSweepWatermark(ctx, jobmirror.WatermarkJobsByDate, time.Now().UTC()); err != nil {
		b.Fatal(err)
	}
}

// budgetRun is what one deployment measured.
type budgetRun struct {
	name            string
	events, repeats int
	calls, inDrain  int
	mostIn60s       int
	// mostGranted is the most calls the budget held in its window (a
	// minute and PRIME_BUDGET_MARGIN) in any revision of its key in NATS:
	// the budget's own view of what mostIn60s measures.
	mostGranted    int
	window         time.Duration
	rateLimited    int64
	fallbacks      float64
	drain, bound   time.Duration
	eventCalls     float64 // the webhooks' own calls, their ensure-jobs and contact syncs included
	firstCalls     float64 // for status changes: one a job, its burst's first event
	byPurpose      map[string]float64
	newJobs        []newJob
	reasks         int // the drains' asks of an object of a job after its first
	makesafe       waits
	makesafeDay    waits
	coalesced      map[string]float64
	profile        []int // the calls of each 10s while draining
	sweeps         float64
	jobsSweeps     int
	failedAttempts int
	err            error
}

// newJob is a job first seen in the day, and the calls of its first sight
// and of what that set off: the GET of the job (none when the backstop's
// list brought it), its drains (their re-asks included), its re-check
// ladder, and the contact syncs of its appointments.
type newJob struct {
	id, via string
	calls   int
}

// waits are the make-safe calls' waits for their turn, read from the
// processes' histograms.
type waits struct {
	p95, p99, count    float64
	within1s, within2s float64 // the share that waited at most 1s, 2s
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
	allIn := float64(r.calls) / float64(r.events)
	ratio := r.drain.Seconds() / r.bound.Seconds()
	perNewJob, mostNewJob := 0.0, 0
	for _, j := range r.newJobs {
		perNewJob += float64(j.calls)
		mostNewJob = max(mostNewJob, j.calls)
	}
	perNewJob /= float64(max(1, len(r.newJobs)))
	b.ReportMetric(float64(r.mostIn60s), r.name+"-max-calls/60s")
	b.ReportMetric(float64(r.rateLimited), r.name+"-429s")
	b.ReportMetric(ratio, r.name+"-drain/bound")
	b.ReportMetric(perEvent, r.name+"-event-calls/event")
	b.ReportMetric(perRepeat, r.name+"-event-calls/repeat")
	b.ReportMetric(allIn, r.name+"-all-in-calls/event")
	b.ReportMetric(perNewJob, r.name+"-calls/new-job")
	b.ReportMetric(r.makesafe.p95, r.name+"-makesafe-wait-p95-s")
	b.ReportMetric(r.makesafe.p99, r.name+"-makesafe-wait-p99-s")
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	b.Logf("%s: %d calls in the day (%d while the webhooks drained), at most %d in any 60s (target ≤ 60: %s), %d answered 429 (target 0: %s); the budget held at most %d in its window of %s; %.0f fallbacks to a local share",
		r.name, r.calls, r.inDrain, r.mostIn60s, met(r.mostIn60s <= 60), r.rateLimited, met(r.rateLimited == 0), r.mostGranted, r.window, r.fallbacks)
	b.Logf("%s: drained %d webhooks in %s, bound %s (the %d calls at 60 a minute): %.3f (target ≤ 1.1: %s)",
		r.name, r.events, r.drain.Round(time.Second), r.bound.Round(time.Second), r.inDrain, ratio, met(ratio <= 1.1))
	if ratio > 1.1 {
		b.Logf("%s: calls every 10s while draining: %v", r.name, r.profile) // where the time went
	}
	b.Logf("%s: the webhooks' own Prime calls per event %.3f (%.0f calls); per repeated-job event %.3f (%.0f calls less the %.0f of the status changes, one a job, over the %d events after each job's first)",
		r.name, perEvent, r.eventCalls, perRepeat, r.eventCalls-r.firstCalls, r.firstCalls, r.repeats)
	b.Logf("%s: the day's calls by caller/purpose/class: %s", r.name, purposes(r.byPurpose))
	b.Logf("%s: ALL-IN %.3f calls an event (%d calls over the day's %d webhooks: every call above; target ≤ 0.8: %s)",
		r.name, allIn, r.calls, r.events, met(allIn <= 0.8))
	b.Logf("%s: ALL-IN %.2f calls a new job, at most %d (%d new jobs, one contact each: its job, its drains with %d grace re-asks in all, its ladder, its contact syncs; target ≤ 6: %s); by the path that saw it first: %s",
		r.name, perNewJob, mostNewJob, len(r.newJobs), r.reasks, met(perNewJob <= 6 && mostNewJob <= 6), byVia(r.newJobs))
	b.Logf("%s: make-safe calls' wait for their turn while the webhooks drained, the sweep running: p95 %.2fs, p99 %.2fs over %.0f calls, %.1f%% within 1s, %.1f%% within 2s (targets p95 ≤ 1s: %s, p99 ≤ 2s: %s); over the whole day p95 %.2fs, p99 %.2fs over %.0f",
		r.name, r.makesafe.p95, r.makesafe.p99, r.makesafe.count, 100*r.makesafe.within1s, 100*r.makesafe.within2s,
		met(r.makesafe.within1s >= 0.95), met(r.makesafe.within2s >= 0.99), r.makesafeDay.p95, r.makesafeDay.p99, r.makesafeDay.count)
	b.Logf("%s: coalesced %v; appointment sweeps %.0f, jobs-by-date sweeps %d; failed attempts %d",
		r.name, r.coalesced, r.sweeps, r.jobsSweeps, r.failedAttempts)
}

// purposes lists the calls by purpose, most first.
func purposes(m map[string]float64) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.0f", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// byVia is the new jobs' calls by the path that first saw them.
func byVia(jobs []newJob) string {
	type sum struct{ jobs, calls, most int }
	m := map[string]*sum{}
	for _, j := range jobs {
		s := m[j.via]
		if s == nil {
			s = &sum{}
			m[j.via] = s
		}
		s.jobs++
		s.calls += j.calls
		s.most = max(s.most, j.calls)
	}
	var parts []string
	for _, via := range slices.Sorted(maps.Keys(m)) {
		s := m[via]
		parts = append(parts, fmt.Sprintf("%s %d jobs, %.2f a job, at most %d", via, s.jobs, float64(s.calls)/float64(s.jobs), s.most))
	}
	return strings.Join(parts, "; ")
}

// spread is the make-safe waits over the runs of one deployment.
func spread(b *testing.B, name string, runs []budgetRun) {
	var p95, p99 []float64
	for _, r := range runs {
		if r.err == nil && r.name != "" {
			p95, p99 = append(p95, r.makesafe.p95), append(p99, r.makesafe.p99)
		}
	}
	if len(p95) < 2 {
		return
	}
	b.Logf("%s: make-safe wait over %d runs: p95 %.2f–%.2fs, p99 %.2f–%.2fs", name, len(p95), slices.Min(p95), slices.Max(p95), slices.Min(p99), slices.Max(p99))
}

// runDeployment runs the day through one deployment and measures it.
func runDeployment(b *testing.B, bin, gatewayURL, name string) (r budgetRun) {
	r.name = name
	separate := name == "processes"
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
	mailbox := graphsim.New(graphsim.Options{})
	graphSrv := httptest.NewServer(mailbox)
	b.Cleanup(graphSrv.Close)
	d := &day{b: b, sim: sim, graph: mailbox, owner: map[string]string{}}
	d.plan()

	dir := b.TempDir()
	dbPath := filepath.Join(dir, "primeflow.db")
	premirror(b, dbPath, d.known)
	pc := sim.ClientConfig(srv.URL)
	gc := mailbox.ClientConfig(graphSrv.URL)
	common := []string{
		"ADMIN_USER=" + benchAdmin, "ADMIN_PASSWORD=" + benchPassword, "LOG_FORMAT=json", "LOG_LEVEL=info", "DATA_DIR=" + dir,
		"PRIME_API_URL=" + pc.URL, "PRIME_CLIENT_ID=" + pc.ClientID, "PRIME_CLIENT_SECRET=" + pc.ClientSecret,
		"PRIME_USERNAME=" + pc.Username, "PRIME_PASSWORD=" + pc.Password,
		"PRIME_WEBHOOK_API_KEY=" + benchAPIKey, "TRIAGE_INITIAL_CONTACT_MADE_STATUS_ID=" + benchTriage,
		"MAKESAFE_SMS_TO=+61400000000", "SMS_SEND_URL=" + gatewayURL + "/sms", "TRIAGE_INVITE_SEND_URL=" + gatewayURL + "/invite",
		"AI_SUMMARY_NUDGE_URL=off", "JOBS_SWEEP_EVERY=off",
		"GRAPH_TENANT_ID=" + gc.TenantID, "GRAPH_CLIENT_ID=" + gc.ClientID, "GRAPH_CLIENT_SECRET=" + gc.ClientSecret,
		"GRAPH_API_URL=" + gc.APIURL, "GRAPH_TOKEN_URL=" + gc.TokenURL, "MAIL_USER=" + mailbox.User(),
		"MAIL_FOLDER=" + graphsim.DefaultFolders[0], "MAIL_PROCESSED_FOLDER=" + graphsim.DefaultFolders[1],
		"MAIL_FAILED_FOLDER=" + graphsim.DefaultFolders[2], "MAIL_POLL_INTERVAL=10s", "MAIL_ALLOWED_SENDERS=" + graphsim.DefaultFrom,
	}
	var ingestAddr, natsURL string
	var metricsAddrs []string
	if separate {
		ns := natstest.Server(b)
		natsURL = ns.ClientURL()
		common = slices.Concat(common, []string{"NATS_URL=" + natsURL, "DATABASE_URL=sqlite:" + dbPath})
		for _, svc := range []string{"ingest", "resolver", "job-mirror", "child-mirror", "newjob-pipeline", "makesafe", "mail-intake"} {
			addr := freeAddr(b)
			startProc(b, bin, svc, dir, slices.Concat(common, []string{"HTTP_ADDR=" + addr}), addr)
			switch svc {
			case "ingest":
				ingestAddr = addr
			case "resolver", "job-mirror", "child-mirror", "makesafe":
				metricsAddrs = append(metricsAddrs, addr) // the ones with a Prime client
			}
		}
	} else {
		addr, natsAddr := freeAddr(b), freeAddr(b)
		natsURL = "nats://" + natsAddr
		startProc(b, bin, "primeflow", dir, slices.Concat(common, []string{"HTTP_ADDR=" + addr, "NATS_LISTEN=" + natsAddr, "SIM_ADDR=" + freeAddr(b),
			"SIMULATE=optimoroute", "NATS_MONITOR_LISTEN=off", "OPTIMO_CREATE_EVERY=off", "OPTIMO_CREATE_ON_START=false", "OPTIMO_PLAN_ON_START=false"}), addr)
		ingestAddr, metricsAddrs = addr, []string{addr}
	}
	d.post = func(body string) {
		flowtest.PostWebhook(b, http.DefaultClient, "http://"+ingestAddr+ingest.WebhookPath, benchAPIKey, body)
	}
	st, err := sqlite.Open(context.Background(), dbPath)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	r.window = time.Minute + 2*time.Second // PRIME_BUDGET_MARGIN's default
	granted, stopWatch := watchGrants(b, nc, r.window)
	defer stopWatch()

	// The appointment sweep from the tenth job on, the jobs-by-date sweeps
	// a minute apart, and the day's timeline.
	sweeps := make(chan float64, 1)
	stopSweeps := make(chan struct{})
	go func() {
		time.Sleep(10 * benchJobGap)
		sweeps <- sweepUntilDone(b, nc, d.from, d.to, stopSweeps)
	}()
	jobsSweeps := make(chan bool, benchBackstops)
	go func() {
		for m := range benchBackstops {
			if m > 0 {
				time.Sleep(time.Minute)
			}
			go func() { jobsSweeps <- sweepJobs(nc) }()
		}
	}()
	d.run()
	r.events, r.repeats = benchJobs*5, benchJobs*4
	ctx := context.Background()
	flowtest.Poll(b, 30*time.Minute, time.Second, "every webhook processed", func() bool {
		n, err := st.CountWebhookLog(ctx, store.LogFilter{State: store.Processed})
		return err == nil && n == r.events
	})
	rows, err := st.ListWebhookLog(ctx, store.LogFilter{Limit: 2 * r.events})
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
		b.Errorf("%s: the appointment sweep did not finish within 15 minutes of the drain", r.name)
	}
	close(stopSweeps)
	m := scrape(b, metricsAddrs) // while the webhooks drained, the sweep running
	r.makesafe = m.waits(prime.PriorityMakesafe.String())

	// The day's work done: the emails, the sweeps, the drains' grace, the
	// ladder.
	for range benchBackstops {
		if <-jobsSweeps {
			r.jobsSweeps++
		}
	}
	flowtest.Poll(b, benchDayLimit, 5*time.Second, "the day's work done", func() bool { return d.done(st) })
	time.Sleep(2 * time.Second) // the last calls' metrics
	if d.err != nil {
		b.Fatal(d.err)
	}

	times := arrivals.all()
	r.calls = len(times)
	at := make([]time.Time, len(times))
	for i, a := range times {
		at[i] = a.at
	}
	r.mostIn60s = flowtest.MostInAnyWindow(at, time.Minute)
	r.mostGranted = granted()
	r.profile = make([]int, int(r.drain/(10*time.Second))+1)
	for _, t := range at {
		if !t.Before(first) && !t.After(last) {
			r.inDrain++
			r.profile[int(t.Sub(first)/(10*time.Second))]++
		}
	}
	r.bound = time.Duration(r.inDrain) * time.Second // 60 a minute
	r.rateLimited = sim.Stats().RateLimited
	m = scrape(b, metricsAddrs)
	r.makesafeDay = m.waits(prime.PriorityMakesafe.String())
	r.fallbacks = m.sum("prime_budget_fallbacks_total", func(map[string]string) bool { return true })
	r.byPurpose = map[string]float64{}
	for _, s := range m {
		if s.name == "prime_client_calls_total" && s.value > 0 {
			r.byPurpose[s.labels["caller"]+"/"+s.labels["purpose"]+"/"+s.labels["priority"]] += s.value
		}
	}
	r.eventCalls = m.sum("prime_client_calls_total", func(l map[string]string) bool {
		return (l["priority"] == prime.PriorityEvent.String() || l["priority"] == prime.PriorityMakesafe.String()) && l["caller"] != "makesafe"
	})
	r.firstCalls = m.sum("prime_client_calls_total", func(l map[string]string) bool { return l["purpose"] == events.ActionChangeJobStatus })
	r.coalesced = map[string]float64{}
	for _, how := range []string{"in_flight", "recent", "shared"} {
		r.coalesced[how] = m.sum("prime_client_coalesced_total", func(l map[string]string) bool { return l["how"] == how })
	}
	r.newJobs, r.reasks = d.newJobs(b, st, times)
	return r
}

// done reports whether the day's work is done: every email filed, every
// new-job pipeline run, the sync queue empty, no rung of the ladder left to
// fire.
func (d *day) done(st store.Store) bool {
	ctx := context.Background()
	d.mu.Lock()
	emails := slices.Clone(d.emails)
	d.mu.Unlock()
	for _, id := range emails {
		if r, found, err := st.GetEmailReceipt(ctx, id); err != nil || !found || r.MovedTo != store.EmailProcessed {
			return false
		}
	}
	pending, err := st.ListFirstSeen(ctx, store.FirstSeenPending, 1)
	if err != nil || len(pending) > 0 {
		return false
	}
	queued, err := st.ListSyncQueue(ctx, store.SyncQueueFilter{Limit: 1})
	if err != nil || len(queued) > 0 {
		return false
	}
	rungs, err := st.ListDueMakesafeChecks(ctx, time.Now().Add(24*time.Hour), 1)
	return err == nil && len(rungs) == 0
}

// newJobs puts each call Prime served down to its job and sums, for every
// job first seen in the day, the calls of its first sight and of what it
// set off: the first GET of the job, and every call of its drains, of its
// ladder and of the contact syncs that fetched its contacts again (an
// appointment's, the appointment sweep's; by the caller and purpose the
// User-Agent names). reasks counts the drains' asks of an object of a job
// after its first.
func (d *day) newJobs(b *testing.B, st store.Store, calls []arrival) ([]newJob, int) {
	seen, err := st.ListFirstSeen(context.Background(), store.FirstSeenAny, 1000)
	if err != nil {
		b.Fatal(err)
	}
	jobs := make(map[string]*newJob, len(seen))
	for _, fs := range seen {
		jobs[strings.ToLower(fs.JobID)] = &newJob{id: fs.JobID, via: fs.Via}
	}
	gotJob := map[string]bool{}
	asked := map[string]int{} // drain asks by job and endpoint
	reasks := 0
	for _, c := range calls {
		collection, job := d.whose(c.url)
		nj := jobs[job]
		if nj == nil {
			continue
		}
		purpose := c.purpose()
		switch {
		case collection == "jobs" && !gotJob[job]:
			gotJob[job] = true
			nj.calls++
		case purpose == "child-mirror; sync-drain" || purpose == "makesafe; recheck" || purpose == "child-mirror; contact-sync":
			nj.calls++
			if purpose == "child-mirror; sync-drain" {
				key := job + " " + collection
				if asked[key]++; asked[key] > 1 && collection != "contacts" {
					reasks++
				}
			}
		}
	}
	out := make([]newJob, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, *j)
	}
	slices.SortFunc(out, func(a, b newJob) int { return cmp.Compare(a.id, b.id) })
	return out, reasks
}

// whose reads a call's URL: the collection it asks of, and the job whose
// record it is ("" for the token and the lists by date).
func (d *day) whose(u *url.URL) (collection, job string) {
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	collection = parts[0]
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(parts) > 1 {
		return collection, d.owner[strings.ToLower(parts[len(parts)-1])]
	}
	q := u.Query().Get("q")
	const term = "'jobId'.eq('"
	if i := strings.Index(q, term); i >= 0 {
		rest := q[i+len(term):]
		if j := strings.IndexByte(rest, '\''); j >= 0 {
			return collection, strings.ToLower(rest[:j])
		}
	}
	return collection, ""
}

// watchGrants follows the budget's key in NATS until stop, and returns the
// most calls any revision of it held in its window (a minute and the
// margin, before its newest call): the budget's own count of what Prime
// may see in a minute, each call at the latest time Prime may have
// counted it.
func watchGrants(b *testing.B, nc *nats.Conn, window time.Duration) (most func() int, stop func()) {
	var mu sync.Mutex
	highest := 0
	js, err := nc.JetStream()
	if err != nil {
		b.Fatal(err)
	}
	var kv nats.KeyValue
	flowtest.Poll(b, time.Minute, 100*time.Millisecond, "the budget's bucket", func() bool {
		kv, err = js.KeyValue(events.BucketPrimeBudget)
		return err == nil
	})
	w, err := kv.Watch(events.PrimeBudgetKey)
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for e := range w.Updates() {
			if e == nil {
				continue
			}
			var st struct{ Grants []int64 }
			if json.Unmarshal(e.Value(), &st) != nil || len(st.Grants) == 0 {
				continue
			}
			newest, n := slices.Max(st.Grants), 0
			for _, g := range st.Grants {
				if g > newest-window.Milliseconds() {
					n++
				}
			}
			mu.Lock()
			highest = max(highest, n)
			mu.Unlock()
		}
	}()
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return highest
	}, func() { w.Stop() }
}

// sweepUntilDone asks child-mirror for the appointment sweep until one goes
// through the whole range, as optimo-create's schedule would, sooner: one
// that stops (its ensure-jobs get no turn while the events' calls come
// first) is asked again. It returns how many it asked for.
func sweepUntilDone(b *testing.B, nc *nats.Conn, from, to time.Time, stop <-chan struct{}) float64 {
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

// sweepJobs asks job-mirror for one jobs-by-date sweep, as JOBS_SWEEP_EVERY
// would, and reports whether it went through.
func sweepJobs(nc *nats.Conn) bool {
	req, _ := json.Marshal(events.JobsSweepRequest{Source: "bench"})
	msg, err := nc.Request(events.SubjectSweepJobs, req, 11*time.Minute)
	return err == nil && msg.Header.Get("Nats-Service-Error-Code") == ""
}

// arrivalLog records each of Prime's API calls as it reached the
// simulator.
type arrivalLog struct {
	mu    sync.Mutex
	calls []arrival
}

type arrival struct {
	at    time.Time
	url   *url.URL
	agent string
}

// purpose is the caller and purpose the call's User-Agent names
// ("child-mirror; sync-drain").
func (a arrival) purpose() string {
	_, p, _ := strings.Cut(a.agent, "(")
	return strings.TrimSuffix(p, ")")
}

func (a *arrivalLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/_sim/") {
			a.mu.Lock()
			a.calls = append(a.calls, arrival{at: time.Now(), url: r.URL, agent: r.UserAgent()})
			a.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

func (a *arrivalLog) all() []arrival {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.calls)
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
var benchServices = []string{"ingest", "resolver", "job-mirror", "child-mirror", "newjob-pipeline", "makesafe", "mail-intake", "primeflow"}

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

// buckets are prime_client_budget_wait_seconds's buckets for priority,
// summed over the processes: the count at or below each bound.
func (ss samples) buckets(priority string) map[float64]float64 {
	out := map[float64]float64{}
	for _, s := range ss {
		if s.name != "prime_client_budget_wait_seconds_bucket" || s.labels["priority"] != priority {
			continue
		}
		le, err := strconv.ParseFloat(s.labels["le"], 64)
		if err != nil {
			le = math.Inf(1)
		}
		out[le] += s.value
	}
	return out
}

// waits are the waits of priority's calls: p95 and p99 as Prometheus's
// histogram_quantile reads them, and the shares within 1s and 2s (bounds of
// the histogram's, so exact).
func (ss samples) waits(priority string) waits {
	buckets := ss.buckets(priority)
	les := slices.Sorted(maps.Keys(buckets))
	if len(les) == 0 || buckets[les[len(les)-1]] == 0 {
		return waits{}
	}
	count := buckets[les[len(les)-1]]
	quantile := func(q float64) float64 {
		rank, lower, below := q*count, 0.0, 0.0
		for _, le := range les {
			if buckets[le] >= rank {
				if math.IsInf(le, 1) {
					return lower
				}
				return lower + (le-lower)*(rank-below)/(buckets[le]-below)
			}
			lower, below = le, buckets[le]
		}
		return lower
	}
	return waits{p95: quantile(0.95), p99: quantile(0.99), count: count, within1s: buckets[1] / count, within2s: buckets[2] / count}
}
