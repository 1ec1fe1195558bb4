package optimoroute_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
	"github.com/ethosbuilding/primeflow/pkg/optimosim"
	"github.com/matryer/is"
	"github.com/prometheus/client_golang/prometheus"
)

// testKey has characters that query-escaping changes, so a leak of either
// form is caught.
const testKey = "s3cr3t/KEY+=&x y"

// setup starts a simulator behind a real HTTP server and a client for it.
func setup(t *testing.T, opts optimosim.Options, cfg optimoroute.Config) (*optimosim.Sim, *optimoroute.Client) {
	t.Helper()
	if opts.APIKey == "" {
		opts.APIKey = testKey
	}
	sim := optimosim.New(opts)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	cfg.APIURL = srv.URL
	if cfg.APIKey == "" {
		cfg.APIKey = testKey
	}
	c, err := optimoroute.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sim, c
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func order(no, date string) optimoroute.Order {
	return optimoroute.Order{
		OrderNo:  no,
		Type:     "T",
		Date:     date,
		Duration: 45,
		Location: &optimoroute.Location{LocationNo: "L-" + no, Address: "1 Test St, Melbourne VIC 3000"},
	}
}

func TestConfigFromEnvironment(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		is := is.New(t)
		var cfg optimoroute.Config
		is.NoErr(config.Parse(func(string) string { return "" }, &cfg))
		is.Equal(cfg.APIURL, "https://api.optimoroute.com/v1") // documented base URL
		is.Equal(cfg.MaxConcurrent, 5)                         // OptimoRoute's limit
		is.Equal(cfg.Timeout, 30*time.Second)                  // default timeout
		is.Equal(cfg.APIKey, "")                               // no key unless given
	})
	t.Run("set", func(t *testing.T) {
		is := is.New(t)
		env := map[string]string{
			"OPTIMOROUTE_API_URL":        "http://sim.local/v1",
			"OPTIMOROUTE_API_KEY":        "k",
			"OPTIMOROUTE_TIMEOUT":        "5s",
			"OPTIMOROUTE_MAX_CONCURRENT": "3",
		}
		var cfg optimoroute.Config
		is.NoErr(config.Parse(func(k string) string { return env[k] }, &cfg))
		is.Equal(cfg, optimoroute.Config{APIURL: "http://sim.local/v1", APIKey: "k", Timeout: 5 * time.Second, MaxConcurrent: 3}) // every variable read
	})
	t.Run("invalid", func(t *testing.T) {
		for name, cfg := range map[string]optimoroute.Config{
			"no key":       {APIURL: "https://api.optimoroute.com/v1"},
			"relative url": {APIURL: "/v1", APIKey: "k"},
			"key in url":   {APIURL: "https://api.optimoroute.com/v1?key=k", APIKey: "k"},
		} {
			t.Run(name, func(t *testing.T) {
				is := is.New(t)
				_, err := optimoroute.New(cfg)
				is.True(err != nil) // refused
			})
		}
	})
	// Every request carries the key in its query.
	t.Run("plain http elsewhere", func(t *testing.T) {
		is := is.New(t)
		_, err := optimoroute.New(optimoroute.Config{APIURL: "http://api.optimoroute.com/v1", APIKey: "k"})
		is.True(err != nil && strings.Contains(err.Error(), "OPTIMOROUTE_API_URL: must be https")) // refused, naming the variable
		_, err = optimoroute.New(optimoroute.Config{APIURL: "http://127.0.0.1:8081/optimoroute", APIKey: "k"})
		is.NoErr(err) // but for this machine (make run's simulator)
	})
}

// A redirect is never followed: one that keeps the request's query (a
// move to another host, http to https) would carry the key to its target,
// and a 307 the orders too. The 3xx is the answer, an error.
func TestFollowsNoRedirect(t *testing.T) {
	var reached atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		fmt.Fprint(w, `{"success":true,"routes":[]}`)
	}))
	defer elsewhere.Close()
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	defer redirecting.Close()
	for name, opts := range map[string][]optimoroute.Option{"own client": nil, "client given": {optimoroute.WithHTTPClient(&http.Client{})}} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			c, err := optimoroute.New(optimoroute.Config{APIURL: redirecting.URL + "/v1", APIKey: testKey}, opts...)
			is.NoErr(err)
			_, err = c.GetRoutes(ctx(t), "2026-03-02")
			is.Equal(reached.Load(), int32(0)) // the redirect's target got nothing, the key least of all
			var api *optimoroute.APIError
			is.True(errors.As(err, &api))                          // refused
			is.Equal(api.HTTPStatus, http.StatusTemporaryRedirect) // by the redirect itself
		})
	}
}

