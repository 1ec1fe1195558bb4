package optimosim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
	"github.com/ethosbuilding/primeflow/pkg/optimosim"
	"github.com/ethosbuilding/primeflow/pkg/simcontrol"
	"github.com/matryer/is"
)

// call sends one raw request, as a client that is not ours would, and
// decodes the JSON answer.
func call(t *testing.T, srv *httptest.Server, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(path, simcontrol.Prefix) {
		simcontrol.Authorize(req, controlToken)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil && err != io.EOF {
		t.Fatalf("%s %s: decode: %v", method, path, err)
	}
	return resp.StatusCode, out
}

// controlToken is the control endpoints' token of the simulators start
// runs, which call sends with every control request.
const controlToken = "optimosim-test-control-token"

func start(t *testing.T, opts optimosim.Options) (*optimosim.Sim, *httptest.Server) {
	t.Helper()
	if opts.ControlToken == "" {
		opts.ControlToken = controlToken
	}
	sim := optimosim.New(opts)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return sim, srv
}

func anOrder(no, date string) map[string]any {
	return map[string]any{"operation": "SYNC", "orderNo": no, "type": "D", "date": date, "duration": 20,
		"location": map[string]any{"address": "1 Test St"}}
}

const key = "?key=" + optimosim.DefaultAPIKey

func TestKeyIsChecked(t *testing.T) {
	tests := []struct {
		name, query, code string
	}{
		{"missing", "", "AUTH_KEY_MISSING"},
		{"unknown", "&key=nope", "AUTH_KEY_UNKNOWN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			_, srv := start(t, optimosim.Options{})
			status, out := call(t, srv, http.MethodGet, "/get_routes?date=2026-03-02"+tt.query, nil)
			is.Equal(status, http.StatusUnauthorized) // refused
			is.Equal(out["success"], false)           // OptimoRoute's error shape
			is.Equal(out["code"], tt.code)            // with the code
		})
	}
}

func TestOrderWireShapes(t *testing.T) {
	is := is.New(t)
	sim, srv := start(t, optimosim.Options{})
	status, out := call(t, srv, http.MethodPost, "/create_or_update_orders"+key, map[string]any{"orders": []any{
		anOrder("W1", "2026-03-02"),
		map[string]any{"orderNo": "W2", "date": "2026-03-02"}, // no location
		anOrder("W3", "not a date"),
	}})
	is.Equal(status, http.StatusOK) // the call succeeds
	is.Equal(out["success"], true)  // as a whole
	res := out["orders"].([]any)
	is.Equal(len(res), 3)                                                 // positional results
	is.Equal(res[0].(map[string]any)["orderNo"], "W1")                    // a success names its order
	is.Equal(res[1].(map[string]any)["code"], "ERR_MISSING_MAND_FIELD")   // no location
	is.Equal(res[1].(map[string]any)["orderNo"], nil)                     // a failure need not name it
	is.Equal(res[2].(map[string]any)["code"], "ERR_INVALID_PARAM_FORMAT") // bad date
	is.Equal(sim.OrderNos(""), []string{"W1"})                            // only W1 held

	_, out = call(t, srv, http.MethodGet, "/get_orders"+key+"&orderNo=W1", nil)
	data := out["orders"].([]any)[0].(map[string]any)["data"].(map[string]any)
	is.Equal(data["orderNo"], "W1")  // get_orders by GET
	is.Equal(data["operation"], nil) // operation is not stored
	is.True(data["id"] != "")        // an id is assigned

	status, out = call(t, srv, http.MethodPost, "/create_order"+key, anOrder("W4", "2026-03-02"))
	is.Equal(status, http.StatusOK) // create_order
	is.True(out["id"] != nil)       // answers the id
	status, out = call(t, srv, http.MethodPost, "/delete_order"+key, map[string]any{"orderNo": "W4"})
	is.Equal(out["success"], true) // delete_order
	_, out = call(t, srv, http.MethodPost, "/delete_order"+key, map[string]any{"orderNo": "W4"})
	is.Equal(out["code"], "ERR_ORD_NOT_FOUND") // twice: gone
	is.Equal(status, http.StatusOK)            // with HTTP 200

	too := make([]any, 501)
	for i := range too {
		too[i] = anOrder("X", "2026-03-02")
	}
	_, out = call(t, srv, http.MethodPost, "/create_or_update_orders"+key, map[string]any{"orders": too})
	is.Equal(out["code"], "ERR_INVALID_PARAM_FORMAT") // more than 500 orders refused

	status, out = call(t, srv, http.MethodPost, "/create_or_update_orders"+key, "not an object")
	is.Equal(status, http.StatusBadRequest)    // a broken body
	is.Equal(out["code"], "MALFORMED_REQUEST") // is malformed
}

