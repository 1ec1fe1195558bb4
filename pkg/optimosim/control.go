package optimosim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Control is the body of POST /_sim/faults. Every part is optional.
type Control struct {
	// Faults are queued as with InjectFault.
	Faults []Fault `json:"faults,omitempty"`
	// Latency maps an operation ("" for every one) to a delay such as
	// "250ms", as with SetLatency.
	Latency map[string]string `json:"latency,omitempty"`
	// PlanningMode is finish, never or error, as with SetPlanningMode.
	PlanningMode PlanningMode `json:"planningMode,omitempty"`
	// FailOrders maps an orderNo to the code its writes fail with.
	FailOrders map[string]string `json:"failOrders,omitempty"`
}

// Apply applies c to s.
func (s *Sim) Apply(c Control) error {
	delays := make(map[string]time.Duration, len(c.Latency))
	for op, v := range c.Latency {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("latency of %q: %w", op, err)
		}
		delays[op] = d
	}
	switch c.PlanningMode {
	case "", PlanningFinishes, PlanningNeverCompletes, PlanningFails:
	default:
		return fmt.Errorf("planningMode %q: want finish, never or error", c.PlanningMode)
	}
	for _, f := range c.Faults {
		s.InjectFault(f)
	}
	for op, d := range delays {
		s.SetLatency(op, d)
	}
	if c.PlanningMode != "" {
		s.SetPlanningMode(c.PlanningMode)
	}
	for no, code := range c.FailOrders {
		s.FailOrder(no, code)
	}
	return nil
}

func (s *Sim) handleStats() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Stats())
	})
}

func (s *Sim) handleFaults() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c Control
		if err := json.NewDecoder(r.Body).Decode(&c); err != nil {
			http.Error(w, "control body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := s.Apply(c); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

func (s *Sim) handleReset() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if err := s.Reset(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