func TestCreateOrUpdateOrdersChunksAndMapsResults(t *testing.T) {
	is := is.New(t)
	sim, c := setup(t, optimosim.Options{}, optimoroute.Config{})
	orders := make([]optimoroute.Order, 1201)
	for i := range orders {
		orders[i] = order(fmt.Sprintf("ORD%04d", i), "2026-03-02")
	}
	// Per-order failures in the first, second and third chunk.
	sim.FailOrder("ORD0000", string(optimoroute.ErrLocGeocoding))
	orders[777].Date = "02/03/2026"
	orders[1200].Location = nil

	results, err := c.CreateOrUpdateOrders(ctx(t), orders)
	is.NoErr(err)                                                      // no call failed as a whole
	is.Equal(len(results), len(orders))                                // one result per order
	is.Equal(c.Calls()[optimoroute.OpCreateOrUpdateOrders], int64(3))  // 500 + 500 + 201
	is.Equal(sim.Stats().Calls[optimoroute.OpCreateOrUpdateOrders], 3) // the simulator saw 3 calls too

	var sizes []int
	for _, ev := range sim.Events() {
		sizes = append(sizes, len(ev.OrderNos))
	}
	is.Equal(sizes, []int{500, 500, 201}) // chunks of at most 500, in order

	failed := map[int]optimoroute.Code{0: optimoroute.ErrLocGeocoding, 777: optimoroute.ErrInvalidParamFormat, 1200: optimoroute.ErrMissingMandField}
	for i, r := range results {
		is.Equal(r.OrderNo, orders[i].OrderNo) // results follow the caller's order
		code, bad := failed[i]
		if !bad {
			is.NoErr(r.Err)     // written
			is.True(r.ID != "") // with OptimoRoute's id
			continue
		}
		is.True(errors.Is(r.Err, code)) // the order's own code
		var apiErr *optimoroute.APIError
		is.True(errors.As(r.Err, &apiErr))                     // typed
		is.Equal(apiErr.HTTPStatus, 200)                       // inside a successful call
		is.True(strings.Contains(r.Err.Error(), string(code))) // and readable
	}
	is.Equal(len(sim.OrderNos("2026-03-02")), 1198) // every good order is held
}

func TestOrdersDefaultToSync(t *testing.T) {
	is := is.New(t)
	sim, c := setup(t, optimosim.Options{}, optimoroute.Config{})
	o := order("A1", "2026-03-02")
	o.Notes = "ring first"
	o.CustomFields = map[string]string{"customField1": "J012345"}
	_, err := c.CreateOrUpdateOrders(ctx(t), []optimoroute.Order{o})
	is.NoErr(err) // created

	replace := order("A1", "2026-03-02")
	res, err := c.CreateOrUpdateOrders(ctx(t), []optimoroute.Order{replace})
	is.NoErr(err)        // sent
	is.NoErr(res[0].Err) // written
	raw, ok := sim.Order("A1")
	is.True(ok)                                           // still there
	is.True(!strings.Contains(string(raw), "ring first")) // SYNC replaced every field

	merge := optimoroute.Order{Operation: optimoroute.OrderMerge, OrderNo: "A1", Notes: "merged"}
	res, err = c.CreateOrUpdateOrders(ctx(t), []optimoroute.Order{merge})
	is.NoErr(err)        // sent
	is.NoErr(res[0].Err) // merged
	got, err := c.GetOrders(ctx(t), []string{"A1"})
	is.NoErr(err)                                      // read back
	is.Equal(got[0].Order.Notes, "merged")             // MERGE set the field
	is.Equal(got[0].Order.Location.LocationNo, "L-A1") // and kept the others
}

