package jobmirror_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/ensurejob"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	jobmirror "github.com/ethosbuilding/primeflow/services/job-mirror"
	"github.com/matryer/is"
)

// TestMainSweepsItsOwnOutbox: job-mirror running as a process of its own,
// with no other service about, publishes a first-sight hand-off whose
// publish after the commit failed from its own outbox sweeper.
func TestMainSweepsItsOwnOutbox(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	dataDir := t.TempDir()
	e := &env{Env: flowtest.New(t, flowtest.Options{StoreDir: dataDir})} // the database Main opens
	logs, stop := e.RunMain(jobmirror.Main, e.MainVars(dataDir, map[string]string{"JOB_MIRROR_OUTBOX_SWEEP": "50ms", "JOBS_SWEEP_EVERY": "off",
		"TRIAGE_INITIAL_CONTACT_MADE_STATUS_ID": statusICM, "TRIAGE_INVITE_SEND_URL": "http://127.0.0.1:9/invites"}))
	flowtest.Eventually(t, "job-mirror consuming", func() bool { return e.Pulling(events.StreamResolved, jobmirror.Durable) })

	s, err := e.JS.Stream(ctx, events.StreamJob)
	is.NoErr(err)
	cfg := s.CachedInfo().Config
	is.NoErr(e.JS.DeleteStream(ctx, events.StreamJob)) // nothing takes prime.job.firstseen
	j := e.Sim.NewJob()
	reply, err := ensurejob.Ensure(ctx, e.NC, events.SubjectEnsureJobDrain, events.EnsureJobRequest{JobID: j.ID})
	is.NoErr(err)
	is.True(reply.FirstSight) // job-mirror saw the job first
	flowtest.Eventually(t, "the publish after the commit failed", func() bool {
		return strings.Contains(logs.String(), "first-sight hand-off not published yet")
	})
	pending, err := e.Store.GetOutboxUnpublished(ctx, 0, time.Now().Add(time.Hour), 10)
	is.NoErr(err)
	is.Equal(len(pending), 1)                                // the hand-off waits in the outbox
	is.Equal(pending[0].Subject, events.SubjectJobFirstSeen) // it is the first sight

	_, err = e.JS.CreateStream(ctx, cfg) // NATS takes it again
	is.NoErr(err)
	flowtest.Eventually(t, "the hand-off published by job-mirror's sweeper", func() bool {
		stream, err := e.JS.Stream(ctx, events.StreamJob)
		return err == nil && stream.CachedInfo().State.Msgs > 0
	})
	is.Equal(e.handoffs(j.ID), 1) // the job's first sight, once
	flowtest.Eventually(t, "and recorded", func() bool {
		pending, err := e.Store.GetOutboxUnpublished(ctx, 0, time.Now().Add(time.Hour), 10)
		return err == nil && len(pending) == 0
	})
	stop() // Main stops cleanly when its context ends
}

// TestMainNeedsATriageStatus: job-mirror on a real Prime refuses to start
// without the status whose arrival queues a triage invite, or with one that
// cannot be a status (the all-zero placeholder), rather than queue no invite
// at all, silently (§5.1 step 6).
func TestMainNeedsATriageStatus(t *testing.T) {
	e := flowtest.New(t, flowtest.Options{})
	for _, tc := range []struct{ value, says string }{
		{"", "is required"},
		{"00000000-0000-0000-0000-000000000000", `"00000000-0000-0000-0000-000000000000"`},
		{"change-me", `"change-me"`},
	} {
		t.Run(tc.value, func(t *testing.T) {
			is := is.New(t)
			vars := e.MainVars(t.TempDir(), map[string]string{"TRIAGE_INITIAL_CONTACT_MADE_STATUS_ID": tc.value})
			err := jobmirror.Main(context.Background(), func(k string) string { return vars[k] }, &flowtest.Buffer{})
			is.True(err != nil)                                                             // refused
			is.True(strings.Contains(err.Error(), "TRIAGE_INITIAL_CONTACT_MADE_STATUS_ID")) // naming the setting
			is.True(strings.Contains(err.Error(), tc.says))
		})
	}
}

// JOBS_SWEEP_EVERY: a duration, or off; anything else is refused, naming it.
func TestJobsSweepEvery(t *testing.T) {
	for v, want := range map[string]jobmirror.Every{"": jobmirror.Every(15 * time.Minute), "off": jobmirror.SweepOff, "0": jobmirror.SweepOff, "1h": jobmirror.Every(time.Hour)} {
		is := is.New(t)
		var c jobmirror.Config
		is.NoErr(config.Parse(func(k string) string { return map[string]string{"JOBS_SWEEP_EVERY": v}[k] }, &c))
		is.Equal(c.JobsSweepEvery, want) // read as meant
	}
	for _, v := range []string{"hourly", "-5m"} {
		is := is.New(t)
		var c jobmirror.Config
		err := config.Parse(func(k string) string { return map[string]string{"JOBS_SWEEP_EVERY": v}[k] }, &c)
		is.True(err != nil && strings.Contains(err.Error(), "JOBS_SWEEP_EVERY")) // refused, naming the variable
	}
}

// TestMainNeedsAnInviteURL: job-mirror on a real Prime refuses to start
// without TRIAGE_INVITE_SEND_URL, where the invites it queues would never go
// out (§3.1), unless a shadow run records them (SEND_DRY_RUN).
func TestMainNeedsAnInviteURL(t *testing.T) {
	e := flowtest.New(t, flowtest.Options{})
	is := is.New(t)
	vars := e.MainVars(t.TempDir(), map[string]string{"TRIAGE_INITIAL_CONTACT_MADE_STATUS_ID": statusICM})
	err := jobmirror.Main(context.Background(), func(k string) string { return vars[k] }, &flowtest.Buffer{})
	is.True(errors.Is(err, jobmirror.ErrNoInviteURL)) // refused, naming TRIAGE_INVITE_SEND_URL

	vars["TRIAGE_INVITE_SEND_URL"] = "ftp://example.com/invites"
	err = jobmirror.Main(context.Background(), func(k string) string { return vars[k] }, &flowtest.Buffer{})
	is.True(err != nil && strings.Contains(err.Error(), "TRIAGE_INVITE_SEND_URL")) // and one that is not http(s)

	vars["TRIAGE_INVITE_SEND_URL"] = "http://127.0.0.1:9/invites"
	vars["TRIAGE_INVITE_CLAIM_LEASE"] = "10s"
	err = jobmirror.Main(context.Background(), func(k string) string { return vars[k] }, &flowtest.Buffer{})
	is.True(err != nil && strings.Contains(err.Error(), "TRIAGE_INVITE_CLAIM_LEASE")) // a lease a post can outlast
}

// job-mirror refuses an invite endpoint it would post a customer's name and
// number to in the clear, naming the variable, and starts with one on this
// machine.
func TestTheInviteEndpointMustBeHTTPS(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://triage.example.com/invite", true},
		{"http://127.0.0.1:9/invites", true},
		{"http://triage.example.com/invite", false},
	} {
		t.Run(tc.url, func(t *testing.T) {
			is := is.New(t)
			cfg := jobmirror.DefaultConfig()
			cfg.Invites.URL = tc.url
			err := cfg.Validate()
			is.Equal(err == nil, tc.ok)
			if err != nil {
				is.True(strings.Contains(err.Error(), "TRIAGE_INVITE_SEND_URL")) // naming the variable
			}
		})
	}
}
