package optimosim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
)

// order is an order as held: the fields last written, without operation.
type order struct {
	id     string
	fields map[string]json.RawMessage
}

func (o *order) str(field string) string {
	var s string
	_ = json.Unmarshal(o.fields[field], &s)
	return s
}

func (o *order) date() string { return o.str("date") }

// duration is the service time in minutes; 30 when not set.
func (o *order) duration() time.Duration {
	var n float64
	if json.Unmarshal(o.fields["duration"], &n) != nil || n <= 0 {
		n = 30
	}
	return time.Duration(n * float64(time.Minute))
}

// assignedTo returns the serial and external id the order is forced onto.
func (o *order) assignedTo() (serial, externalID string) {
	var a struct {
		Serial     string `json:"serial"`
		ExternalID string `json:"externalId"`
	}
	_ = json.Unmarshal(o.fields["assignedTo"], &a)
	return a.Serial, a.ExternalID
}

func (o *order) locationNo() string {
	var l struct {
		LocationNo string `json:"locationNo"`
	}
	_ = json.Unmarshal(o.fields["location"], &l)
	return l.LocationNo
}

// data is the order as get_orders returns it.
func (o *order) data() map[string]json.RawMessage {
	d := make(map[string]json.RawMessage, len(o.fields)+1)
	for k, v := range o.fields {
		d[k] = v
	}
	d["id"], _ = json.Marshal(o.id)
	return d
}

// validate checks what the simulator checks of a complete order.
func validate(f map[string]json.RawMessage) *apiError {
	var date string
	if json.Unmarshal(f["date"], &date) != nil || date == "" {
		return failf(optimoroute.ErrMissingMandField, "date is required")
	}
	if _, err := time.Parse(time.DateOnly, date); err != nil {
		return failf(optimoroute.ErrInvalidParamFormat, "date %q: want YYYY-MM-DD", date)
	}
	if t, ok := f["type"]; ok {
		var typ string
		if json.Unmarshal(t, &typ) != nil || (typ != "D" && typ != "P" && typ != "T") {
			return failf(optimoroute.ErrInvalidParamFormat, "type: want D, P or T")
		}
	}
	var loc struct {
		LocationNo string   `json:"locationNo"`
		Address    string   `json:"address"`
		Latitude   *float64 `json:"latitude"`
		Longitude  *float64 `json:"longitude"`
	}
	if raw, ok := f["location"]; !ok || json.Unmarshal(raw, &loc) != nil {
		return failf(optimoroute.ErrMissingMandField, "location is required")
	}
	if loc.LocationNo == "" && loc.Address == "" && (loc.Latitude == nil || loc.Longitude == nil) {
		return failf(optimoroute.ErrMissingMandField, "location needs locationNo, address or latitude and longitude")
	}
	return nil
}

// writeLocked applies one order write and returns the order's id.
func (s *Sim) writeLocked(in map[string]json.RawMessage) (string, string, *apiError) {
	var no, op string
	if json.Unmarshal(in["orderNo"], &no) != nil || no == "" {
		return "", "", failf(optimoroute.ErrMissingMandField, "orderNo is required")
	}
	if code, ok := s.failOrders[no]; ok {
		return no, "", failf(optimoroute.Code(code), "order %s: injected failure", no)
	}
	if raw, ok := in["operation"]; ok && json.Unmarshal(raw, &op) != nil {
		return no, "", failf(optimoroute.ErrInvalidParamFormat, "operation: want a string")
	}
	if op == "" {
		op = string(optimoroute.OrderSync)
	}
	existing := s.orders[no]
	fields := make(map[string]json.RawMessage, len(in))
	switch optimoroute.OrderOperation(op) {
	case optimoroute.OrderSync:
	case optimoroute.OrderCreate:
		if existing != nil {
			// The real code for this is not known; this one is assumed.
			return no, "", failf(optimoroute.ErrInvalidParamFormat, "order %s exists (operation CREATE)", no)
		}
	case optimoroute.OrderUpdate, optimoroute.OrderMerge:
		if existing == nil && op == string(optimoroute.OrderUpdate) {
			return no, "", failf(optimoroute.ErrOrderNotFound, "order %s not found", no)
		}
		if existing != nil {
			for k, v := range existing.fields {
				fields[k] = v
			}
		}
	default:
		return no, "", failf(optimoroute.ErrInvalidParamFormat, "operation %q: want SYNC, MERGE, CREATE or UPDATE", op)
	}
	for k, v := range in {
		if k != "operation" && k != "id" {
			fields[k] = v
		}
	}
	if aerr := validate(fields); aerr != nil {
		return no, "", aerr
	}
	id := ""
	if existing != nil {
		id = existing.id
	} else {
		s.nextOrderID++
		id = fmt.Sprintf("sim-%d", s.nextOrderID)
	}
	s.orders[no] = &order{id: id, fields: fields}
	return no, id, nil
}

