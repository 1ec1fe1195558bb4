// Package optimosim simulates the OptimoRoute Web Service API v1 in memory,
// for tests, benchmarks and the all-in-one process when no API key is
// configured.
//
// A *Sim is an http.Handler: mount it at a URL and point the OptimoRoute
// client's OPTIMOROUTE_API_URL at it (under a prefix with http.StripPrefix).
// It checks the key query parameter, keeps orders in memory (made by Open,
// in a state file too, across restarts), plans a date
// N → R → F over Options.PlanningDuration of Options.Now's time, and builds
// routes that carry every order of the date. Faults, latency and planning
// outcomes are injected through the Go API or the control endpoints (JSON
// only, with the control token as "Authorization: Bearer <token>",
// pkg/simcontrol):
//
//	GET  /_sim/stats   calls per operation, in flight, most in flight
//	POST /_sim/faults  a Control as JSON
//	POST /_sim/reset   forget orders, plans, faults, stats and events
package optimosim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
	"github.com/ethosbuilding/primeflow/pkg/simcontrol"
)

// DefaultAPIKey is the key a Sim accepts when Options.APIKey is empty.
const DefaultAPIKey = "optimosim-key"

// Options configure a Sim. Zero values take the defaults named.
type Options struct {
	// APIKey is the only key accepted; default DefaultAPIKey.
	APIKey string
	// Drivers get the routes, round-robin; default three drivers with
	// serials "1", "2", "3".
	Drivers []Driver
	// PlanningDuration is how long a planning run takes from start to F;
	// default 2s. Zero-length runs are not possible: use a small value.
	PlanningDuration time.Duration
	// PlanningSteps is how many equal steps the run moves through: the
	// first is N, the others R with a growing percentage; default 4.
	PlanningSteps int
	// MaxConcurrent is the most requests served at once; more get
	// ERR_TOO_MANY_CONNECTIONS. Default 5, as OptimoRoute.
	MaxConcurrent int
	// Now is the clock planning runs on; default time.Now. See Clock.
	Now func() time.Time
	// ControlToken is what the control endpoints take, as "Authorization:
	// Bearer <token>", with JSON bodies only (pkg/simcontrol); default a
	// random token, which ControlToken returns.
	ControlToken string
}

// Driver is a driver of the simulated account.
type Driver struct {
	Serial     string
	ExternalID string
	Name       string
	Vehicle    string
}

// PlanningMode decides how planning runs started from now on end.
type PlanningMode string

// Planning modes.
const (
	// PlanningFinishes ends in F after PlanningDuration: the default.
	PlanningFinishes PlanningMode = "finish"
	// PlanningNeverCompletes stays R until stopped.
	PlanningNeverCompletes PlanningMode = "never"
	// PlanningFails ends in E after PlanningDuration.
	PlanningFails PlanningMode = "error"
)

// Fault makes calls fail. Faults are consumed in the order injected; a call
// looks only at the first fault that matches its operation.
type Fault struct {
	// Operation is the API operation; empty matches every operation.
	Operation string `json:"operation,omitempty"`
	// After lets this many matching calls through before failing any.
	After int `json:"after,omitempty"`
	// Count is how many calls fail; 0 means 1.
	Count int `json:"count,omitempty"`
	// Code is the OptimoRoute code sent as {"success":false,…}. Empty sends
	// a non-JSON error page instead, as a proxy in front of the API would.
	Code string `json:"code,omitempty"`
	// Message goes with Code.
	Message string `json:"message,omitempty"`
	// HTTPStatus defaults to 200 with a Code and 502 without one.
	HTTPStatus int `json:"httpStatus,omitempty"`
}

// Stats are counters since New or the last Reset.
type Stats struct {
	// Calls counts requests per operation, failed ones included.
	Calls map[string]int `json:"calls"`
	// InFlight is the number of requests being served now.
	InFlight int `json:"inFlight"`
	// MaxInFlight is the most requests served at once.
	MaxInFlight int `json:"maxInFlight"`
	// Rejected counts ERR_TOO_MANY_CONNECTIONS answers.
	Rejected int `json:"rejected"`
	// Orders is the number of orders held.
	Orders int `json:"orders"`
}