func TestOrderOperations(t *testing.T) {
	tests := []struct {
		name  string
		first map[string]any // written before, if set
		write map[string]any
		code  string // expected failure, if any
		notes any    // notes held afterwards
	}{
		{"UPDATE of a missing order", nil, map[string]any{"operation": "UPDATE", "orderNo": "O1", "notes": "n"}, "ERR_ORD_NOT_FOUND", nil},
		{"CREATE of an existing order", anOrder("O1", "2026-03-02"), anOrder("O1", "2026-03-02"), "ERR_INVALID_PARAM_FORMAT", nil},
		{"MERGE keeps fields", with(anOrder("O1", "2026-03-02"), "notes", "kept"), map[string]any{"operation": "MERGE", "orderNo": "O1", "duration": 5}, "", "kept"},
		{"SYNC replaces fields", with(anOrder("O1", "2026-03-02"), "notes", "gone"), anOrder("O1", "2026-03-02"), "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			sim, srv := start(t, optimosim.Options{})
			if tt.first != nil {
				call(t, srv, http.MethodPost, "/create_or_update_orders"+key, map[string]any{"orders": []any{tt.first}})
			}
			if tt.name == "CREATE of an existing order" {
				tt.write["operation"] = "CREATE"
			}
			_, out := call(t, srv, http.MethodPost, "/create_or_update_orders"+key, map[string]any{"orders": []any{tt.write}})
			res := out["orders"].([]any)[0].(map[string]any)
			if tt.code != "" {
				is.Equal(res["code"], tt.code) // refused with the code
				return
			}
			is.Equal(res["success"], true) // written
			raw, _ := sim.Order("O1")
			var held map[string]any
			is.NoErr(json.Unmarshal(raw, &held)) // readable
			is.Equal(held["notes"], tt.notes)    // notes as expected
		})
	}
}

func with(m map[string]any, k string, v any) map[string]any {
	m[k] = v
	return m
}

func TestControlEndpoints(t *testing.T) {
	is := is.New(t)
	sim, srv := start(t, optimosim.Options{})
	ctl := optimosim.Control{
		Faults:       []optimosim.Fault{{Operation: "get_routes", Count: 2, Code: "ERR_INTERNAL", HTTPStatus: 503}},
		Latency:      map[string]string{"get_planning_status": "1ms"},
		PlanningMode: optimosim.PlanningNeverCompletes,
		FailOrders:   map[string]string{"BAD": "ERR_LOC_GEOCODING"},
	}
	status, _ := call(t, srv, http.MethodPost, "/_sim/faults", ctl)
	is.Equal(status, http.StatusNoContent) // accepted

	for range 2 {
		status, out := call(t, srv, http.MethodGet, "/get_routes"+key+"&date=2026-03-02", nil)
		is.Equal(status, 503)                 // the injected status
		is.Equal(out["code"], "ERR_INTERNAL") // and code
	}
	status, _ = call(t, srv, http.MethodGet, "/get_routes"+key+"&date=2026-03-02", nil)
	is.Equal(status, http.StatusOK) // only twice

	_, out := call(t, srv, http.MethodPost, "/create_or_update_orders"+key, map[string]any{"orders": []any{anOrder("BAD", "2026-03-02")}})
	is.Equal(out["orders"].([]any)[0].(map[string]any)["code"], "ERR_LOC_GEOCODING") // per-order failure injected

	_, stats := call(t, srv, http.MethodGet, "/_sim/stats", nil)
	is.Equal(stats["calls"].(map[string]any)["get_routes"], 3.0) // calls counted, failures included
	is.Equal(stats["maxInFlight"], 1.0)                          // one at a time here

	status, _ = call(t, srv, http.MethodPost, "/_sim/reset", nil)
	is.Equal(status, http.StatusNoContent)       // reset
	is.Equal(sim.Stats().Calls["get_routes"], 0) // counters cleared
	is.Equal(len(sim.Events()), 0)               // log cleared

	bad, _ := json.Marshal(optimosim.Control{PlanningMode: "sometimes"})
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/_sim/faults", bytes.NewReader(bad))
	is.NoErr(err)
	simcontrol.Authorize(req, controlToken)
	resp, err := srv.Client().Do(req)
	is.NoErr(err)                                    // posted
	is.Equal(resp.StatusCode, http.StatusBadRequest) // an unknown mode is refused
	resp.Body.Close()
}

