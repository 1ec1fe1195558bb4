package optimosim_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/optimosim"
	"github.com/matryer/is"
)

// A simulator opened again on its state file holds the orders and planning
// runs it held, and hands out no order or planning id twice, not even
// after a Reset (bin/primeflow keeps it under DATA_DIR).
func TestStateFileKeepsOrdersAndNeverReusesIds(t *testing.T) {
	is := is.New(t)
	state := filepath.Join(t.TempDir(), "simulators", "optimoroute.json")
	open := func() *httptest.Server {
		sim, err := optimosim.Open(optimosim.Options{ControlToken: controlToken}, state)
		is.NoErr(err)
		srv := httptest.NewServer(sim)
		t.Cleanup(srv.Close)
		return srv
	}

	srv := open()
	status, out := call(t, srv, http.MethodPost, "/create_order"+key, anOrder("A1", "2026-12-02"))
	is.Equal(status, http.StatusOK)
	firstOrder := out["id"]
	_, out = call(t, srv, http.MethodPost, "/start_planning"+key, map[string]any{"date": "2026-12-02"})
	firstPlan := out["planningId"]
	is.True(firstPlan != nil) // planning started
	fi, err := os.Stat(state)
	is.NoErr(err)
	is.Equal(fi.Mode().Perm(), os.FileMode(0o600)) // the owner's only
	srv.Close()

	srv = open() // a restart
	_, out = call(t, srv, http.MethodGet, "/get_orders"+key+"&orderNo=A1", nil)
	orders, _ := out["orders"].([]any)
	is.Equal(len(orders), 1)
	is.Equal(orders[0].(map[string]any)["id"], firstOrder) // the order is still there
	_, out = call(t, srv, http.MethodGet, "/get_planning_status"+key+"&planningId="+jsonNumber(firstPlan), nil)
	is.Equal(out["success"], true) // and the planning run
	_, out = call(t, srv, http.MethodPost, "/create_order"+key, anOrder("A2", "2026-12-02"))
	is.True(out["id"] != firstOrder) // a new order gets a new id

	status, _ = call(t, srv, http.MethodPost, "/_sim/reset", nil)
	is.Equal(status, http.StatusNoContent) // reset
	_, out = call(t, srv, http.MethodPost, "/create_order"+key, anOrder("A3", "2026-12-03"))
	is.True(out["id"] != firstOrder) // a Reset does not rewind the order ids
	_, out = call(t, srv, http.MethodPost, "/start_planning"+key, map[string]any{"date": "2026-12-03"})
	is.True(out["planningId"] != firstPlan) // nor the planning ids
}

func jsonNumber(v any) string {
	f, _ := v.(float64)
	return strconv.FormatFloat(f, 'f', -1, 64)
}
