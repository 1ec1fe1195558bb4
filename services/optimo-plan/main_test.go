package optimoplan_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
	"github.com/ethosbuilding/primeflow/pkg/optimosim"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
	optimoplan "github.com/ethosbuilding/primeflow/services/optimo-plan"
	"github.com/matryer/is"
)

func TestConfigDefaultsAndOverrides(t *testing.T) {
	for _, tc := range []struct {
		name  string
		env   map[string]string
		check func(is *is.I, c optimoplan.Config)
	}{
		{"defaults", nil, func(is *is.I, c optimoplan.Config) {
			is.Equal(c.Lock.TTL, 12*time.Minute)    // §8.2: a 12-minute lock
			is.Equal(c.Lock.Wait, 6*time.Minute)    // §8.3: waited for up to 6 minutes
			is.Equal(c.PollInterval, 3*time.Second) // §8.2: polls 3 seconds apart
			is.Equal(c.MaxPolls, 60)                // §8.2: at most 60
			is.Equal(c.TimeZone, "Australia/Melbourne")
			is.True(c.OnStart)
		}},
		{"overrides", map[string]string{"OPTIMO_PLAN_LOCK_WAIT": "90s", "OPTIMO_PLAN_MAX_POLLS": "10",
			"OPTIMO_PLAN_POLL_INTERVAL": "500ms", "OPTIMO_PLAN_EVERY": "0s"}, func(is *is.I, c optimoplan.Config) {
			is.Equal(c.Lock.Wait, 90*time.Second) // the lock's settings carry the service's prefix
			is.Equal(c.MaxPolls, 10)
			is.Equal(c.PollInterval, 500*time.Millisecond)
			is.Equal(c.Every, time.Duration(0))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			var c optimoplan.Config
			is.NoErr(config.Parse(func(k string) string { return tc.env[k] }, &c))
			tc.check(is, c)
		})
	}
}

// Main runs the service from the environment alone: a portal's plan request
// over NATS gets its date planned in the simulator.
func TestMainFromTheEnvironment(t *testing.T) {
	is := is.New(t)
	srv := natstest.Server(t)
	_, js := natstest.Connect(t, srv)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "primeflow.db")
	st, err := sqlite.Open(context.Background(), dbPath)
	is.NoErr(err)
	defer st.Close()
	is.NoErr(st.PlanUpsert(context.Background(), "2026-03-10")) // a portal's booking marked the date
	sim := optimosim.New(optimosim.Options{PlanningDuration: time.Millisecond})
	hs := httptest.NewServer(sim)
	defer hs.Close()
	env := map[string]string{
		"NATS_URL": srv.ClientURL(), "DATABASE_URL": "sqlite:" + dbPath, "HTTP_ADDR": "127.0.0.1:0",
		"OPTIMOROUTE_API_URL": hs.URL, "OPTIMOROUTE_API_KEY": optimosim.DefaultAPIKey,
		"OPTIMO_PLAN_ON_START": "false", "OPTIMO_PLAN_POLL_INTERVAL": "5ms",
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- optimoplan.Main(ctx, func(k string) string { return env[k] }, io.Discard) }()

	data, _ := json.Marshal(events.PlanRequested{Source: "AdminPortal", Reason: "booking"})
	_, err = js.Publish(context.Background(), events.SubjectOptimoPlan, data)
	is.NoErr(err)
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	_, err = sim.WaitEvent(wctx, func(ev optimosim.Event) bool {
		return ev.Operation == optimoroute.OpGetRoutes && ev.Date == "2026-03-10"
	})
	is.NoErr(err) // the date was planned and its routes read
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, _, err := st.GetPlan(context.Background(), "2026-03-10")
		is.NoErr(err)
		if p.PlanStatus == store.PlanRoutesCompleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the date is %s", p.PlanStatus)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	is.NoErr(<-done) // and Main stops cleanly
}

// The portals' command line works as docs/operations.md shows it: `nats pub
// --jetstream optimo.plan.requested '{…}'` gets the NotPlanned dates planned.
// The Makefile builds the nats CLI and sets NATS_CLI.
func TestPortalCommandLine(t *testing.T) {
	cli := natstest.CLI(t)
	is := is.New(t)
	e := newEnv(t, false)
	e.order("A-1", dayOne)
	p := e.planner(testConfig())
	ctx, stop := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	out, err := exec.Command(cli, "--server", e.srv.ClientURL(), "pub", "--jetstream",
		events.SubjectOptimoPlan, `{"source":"AdminPortal","reason":"booking"}`).CombinedOutput()
	is.True(err == nil) // the CLI published and JetStream stored it
	if err != nil {
		t.Logf("nats pub: %s", out)
	}
	e.waitFor("the date to be planned", func() bool {
		pl, found, err := e.store.GetPlan(e.ctx, dayOne)
		return err == nil && found && pl.PlanStatus == store.PlanRoutesCompleted
	})
	stop()
	is.NoErr(<-done)
	is.Equal(p.requests(), 1) // one request, from the command line
}
