package optimoroute

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
)

// StartPlanningRequest is the body of start_planning. Only Date is required.
type StartPlanningRequest struct {
	// Date is the day to plan, YYYY-MM-DD.
	Date string `json:"date"`
	// Balancing is OFF, ON or ON_FORCE.
	Balancing string `json:"balancing,omitempty"`
	// BalanceBy is WT (working time) or NUM (number of orders).
	BalanceBy string `json:"balanceBy,omitempty"`
	// BalancingFactor weighs balance against cost, 0 to 1.
	BalancingFactor *float64 `json:"balancingFactor,omitempty"`
	// StartWith is EMPTY (plan from scratch) or CURRENT (keep the routes).
	StartWith string `json:"startWith,omitempty"`
	// LockType is NONE, ROUTES or RESOURCES.
	LockType string `json:"lockType,omitempty"`
	// Clustering groups nearby orders on one route.
	Clustering *bool `json:"clustering,omitempty"`
	// UseDrivers limits planning to these drivers.
	UseDrivers []PlanningDriver `json:"useDrivers,omitempty"`
}

// PlanningDriver names a driver for start_planning.
type PlanningDriver struct {
	DriverSerial     string `json:"driverSerial,omitempty"`
	DriverExternalID string `json:"driverExternalId,omitempty"`
}

// PlanningStarted is the answer to start_planning.
type PlanningStarted struct {
	PlanningID int64
	// MissingOrders and MissingDrivers are the orders and drivers named in
	// the request that OptimoRoute does not know.
	MissingOrders  []string
	MissingDrivers []string
}

// UnmarshalJSON reads the answer; the missing lists may hold strings or
// objects (shape assumed: external-apis.md shows only empty lists).
func (p *PlanningStarted) UnmarshalJSON(b []byte) error {
	var raw struct {
		PlanningID     int64             `json:"planningId"`
		MissingOrders  []json.RawMessage `json:"missingOrders"`
		MissingDrivers []json.RawMessage `json:"missingDrivers"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	p.PlanningID = raw.PlanningID
	p.MissingOrders = identifiers(raw.MissingOrders)
	p.MissingDrivers = identifiers(raw.MissingDrivers)
	return nil
}

// identifiers reads names sent as "a" or as {"orderNo":"a"} and the like.
func identifiers(raw []json.RawMessage) []string {
	out := make([]string, 0, len(raw))
	for _, r := range raw {
		var s string
		if json.Unmarshal(r, &s) == nil {
			out = append(out, s)
			continue
		}
		var m map[string]any
		if json.Unmarshal(r, &m) != nil {
			out = append(out, string(r))
			continue
		}
		name := string(r)
		for _, k := range []string{"orderNo", "driverSerial", "serial", "driverExternalId", "externalId", "id"} {
			if v, ok := m[k]; ok {
				name = stringOf(v)
				break
			}
		}
		out = append(out, name)
	}
	return out
}

func stringOf(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

// StartPlanning starts planning a date. While a plan for that date runs it
// fails with an error matching ErrOptRunning.
func (c *Client) StartPlanning(ctx context.Context, req StartPlanningRequest) (PlanningStarted, error) {
	var out PlanningStarted
	err := c.post(ctx, OpStartPlanning, req, &out)
	return out, err
}

// PlanningStatusCode is the state of a planning run.
type PlanningStatusCode string

// Planning states.
const (
	PlanningNew       PlanningStatusCode = "N"
	PlanningRunning   PlanningStatusCode = "R"
	PlanningCancelled PlanningStatusCode = "C"
	PlanningFinished  PlanningStatusCode = "F"
	PlanningError     PlanningStatusCode = "E"
)

// Done reports whether the run has ended, well or not.
func (s PlanningStatusCode) Done() bool {
	return s == PlanningCancelled || s == PlanningFinished || s == PlanningError
}

// PlanningStatus is the answer to get_planning_status.
type PlanningStatus struct {
	Status             PlanningStatusCode `json:"status"`
	PercentageComplete int                `json:"percentageComplete"`
}

// GetPlanningStatus reads the state of a planning run.
func (c *Client) GetPlanningStatus(ctx context.Context, planningID int64) (PlanningStatus, error) {
	var out PlanningStatus
	err := c.get(ctx, OpGetPlanningStatus, url.Values{"planningId": {strconv.FormatInt(planningID, 10)}}, &out)
	return out, err
}

// StopPlanning stops a planning run; its status becomes C.
func (c *Client) StopPlanning(ctx context.Context, planningID int64) error {
	return c.post(ctx, OpStopPlanning, struct {
		PlanningID int64 `json:"planningId"`
	}{planningID}, nil)
}

// Route is one driver's route for a day.
type Route struct {
	DriverSerial        string `json:"driverSerial"`
	DriverExternalID    string `json:"driverExternalId"`
	DriverName          string `json:"driverName"`
	VehicleRegistration string `json:"vehicleRegistration"`
	// Duration is the route's length in minutes.
	Duration float64 `json:"duration"`
	// Distance is the route's length in kilometres.
	Distance float64 `json:"distance"`
	Stops    []Stop  `json:"stops"`
}

// Stop is one stop of a route. Depot and break stops have no OrderNo.
type Stop struct {
	StopNumber int    `json:"stopNumber"`
	OrderNo    string `json:"orderNo"`
	ID         string `json:"id"`
	LocationNo string `json:"locationNo"`
	// Type is set on stops that are not orders ("depot", "break"; assumed).
	Type string `json:"type"`
	// ScheduledAt is "HH:MM"; ScheduledAtDt is "YYYY-MM-DD HH:MM:SS", local
	// to the account.
	ScheduledAt   string `json:"scheduledAt"`
	ScheduledAtDt string `json:"scheduledAtDt"`
	// TravelTime is in seconds, Distance in metres, from the previous stop.
	TravelTime float64 `json:"travelTime"`
	Distance   float64 `json:"distance"`
}

// IsOrder reports whether the stop services an order.
func (s Stop) IsOrder() bool { return s.OrderNo != "" }

// GetRoutes reads the routes of a date (YYYY-MM-DD). No routes means nothing
// is planned for it.
func (c *Client) GetRoutes(ctx context.Context, date string) ([]Route, error) {
	var out struct {
		Routes []Route `json:"routes"`
	}
	err := c.get(ctx, OpGetRoutes, url.Values{"date": {date}}, &out)
	return out.Routes, err
}
