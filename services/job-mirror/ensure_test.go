package jobmirror_test

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/ensurejob"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/pkg/store"
	jobmirror "github.com/ethosbuilding/primeflow/services/job-mirror"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"
)

func TestEnsureJob(t *testing.T) {
	ctx := context.Background()
	e := start(t, options{})
	known := e.Sim.NewJob()
	e.WaitProcessed(e.Fire("change-job-status", known.ID))

	t.Run("present: answered from the mirror", func(t *testing.T) {
		is := is.New(t)
		before := e.Sim.Stats().Calls
		reply, err := ensurejob.Ensure(ctx, e.NC, events.SubjectEnsureJobEmail, events.EnsureJobRequest{JobID: strings.ToUpper(known.ID)})
		is.NoErr(err)
		is.Equal(reply.JobID, known.ID)                // the job, lower-case
		is.True(reply.WasMirrored)                     // it was there
		is.True(!reply.FirstSight)                     // so no first sight
		is.Equal(e.Sim.Stats().Calls-before, int64(0)) // and no Prime call
	})

	t.Run("present by numeric reference", func(t *testing.T) {
		is := is.New(t)
		before := e.Sim.Stats().Calls
		reply, err := ensurejob.Ensure(ctx, e.NC, events.SubjectEnsureJobEmail, events.EnsureJobRequest{NumericRef: known.Ref})
		is.NoErr(err)
		is.Equal(reply.JobID, known.ID) // found through ethPrimeJobReference
		is.True(reply.WasMirrored)
		is.Equal(e.Sim.Stats().Calls-before, int64(0)) // no Prime call
	})

	t.Run("missing: fetched, mirrored, first sight", func(t *testing.T) {
		is := is.New(t)
		j := e.Sim.NewJob()
		sights := e.firstSights(1) // the known job's, counted once its hand-off is published, after its row is stamped
		logID := e.childEvent(events.ActionCreateAppointment)
		reply, err := ensurejob.Ensure(ctx, e.NC, events.SubjectEnsureJobEvent, events.EnsureJobRequest{JobID: j.ID, NumericRef: j.Ref, LogID: logID})
		is.NoErr(err)
		is.True(!reply.WasMirrored)                  // it was missing
		is.True(reply.FirstSight)                    // this request saw it first
		is.Equal(e.job(j.ID).JobNumber, j.JobNumber) // now it is mirrored
		fs, found := e.firstSeen(j.ID)
		is.True(found)
		is.Equal(fs.LogID, logID)                   // on behalf of the caller's event
		is.Equal(fs.Via, store.ViaWebhook)          // a webhook's
		is.Equal(e.firstSights(sights+1), sights+1) // handed to the new-job pipeline
		mapped, _, err := e.Store.GetJobIDByReference(ctx, j.Ref)
		is.NoErr(err)
		is.Equal(mapped, j.ID) // the mapping saved too
		flowtest.Eventually(t, "one hand-off on prime.job.firstseen", func() bool { return e.handoffs(j.ID) == 1 })

		again, err := ensurejob.Ensure(ctx, e.NC, events.SubjectEnsureJobDrain, events.EnsureJobRequest{JobID: j.ID})
		is.NoErr(err)
		is.True(again.WasMirrored) // a second ask finds it
		is.True(!again.FirstSight)
	})

	t.Run("missing by numeric reference only", func(t *testing.T) {
		is := is.New(t)
		j := e.Sim.NewJob()
		reply, err := ensurejob.Ensure(ctx, e.NC, events.SubjectEnsureJobEmail, events.EnsureJobRequest{NumericRef: j.Ref})
		is.NoErr(err)
		is.Equal(reply.JobID, j.ID) // Prime's /jobs/{reference} named it
		is.True(reply.FirstSight)
		mapped, _, err := e.Store.GetJobIDByReference(ctx, j.Ref)
		is.NoErr(err)
		is.Equal(mapped, j.ID)
	})

	t.Run("not found", func(t *testing.T) {
		is := is.New(t)
		reply, err := ensurejob.Ensure(ctx, e.NC, events.SubjectEnsureJobDrain, events.EnsureJobRequest{JobID: "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"})
		is.True(errors.Is(err, prime.ErrNotFound)) // Prime has no such job
		is.True(reply.NotFound)
	})

	t.Run("rate limited", func(t *testing.T) {
		is := is.New(t)
		j := e.Sim.NewJob()
		e.Sim.SetFaults(primesim.Faults{Path: "/jobs", RateLimitNext: 1, RetryAfter: 2 * time.Second})
		reply, err := ensurejob.Ensure(ctx, e.NC, events.SubjectEnsureJobDrain, events.EnsureJobRequest{JobID: j.ID})
		var limited *prime.RateLimitedError
		is.True(errors.As(err, &limited))            // a rate limit, not a failure: the caller waits, no attempt
		is.True(limited.RetryAfter() >= time.Second) // for as long as Prime asked
		is.True(reply.RetryAfterMS >= 1000)
		is.True(errors.Is(err, prime.ErrRateLimited))
		_, found, ferr := e.Store.GetJob(ctx, j.ID)
		is.NoErr(ferr)
		is.True(!found) // nothing was written

		time.Sleep(time.Duration(reply.RetryAfterMS) * time.Millisecond)
		reply, err = ensurejob.Ensure(ctx, e.NC, events.SubjectEnsureJobDrain, events.EnsureJobRequest{JobID: j.ID})
		is.NoErr(err)             // after the wait it goes through
		is.True(reply.FirstSight) // and the job is mirrored
	})

	t.Run("requests job-mirror does not take", func(t *testing.T) {
		for _, tc := range []struct{ subject, body, says string }{
			{events.SubjectEnsureJobEmail, `{}`, "needs jobId or numericRef"},
			{events.SubjectEnsureJobEmail, `{"jobId":"../contacts"}`, "not a GUID"},
			{events.SubjectEnsureJobEmail, `{"numericRef":-4}`, "not a reference"},
			{events.SubjectEnsureJobEmail, `not json`, "not an ensure-job request"},
			{events.SubjectEnsureJobSweep, `{"jobId":"` + known.ID + `","logId":3}`, "takes no logId"},
			{events.SubjectEnsureJobDrain, `{"jobId":"` + known.ID + `","priority":"makesafe"}`, `unknown field "priority"`},
			{events.SubjectEnsureJobEvent, `{"jobId":"` + known.ID + `"}`, "needs its logId"},
		} {
			t.Run(tc.subject+" "+tc.body, func(t *testing.T) {
				is := is.New(t)
				msg, err := e.NC.Request(tc.subject, []byte(tc.body), 5*time.Second)
				is.NoErr(err)
				is.Equal(msg.Header.Get(micro.ErrorCodeHeader), "400")                // refused
				is.True(strings.Contains(msg.Header.Get(micro.ErrorHeader), tc.says)) // saying why
			})
		}
		_, err := ensurejob.Ensure(ctx, e.NC, events.SubjectEnsureJobEmail, events.EnsureJobRequest{})
		is.New(t).True(err != nil) // the client refuses a request without a job before sending
	})

	t.Run("a child event's log row", func(t *testing.T) {
		j := e.Sim.NewJob()
		processed := e.childEvent(events.ActionCreateAppointment)
		is.New(t).NoErr(e.Store.SetWebhookLogProcessed(ctx, processed, "", "Processed"))
		for name, logID := range map[string]int64{
			"no such row":                     1 << 40,
			"a row of job-mirror's own event": e.childEvent(events.ActionChangeJobStatus),
			"a processed row":                 processed,
		} {
			t.Run(name, func(t *testing.T) {
				is := is.New(t)
				_, err := ensurejob.Ensure(ctx, e.NC, events.SubjectEnsureJobEvent, events.EnsureJobRequest{JobID: j.ID, LogID: logID})
				is.True(err != nil && strings.Contains(err.Error(), "refused")) // refused
				_, found := e.firstSeen(j.ID)
				is.True(!found) // and nothing mirrored
			})
		}
	})

	t.Run("a create-allocation's job: make-safe work", func(t *testing.T) {
		is := is.New(t)
		reg := prometheus.NewRegistry()
		is.NoErr(reg.Register(e.Prime))
		calls := func() float64 {
			return flowtest.Counter(t, reg, "prime_client_calls_total", map[string]string{"caller": "job-mirror", "priority": "makesafe"})
		}
		before := calls()
		j := e.Sim.NewJob()
		logID := e.childEvent(events.ActionCreateAllocation)
		reply, err := ensurejob.Ensure(ctx, e.NC, events.SubjectEnsureJobEvent, events.EnsureJobRequest{JobID: j.ID, LogID: logID})
		is.NoErr(err)
		is.True(reply.FirstSight)
		is.Equal(calls()-before, 1.0) // the class its log row's action says (§5.5)
		fs, _ := e.firstSeen(j.ID)
		is.Equal(fs.LogID, logID)
	})

	t.Run("the micro service describes itself", func(t *testing.T) {
		is := is.New(t)
		msg, err := e.NC.Request("$SRV.INFO."+jobmirror.ServiceName, nil, 5*time.Second)
		is.NoErr(err)
		var info micro.Info
		is.NoErr(json.Unmarshal(msg.Data, &info))
		is.Equal(info.Name, jobmirror.ServiceName) // `nats micro ls` shows job-mirror
		subjects := map[string]string{}
		for _, ep := range info.Endpoints {
			subjects[ep.Name] = ep.Subject
		}
		is.Equal(subjects, map[string]string{ // with an ensure endpoint a path
			jobmirror.EndpointEnsureEvent: events.SubjectEnsureJobEvent, jobmirror.EndpointEnsureSweep: events.SubjectEnsureJobSweep,
			jobmirror.EndpointEnsureDrain: events.SubjectEnsureJobDrain, jobmirror.EndpointEnsureEmail: events.SubjectEnsureJobEmail,
			jobmirror.EndpointSweepJobs: events.SubjectSweepJobs}) // and the jobs sweep
		msg, err = e.NC.Request("$SRV.STATS."+jobmirror.ServiceName, nil, 5*time.Second)
		is.NoErr(err)
		var stats micro.Stats
		is.NoErr(json.Unmarshal(msg.Data, &stats))
		requests, failures := 0, 0
		for _, ep := range stats.Endpoints {
			if ep.Name != jobmirror.EndpointSweepJobs {
				requests, failures = requests+ep.NumRequests, failures+ep.NumErrors
			}
		}
		is.True(requests >= 15) // every request above counted
		is.True(failures >= 10) // the failures too
	})
}

