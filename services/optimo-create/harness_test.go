package optimocreate_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/lock"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
	"github.com/ethosbuilding/primeflow/pkg/optimosim"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
	optimocreate "github.com/ethosbuilding/primeflow/services/optimo-create"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// melbourne is the account's time zone in the tests.
var melbourne = func() *time.Location {
	l, err := time.LoadLocation("Australia/Melbourne")
	if err != nil {
		panic(err)
	}
	return l
}()

// env is one test's world: a real nats-server, SQLite, and the OptimoRoute
// simulator over HTTP.
type env struct {
	t      *testing.T
	ctx    context.Context
	srv    *server.Server
	js     jetstream.JetStream
	store  store.Store
	sim    *optimosim.Sim
	client *optimoroute.Client
	log    *slog.Logger
	db     string // the SQLite file
}

// dbPath is the SQLite file the store uses.
func (e *env) dbPath() string { return e.db }

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, log: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	e.ctx = ctx
	e.srv = natstest.Server(t)
	_, e.js = natstest.Connect(t, e.srv)
	e.db = filepath.Join(t.TempDir(), "primeflow.db")
	st, err := sqlite.Open(ctx, e.db)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	e.store = st
	e.sim = optimosim.New(optimosim.Options{PlanningDuration: time.Millisecond})
	hs := httptest.NewServer(e.sim)
	t.Cleanup(hs.Close)
	c, err := optimoroute.New(e.sim.ClientConfig(hs.URL))
	if err != nil {
		t.Fatalf("optimoroute client: %v", err)
	}
	e.client = c
	return e
}

// testConfig is a test's configuration: no schedule, no run at start.
func testConfig() optimocreate.Config {
	cfg := optimocreate.DefaultConfig()
	cfg.Lock = lock.Config{TTL: 12 * time.Minute, Wait: time.Minute}
	cfg.Every = optimocreate.OnRequest
	cfg.OnStart = false
	cfg.SweepTimeout = 30 * time.Second
	return cfg
}

// creator is one optimo-create instance with its own NATS connection and
// metrics.
type creator struct {
	*optimocreate.Creator
	reg *prometheus.Registry
}

func (e *env) creator(cfg optimocreate.Config) *creator {
	e.t.Helper()
	nc, js := natstest.Connect(e.t, e.srv)
	reg := prometheus.NewRegistry()
	c, err := optimocreate.New(e.ctx, cfg, service.Deps{Log: e.log, NC: nc, JS: js, Store: e.store, Metrics: reg}, e.client,
		optimocreate.WithClock(outsideSweepBand))
	if err != nil {
		e.t.Fatalf("new creator: %v", err)
	}
	return &creator{Creator: c, reg: reg}
}

// outsideSweepBand is the clock of the tests that are not about the sweep:
// now, or three hours earlier the same day when now is in M–F 15:00–16:59
// Melbourne, so that what they do does not depend on the time of day.
func outsideSweepBand() time.Time {
	now := time.Now()
	if optimocreate.InSweepBand(now, melbourne) {
		return now.Add(-3 * time.Hour)
	}
	return now
}

// Fixtures: one job with an address, appointments of it.
const (
	jobID    = "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"
	bareJob  = "7d3f8e21-9c4b-4d1e-8f6a-5b2c9e0a1d34"
	userID   = "5e6f7a8b-1c2d-4e3f-9a0b-1c2d3e4f5a6b"
	apptOne  = "a1a1a1a1-0000-4000-8000-000000000001"
	apptTwo  = "a1a1a1a1-0000-4000-8000-000000000002"
	apptPast = "a1a1a1a1-0000-4000-8000-000000000003"
	workOne  = "b2b2b2b2-0000-4000-8000-000000000001"
	workTwo  = "b2b2b2b2-0000-4000-8000-000000000002"
)

func (e *env) job(id string, withAddress bool) {
	e.t.Helper()
	j := store.Job{JobID: id, JobNumber: "J012345", Version: 1}
	if withAddress {
		j.AddressLine1, j.AddressLine2, j.Suburb, j.State, j.Postcode = "12 Lygon St", "Unit 3", "Carlton", "VIC", "3053"
	}
	if _, err := e.store.UpsertJob(e.ctx, j); err != nil {
		e.t.Fatalf("job: %v", err)
	}
}

// day is a day from now in Melbourne, at hh:mm local, in UTC.
func day(days, hh, mm int) time.Time {
	n := time.Now().In(melbourne)
	return time.Date(n.Year(), n.Month(), n.Day()+days, hh, mm, 0, 0, melbourne).UTC()
}

func localDate(t time.Time) string { return t.In(melbourne).Format(store.DateLayout) }

// appointment mirrors an appointment, as child-mirror does.
func (e *env) appointment(id, job string, start time.Time, version int64, edit ...func(*store.Appointment)) store.Appointment {
	e.t.Helper()
	a := store.Appointment{AppointmentID: id, JobID: job, StartDate: start, EndDate: start.Add(2 * time.Hour),
		Status: "Scheduled", Version: version, AssignedID: userID, Description: "Site inspection", Notes: "Dog on site"}
	for _, ed := range edit {
		ed(&a)
	}
	if _, err := e.store.SaveAppointment(e.ctx, a); err != nil {
		e.t.Fatalf("appointment: %v", err)
	}
	return a
}

// order reads an order row.
func (e *env) order(no string) store.OptimoOrder {
	e.t.Helper()
	o, found, err := e.store.GetOrder(e.ctx, no)
	if err != nil || !found {
		e.t.Fatalf("order %s: found %v, %v", no, found, err)
	}
	return o
}

// simOrder is an order as OptimoRoute holds it.
func (e *env) simOrder(no string) (optimoroute.Order, bool) {
	e.t.Helper()
	raw, ok := e.sim.Order(no)
	if !ok {
		return optimoroute.Order{}, false
	}
	var o optimoroute.Order
	if err := json.Unmarshal(raw, &o); err != nil {
		e.t.Fatalf("sim order %s: %v", no, err)
	}
	return o, true
}

func (e *env) planStatus(date string) string {
	e.t.Helper()
	p, found, err := e.store.GetPlan(e.ctx, date)
	if err != nil {
		e.t.Fatalf("plan %s: %v", date, err)
	}
	if !found {
		return ""
	}
	return p.PlanStatus
}

// calls counts the simulator's calls of op.
func (e *env) calls(op string) int { return e.sim.Stats().Calls[op] }

// planRequests reads what was published on optimo.plan.requested so far.
func (e *env) planRequests() []events.PlanRequested {
	e.t.Helper()
	s, err := e.js.Stream(e.ctx, events.StreamOptimo)
	if err != nil {
		e.t.Fatalf("stream: %v", err)
	}
	info, err := s.Info(e.ctx)
	if err != nil {
		e.t.Fatalf("stream info: %v", err)
	}
	var out []events.PlanRequested
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(e.ctx, seq)
		if err != nil || m.Subject != events.SubjectOptimoPlan {
			continue
		}
		var r events.PlanRequested
		if err := json.Unmarshal(m.Data, &r); err != nil {
			e.t.Fatalf("plan request: %v", err)
		}
		out = append(out, r)
	}
	return out
}

// waitFor polls cond until it holds, failing the test at the deadline.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	flowtest.Poll(e.t, 30*time.Second, 2*time.Millisecond, what, cond)
}
