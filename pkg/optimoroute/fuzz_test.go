package optimoroute

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzKey is the client's key in FuzzAnswer: characters a URL escapes, so
// that each form redact knows is tried.
const fuzzKey = "fuzz+K3y/with space&sec=ret"

// FuzzAnswer feeds OptimoRoute's answers, whatever their status, to what
// every operation decodes them into. An answer is ok, an API error or an
// HTTP error, never a panic; an error never carries the key, or a piece of
// it cut off at the end of a snippet; and an answer in valid UTF-8 gives
// an error in valid UTF-8 (it is logged and stored).
func FuzzAnswer(f *testing.F) {
	for _, seed := range []struct {
		status int
		body   string
	}{
		{200, `{"success":true,"planningId":7,"missingOrders":["A",{"orderNo":"B"}],"missingDrivers":[{"serial":"1"}]}`},
		{200, `{"success":true,"status":"F","percentageComplete":100}`},
		{200, `{"success":true,"routes":[{"driverSerial":"1","duration":12.5,"stops":[{"stopNumber":1,"orderNo":"A","scheduledAtDt":"2026-03-02 09:00:00"}]}]}`},
		{200, `{"success":true,"orders":[{"success":true,"orderNo":"A","id":12},{"success":false,"orderNo":"B","code":"ERR_LOC_GEOCODING","message":"no"}]}`},
		{200, `{"success":true,"orders":[{"success":true,"orderNo":"A","data":{"orderNo":"A","date":"2026-03-02","customField1":"x","location":{"latitude":-37.8}}}]}`},
		{200, `{"success":false,"code":"ERR_INTERNAL","message":"key=` + fuzzKey + ` rejected"}`},
		{401, `{"success":false,"code":"AUTH_KEY_UNKNOWN"}`},
		{502, `<html><body><h1>502 Bad Gateway</h1>` + strings.Repeat("é", 120) + `</body></html>`},
		{502, strings.Repeat("x", 195) + fuzzKey},
		{500, ``}, {200, `{}`}, {200, `null`}, {200, `{"success":true,"planningId":"7"}`}, {299, `{"code":""}`},
	} {
		f.Add(seed.status, []byte(seed.body))
	}
	c, err := New(Config{APIURL: "https://api.optimoroute.example/v1", APIKey: fuzzKey})
	if err != nil {
		f.Fatal(err)
	}
	half := fuzzKey[:len(fuzzKey)/2]
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		var started PlanningStarted
		var planning PlanningStatus
		var routes struct {
			Routes []Route `json:"routes"`
		}
		var bulk bulkResponse
		for op, out := range map[string]any{OpStartPlanning: &started, OpGetPlanningStatus: &planning, OpGetRoutes: &routes, OpGetOrders: &bulk, OpStopPlanning: nil} {
			result, err := c.answer(op, status, body, out)
			switch {
			case (result == "ok") != (err == nil):
				t.Fatalf("%s: result %q with error %v", op, result, err)
			case result != "ok" && result != "api_error" && result != "http_error":
				t.Fatalf("%s: result %q", op, result)
			case err == nil:
				continue
			}
			msg := err.Error()
			if strings.Contains(msg, fuzzKey) || strings.Contains(msg, half) && !strings.Contains(strings.ReplaceAll(string(body), fuzzKey, ""), half) {
				t.Fatalf("%s: the error carries the key: %s", op, msg)
			}
			if utf8.Valid(body) && !utf8.ValidString(msg) {
				t.Fatalf("%s: an answer in UTF-8 gave an error that is not: %q", op, msg)
			}
		}
		for _, it := range bulk.Orders {
			idString(it.ID)
			if it.Data != nil {
				if _, err := json.Marshal(it.Data); err != nil {
					t.Fatalf("order %s as read cannot be written again: %v", it.Data.OrderNo, err)
				}
			}
		}
	})
}