// Event records one API call, once it was answered.
type Event struct {
	// Seq numbers events from 1.
	Seq int
	// Time is Options.Now at the answer.
	Time      time.Time
	Operation string
	// Date is the date of start_planning and get_routes.
	Date string
	// PlanningID is set for the planning operations.
	PlanningID int64
	// OrderNos are the orders a bulk or single-order call named.
	OrderNos []string
	// Code is the error code of a failed call; empty on success.
	Code string
	// HTTPStatus is the status sent.
	HTTPStatus int
}

// Sim is the simulated API. Its methods are safe for concurrent use.
type Sim struct {
	opts Options
	mux  *http.ServeMux
	// handler is mux behind the control endpoints' guard.
	handler http.Handler

	mu           sync.Mutex
	orders       map[string]*order
	plans        []*plan
	planBase     int64 // the id of plans[0] less one: runs forgotten by a Reset keep their ids
	nextOrderID  int
	stateFile    string // Open's
	faults       []Fault
	latency      map[string]time.Duration
	planningMode PlanningMode
	failOrders   map[string]string
	stats        Stats
	events       []Event
	changed      chan struct{}
}

// New returns a Sim with opts.
func New(opts Options) *Sim {
	if opts.APIKey == "" {
		opts.APIKey = DefaultAPIKey
	}
	if len(opts.Drivers) == 0 {
		opts.Drivers = []Driver{
			{Serial: "1", ExternalID: "drv-1", Name: "Driver One", Vehicle: "SIM001"},
			{Serial: "2", ExternalID: "drv-2", Name: "Driver Two", Vehicle: "SIM002"},
			{Serial: "3", ExternalID: "drv-3", Name: "Driver Three", Vehicle: "SIM003"},
		}
	}
	if opts.PlanningDuration <= 0 {
		opts.PlanningDuration = 2 * time.Second
	}
	if opts.PlanningSteps <= 0 {
		opts.PlanningSteps = 4
	}
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = 5
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ControlToken == "" {
		opts.ControlToken = simcontrol.NewToken()
	}
	s := &Sim{opts: opts, mux: http.NewServeMux(), changed: make(chan struct{})}
	s.resetLocked()
	s.routes()
	s.handler = simcontrol.Guard(opts.ControlToken, s.mux)
	return s
}

// ClientConfig is a pkg/optimoroute configuration that talks to this
// simulator at apiURL (where it is mounted): its key, as many requests at
// once as it serves, and a 10-second timeout.
func (s *Sim) ClientConfig(apiURL string) optimoroute.Config {
	return optimoroute.Config{APIURL: apiURL, APIKey: s.opts.APIKey, Timeout: 10 * time.Second, MaxConcurrent: s.opts.MaxConcurrent}
}

// ServeHTTP serves the API and the control endpoints, the latter only to a
// request with the control token (pkg/simcontrol).
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.handler.ServeHTTP(w, r)
}

// ControlToken is the token the control endpoints take (Options.ControlToken).
func (s *Sim) ControlToken() string { return s.opts.ControlToken }

// InjectFault queues f.
func (s *Sim) InjectFault(f Fault) {
	if f.Count <= 0 {
		f.Count = 1
	}
	if f.HTTPStatus == 0 {
		f.HTTPStatus = http.StatusOK
		if f.Code == "" {
			f.HTTPStatus = http.StatusBadGateway
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f)
}

// ClearFaults drops the faults still queued; orders, plans and the rest
// stay.
func (s *Sim) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// SetLatency delays every call of op (every operation when op is empty) by
// d before it is answered, while it counts as in flight. Zero removes it.
func (s *Sim) SetLatency(op string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d <= 0 {
		delete(s.latency, op)
		return
	}
	s.latency[op] = d
}

// SetPlanningMode sets how planning runs started from now on end.
func (s *Sim) SetPlanningMode(m PlanningMode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.planningMode = m
}

// FailOrder makes every write of orderNo fail with code (for example
// ERR_LOC_GEOCODING) until Reset. An empty code removes it.
func (s *Sim) FailOrder(orderNo, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if code == "" {
		delete(s.failOrders, orderNo)
		return
	}
	s.failOrders[orderNo] = code
}

// Stats returns the counters.
func (s *Sim) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Calls = make(map[string]int, len(s.stats.Calls))
	for op, n := range s.stats.Calls {
		st.Calls[op] = n
	}
	st.Orders = len(s.orders)
	return st
}

