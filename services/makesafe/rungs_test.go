package makesafe_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/services/makesafe"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A ladder queued the way the email flow's call queues it (§7: @JobId,
// @QueueMakeAllocationChecks = 1, nothing else) has no JetStream schedule:
// the sweep fires its rungs once they are overdue.
func TestRungsQueuedOutsidePrimeflowFire(t *testing.T) {
	is := is.New(t)
	r := newRig(t, nil, func(c *makesafe.Config) { c.RungSweep = 200 * time.Millisecond })
	j := r.job(saturdayNight)
	job := strings.ToLower(j.ID)
	out, err := r.Store.UpsertMakeSafePhoneCallFromJob(context.Background(), store.MakesafeDetection{
		JobID: job, QueueChecks: true, ChecksFrom: time.Now().Add(-time.Hour)}) // started an hour ago: every rung is due
	is.NoErr(err)
	is.Equal(len(out.Checks), len(store.DefaultMakesafeLadder)) // the default ladder
	is.Equal(r.schedules(job), 0)                               // and no schedule for it

	r.Run("makesafe", r.ms)
	flowtest.Eventually(t, "every rung runs", func() bool {
		for _, c := range r.checks(job) {
			if c.FiredUTC.IsZero() {
				return false
			}
		}
		return true
	})
	is.Equal(flowtest.Counter(t, r.Deps.Metrics, "primeflow_makesafe_rungs_overdue_total", nil), float64(len(store.DefaultMakesafeLadder))) // each fired by the sweep, once
	for _, c := range r.checks(job) {
		is.True(strings.HasPrefix(c.Outcome, makesafe.RungSynced)) // and did what a scheduled rung does
	}
}

func TestRungSweepConfig(t *testing.T) {
	is := is.New(t)
	env := flowtest.New(t, flowtest.Options{})
	cfg := testConfig("http://127.0.0.1:1")
	cfg.RungSweep = -time.Second
	_, err := makesafe.New(cfg, env.Deps, env.Prime, nil)
	is.True(err != nil && strings.Contains(err.Error(), "MAKESAFE_RUNG_SWEEP")) // refused, naming the variable
}