// The control endpoints serve only a request with the simulator's token and
// a JSON body: a page on another origin cannot make the simulator forget
// its orders with the text/plain POST a browser sends without asking
// (issue 27 §6).
func TestControlNeedsTheTokenAndJSON(t *testing.T) {
	is := is.New(t)
	sim, srv := start(t, optimosim.Options{})
	status, _ := call(t, srv, http.MethodPost, "/create_or_update_orders"+key, map[string]any{"orders": []any{anOrder("A1", "2026-03-02")}})
	is.Equal(status, http.StatusOK)
	for _, req := range simcontrol.Forged(http.MethodPost, srv.URL+"/_sim/reset", `{}`, controlToken) {
		resp, err := srv.Client().Do(req)
		is.NoErr(err)
		resp.Body.Close()
		is.True(resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusUnsupportedMediaType) // refused
	}
	_, kept := sim.Order("A1")
	is.True(kept) // the order is still there
}

func TestProxyPageFault(t *testing.T) {
	is := is.New(t)
	sim, srv := start(t, optimosim.Options{})
	sim.InjectFault(optimosim.Fault{Operation: "get_routes"})
	resp, err := http.Get(srv.URL + "/get_routes" + key + "&date=2026-03-02")
	is.NoErr(err) // sent
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	is.Equal(resp.StatusCode, http.StatusBadGateway)   // 502 by default
	is.True(strings.HasPrefix(string(body), "<html>")) // not JSON
}

func TestClearFaultsKeepsTheOrders(t *testing.T) {
	is := is.New(t)
	sim, srv := start(t, optimosim.Options{})
	status, _ := call(t, srv, http.MethodPost, "/create_order"+key, anOrder("A1", "2026-03-02"))
	is.Equal(status, http.StatusOK) // an order held
	sim.InjectFault(optimosim.Fault{Count: 5})
	sim.ClearFaults()
	resp, err := http.Get(srv.URL + "/get_routes" + key + "&date=2026-03-02")
	is.NoErr(err)
	resp.Body.Close()
	is.Equal(resp.StatusCode, http.StatusOK)   // no fault left
	is.Equal(sim.OrderNos(""), []string{"A1"}) // and the order is still held
}

func TestWaitEvent(t *testing.T) {
	is := is.New(t)
	sim, srv := start(t, optimosim.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan optimosim.Event, 1)
	go func() {
		ev, err := sim.WaitEvent(ctx, func(e optimosim.Event) bool {
			return e.Operation == "start_planning" && e.Date == "2026-03-09"
		})
		if err == nil {
			got <- ev
		}
		close(got)
	}()
	call(t, srv, http.MethodPost, "/start_planning"+key, map[string]any{"date": "2026-03-08"})
	call(t, srv, http.MethodPost, "/start_planning"+key, map[string]any{"date": "2026-03-09"})
	ev, ok := <-got
	is.True(ok)                       // the waiter saw it
	is.Equal(ev.Date, "2026-03-09")   // the matching event, not the first
	is.Equal(ev.PlanningID, int64(2)) // with its planning id
	is.Equal(ev.Seq, 2)               // in sequence

	short, cancelShort := context.WithCancel(context.Background())
	cancelShort()
	_, err := sim.WaitEvent(short, func(optimosim.Event) bool { return false })
	is.True(err != nil) // gives up with its context
}

func TestSchedulingInfo(t *testing.T) {
	is := is.New(t)
	clock := optimosim.NewClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	_, srv := start(t, optimosim.Options{Now: clock.Now, PlanningDuration: time.Second})
	call(t, srv, http.MethodPost, "/create_or_update_orders"+key, map[string]any{"orders": []any{anOrder("S1", "2026-03-02")}})
	_, out := call(t, srv, http.MethodGet, "/get_scheduling_info"+key+"&orderNo=S1", nil)
	is.Equal(out["orderScheduled"], false) // not planned yet
	call(t, srv, http.MethodPost, "/start_planning"+key, map[string]any{"date": "2026-03-02"})
	clock.Advance(time.Second)
	_, out = call(t, srv, http.MethodGet, "/get_scheduling_info"+key+"&orderNo=S1", nil)
	is.Equal(out["orderScheduled"], true) // planned
	info := out["scheduleInformation"].(map[string]any)
	is.Equal(info["driverSerial"], "1")                    // on the first driver
	is.Equal(info["scheduledAtDt"], "2026-03-02 08:15:00") // after the first leg
	_, out = call(t, srv, http.MethodGet, "/get_scheduling_info"+key+"&orderNo=NOPE", nil)
	is.Equal(out["code"], "ERR_ORD_NOT_FOUND") // unknown order
}

// A client built from ClientConfig is let in, with the simulator's own key.
func TestClientConfig(t *testing.T) {
	for _, tc := range []struct{ name, key string }{{"default key", ""}, {"own key", "another-key"}} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			sim, srv := start(t, optimosim.Options{APIKey: tc.key})
			c, err := optimoroute.New(sim.ClientConfig(srv.URL))
			is.NoErr(err)
			_, err = c.GetRoutes(context.Background(), "2026-03-02")
			is.NoErr(err) // the key is accepted
		})
	}
}
