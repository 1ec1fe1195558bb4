package primeflow_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/pkg/store"
	childmirror "github.com/ethosbuilding/primeflow/services/child-mirror"
	jobmirror "github.com/ethosbuilding/primeflow/services/job-mirror"
	"github.com/ethosbuilding/primeflow/services/makesafe"
	newjobpipeline "github.com/ethosbuilding/primeflow/services/newjob-pipeline"
	"github.com/ethosbuilding/primeflow/services/resolver"
	"github.com/matryer/is"
)

// outageLadder is the resolver's RESOLVER_BACKOFF in these tests: an event
// that kept failing would reach the cap of 5 attempts within about 1.5 s.
const outageLadder = "100ms,200ms,400ms,800ms"

// outageLasts is how long the outage lasts once the last event is in: six
// times as long as the ladder takes to cap an event.
const outageLasts = 10 * time.Second

// webhookPipeline runs the services of the webhook path — the resolver,
// job-mirror, child-mirror, the new-job pipeline and makesafe — each
// through its own Main, on e's NATS, database and Prime simulator, and
// returns each one's logs.
func webhookPipeline(t *testing.T) (*flowtest.Env, map[string]*flowtest.Buffer) {
	t.Helper()
	dir := t.TempDir()
	e := flowtest.New(t, flowtest.Options{StoreDir: dir})
	vars := e.MainVars(dir, map[string]string{
		"RESOLVER_BACKOFF":      outageLadder,
		"PRIME_RATE_PER_MINUTE": "100000", "PRIME_RATE_BURST": "100", "PRIME_MAX_CONCURRENT": "32",
		"SEND_DRY_RUN": "true", "AI_SUMMARY_NUDGE_URL": childmirror.NudgeOff, "JOBS_SWEEP_EVERY": "off",
		"MAKESAFE_SMS_TO": "+61400000000", "TRIAGE_INITIAL_CONTACT_MADE_STATUS_ID": "3c1f4e2a-7b6d-4c8e-9a0f-1d2e3f4a5b6c",
	})
	logs := map[string]*flowtest.Buffer{}
	for _, svc := range []struct {
		name string
		main func(context.Context, func(string) string, io.Writer) error
	}{
		{"job-mirror", jobmirror.Main}, {"child-mirror", childmirror.Main}, {"newjob-pipeline", newjobpipeline.Main},
		{"makesafe", makesafe.Main}, {"resolver", resolver.Main},
	} {
		l, stop := e.RunMain(svc.main, vars)
		logs[svc.name] = l
		t.Cleanup(func() {
			stop()
			if t.Failed() {
				t.Logf("%s logs:\n%s", svc.name, l.String())
			}
		})
		flowtest.Poll(t, 60*time.Second, 20*time.Millisecond, svc.name+" started", func() bool {
			return strings.Contains(l.String(), "started")
		})
	}
	return e, logs
}

// jobEvents fires a new job's webhooks — its status, an appointment, a
// Make Safe allocation, an estimate — and returns their log rows.
func jobEvents(e *flowtest.Env) []int64 {
	job := e.Sim.NewJob()
	return []int64{
		e.Fire(events.ActionChangeJobStatus, job.ID),
		e.Fire(events.ActionCreateAppointment, e.Sim.NewAppointment(job.ID).ID),
		e.Fire(events.ActionCreateAllocation, e.Sim.NewMakeSafeAllocation(job.ID).ID),
		e.Fire(events.ActionCreateEstimate, e.Sim.NewEstimate(job.ID).ID),
	}
}

// waitAllProcessed waits for every row, and returns them.
func waitAllProcessed(t *testing.T, e *flowtest.Env, ids []int64) []store.WebhookLogRow {
	t.Helper()
	rows := make([]store.WebhookLogRow, len(ids))
	flowtest.Poll(t, 90*time.Second, 50*time.Millisecond, "every event processed", func() bool {
		for i, id := range ids {
			r, err := e.Store.GetWebhookLog(context.Background(), id)
			if err != nil || !r.Processed() {
				return false
			}
			rows[i] = r
		}
		return true
	})
	return rows
}