type ordersBody struct {
	Orders []map[string]json.RawMessage `json:"orders"`
}

func (s *Sim) handleCreateOrder(r *http.Request, ev *Event) (any, *apiError) {
	var in map[string]json.RawMessage
	if aerr := decodeBody(r, &in); aerr != nil {
		return nil, aerr
	}
	no, id, aerr := s.writeLocked(in)
	ev.OrderNos = []string{no}
	if aerr != nil {
		return nil, aerr
	}
	return map[string]any{"success": true, "id": id}, nil
}

func (s *Sim) handleCreateOrUpdateOrders(r *http.Request, ev *Event) (any, *apiError) {
	var in ordersBody
	if aerr := decodeBody(r, &in); aerr != nil {
		return nil, aerr
	}
	if aerr := checkBulk(len(in.Orders)); aerr != nil {
		return nil, aerr
	}
	results := make([]map[string]any, len(in.Orders))
	for i, o := range in.Orders {
		no, id, aerr := s.writeLocked(o)
		ev.OrderNos = append(ev.OrderNos, no)
		if aerr != nil {
			// Failed entries do not name their order: results are positional.
			results[i] = map[string]any{"success": false, "code": aerr.code, "message": aerr.message}
			continue
		}
		results[i] = map[string]any{"success": true, "orderNo": no, "id": id}
	}
	return map[string]any{"success": true, "orders": results}, nil
}

func checkBulk(n int) *apiError {
	switch {
	case n == 0:
		return failf(optimoroute.ErrMissingMandField, "orders is required")
	case n > optimoroute.MaxOrdersPerCall:
		return failf(optimoroute.ErrInvalidParamFormat, "%d orders: at most %d a call", n, optimoroute.MaxOrdersPerCall)
	}
	return nil
}

type refsBody struct {
	Orders []struct {
		OrderNo string `json:"orderNo"`
	} `json:"orders"`
}

func (s *Sim) handleDeleteOrder(r *http.Request, ev *Event) (any, *apiError) {
	var in struct {
		OrderNo string `json:"orderNo"`
	}
	if aerr := decodeBody(r, &in); aerr != nil {
		return nil, aerr
	}
	ev.OrderNos = []string{in.OrderNo}
	if _, ok := s.orders[in.OrderNo]; !ok {
		return nil, failf(optimoroute.ErrOrderNotFound, "order %s not found", in.OrderNo)
	}
	delete(s.orders, in.OrderNo)
	return map[string]any{"success": true}, nil
}

func (s *Sim) handleDeleteOrders(r *http.Request, ev *Event) (any, *apiError) {
	var in refsBody
	if aerr := decodeBody(r, &in); aerr != nil {
		return nil, aerr
	}
	if aerr := checkBulk(len(in.Orders)); aerr != nil {
		return nil, aerr
	}
	results := make([]map[string]any, len(in.Orders))
	for i, ref := range in.Orders {
		ev.OrderNos = append(ev.OrderNos, ref.OrderNo)
		if _, ok := s.orders[ref.OrderNo]; !ok {
			results[i] = map[string]any{"success": false, "orderNo": ref.OrderNo, "code": optimoroute.ErrOrderNotFound, "message": "order not found"}
			continue
		}
		delete(s.orders, ref.OrderNo)
		results[i] = map[string]any{"success": true, "orderNo": ref.OrderNo}
	}
	return map[string]any{"success": true, "orders": results}, nil
}

// handleGetOrders takes ?orderNo=… (GET) or {"orders":[{"orderNo":…}]} (POST).
func (s *Sim) handleGetOrders(r *http.Request, ev *Event) (any, *apiError) {
	var nos []string
	if r.Method == http.MethodGet {
		nos = r.URL.Query()["orderNo"]
	} else {
		var in refsBody
		if aerr := decodeBody(r, &in); aerr != nil {
			return nil, aerr
		}
		for _, ref := range in.Orders {
			nos = append(nos, ref.OrderNo)
		}
	}
	if aerr := checkBulk(len(nos)); aerr != nil {
		return nil, aerr
	}
	ev.OrderNos = nos
	results := make([]map[string]any, len(nos))
	for i, no := range nos {
		o, ok := s.orders[no]
		if !ok {
			results[i] = map[string]any{"success": false, "orderNo": no, "code": optimoroute.ErrOrderNotFound, "message": "order not found"}
			continue
		}
		results[i] = map[string]any{"success": true, "orderNo": no, "id": o.id, "data": o.data()}
	}
	return map[string]any{"success": true, "orders": results}, nil
}