// TestNatsCLISeesTheService proves `nats micro ls` and `nats micro stats
// job-mirror` show the service. The Makefile builds the CLI and sets NATS_CLI.
func TestNatsCLISeesTheService(t *testing.T) {
	cli := natstest.CLI(t)
	is := is.New(t)
	e := start(t, options{})
	out, err := exec.Command(cli, "--server", e.NATS.ClientURL(), "micro", "ls").CombinedOutput()
	is.NoErr(err)
	is.True(strings.Contains(string(out), jobmirror.ServiceName)) // listed
	out, err = exec.Command(cli, "--server", e.NATS.ClientURL(), "micro", "stats", jobmirror.ServiceName).CombinedOutput()
	is.NoErr(err)
	is.True(strings.Contains(string(out), jobmirror.EndpointEnsureEmail)) // with its endpoints
}

func TestEnsureAndAnEventOfTheSameNewJobHandOffOnce(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	ctx := context.Background()
	for range 5 {
		j := e.Sim.NewJob()
		done := make(chan error, 1)
		go func() {
			_, err := ensurejob.Ensure(ctx, e.NC, events.SubjectEnsureJobDrain, events.EnsureJobRequest{JobID: j.ID})
			done <- err
		}()
		e.WaitProcessed(e.Fire("change-job-status", j.ID))
		is.NoErr(<-done)
		_, found := e.firstSeen(j.ID)
		is.True(found) // first sight recorded by one of them
	}
	is.Equal(e.firstSights(5.0), 5.0) // once per job, however they raced
}
