package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"

	_ "time/tzdata" // Melbourne's rules travel with the harness
)

// accepted is a webhook ingest answered 2xx: the log row it named.
type accepted struct {
	id     int64
	action string
	body   string
}

// primeSender sends webhooks as Prime does: any answer but a 2xx, or none,
// and it sends the same body again, with a growing pause, until one is
// accepted (the spec's §2: "Prime retries any non-2xx response").
type primeSender struct {
	sim *primesim.Sim
	url string
	key string
	hc  *http.Client

	mu       sync.Mutex
	accepted []accepted
	posts    int
}

func newPrime(ext *externals, url, key string) *primeSender {
	return &primeSender{sim: ext.prime, url: url, key: key, hc: &http.Client{Timeout: 10 * time.Second}}
}

// send sends Prime's webhook for action about the record id until ingest
// accepts it or ctx ends.
func (p *primeSender) send(ctx context.Context, action, id string) error {
	ev, err := p.sim.Webhook(action, id)
	if err != nil {
		return err
	}
	body, err := ev.Body()
	if err != nil {
		return err
	}
	pause := 250 * time.Millisecond
	for {
		row, err := p.post(ctx, body)
		if err == nil {
			p.mu.Lock()
			p.accepted = append(p.accepted, accepted{id: row, action: action, body: string(body)})
			p.mu.Unlock()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("webhook %s %s never accepted: %w (last: %v)", action, id, ctx.Err(), err)
		case <-time.After(pause):
		}
		pause = min(2*pause, 4*time.Second)
	}
}

// post is one post; it returns the row id ingest answered with.
func (p *primeSender) post(ctx context.Context, body []byte) (int64, error) {
	p.mu.Lock()
	p.posts++
	p.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("API-Key", p.key)
	resp, err := p.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return 0, err
	}
	if resp.StatusCode/100 != 2 {
		return 0, fmt.Errorf("ingest answered %d", resp.StatusCode)
	}
	var a struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal(answer, &a); err != nil || a.ID == 0 {
		return 0, fmt.Errorf("ingest's answer %q names no row: %v", answer, err)
	}
	return a.ID, nil
}

func (p *primeSender) acceptedRows() []accepted {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]accepted(nil), p.accepted...)
}

func (p *primeSender) acceptedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.accepted)
}

func (p *primeSender) postCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.posts
}

// job is one Prime job of the workload, and what the pipeline must make of
// it.
type job struct {
	// start is when the job's first webhook goes, from the start of the
	// fault phase; gaps are the pauses before each later step.
	start time.Duration
	gaps  []time.Duration
	// afterHours jobs are created outside business hours and get a Make
	// Safe allocation: one phone call and one SMS each.
	afterHours bool
	// days is how many days ahead the appointment is; reschedule moves it a
	// day later.
	days       int
	hour       int
	reschedule bool

	mu          sync.Mutex
	id          string
	appointment string
	date        string // the appointment's date as it stands, in Melbourne
	done        bool
	err         error
}

// workload is the jobs and their webhooks.
type workload struct {
	pr   *primeSender
	jobs []*job
	zone *time.Location
}

// steps per job: status, appointment, allocation, site form, estimate,
// (reschedule), status.
const steps = 7

func newWorkload(pr *primeSender, rng *rand.Rand, jobs int) *workload {
	zone, err := time.LoadLocation("Australia/Melbourne")
	if err != nil {
		panic(err) // time/tzdata is embedded
	}
	w := &workload{pr: pr, zone: zone}
	for i := range jobs {
		j := &job{afterHours: i%3 == 0, days: 1 + i%3, hour: 8 + rng.IntN(9), reschedule: rng.IntN(3) == 0}
		for range steps - 1 {
			j.gaps = append(j.gaps, time.Duration(300+rng.IntN(2200))*time.Millisecond)
		}
		w.jobs = append(w.jobs, j)
	}
	return w
}

// run sends every job's webhooks, the jobs starting spread over window.
func (w *workload) run(ctx context.Context, window time.Duration, logf func(string, ...any)) {
	var wg sync.WaitGroup
	for i, j := range w.jobs {
		j.start = window * time.Duration(i) / time.Duration(max(1, len(w.jobs)))
		wg.Go(func() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(j.start):
			}
			err := w.script(ctx, j)
			j.mu.Lock()
			j.done, j.err = err == nil, err
			j.mu.Unlock()
			if err != nil {
				logf("job %s: %v", j.id, err)
			}
		})
	}
	wg.Wait()
}