func TestGetOrders(t *testing.T) {
	is := is.New(t)
	_, c := setup(t, optimosim.Options{}, optimoroute.Config{})
	o := order("G1", "2026-03-03")
	o.TimeWindows = []optimoroute.TimeWindow{{From: "09:00", To: "12:00"}}
	o.AssignedTo = &optimoroute.Driver{Serial: "2"}
	o.CustomFields = map[string]string{"customField1": "J012345", "customField3": "make safe"}
	_, err := c.CreateOrUpdateOrders(ctx(t), []optimoroute.Order{o})
	is.NoErr(err) // created

	res, err := c.GetOrders(ctx(t), []string{"G1", "NOPE"})
	is.NoErr(err)                                                    // the call worked
	is.Equal(len(res), 2)                                            // one result per orderNo
	is.NoErr(res[0].Err)                                             // G1 found
	is.Equal(res[0].Order.OrderNo, "G1")                             // its data
	is.Equal(res[0].Order.TimeWindows, o.TimeWindows)                // time windows kept
	is.Equal(res[0].Order.AssignedTo.Serial, "2")                    // assignment kept
	is.Equal(res[0].Order.CustomFields, o.CustomFields)              // custom fields at the top level, read back
	is.Equal(res[0].Order.Operation, optimoroute.OrderOperation("")) // operation is not part of an order
	is.True(errors.Is(res[1].Err, optimoroute.ErrOrderNotFound))     // NOPE missing
	is.Equal(res[1].Order, nil)                                      // without data
}

func TestCustomFieldClashIsRefused(t *testing.T) {
	is := is.New(t)
	_, c := setup(t, optimosim.Options{}, optimoroute.Config{})
	o := order("C1", "2026-03-03")
	o.CustomFields = map[string]string{"notes": "x"}
	_, err := c.CreateOrUpdateOrders(ctx(t), []optimoroute.Order{o})
	is.True(err != nil)                                               // refused before sending
	is.True(strings.Contains(err.Error(), "clashes"))                 // says why
	is.Equal(c.Calls()[optimoroute.OpCreateOrUpdateOrders], int64(0)) // nothing sent
}

func TestChunkFailureIsReportedAndStops(t *testing.T) {
	is := is.New(t)
	sim, c := setup(t, optimosim.Options{}, optimoroute.Config{})
	sim.InjectFault(optimosim.Fault{Operation: optimoroute.OpCreateOrUpdateOrders, After: 1, Code: string(optimoroute.ErrInternal), HTTPStatus: 500})
	orders := make([]optimoroute.Order, 1201)
	for i := range orders {
		orders[i] = order(fmt.Sprintf("ORD%04d", i), "2026-03-02")
	}
	results, err := c.CreateOrUpdateOrders(ctx(t), orders)
	var chunk *optimoroute.ChunkError
	is.True(errors.As(err, &chunk))                                   // a chunk failed as a whole
	is.Equal(chunk.Offset, 500)                                       // the second one
	is.Equal(chunk.Count, 500)                                        // all of it
	is.True(errors.Is(err, optimoroute.ErrInternal))                  // with OptimoRoute's code
	is.True(strings.Contains(err.Error(), "orders 500-999 of 1201"))  // named clearly
	is.Equal(c.Calls()[optimoroute.OpCreateOrUpdateOrders], int64(2)) // the third chunk was not sent
	is.NoErr(results[0].Err)                                          // first chunk written
	is.NoErr(results[499].Err)                                        // to its end
	is.Equal(results[500].Err, error(chunk))                          // failed chunk carries the chunk error
	is.Equal(results[999].Err, error(chunk))                          // to its end
	is.True(errors.Is(results[1000].Err, optimoroute.ErrNotSent))     // the rest was never sent
	is.Equal(len(sim.OrderNos("")), 500)                              // only the first chunk is held
}

func TestErrorsAreTyped(t *testing.T) {
	tests := []struct {
		name   string
		fault  optimosim.Fault
		code   optimoroute.Code
		status int
	}{
		{"opt running with 200", optimosim.Fault{Code: "ERR_OPT_RUNNING", HTTPStatus: 200}, optimoroute.ErrOptRunning, 200},
		{"too many connections with 200", optimosim.Fault{Code: "ERR_TOO_MANY_CONNECTIONS", HTTPStatus: 200}, optimoroute.ErrTooManyConnections, 200},
		{"internal with 500", optimosim.Fault{Code: "ERR_INTERNAL", HTTPStatus: 500}, optimoroute.ErrInternal, 500},
		{"proxy page with 502", optimosim.Fault{}, "", 502},
		{"proxy page with 503", optimosim.Fault{HTTPStatus: 503}, "", 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			sim, c := setup(t, optimosim.Options{}, optimoroute.Config{})
			sim.InjectFault(tt.fault)
			_, err := c.GetRoutes(ctx(t), "2026-03-02")
			var apiErr *optimoroute.APIError
			is.True(errors.As(err, &apiErr))                    // an *APIError
			is.Equal(apiErr.Code, tt.code)                      // with the code sent
			is.Equal(apiErr.HTTPStatus, tt.status)              // and the status
			is.Equal(apiErr.Operation, optimoroute.OpGetRoutes) // of this operation
			if tt.code != "" {
				is.True(errors.Is(err, tt.code))                       // matches its sentinel
				is.True(!errors.Is(err, optimoroute.ErrOrderNotFound)) // and no other
			}
			_, err = c.GetRoutes(ctx(t), "2026-03-02")
			is.NoErr(err) // the fault was for one call only
		})
	}
}

