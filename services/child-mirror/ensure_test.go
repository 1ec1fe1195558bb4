package childmirror_test

import (
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
	"github.com/prometheus/client_golang/prometheus"
)

// TestChildEventsWaitForJobMirror: job-mirror not answering (a restart, a
// deploy) is not a failure of the child events that ask it to ensure their
// job (§4.3): they wait, with no attempt counted (§9), however long it is
// down — here well past the resolver's whole backoff, which caps an event
// that fails — and are processed once it answers. A capped create-allocation
// would never ask for make-safe detection (§10.5).
func TestChildEventsWaitForJobMirror(t *testing.T) {
	is := is.New(t)
	e := start(t, options{noJobMirror: true})
	// A job each, so that no event waits behind another in its job's lane.
	jobs := []string{e.Sim.NewJob().ID, e.Sim.NewJob().ID, e.Sim.NewJob().ID, e.Sim.NewJob().ID}
	ids := map[string]int64{
		events.ActionCreateAppointment:      e.Fire(events.ActionCreateAppointment, e.Sim.NewAppointment(jobs[0]).ID),
		events.ActionCreateAllocation:       e.Fire(events.ActionCreateAllocation, e.Sim.NewMakeSafeAllocation(jobs[1]).ID),
		events.ActionChangeCustomFormStatus: e.Fire(events.ActionChangeCustomFormStatus, e.Sim.NewSiteForm(jobs[2]).ID),
		events.ActionCreateEstimate:         e.Fire(events.ActionCreateEstimate, e.Sim.NewEstimate(jobs[3]).ID),
	}

	for action, id := range ids {
		// Each event asks job-mirror twice or more — or, failing attempts,
		// is capped at once by the test's 10ms backoff.
		row := e.WaitRow(id, "asked job-mirror twice", func(r store.WebhookLogRow) bool {
			return r.Capped() || flowtest.Counter(t, e.Deps.Metrics, "primeflow_childmirror_events_total",
				map[string]string{"action": action, "outcome": "unavailable"}) >= 2
		})
		is.Equal(row.ProcessAttempts, 0) // no attempt counted while job-mirror does not answer
		is.True(!row.Processed())        // and the event still queued
		is.Equal(row.ProcessStatus, "")  // with no error written
	}
	is.True(gauge(t, e.Deps.Metrics, "primeflow_childmirror_job_mirror_unanswered_seconds") > 0)  // the outage is seen
	is.True(strings.Contains(e.Logs.String(), "job-mirror is not answering ensure-job requests")) // and logged

	e.startJobMirror()
	for _, id := range ids {
		row := e.WaitProcessed(id)
		is.Equal(row.ProcessAttempts, 0) // processed without an attempt against it
	}
	is.Equal(len(e.makesafeDetects(jobs[1])), 1)                                                   // the allocation asked for make-safe detection
	is.Equal(gauge(t, e.Deps.Metrics, "primeflow_childmirror_job_mirror_unanswered_seconds"), 0.0) // job-mirror answers again
}

// gauge is the value of an unlabelled gauge in reg.
func gauge(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}
