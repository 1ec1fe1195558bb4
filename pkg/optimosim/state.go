package optimosim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/datadir"
	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
)

// Open is New keeping the simulated account in stateFile across restarts:
// the orders, the planning runs and the counters of order and planning ids
// are loaded from it when it exists and written back (datadir.WriteFile)
// after every call that changes them and every Reset. A Reset forgets the
// orders and runs but not the counters, so an id is never handed out
// twice. Faults, latency, the planning mode, stats and events are not kept.
func Open(opts Options, stateFile string) (*Sim, error) {
	s := New(opts)
	s.stateFile = stateFile
	b, err := os.ReadFile(stateFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s.mu.Lock()
		err = s.saveLocked()
		s.mu.Unlock()
		return s, err
	case err != nil:
		return nil, fmt.Errorf("optimosim: state: %w", err)
	}
	var saved savedState
	if err := json.Unmarshal(b, &saved); err != nil {
		return nil, fmt.Errorf("optimosim: state %s: %w (remove it to start with no orders)", stateFile, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextOrderID, s.planBase = saved.NextOrderID, saved.PlanBase
	for no, o := range saved.Orders {
		s.orders[no] = &order{id: o.ID, fields: o.Fields}
	}
	for _, p := range saved.Plans {
		s.plans = append(s.plans, &plan{id: p.ID, date: p.Date, start: p.Start, mode: p.Mode, drivers: p.Drivers,
			orderNos: p.OrderNos, stopped: p.Stopped, stopPct: p.StopPct})
	}
	return s, nil
}

// savedState is what Open keeps in the state file.
type savedState struct {
	NextOrderID int                   `json:"nextOrderId"`
	PlanBase    int64                 `json:"planBase"`
	Orders      map[string]savedOrder `json:"orders"`
	Plans       []savedPlan           `json:"plans"`
}

type savedOrder struct {
	ID     string                     `json:"id"`
	Fields map[string]json.RawMessage `json:"fields"`
}

type savedPlan struct {
	ID       int64        `json:"id"`
	Date     string       `json:"date"`
	Start    time.Time    `json:"start"`
	Mode     PlanningMode `json:"mode"`
	Drivers  []Driver     `json:"drivers"`
	OrderNos []string     `json:"orderNos"`
	Stopped  bool         `json:"stopped"`
	StopPct  int          `json:"stopPct"`
}

// changes are the operations whose success changes what the state file
// keeps.
var changes = map[string]bool{
	optimoroute.OpCreateOrder: true, optimoroute.OpCreateOrUpdateOrders: true, optimoroute.OpDeleteOrder: true,
	optimoroute.OpDeleteOrders: true, optimoroute.OpStartPlanning: true, optimoroute.OpStopPlanning: true,
}

// saveLocked writes the state file, when the Sim has one; s.mu is held.
func (s *Sim) saveLocked() error {
	if s.stateFile == "" {
		return nil
	}
	saved := savedState{NextOrderID: s.nextOrderID, PlanBase: s.planBase, Orders: make(map[string]savedOrder, len(s.orders))}
	for no, o := range s.orders {
		saved.Orders[no] = savedOrder{ID: o.id, Fields: o.fields}
	}
	for _, p := range s.plans {
		saved.Plans = append(saved.Plans, savedPlan{ID: p.id, Date: p.date, Start: p.start, Mode: p.mode, Drivers: p.drivers,
			OrderNos: p.orderNos, Stopped: p.stopped, StopPct: p.stopPct})
	}
	b, err := json.Marshal(saved)
	if err == nil {
		err = datadir.WriteFile(s.stateFile, b)
	}
	if err != nil {
		return fmt.Errorf("optimosim: state not saved in %s: %w", s.stateFile, err)
	}
	return nil
}