func TestAuthErrors(t *testing.T) {
	is := is.New(t)
	_, c := setup(t, optimosim.Options{APIKey: "the-right-key"}, optimoroute.Config{APIKey: "a-wrong-key"})
	_, err := c.StartPlanning(ctx(t), optimoroute.StartPlanningRequest{Date: "2026-03-02"})
	is.True(errors.Is(err, optimoroute.ErrAuthKeyUnknown)) // the simulator checks the key
	is.True(!strings.Contains(err.Error(), "a-wrong-key")) // and the error does not repeat it
}

func TestDeleteOrdersNotFoundCountsAsDeleted(t *testing.T) {
	is := is.New(t)
	sim, c := setup(t, optimosim.Options{}, optimoroute.Config{})
	_, err := c.CreateOrUpdateOrders(ctx(t), []optimoroute.Order{order("D1", "2026-03-02"), order("D2", "2026-03-02")})
	is.NoErr(err) // created

	res, err := c.DeleteOrders(ctx(t), []string{"D1", "GONE", "D2"})
	is.NoErr(err)         // the call worked
	is.Equal(len(res), 3) // one result per orderNo
	for _, r := range res {
		is.NoErr(r.Err) // deleted, or already gone
	}
	is.Equal(res[1].OrderNo, "GONE")                           // in the caller's order
	is.Equal(len(sim.OrderNos("")), 0)                         // nothing left
	is.Equal(sim.Stats().Calls[optimoroute.OpDeleteOrders], 1) // one call
}