// A Prime outage longer than the resolver's whole backoff ladder caps no
// row: the events that arrive meanwhile wait in their lanes, no attempt
// counted, and are all processed once Prime answers again — whether Prime
// answers 503 to every call or refuses every connection. Before, each
// failed call was an attempt and every such event was capped after the
// ladder, for a person to replay (docs/architecture.md).
func TestAPrimeOutageLongerThanTheBackoffLadderCapsNoRow(t *testing.T) {
	if testing.Short() {
		t.Skip("runs five services: not with -short")
	}
	for _, tc := range []struct {
		name     string
		down, up func(*flowtest.Env)
	}{
		{"503 to every call",
			func(e *flowtest.Env) {
				e.Sim.SetFaults(primesim.Faults{FailNext: 1 << 30, FailStatus: http.StatusServiceUnavailable})
			},
			func(e *flowtest.Env) { e.Sim.SetFaults(primesim.Faults{}) }},
		{"every connection refused", (*flowtest.Env).StopPrime, (*flowtest.Env).StartPrime},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			e, logs := webhookPipeline(t)
			before := jobEvents(e)
			waitAllProcessed(t, e, before) // Prime answers: the pipeline runs

			tc.down(e)
			var during []int64
			for range 3 {
				during = append(during, jobEvents(e)...)
			}
			flowtest.Poll(t, 60*time.Second, 20*time.Millisecond, "the resolver sees Prime down", func() bool {
				return strings.Contains(logs["resolver"].String(), "Prime is not answering")
			})
			time.Sleep(outageLasts) // the outage goes on, well past the ladder
			for _, id := range during {
				r := e.Row(id)
				is.True(!r.Processed())        // nothing got through
				is.Equal(r.ProcessAttempts, 0) // and no attempt was counted
			}
			tc.up(e)

			for i, r := range waitAllProcessed(t, e, during) {
				is.Equal(r.ProcessAttempts, 0) // every event processed with no attempt counted
				if t.Failed() {
					t.Logf("row %d: %+v", during[i], r)
				}
			}
			capped, err := e.Store.CountWebhookLog(context.Background(), store.LogFilter{State: store.Capped})
			is.NoErr(err)
			is.Equal(capped, 0) // and no row capped
			is.True(strings.Contains(logs["resolver"].String(), "Prime answers again"))
		})
	}
}

// A 5xx for one job's record while Prime answers the other calls is the
// record's failure: its row counts its attempts and is capped after 5, for
// a person to look at (§3, §9), while the events around it are processed
// with none.
func TestAFiveHundredForOneJobCapsItsRow(t *testing.T) {
	if testing.Short() {
		t.Skip("runs five services: not with -short")
	}
	is := is.New(t)
	e, _ := webhookPipeline(t)
	bad := e.Sim.NewJob()
	// The resolver looks the job's reference up in Prime (§4.1).
	e.Sim.SetFaults(primesim.Faults{Path: fmt.Sprintf("/jobs/%d", bad.Ref), FailNext: 1 << 30, FailStatus: http.StatusInternalServerError})
	id := e.Publish(events.ActionCreateEstimate, fmt.Sprintf(`{"eventAction":"create-estimate","jobId":%d}`, bad.Ref))

	stop := make(chan struct{})
	var others []int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Go(func() { // the rest of Prime's webhooks meanwhile, answered
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			job := e.Sim.NewJob()
			other := e.Fire(events.ActionCreateEstimate, e.Sim.NewEstimate(job.ID).ID)
			mu.Lock()
			others = append(others, other)
			mu.Unlock()
		}
	})
	var row store.WebhookLogRow
	flowtest.Poll(t, 90*time.Second, 50*time.Millisecond, "the job's row capped", func() bool {
		r, err := e.Store.GetWebhookLog(context.Background(), id)
		row = r
		return err == nil && r.Capped()
	})
	close(stop)
	wg.Wait()
	is.Equal(row.ProcessAttempts, store.MaxAttempts)    // capped after 5 attempts
	is.True(strings.Contains(row.ProcessStatus, "500")) // with Prime's answer as its error
	is.True(len(others) > 0)
	for _, r := range waitAllProcessed(t, e, others) {
		is.Equal(r.ProcessAttempts, 0) // the others processed, none counted an attempt
	}
}
