package optimosim

import (
	"net/http"
	"strconv"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
)

// plan is one planning run. Its status follows from the clock, so tests
// move it by moving Options.Now.
type plan struct {
	id       int64
	date     string
	start    time.Time
	mode     PlanningMode
	drivers  []Driver
	orderNos []string // the date's orders when the run started
	stopped  bool
	stopPct  int
}

// stateLocked returns the run's status and percentage now.
func (s *Sim) stateLocked(p *plan) (optimoroute.PlanningStatusCode, int) {
	if p.stopped {
		return optimoroute.PlanningCancelled, p.stopPct
	}
	steps := s.opts.PlanningSteps
	elapsed := s.opts.Now().Sub(p.start)
	step := int(float64(elapsed) / float64(s.opts.PlanningDuration) * float64(steps))
	switch {
	case step <= 0:
		return optimoroute.PlanningNew, 0
	case step < steps:
		return optimoroute.PlanningRunning, step * 100 / steps
	}
	switch p.mode {
	case PlanningNeverCompletes:
		return optimoroute.PlanningRunning, (steps - 1) * 100 / steps
	case PlanningFails:
		return optimoroute.PlanningError, (steps - 1) * 100 / steps
	default:
		return optimoroute.PlanningFinished, 100
	}
}

func (s *Sim) planLocked(id int64) *plan {
	if id <= s.planBase || id > s.planBase+int64(len(s.plans)) {
		return nil
	}
	return s.plans[id-s.planBase-1]
}

// finishedLocked returns the latest run for date that finished, or nil.
func (s *Sim) finishedLocked(date string) *plan {
	for i := len(s.plans) - 1; i >= 0; i-- {
		p := s.plans[i]
		if st, _ := s.stateLocked(p); p.date == date && st == optimoroute.PlanningFinished {
			return p
		}
	}
	return nil
}

func checkDate(date string) *apiError {
	if date == "" {
		return failf(optimoroute.ErrMissingMandField, "date is required")
	}
	if _, err := time.Parse(time.DateOnly, date); err != nil {
		return failf(optimoroute.ErrInvalidParamFormat, "date %q: want YYYY-MM-DD", date)
	}
	return nil
}

func (s *Sim) handleStartPlanning(r *http.Request, ev *Event) (any, *apiError) {
	var in struct {
		Date       string `json:"date"`
		UseDrivers []struct {
			DriverSerial     string `json:"driverSerial"`
			DriverExternalID string `json:"driverExternalId"`
		} `json:"useDrivers"`
	}
	if aerr := decodeBody(r, &in); aerr != nil {
		return nil, aerr
	}
	ev.Date = in.Date
	if aerr := checkDate(in.Date); aerr != nil {
		return nil, aerr
	}
	for _, p := range s.plans {
		if st, _ := s.stateLocked(p); p.date == in.Date && !st.Done() {
			return nil, failf(optimoroute.ErrOptRunning, "planning %d for %s is running", p.id, in.Date)
		}
	}
	drivers := s.opts.Drivers
	missing := []string{}
	if len(in.UseDrivers) > 0 {
		drivers = nil
		for _, u := range in.UseDrivers {
			found := false
			for _, d := range s.opts.Drivers {
				if (u.DriverSerial != "" && u.DriverSerial == d.Serial) || (u.DriverExternalID != "" && u.DriverExternalID == d.ExternalID) {
					drivers = append(drivers, d)
					found = true
					break
				}
			}
			if !found {
				missing = append(missing, u.DriverSerial+u.DriverExternalID)
			}
		}
	}
	p := &plan{
		id:       s.planBase + int64(len(s.plans)) + 1,
		date:     in.Date,
		start:    s.opts.Now(),
		mode:     s.planningMode,
		drivers:  drivers,
		orderNos: s.orderNosLocked(in.Date),
	}
	s.plans = append(s.plans, p)
	ev.PlanningID = p.id
	return map[string]any{"success": true, "planningId": p.id, "missingOrders": []string{}, "missingDrivers": missing}, nil
}

func (s *Sim) handleGetPlanningStatus(r *http.Request, ev *Event) (any, *apiError) {
	raw := r.URL.Query().Get("planningId")
	if raw == "" {
		return nil, failf(optimoroute.ErrMissingMandField, "planningId is required")
	}
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return nil, failf(optimoroute.ErrInvalidParamFormat, "planningId %q: want a number", raw)
	}
	ev.PlanningID = id
	p := s.planLocked(id)
	if p == nil {
		return nil, failf(optimoroute.ErrInvalidParamFormat, "planningId %d is unknown", id)
	}
	ev.Date = p.date
	st, pct := s.stateLocked(p)
	return map[string]any{"success": true, "status": st, "percentageComplete": pct}, nil
}

func (s *Sim) handleStopPlanning(r *http.Request, ev *Event) (any, *apiError) {
	var in struct {
		PlanningID int64 `json:"planningId"`
	}
	if aerr := decodeBody(r, &in); aerr != nil {
		return nil, aerr
	}
	ev.PlanningID = in.PlanningID
	p := s.planLocked(in.PlanningID)
	if p == nil {
		return nil, failf(optimoroute.ErrInvalidParamFormat, "planningId %d is unknown", in.PlanningID)
	}
	ev.Date = p.date
	if st, pct := s.stateLocked(p); !st.Done() {
		p.stopped, p.stopPct = true, pct
	}
	return map[string]any{"success": true}, nil
}

