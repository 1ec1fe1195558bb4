package optimocreate_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
	"github.com/ethosbuilding/primeflow/pkg/optimosim"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
	optimocreate "github.com/ethosbuilding/primeflow/services/optimo-create"
	"github.com/matryer/is"
)

func TestConfigDefaultsAndOverrides(t *testing.T) {
	is := is.New(t)
	var c optimocreate.Config
	is.NoErr(config.Parse(func(string) string { return "" }, &c))
	is.Equal(c.Lock.TTL, 12*time.Minute) // §8.1: a 12-minute lock
	is.Equal(c.Lock.Wait, 6*time.Minute) // §8.3: waited for up to 6 minutes
	is.Equal(c.OrderDuration, time.Hour)
	is.True(c.AssignDrivers)
	is.Equal(c.TimeZone, "Australia/Melbourne")
	is.Equal(c.Every, optimocreate.SpecSchedule) // §8.1's schedule unless overridden
	is.Equal(c.SweepDays, 7)                     // the sweep covers today and the week after
	is.Equal(c.SweepTimeout, 5*time.Minute)

	env := map[string]string{"OPTIMO_CREATE_LOCK_WAIT": "2m", "OPTIMO_ASSIGN_DRIVERS": "false", "OPTIMO_ORDER_DURATION": "45m",
		"OPTIMO_CREATE_EVERY": "20m", "OPTIMO_SWEEP_DAYS": "3", "OPTIMO_SWEEP_TIMEOUT": "90s"}
	is.NoErr(config.Parse(func(k string) string { return env[k] }, &c))
	is.Equal(c.Lock.Wait, 2*time.Minute) // the lock's settings carry the service's prefix
	is.True(!c.AssignDrivers)
	is.Equal(c.OrderDuration, 45*time.Minute)
	is.Equal(c.Every, optimocreate.Schedule(20*time.Minute)) // a flat interval instead of §8.1's
	is.Equal(c.SweepDays, 3)
	is.Equal(c.SweepTimeout, 90*time.Second)

	for v, want := range map[string]optimocreate.Schedule{"off": optimocreate.OnRequest, "OFF": optimocreate.OnRequest, "0": optimocreate.OnRequest, "0s": optimocreate.OnRequest} {
		var c optimocreate.Config
		is.NoErr(config.Parse(func(k string) string { return map[string]string{"OPTIMO_CREATE_EVERY": v}[k] }, &c))
		is.Equal(c.Every, want) // runs only on request
	}
	for _, v := range []string{"-5m", "soon"} {
		var c optimocreate.Config
		err := config.Parse(func(k string) string { return map[string]string{"OPTIMO_CREATE_EVERY": v}[k] }, &c)
		is.True(err != nil)                                           // refused
		is.True(strings.Contains(err.Error(), "OPTIMO_CREATE_EVERY")) // naming the variable
	}
}

// Main runs the service from the environment alone: child-mirror's request
// over NATS makes the queued appointment an order.
func TestMainFromTheEnvironment(t *testing.T) {
	is := is.New(t)
	srv := natstest.Server(t)
	_, js := natstest.Connect(t, srv)
	dbPath := filepath.Join(t.TempDir(), "primeflow.db")
	st, err := sqlite.Open(context.Background(), dbPath)
	is.NoErr(err)
	defer st.Close()
	_, err = st.UpsertJob(context.Background(), store.Job{JobID: jobID, JobNumber: "J1", AddressLine1: "1 A St", Suburb: "Carlton", Version: 1})
	is.NoErr(err)
	_, err = st.SaveAppointment(context.Background(), store.Appointment{AppointmentID: apptOne, JobID: jobID,
		StartDate: day(1, 9, 0), EndDate: day(1, 10, 0), Status: "Scheduled", Version: 1})
	is.NoErr(err)
	sim := optimosim.New(optimosim.Options{})
	hs := httptest.NewServer(sim)
	defer hs.Close()
	env := map[string]string{
		"NATS_URL": srv.ClientURL(), "DATABASE_URL": "sqlite:" + dbPath, "HTTP_ADDR": "127.0.0.1:0",
		"OPTIMOROUTE_API_URL": hs.URL, "OPTIMOROUTE_API_KEY": optimosim.DefaultAPIKey, "OPTIMO_CREATE_ON_START": "false",
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- optimocreate.Main(ctx, func(k string) string { return env[k] }, io.Discard) }()

	data, _ := json.Marshal(events.CreateRequested{Source: "child-mirror"})
	_, err = js.Publish(context.Background(), events.SubjectOptimoCreate, data)
	is.NoErr(err)
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	ev, err := sim.WaitEvent(wctx, func(ev optimosim.Event) bool { return ev.Operation == optimoroute.OpCreateOrUpdateOrders })
	is.NoErr(err)                            // the order was written
	is.Equal(ev.OrderNos, []string{apptOne}) // for the appointment
	cancel()
	is.NoErr(<-done) // and Main stops cleanly
}
