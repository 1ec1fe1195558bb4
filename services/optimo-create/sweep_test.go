package optimocreate_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
	"github.com/ethosbuilding/primeflow/pkg/optimosim"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/pkg/store"
	childmirror "github.com/ethosbuilding/primeflow/services/child-mirror"
	jobmirror "github.com/ethosbuilding/primeflow/services/job-mirror"
	optimocreate "github.com/ethosbuilding/primeflow/services/optimo-create"
	"github.com/matryer/is"
	"github.com/prometheus/client_golang/prometheus"
)

// flow is the path the sweep takes from Prime to OptimoRoute, for real:
// NATS, SQLite and the Prime simulator over HTTP (pkg/flowtest), job-mirror
// and child-mirror (whose micro service answers the sweep), the OptimoRoute
// simulator over HTTP, and optimo-create on a clock the test sets.
type flow struct {
	*flowtest.Env
	optimo *optimosim.Sim
	client *optimoroute.Client
}

func startFlow(t *testing.T, childMirror bool) *flow {
	t.Helper()
	f := &flow{Env: flowtest.New(t, flowtest.Options{})}
	mirrorCfg := jobmirror.DefaultConfig()
	mirrorCfg.Workers, mirrorCfg.EnsureTimeout = 2, 10*time.Second
	mirrorCfg.JobsSweepEvery = jobmirror.SweepOff // no jobs-by-date sweep behind the test's back
	jm, err := jobmirror.New(mirrorCfg, f.Deps, f.Prime, jobmirror.LogInvites{Log: f.Deps.Log})
	if err != nil {
		t.Fatal(err)
	}
	f.Run("job-mirror", jm)
	if childMirror {
		childCfg := childmirror.DefaultConfig()
		childCfg.Workers, childCfg.EnsureTimeout, childCfg.ContactSyncTimeout, childCfg.AISummaryNudgeTimeout = 2, 10*time.Second, 10*time.Second, 5*time.Second
		cm, err := childmirror.New(childCfg, f.Deps, f.Prime)
		if err != nil {
			t.Fatal(err)
		}
		f.Run("child-mirror", cm)
		flowtest.Eventually(t, "child-mirror's sweep micro service", func() bool {
			_, err := f.NC.Request("$SRV.PING."+childmirror.ServiceName, nil, time.Second)
			return err == nil
		})
	}
	f.optimo = optimosim.New(optimosim.Options{PlanningDuration: time.Millisecond})
	hs := httptest.NewServer(f.optimo)
	t.Cleanup(hs.Close)
	f.client, err = optimoroute.New(f.optimo.ClientConfig(hs.URL))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *flow) creator(clk *optimosim.Clock) (*optimocreate.Creator, *prometheus.Registry) {
	f.T.Helper()
	reg := prometheus.NewRegistry()
	d := f.Deps
	d.Metrics = reg
	c, err := optimocreate.New(context.Background(), testConfig(), d, f.client, optimocreate.WithClock(clk.Now))
	if err != nil {
		f.T.Fatalf("new creator: %v", err)
	}
	return c, reg
}

// weekday is the next Monday to Friday after today in Melbourne, at hh:mm.
func weekday(hh, mm int) time.Time {
	n := time.Now().In(melbourne)
	d := time.Date(n.Year(), n.Month(), n.Day()+1, hh, mm, 0, 0, melbourne)
	for d.Weekday() == time.Saturday || d.Weekday() == time.Sunday {
		d = time.Date(d.Year(), d.Month(), d.Day()+1, hh, mm, 0, 0, melbourne)
	}
	return d
}

// missedAppointment is an appointment in Prime, the day after at, of a job
// the mirror has never seen: its webhook never came.
func (f *flow) missedAppointment(at time.Time) (primesim.Job, prime.Appointment) {
	job := f.Sim.NewJob()
	start := time.Date(at.Year(), at.Month(), at.Day()+1, 9, 0, 0, 0, melbourne)
	a := f.Sim.NewAppointment(job.ID, func(a *prime.Appointment) { a.StartDate = prime.Time{Time: start.UTC()} })
	return job, a
}

func (f *flow) sweeps(reg prometheus.Gatherer, result string) float64 {
	return flowtest.Counter(f.T, reg, "primeflow_optimocreate_sweeps_total", map[string]string{"result": result})
}