// script is a job's life as Prime reports it.
func (w *workload) script(ctx context.Context, j *job) error {
	sim := w.pr.sim
	now := time.Now()
	created := w.businessHours(now)
	if j.afterHours {
		created = w.afterHours(now)
	}
	pj := sim.NewJob(func(pj *prime.Job) { pj.CreatedAt, pj.UpdatedAt = prime.Time{Time: created}, prime.Time{Time: created} })
	sim.NewContact(pj.ID) // the primary contact a triage invite goes to
	j.mu.Lock()
	j.id = pj.ID
	j.mu.Unlock()
	gap := 0
	pause := func() error {
		d := j.gaps[min(gap, len(j.gaps)-1)]
		gap++
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
	if err := w.pr.send(ctx, events.ActionChangeJobStatus, pj.ID); err != nil {
		return err
	}
	if err := pause(); err != nil {
		return err
	}
	day := time.Now().In(w.zone).AddDate(0, 0, j.days)
	start := time.Date(day.Year(), day.Month(), day.Day(), j.hour, 0, 0, 0, w.zone)
	appt := sim.NewAppointment(pj.ID, func(a *prime.Appointment) {
		a.StartDate, a.EndDate = prime.Time{Time: start.UTC()}, prime.Time{Time: start.Add(2 * time.Hour).UTC()}
	})
	j.mu.Lock()
	j.appointment, j.date = appt.ID, start.Format(time.DateOnly)
	j.mu.Unlock()
	if err := w.pr.send(ctx, events.ActionCreateAppointment, appt.ID); err != nil {
		return err
	}
	if err := pause(); err != nil {
		return err
	}
	alloc := sim.NewAllocation(pj.ID, "Assessment Report")
	if j.afterHours {
		alloc = sim.NewMakeSafeAllocation(pj.ID)
	}
	if err := w.pr.send(ctx, events.ActionCreateAllocation, alloc.ID); err != nil {
		return err
	}
	if err := pause(); err != nil {
		return err
	}
	if err := w.pr.send(ctx, events.ActionChangeCustomFormStatus, sim.NewSiteForm(pj.ID).ID); err != nil {
		return err
	}
	if err := pause(); err != nil {
		return err
	}
	if err := w.pr.send(ctx, events.ActionCreateEstimate, sim.NewEstimate(pj.ID).ID); err != nil {
		return err
	}
	if j.reschedule {
		if err := pause(); err != nil {
			return err
		}
		moved := start.AddDate(0, 0, 1)
		appt.StartDate, appt.EndDate = prime.Time{Time: moved.UTC()}, prime.Time{Time: moved.Add(2 * time.Hour).UTC()}
		appt.Version++
		appt.UpdatedAt = prime.Time{Time: time.Now().UTC().Truncate(time.Second)}
		if err := sim.PutAppointment(appt); err != nil {
			return err
		}
		j.mu.Lock()
		j.date = moved.Format(time.DateOnly)
		j.mu.Unlock()
		if err := w.pr.send(ctx, events.ActionCreateAppointment, appt.ID); err != nil {
			return err
		}
	}
	if err := pause(); err != nil {
		return err
	}
	changed, _ := sim.Job(pj.ID)
	changed.StatusID = triageStatus
	changed.Version++
	changed.UpdatedAt = prime.Time{Time: time.Now().UTC().Truncate(time.Second)}
	if err := sim.PutJob(changed); err != nil {
		return err
	}
	return w.pr.send(ctx, events.ActionChangeJobStatus, pj.ID)
}

// afterHours is the last 22:30 in Melbourne before now.
func (w *workload) afterHours(now time.Time) time.Time {
	l := now.In(w.zone)
	t := time.Date(l.Year(), l.Month(), l.Day(), 22, 30, 0, 0, w.zone)
	if t.After(now) {
		t = t.AddDate(0, 0, -1)
	}
	return t.UTC()
}

// businessHours is the last weekday 11:00 in Melbourne before now.
func (w *workload) businessHours(now time.Time) time.Time {
	l := now.In(w.zone)
	t := time.Date(l.Year(), l.Month(), l.Day(), 11, 0, 0, 0, w.zone)
	for t.After(now) || t.Weekday() == time.Saturday || t.Weekday() == time.Sunday {
		t = t.AddDate(0, 0, -1)
	}
	return t.UTC()
}

// snapshot is the jobs as they stand, for the checks.
func (w *workload) snapshot() []jobState {
	out := make([]jobState, 0, len(w.jobs))
	for _, j := range w.jobs {
		j.mu.Lock()
		out = append(out, jobState{id: j.id, afterHours: j.afterHours, appointment: j.appointment, date: j.date, done: j.done, err: j.err})
		j.mu.Unlock()
	}
	return out
}

type jobState struct {
	id, appointment, date string
	afterHours, done      bool
	err                   error
}
