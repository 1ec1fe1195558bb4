package makesafe_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/services/makesafe"
	"github.com/matryer/is"
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