// §8.1: a run in M–F 15:00–16:59 sweeps Prime's appointments of the coming
// days into the mirror before the queues, so an appointment whose webhook
// never came becomes an order all the same. Runs between two of the band's
// quarter hours do not sweep again.
func TestRunInTheBandSweepsFirst(t *testing.T) {
	is := is.New(t)
	f := startFlow(t, true)
	band := weekday(15, 20)
	clk := optimosim.NewClock(band)
	job, missed := f.missedAppointment(band)
	c, reg := f.creator(clk)

	res, err := c.Create(context.Background())
	is.NoErr(err)
	is.True(res.Swept)                 // the run swept first
	is.Equal(res.Sweep.Error, "")      // and the sweep went through
	is.Equal(res.Sweep.Saved, 1)       // mirroring the missed appointment
	is.Equal(res.Sweep.JobsEnsured, 1) // with its job
	is.Equal(res.Sweep.ContactJobs, 1) // and the job's contacts
	is.Equal(res.Written, 1)           // then the queue made it an order
	is.Equal(f.sweeps(reg, "ok"), 1.0) // counted
	_, ok := f.optimo.Order(missed.ID)
	is.True(ok) // OptimoRoute holds the order
	row, found, err := f.Store.GetOrder(context.Background(), missed.ID)
	is.NoErr(err)
	is.True(found)                                                                   // recorded
	is.Equal(row.JobID, job.ID)                                                      // for its job
	is.Equal(row.OrderDate, missed.StartDate.In(melbourne).Format(store.DateLayout)) // on its day
	is.Equal(f.Sim.Stats().ByEndpoint["GET /appointments"], int64(1))                // one page of the list
	is.True(f.Sim.Stats().ByEndpoint["GET /appointments/{id}"] == 0)                 // no appointment fetched one by one

	clk.Advance(9 * time.Minute) // a run the webhook asked for, before the next quarter hour
	res, err = c.Create(context.Background())
	is.NoErr(err)
	is.True(!res.Swept)                                               // does not sweep again
	is.Equal(f.Sim.Stats().ByEndpoint["GET /appointments"], int64(1)) // nor ask Prime

	clk.Advance(time.Minute) // the next scheduled run, at band + 10 minutes
	res, err = c.Create(context.Background())
	is.NoErr(err)
	is.True(res.Swept)                 // sweeps
	is.Equal(res.Sweep.Unchanged, 1)   // finding the appointment mirrored
	is.Equal(res.Sweep.Saved, 0)       // and nothing to write
	is.Equal(res.Written, 0)           // nor an order
	is.Equal(f.sweeps(reg, "ok"), 2.0) // counted
}

// Outside 15:00–16:59 on weekdays, and at weekends, a run drains the queues
// without the sweep (§8.1's other path).
func TestRunOutsideTheBandDoesNotSweep(t *testing.T) {
	for name, at := range map[string]time.Time{
		"weekday morning": weekday(10, 0),
		"weekday evening": weekday(17, 0),
		"Saturday":        nextSaturday(15, 20),
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			f := startFlow(t, true)
			clk := optimosim.NewClock(at)
			_, missed := f.missedAppointment(at)
			c, reg := f.creator(clk)
			res, err := c.Create(context.Background())
			is.NoErr(err)
			is.True(!res.Swept)                                                                 // no sweep
			is.Equal(res.Written, 0)                                                            // so nothing the webhook never told us of
			is.Equal(f.Sim.Stats().Calls, int64(0))                                             // and no call to Prime
			is.Equal(flowtest.Counter(t, reg, "primeflow_optimocreate_sweeps_total", nil), 0.0) // none counted
			_, found, err := f.Store.GetAppointment(context.Background(), missed.ID)
			is.NoErr(err)
			is.True(!found) // the appointment is not mirrored
		})
	}
}

// nextSaturday is the next Saturday in Melbourne, at hh:mm.
func nextSaturday(hh, mm int) time.Time {
	n := time.Now().In(melbourne)
	d := time.Date(n.Year(), n.Month(), n.Day()+1, hh, mm, 0, 0, melbourne)
	for d.Weekday() != time.Saturday {
		d = time.Date(d.Year(), d.Month(), d.Day()+1, hh, mm, 0, 0, melbourne)
	}
	return d
}

// A sweep that fails, stops at Prime's rate limit or finds no child-mirror
// is logged and counted, and the run drains the queues all the same: nothing
// there depends on the sweep (sql/README.md, "The parent flow's sweep").
func TestFailedSweepStillDrainsTheQueues(t *testing.T) {
	tests := []struct {
		name        string
		childMirror bool
		faults      primesim.Faults
		result      string
	}{
		{"Prime fails the list", true, primesim.Faults{Path: "/appointments", FailNext: 1, FailStatus: 503}, "error"},
		{"Prime's rate limit", true, primesim.Faults{Path: "/appointments", RateLimitNext: 1, RetryAfter: time.Second}, "rate_limited"},
		{"no child-mirror answers", false, primesim.Faults{}, "error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			f := startFlow(t, tt.childMirror)
			clk := optimosim.NewClock(weekday(16, 10))
			f.Sim.SetFaults(tt.faults)
			// An appointment whose webhook did come: mirrored, queued.
			job := store.Job{JobID: jobID, JobNumber: "J012345", AddressLine1: "12 Lygon St", Suburb: "Carlton", State: "VIC", Postcode: "3053", Version: 1}
			_, err := f.Store.UpsertJob(context.Background(), job)
			is.NoErr(err)
			start := time.Date(clk.Now().Year(), clk.Now().Month(), clk.Now().Day()+1, 9, 0, 0, 0, melbourne).UTC()
			_, err = f.Store.SaveAppointment(context.Background(), store.Appointment{AppointmentID: apptOne, JobID: jobID,
				StartDate: start, EndDate: start.Add(time.Hour), Status: "Scheduled", Version: 1})
			is.NoErr(err)
			c, reg := f.creator(clk)

			res, err := c.Create(context.Background())
			is.NoErr(err)                           // the run itself succeeds
			is.True(res.Swept)                      // it tried to sweep
			is.True(res.Sweep.Error != "")          // and says why the sweep failed
			is.Equal(f.sweeps(reg, tt.result), 1.0) // counted by its result
			is.Equal(res.Written, 1)                // the queue drained all the same
			_, ok := f.optimo.Order(apptOne)
			is.True(ok)                                                                                                     // the order is in OptimoRoute
			is.Equal(flowtest.Counter(t, reg, "primeflow_optimocreate_runs_total", map[string]string{"result": "ok"}), 1.0) // an ok run
		})
	}
}