// Reset forgets orders, plans, faults, latency, the planning mode, stats and
// events; a Sim made by Open goes on counting ids where it was, and fails
// only when its state file cannot be written.
func (s *Sim) Reset() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetLocked()
	s.broadcastLocked()
	return s.saveLocked()
}

func (s *Sim) resetLocked() {
	s.orders = make(map[string]*order)
	s.planBase += int64(len(s.plans))
	s.plans = nil
	if s.stateFile == "" {
		s.nextOrderID, s.planBase = 0, 0
	}
	s.faults = nil
	s.latency = make(map[string]time.Duration)
	s.planningMode = PlanningFinishes
	s.failOrders = make(map[string]string)
	s.stats = Stats{Calls: make(map[string]int), InFlight: s.stats.InFlight}
	s.events = nil
}

// Events returns the calls answered so far.
func (s *Sim) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Event(nil), s.events...)
}

// WaitEvent returns the first event, past or future, for which match is
// true, or ctx's error when none comes in time.
func (s *Sim) WaitEvent(ctx context.Context, match func(Event) bool) (Event, error) {
	next := 0
	for {
		s.mu.Lock()
		if next > len(s.events) {
			next = 0 // Reset emptied the log.
		}
		for ; next < len(s.events); next++ {
			if match(s.events[next]) {
				ev := s.events[next]
				s.mu.Unlock()
				return ev, nil
			}
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return Event{}, fmt.Errorf("optimosim: wait for event: %w", ctx.Err())
		}
	}
}

func (s *Sim) recordLocked(ev Event) {
	ev.Seq = len(s.events) + 1
	ev.Time = s.opts.Now()
	s.events = append(s.events, ev)
	s.broadcastLocked()
}

func (s *Sim) broadcastLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Order returns an order as get_orders would, and whether it exists.
func (s *Sim) Order(orderNo string) (json.RawMessage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[orderNo]
	if !ok {
		return nil, false
	}
	b, _ := json.Marshal(o.data())
	return b, true
}

// OrderNos returns the orders held for date (every order when date is
// empty), sorted.
func (s *Sim) OrderNos(date string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.orderNosLocked(date)
}

func (s *Sim) orderNosLocked(date string) []string {
	nos := make([]string, 0, len(s.orders))
	for no, o := range s.orders {
		if date == "" || o.date() == date {
			nos = append(nos, no)
		}
	}
	sort.Strings(nos)
	return nos
}

// apiError is a failure answered as {"success":false,…}.
type apiError struct {
	code    string
	message string
}

func failf(code optimoroute.Code, format string, args ...any) *apiError {
	return &apiError{code: string(code), message: fmt.Sprintf(format, args...)}
}

// statusOf is the HTTP status the simulator sends with a code. Which codes
// the real API sends with which status is not known (external-apis.md);
// most go with 200 here so that clients are kept honest about reading the
// body.
func statusOf(code string) int {
	switch optimoroute.Code(code) {
	case optimoroute.ErrAuthKeyMissing, optimoroute.ErrAuthKeyUnknown:
		return http.StatusUnauthorized
	case optimoroute.ErrMalformedRequest:
		return http.StatusBadRequest
	case optimoroute.ErrTooManyConnections:
		return http.StatusTooManyRequests
	case optimoroute.ErrInternal:
		return http.StatusInternalServerError
	default:
		return http.StatusOK
	}
}

