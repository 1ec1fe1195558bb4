package optimosim

import "github.com/ethosbuilding/primeflow/pkg/optimoroute"

// routes lists the whole HTTP surface.
func (s *Sim) routes() {
	s.mux.Handle("POST /"+optimoroute.OpCreateOrder, s.api(optimoroute.OpCreateOrder, s.handleCreateOrder))
	s.mux.Handle("POST /"+optimoroute.OpCreateOrUpdateOrders, s.api(optimoroute.OpCreateOrUpdateOrders, s.handleCreateOrUpdateOrders))
	s.mux.Handle("POST /"+optimoroute.OpDeleteOrder, s.api(optimoroute.OpDeleteOrder, s.handleDeleteOrder))
	s.mux.Handle("POST /"+optimoroute.OpDeleteOrders, s.api(optimoroute.OpDeleteOrders, s.handleDeleteOrders))
	s.mux.Handle("GET /"+optimoroute.OpGetOrders, s.api(optimoroute.OpGetOrders, s.handleGetOrders))
	s.mux.Handle("POST /"+optimoroute.OpGetOrders, s.api(optimoroute.OpGetOrders, s.handleGetOrders))
	s.mux.Handle("GET /"+optimoroute.OpGetSchedulingInfo, s.api(optimoroute.OpGetSchedulingInfo, s.handleGetSchedulingInfo))
	s.mux.Handle("POST /"+optimoroute.OpStartPlanning, s.api(optimoroute.OpStartPlanning, s.handleStartPlanning))
	s.mux.Handle("GET /"+optimoroute.OpGetPlanningStatus, s.api(optimoroute.OpGetPlanningStatus, s.handleGetPlanningStatus))
	s.mux.Handle("POST /"+optimoroute.OpStopPlanning, s.api(optimoroute.OpStopPlanning, s.handleStopPlanning))
	s.mux.Handle("GET /"+optimoroute.OpGetRoutes, s.api(optimoroute.OpGetRoutes, s.handleGetRoutes))

	s.mux.Handle("GET /_sim/stats", s.handleStats())
	s.mux.Handle("POST /_sim/faults", s.handleFaults())
	s.mux.Handle("POST /_sim/reset", s.handleReset())
}