func TestPlanning(t *testing.T) {
	const date = "2026-03-04"
	clock := optimosim.NewClock(time.Date(2026, 3, 3, 20, 0, 0, 0, time.UTC))

	t.Run("N to R to F, and ERR_OPT_RUNNING meanwhile", func(t *testing.T) {
		is := is.New(t)
		sim, c := setup(t, optimosim.Options{Now: clock.Now, PlanningDuration: 4 * time.Minute, PlanningSteps: 4}, optimoroute.Config{})
		_, err := c.CreateOrUpdateOrders(ctx(t), []optimoroute.Order{order("P1", date)})
		is.NoErr(err) // an order to plan

		started, err := c.StartPlanning(ctx(t), optimoroute.StartPlanningRequest{Date: date, Balancing: "ON", StartWith: "EMPTY"})
		is.NoErr(err)                               // started
		is.True(started.PlanningID > 0)             // with an id
		is.Equal(started.MissingOrders, []string{}) // nothing missing

		st, err := c.GetPlanningStatus(ctx(t), started.PlanningID)
		is.NoErr(err)                                // read
		is.Equal(st.Status, optimoroute.PlanningNew) // N at first
		is.True(!st.Status.Done())                   // not done

		clock.Advance(time.Minute)
		st, err = c.GetPlanningStatus(ctx(t), started.PlanningID)
		is.NoErr(err)                                    // read
		is.Equal(st.Status, optimoroute.PlanningRunning) // then R
		is.Equal(st.PercentageComplete, 25)              // a quarter through

		_, err = c.StartPlanning(ctx(t), optimoroute.StartPlanningRequest{Date: date})
		is.True(errors.Is(err, optimoroute.ErrOptRunning)) // the date is being planned
		var apiErr *optimoroute.APIError
		is.True(errors.As(err, &apiErr)) // typed
		is.Equal(apiErr.HTTPStatus, 200) // though sent with HTTP 200

		other, err := c.StartPlanning(ctx(t), optimoroute.StartPlanningRequest{Date: "2026-03-05"})
		is.NoErr(err)                                   // another date may be planned meanwhile
		is.True(other.PlanningID != started.PlanningID) // as its own run

		clock.Advance(3 * time.Minute)
		st, err = c.GetPlanningStatus(ctx(t), started.PlanningID)
		is.NoErr(err)                                     // read
		is.Equal(st.Status, optimoroute.PlanningFinished) // F at the end
		is.Equal(st.PercentageComplete, 100)              // complete
		is.True(st.Status.Done())                         // done

		again, err := c.StartPlanning(ctx(t), optimoroute.StartPlanningRequest{Date: date})
		is.NoErr(err) // a finished date can be planned again
		ev, err := sim.WaitEvent(ctx(t), func(e optimosim.Event) bool {
			return e.Operation == optimoroute.OpStartPlanning && e.PlanningID == again.PlanningID
		})
		is.NoErr(err)           // the simulator logged it
		is.Equal(ev.Date, date) // for the date
	})

	t.Run("stop makes C", func(t *testing.T) {
		is := is.New(t)
		_, c := setup(t, optimosim.Options{Now: clock.Now, PlanningDuration: time.Minute}, optimoroute.Config{})
		started, err := c.StartPlanning(ctx(t), optimoroute.StartPlanningRequest{Date: date})
		is.NoErr(err)                                        // started
		is.NoErr(c.StopPlanning(ctx(t), started.PlanningID)) // stopped
		st, err := c.GetPlanningStatus(ctx(t), started.PlanningID)
		is.NoErr(err)                                      // read
		is.Equal(st.Status, optimoroute.PlanningCancelled) // C
		clock.Advance(time.Hour)
		st, err = c.GetPlanningStatus(ctx(t), started.PlanningID)
		is.NoErr(err)                                      // read
		is.Equal(st.Status, optimoroute.PlanningCancelled) // and stays C
		_, err = c.StartPlanning(ctx(t), optimoroute.StartPlanningRequest{Date: date})
		is.NoErr(err) // the date is free again
	})

	t.Run("never completes", func(t *testing.T) {
		is := is.New(t)
		sim, c := setup(t, optimosim.Options{Now: clock.Now, PlanningDuration: time.Minute}, optimoroute.Config{})
		sim.SetPlanningMode(optimosim.PlanningNeverCompletes)
		_, err := c.CreateOrUpdateOrders(ctx(t), []optimoroute.Order{order("N1", date)})
		is.NoErr(err) // an order to plan
		started, err := c.StartPlanning(ctx(t), optimoroute.StartPlanningRequest{Date: date})
		is.NoErr(err) // started
		clock.Advance(24 * time.Hour)
		st, err := c.GetPlanningStatus(ctx(t), started.PlanningID)
		is.NoErr(err)                                    // read
		is.Equal(st.Status, optimoroute.PlanningRunning) // still R a day later
		routes, err := c.GetRoutes(ctx(t), date)
		is.NoErr(err)            // read
		is.Equal(len(routes), 0) // nothing planned
		_, err = c.StartPlanning(ctx(t), optimoroute.StartPlanningRequest{Date: date})
		is.True(errors.Is(err, optimoroute.ErrOptRunning))   // and the date stays busy
		is.NoErr(c.StopPlanning(ctx(t), started.PlanningID)) // until stopped
		st, err = c.GetPlanningStatus(ctx(t), started.PlanningID)
		is.NoErr(err)                                      // read
		is.Equal(st.Status, optimoroute.PlanningCancelled) // C
	})

	t.Run("ends in E", func(t *testing.T) {
		is := is.New(t)
		sim, c := setup(t, optimosim.Options{Now: clock.Now, PlanningDuration: time.Minute}, optimoroute.Config{})
		sim.SetPlanningMode(optimosim.PlanningFails)
		started, err := c.StartPlanning(ctx(t), optimoroute.StartPlanningRequest{Date: date})
		is.NoErr(err) // started
		clock.Advance(time.Minute)
		st, err := c.GetPlanningStatus(ctx(t), started.PlanningID)
		is.NoErr(err)                                  // read
		is.Equal(st.Status, optimoroute.PlanningError) // E
		is.True(st.Status.Done())                      // which is an end
	})

	t.Run("missing drivers", func(t *testing.T) {
		is := is.New(t)
		_, c := setup(t, optimosim.Options{Now: clock.Now}, optimoroute.Config{})
		started, err := c.StartPlanning(ctx(t), optimoroute.StartPlanningRequest{
			Date:       date,
			UseDrivers: []optimoroute.PlanningDriver{{DriverSerial: "1"}, {DriverSerial: "99"}},
		})
		is.NoErr(err)                                    // started
		is.Equal(started.MissingDrivers, []string{"99"}) // the unknown driver is reported
	})
}