// handlerFunc answers one API call with s.mu held. It may fill ev.
type handlerFunc func(r *http.Request, ev *Event) (any, *apiError)

// api wraps an operation's handler with what every call goes through:
// counting, the connection limit, latency, the key and injected faults.
func (s *Sim) api(op string, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.stats.Calls[op]++
		s.stats.InFlight++
		s.stats.MaxInFlight = max(s.stats.MaxInFlight, s.stats.InFlight)
		over := s.stats.InFlight > s.opts.MaxConcurrent
		delay, ok := s.latency[op]
		if !ok {
			delay = s.latency[""]
		}
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.stats.InFlight--
			s.mu.Unlock()
		}()

		if over {
			s.mu.Lock()
			s.stats.Rejected++
			s.mu.Unlock()
			s.answer(w, op, Event{}, nil, failf(optimoroute.ErrTooManyConnections, "more than %d concurrent requests", s.opts.MaxConcurrent))
			return
		}
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
		switch key := r.URL.Query().Get("key"); {
		case key == "":
			s.answer(w, op, Event{}, nil, failf(optimoroute.ErrAuthKeyMissing, "API key is missing"))
			return
		case key != s.opts.APIKey:
			s.answer(w, op, Event{}, nil, failf(optimoroute.ErrAuthKeyUnknown, "API key is unknown"))
			return
		}
		if f, ok := s.takeFault(op); ok {
			s.answerFault(w, op, f)
			return
		}
		s.mu.Lock()
		var ev Event
		body, aerr := h(r, &ev)
		if aerr == nil && changes[op] {
			if err := s.saveLocked(); err != nil {
				body, aerr = nil, failf(optimoroute.ErrInternal, "%v", err)
			}
		}
		s.mu.Unlock()
		s.answer(w, op, ev, body, aerr)
	})
}

// takeFault consumes the fault that applies to this call of op, if any.
func (s *Sim) takeFault(op string) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.faults {
		f := &s.faults[i]
		if f.Operation != "" && f.Operation != op {
			continue
		}
		if f.After > 0 {
			f.After--
			return Fault{}, false
		}
		taken := *f
		if f.Count--; f.Count == 0 {
			s.faults = append(s.faults[:i], s.faults[i+1:]...)
		}
		return taken, true
	}
	return Fault{}, false
}

func (s *Sim) answerFault(w http.ResponseWriter, op string, f Fault) {
	s.mu.Lock()
	s.recordLocked(Event{Operation: op, Code: f.Code, HTTPStatus: f.HTTPStatus})
	s.mu.Unlock()
	if f.Code == "" {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(f.HTTPStatus)
		fmt.Fprintf(w, "<html><body><h1>%d %s</h1></body></html>\n", f.HTTPStatus, http.StatusText(f.HTTPStatus))
		return
	}
	msg := f.Message
	if msg == "" {
		msg = "injected fault"
	}
	writeJSON(w, f.HTTPStatus, map[string]any{"success": false, "code": f.Code, "message": msg})
}

// answer records the call and sends body, or aerr when it is set.
func (s *Sim) answer(w http.ResponseWriter, op string, ev Event, body any, aerr *apiError) {
	ev.Operation = op
	ev.HTTPStatus = http.StatusOK
	if aerr != nil {
		ev.Code = aerr.code
		ev.HTTPStatus = statusOf(aerr.code)
		body = map[string]any{"success": false, "code": aerr.code, "message": aerr.message}
	}
	s.mu.Lock()
	s.recordLocked(ev)
	s.mu.Unlock()
	writeJSON(w, ev.HTTPStatus, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decodeBody reads a POST body into v.
func decodeBody(r *http.Request, v any) *apiError {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 64<<20))
	if err := dec.Decode(v); err != nil {
		return failf(optimoroute.ErrMalformedRequest, "request body: %s", strings.TrimSpace(err.Error()))
	}
	return nil
}