// ladderOutsidePrimeflow runs makesafe, without its sweep, for a job whose
// ladder d queued in the store alone: no schedule fires its rungs.
func ladderOutsidePrimeflow(t *testing.T, d store.MakesafeDetection) (*rig, prime.Job, string) {
	t.Helper()
	r := newRig(t, nil, func(c *makesafe.Config) { c.RungSweep = 0 })
	j := r.job(saturdayNight)
	d.JobID, d.QueueChecks = strings.ToLower(j.ID), true
	if _, err := r.Store.UpsertMakeSafePhoneCallFromJob(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	r.Run("makesafe", r.ms)
	return r, j, d.JobID
}

// scheduleEvery stores a schedule on MAKESAFE, as only makesafe may, that
// delivers body to makesafe.recheck every second until the test ends.
func (r *rig) scheduleEvery(subject string, body []byte) {
	r.T.Helper()
	m := nats.NewMsg(subject)
	m.Data = body
	m.Header.Set(jetstream.ScheduleHeader, "@every 1s")
	m.Header.Set(jetstream.ScheduleTargetHeader, events.SubjectMakesafeRecheck)
	if _, err := r.JS.PublishMsg(context.Background(), m); err != nil {
		r.T.Fatal(err)
	}
}

func (r *rig) rungsNotWorked(outcome string) float64 {
	return flowtest.Counter(r.T, r.Deps.Metrics, "primeflow_makesafe_rungs_fired_total", map[string]string{"outcome": outcome})
}

// A re-check that repeats for ever (issue 27: one publish with
// `Nats-Schedule: @every 1s` aimed at makesafe.recheck had the server ask
// for one every second, each a make-safe-priority Prime call, without end)
// works its rung once: the rung's row says it fired, and the repeats ask
// Prime nothing. A re-check of a rung never queued is dropped unworked.
func TestARungRepeatedForEverIsWorkedOnce(t *testing.T) {
	is := is.New(t)
	r, j, job := ladderOutsidePrimeflow(t, store.MakesafeDetection{ChecksFrom: time.Now().Add(-time.Hour)}) // every rung due

	body, _ := json.Marshal(events.MakesafeRecheck{JobID: j.ID, Rung: 1})
	r.scheduleEvery("makesafe.schedule.evil.1", body)
	never, _ := json.Marshal(events.MakesafeRecheck{JobID: j.ID, Rung: 9})
	r.scheduleEvery("makesafe.schedule.evil.9", never)
	flowtest.Eventually(t, "eight re-checks taken", func() bool {
		info, err := events.ConsumerMakesafe.Info(context.Background(), r.JS)
		return err == nil && info.AckFloor.Consumer >= 8
	})
	is.Equal(r.listCalls(), int64(1))              // Prime asked once, for the rung's one run
	is.True(r.rungsNotWorked("fired_before") >= 3) // the repeats did nothing
	cs := r.checks(job)
	is.True(strings.HasPrefix(cs[0].Outcome, makesafe.RungSynced)) // which the row records
	for _, c := range cs[1:] {
		is.True(c.FiredUTC.IsZero()) // and no other rung ran
	}
	is.True(r.rungsNotWorked("not_queued") >= 1) // a rung never queued is dropped
}

// A re-check that comes before its rung is due is worked at the rung's
// time, not when it came.
func TestARecheckBeforeItsRungIsDueWaitsForIt(t *testing.T) {
	is := is.New(t)
	r, j, job := ladderOutsidePrimeflow(t, store.MakesafeDetection{ChecksFrom: events.ScheduleAt(time.Now()), Checks: []time.Duration{3 * time.Second}})
	is.Equal(len(r.checks(job)), 1) // one rung, due in 3 s, with no schedule

	body, _ := json.Marshal(events.MakesafeRecheck{JobID: j.ID, Rung: 1})
	_, err := r.JS.Publish(context.Background(), events.SubjectMakesafeRecheck, body)
	is.NoErr(err) // now, early
	flowtest.Eventually(t, "the rung worked", func() bool { return !r.checks(job)[0].FiredUTC.IsZero() })
	c := r.checks(job)[0]
	is.True(!c.FiredUTC.Before(c.DueUTC))                      // at its time, not before
	is.True(strings.HasPrefix(c.Outcome, makesafe.RungSynced)) // and as a rung runs
	is.Equal(r.listCalls(), int64(1))
}

// A re-check long before its rung is due does nothing meanwhile: it asks
// Prime nothing and leaves the rung to come.
func TestARecheckLongBeforeItsRungAsksNothing(t *testing.T) {
	is := is.New(t)
	r, j, job := ladderOutsidePrimeflow(t, store.MakesafeDetection{ChecksFrom: events.ScheduleAt(time.Now()), Checks: []time.Duration{time.Hour}})
	body, _ := json.Marshal(events.MakesafeRecheck{JobID: j.ID, Rung: 1})
	_, err := r.JS.Publish(context.Background(), events.SubjectMakesafeRecheck, body)
	is.NoErr(err)
	flowtest.Eventually(t, "the re-check handled", func() bool {
		handled := 0.0
		for _, result := range []string{"ack", "retry", "drop", "error"} {
			handled += flowtest.Counter(t, r.Deps.Metrics, "primeflow_consumer_messages_total", map[string]string{"consumer": makesafe.Durable, "result": result})
		}
		return handled >= 1
	})
	is.True(r.checks(job)[0].FiredUTC.IsZero()) // the rung waits for its time
	is.Equal(r.listCalls(), int64(0))           // and Prime was not asked
	is.Equal(r.rungsNotWorked("not_due"), 1.0)  // the re-check is put off
}