func TestGetRoutes(t *testing.T) {
	const date = "2026-03-04"
	is := is.New(t)
	clock := optimosim.NewClock(time.Date(2026, 3, 3, 20, 0, 0, 0, time.UTC))
	_, c := setup(t, optimosim.Options{Now: clock.Now, PlanningDuration: time.Minute}, optimoroute.Config{})

	routes, err := c.GetRoutes(ctx(t), date)
	is.NoErr(err)            // read
	is.Equal(len(routes), 0) // nothing planned yet

	var orders []optimoroute.Order
	for i := range 7 {
		orders = append(orders, order(fmt.Sprintf("R%d", i), date))
	}
	orders[6].AssignedTo = &optimoroute.Driver{Serial: "3"}
	orders = append(orders, order("OTHER-DAY", "2026-03-05"))
	_, err = c.CreateOrUpdateOrders(ctx(t), orders)
	is.NoErr(err) // created
	started, err := c.StartPlanning(ctx(t), optimoroute.StartPlanningRequest{Date: date})
	is.NoErr(err) // started
	clock.Advance(time.Minute)
	st, err := c.GetPlanningStatus(ctx(t), started.PlanningID)
	is.NoErr(err)                                     // read
	is.Equal(st.Status, optimoroute.PlanningFinished) // F

	routes, err = c.GetRoutes(ctx(t), date)
	is.NoErr(err)            // read
	is.Equal(len(routes), 3) // one per driver, round-robin
	seen := map[string]string{}
	for _, r := range routes {
		is.True(r.DriverSerial != "") // names its driver
		is.True(len(r.Stops) >= 2)    // at least an order and the depot
		last := r.Stops[len(r.Stops)-1]
		is.True(!last.IsOrder())   // ends at the depot
		is.Equal(last.OrderNo, "") // which has no orderNo
		for i, s := range r.Stops {
			is.Equal(s.StopNumber, i+1)                                          // numbered from 1
			is.True(strings.HasPrefix(s.ScheduledAtDt, date+" "))                // on the date
			is.Equal(len(s.ScheduledAt), len("08:15"))                           // HH:MM
			is.True(strings.HasSuffix(s.ScheduledAtDt, " "+s.ScheduledAt+":00")) // consistent times
			if s.IsOrder() {
				_, dup := seen[s.OrderNo]
				is.True(!dup) // each order once
				seen[s.OrderNo] = r.DriverSerial
			}
		}
	}
	is.Equal(len(seen), 7)    // every order of the date, none of another date
	is.Equal(seen["R6"], "3") // the assigned driver is kept
	is.Equal(seen["R0"], "1") // the others go round-robin
	is.Equal(seen["R1"], "2") // …
	is.Equal(seen["R2"], "3") // …
}

func TestMountedUnderPrefix(t *testing.T) {
	is := is.New(t)
	sim := optimosim.New(optimosim.Options{APIKey: testKey})
	mux := http.NewServeMux()
	mux.Handle("/optimoroute/v1/", http.StripPrefix("/optimoroute/v1", sim))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c, err := optimoroute.New(optimoroute.Config{APIURL: srv.URL + "/optimoroute/v1", APIKey: testKey})
	is.NoErr(err) // configured
	_, err = c.CreateOrUpdateOrders(ctx(t), []optimoroute.Order{order("M1", "2026-03-02")})
	is.NoErr(err)                                        // reached through the prefix
	is.Equal(sim.OrderNos("2026-03-02"), []string{"M1"}) // and written
}