// Wire shapes of get_routes.
type (
	wireRoute struct {
		DriverSerial        string     `json:"driverSerial"`
		DriverExternalID    string     `json:"driverExternalId"`
		DriverName          string     `json:"driverName"`
		VehicleRegistration string     `json:"vehicleRegistration"`
		Duration            float64    `json:"duration"`
		Distance            float64    `json:"distance"`
		Stops               []wireStop `json:"stops"`
	}
	wireStop struct {
		StopNumber    int     `json:"stopNumber"`
		OrderNo       string  `json:"orderNo,omitempty"`
		ID            string  `json:"id,omitempty"`
		LocationNo    string  `json:"locationNo,omitempty"`
		Type          string  `json:"type,omitempty"`
		ScheduledAt   string  `json:"scheduledAt"`
		ScheduledAtDt string  `json:"scheduledAtDt"`
		TravelTime    float64 `json:"travelTime"`
		Distance      float64 `json:"distance"`
	}
)

// The made-up geography: every leg is 15 minutes and 5 km, days start at
// 08:00 and end back at the depot.
const (
	legTime     = 15 * time.Minute
	legDistance = 5000.0
	dayStart    = 8 * time.Hour
)

// routesLocked builds p's routes from the orders of its date that still
// exist: each order on its assigned driver if that driver is planned, the
// others round-robin.
func (s *Sim) routesLocked(p *plan) []wireRoute {
	if len(p.drivers) == 0 {
		return []wireRoute{}
	}
	perDriver := make([][]string, len(p.drivers))
	next := 0
	for _, no := range p.orderNos {
		o, ok := s.orders[no]
		if !ok || o.date() != p.date {
			continue
		}
		serial, ext := o.assignedTo()
		idx := -1
		for i, d := range p.drivers {
			if (serial != "" && serial == d.Serial) || (ext != "" && ext == d.ExternalID) {
				idx = i
				break
			}
		}
		if idx < 0 {
			idx = next % len(p.drivers)
			next++
		}
		perDriver[idx] = append(perDriver[idx], no)
	}
	day, _ := time.Parse(time.DateOnly, p.date)
	routes := []wireRoute{}
	for i, d := range p.drivers {
		if len(perDriver[i]) == 0 {
			continue
		}
		at := day.Add(dayStart)
		var stops []wireStop
		for _, no := range perDriver[i] {
			o := s.orders[no]
			at = at.Add(legTime)
			stops = append(stops, stopAt(len(stops)+1, at, wireStop{OrderNo: no, ID: o.id, LocationNo: o.locationNo()}))
			at = at.Add(o.duration())
		}
		at = at.Add(legTime)
		stops = append(stops, stopAt(len(stops)+1, at, wireStop{LocationNo: "DEPOT", Type: "depot"}))
		routes = append(routes, wireRoute{
			DriverSerial:        d.Serial,
			DriverExternalID:    d.ExternalID,
			DriverName:          d.Name,
			VehicleRegistration: d.Vehicle,
			Duration:            at.Sub(day.Add(dayStart)).Minutes(),
			Distance:            float64(len(stops)) * legDistance / 1000,
			Stops:               stops,
		})
	}
	return routes
}

func stopAt(n int, at time.Time, st wireStop) wireStop {
	st.StopNumber = n
	st.ScheduledAt = at.Format("15:04")
	st.ScheduledAtDt = at.Format(time.DateTime)
	st.TravelTime = legTime.Seconds()
	st.Distance = legDistance
	return st
}

func (s *Sim) handleGetRoutes(r *http.Request, ev *Event) (any, *apiError) {
	date := r.URL.Query().Get("date")
	ev.Date = date
	if aerr := checkDate(date); aerr != nil {
		return nil, aerr
	}
	routes := []wireRoute{}
	if p := s.finishedLocked(date); p != nil {
		routes = s.routesLocked(p)
	}
	return map[string]any{"success": true, "routes": routes}, nil
}

func (s *Sim) handleGetSchedulingInfo(r *http.Request, ev *Event) (any, *apiError) {
	no := r.URL.Query().Get("orderNo")
	ev.OrderNos = []string{no}
	o, ok := s.orders[no]
	if !ok {
		return nil, failf(optimoroute.ErrOrderNotFound, "order %s not found", no)
	}
	if p := s.finishedLocked(o.date()); p != nil {
		for _, rt := range s.routesLocked(p) {
			for _, st := range rt.Stops {
				if st.OrderNo == no {
					return map[string]any{"success": true, "orderScheduled": true, "scheduleInformation": map[string]any{
						"driverSerial":     rt.DriverSerial,
						"driverExternalId": rt.DriverExternalID,
						"driverName":       rt.DriverName,
						"stopNumber":       st.StopNumber,
						"scheduledAt":      st.ScheduledAt,
						"scheduledAtDt":    st.ScheduledAtDt,
					}}, nil
				}
			}
		}
	}
	return map[string]any{"success": true, "orderScheduled": false}, nil
}