func TestNeverMoreThanMaxConcurrentInFlight(t *testing.T) {
	run := func(t *testing.T, maxConcurrent int) (optimosim.Stats, []error) {
		sim, c := setup(t, optimosim.Options{}, optimoroute.Config{MaxConcurrent: maxConcurrent})
		sim.SetLatency("", 100*time.Millisecond)
		errs := make([]error, 20)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() {
				_, errs[i] = c.GetRoutes(ctx(t), "2026-03-02")
			})
		}
		wg.Wait()
		return sim.Stats(), errs
	}
	t.Run("client limit 5", func(t *testing.T) {
		is := is.New(t)
		stats, errs := run(t, 0)
		for _, err := range errs {
			is.NoErr(err) // no call refused
		}
		is.True(stats.MaxInFlight <= 5)                    // never more than 5 at once
		is.True(stats.MaxInFlight > 1)                     // but in parallel
		is.Equal(stats.Rejected, 0)                        // nothing refused
		is.Equal(stats.Calls[optimoroute.OpGetRoutes], 20) // every caller served
	})
	t.Run("without the limit the simulator refuses", func(t *testing.T) {
		is := is.New(t)
		stats, errs := run(t, 20)
		refused := 0
		for _, err := range errs {
			if errors.Is(err, optimoroute.ErrTooManyConnections) {
				refused++
			}
		}
		is.True(stats.MaxInFlight > 5)    // the gauge sees more than 5
		is.True(refused > 0)              // and those calls fail typed
		is.Equal(refused, stats.Rejected) // one error per refusal
	})
}

func TestWaitForSlotHonoursContext(t *testing.T) {
	is := is.New(t)
	sim, c := setup(t, optimosim.Options{}, optimoroute.Config{MaxConcurrent: 1})
	sim.SetLatency(optimoroute.OpGetRoutes, time.Minute)
	slow, cancelSlow := context.WithCancel(ctx(t))
	done := make(chan error, 1)
	go func() {
		_, err := c.GetRoutes(slow, "2026-03-02")
		done <- err
	}()
	waitFor(t, func() bool { return sim.Stats().InFlight == 1 })

	waiting, cancel := context.WithCancel(ctx(t))
	cancel()
	_, err := c.GetPlanningStatus(waiting, 1)
	is.True(errors.Is(err, context.Canceled))                      // gave up waiting for the slot
	is.Equal(c.Calls()[optimoroute.OpGetPlanningStatus], int64(0)) // without sending

	cancelSlow()
	is.True(errors.Is(<-done, context.Canceled)) // the slow call ends with its context
}

func TestCollectors(t *testing.T) {
	is := is.New(t)
	sim, c := setup(t, optimosim.Options{}, optimoroute.Config{})
	reg := prometheus.NewRegistry()
	for _, col := range c.Collectors() {
		is.NoErr(reg.Register(col)) // registers cleanly
	}
	_, err := c.GetRoutes(ctx(t), "2026-03-02")
	is.NoErr(err) // ok
	sim.InjectFault(optimosim.Fault{Code: "ERR_INTERNAL"})
	_, err = c.GetRoutes(ctx(t), "2026-03-02")
	is.True(err != nil) // api_error

	mfs, err := reg.Gather()
	is.NoErr(err) // gathered
	counts := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "optimoroute_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := ""
			for _, l := range m.GetLabel() {
				labels += l.GetName() + "=" + l.GetValue() + ","
			}
			counts[labels] = m.GetCounter().GetValue()
		}
	}
	is.Equal(counts["operation=get_routes,result=ok,"], 1.0)        // one success
	is.Equal(counts["operation=get_routes,result=api_error,"], 1.0) // one failure
}

func TestResultsThatCannotBeMatchedFailTheChunk(t *testing.T) {
	answers := map[string]string{
		"fewer results":             `{"success":true,"orders":[{"success":true,"orderNo":"A"}]}`,
		"another order":             `{"success":true,"orders":[{"success":true,"orderNo":"B"},{"success":true,"orderNo":"A"}]}`,
		"not an OptimoRoute answer": `[1,2]`,
	}
	for name, answer := range answers {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				fmt.Fprint(w, answer)
			}))
			defer srv.Close()
			c, err := optimoroute.New(optimoroute.Config{APIURL: srv.URL, APIKey: testKey})
			is.NoErr(err) // configured
			res, err := c.CreateOrUpdateOrders(ctx(t), []optimoroute.Order{order("A", "2026-03-02"), order("B", "2026-03-02")})
			var chunk *optimoroute.ChunkError
			is.True(errors.As(err, &chunk))    // the chunk fails as a whole
			is.Equal(res[0].Err, error(chunk)) // no order is taken as written
			is.Equal(res[1].Err, error(chunk)) // …
		})
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
