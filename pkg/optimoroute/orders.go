package optimoroute

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// OrderOperation says how create_or_update_orders applies an order.
type OrderOperation string

// Order operations.
const (
	// OrderSync creates the order or replaces all its fields: the one to
	// mirror with, and the default.
	OrderSync OrderOperation = "SYNC"
	// OrderMerge creates the order or updates only the fields sent.
	OrderMerge OrderOperation = "MERGE"
	// OrderCreate creates a new order only.
	OrderCreate OrderOperation = "CREATE"
	// OrderUpdate updates an existing order only.
	OrderUpdate OrderOperation = "UPDATE"
)

// Order is an OptimoRoute order as create_or_update_orders takes it and
// get_orders returns it. Empty fields are left out of the request.
type Order struct {
	// Operation defaults to OrderSync when empty.
	Operation OrderOperation `json:"operation,omitempty"`
	OrderNo   string         `json:"orderNo"`
	// Type is D (delivery), P (pickup) or T (task).
	Type string `json:"type,omitempty"`
	// Date is the order's day, YYYY-MM-DD.
	Date string `json:"date,omitempty"`
	// Duration is the service time in minutes.
	Duration    int          `json:"duration,omitempty"`
	TimeWindows []TimeWindow `json:"timeWindows,omitempty"`
	// Priority is L, M, H or C.
	Priority   string    `json:"priority,omitempty"`
	Location   *Location `json:"location,omitempty"`
	AssignedTo *Driver   `json:"assignedTo,omitempty"`
	Notes      string    `json:"notes,omitempty"`
	Email      string    `json:"email,omitempty"`
	Phone      string    `json:"phone,omitempty"`
	// NotificationPreference is dont_notify, email, sms or both.
	NotificationPreference string `json:"notificationPreference,omitempty"`
	// CustomFields are the account's custom fields by API name
	// ("customField1" …), sent at the top level of the order.
	CustomFields map[string]string `json:"-"`
}

// TimeWindow is a window in which the order may be serviced, "HH:MM".
type TimeWindow struct {
	From string `json:"twFrom"`
	To   string `json:"twTo"`
}

// Location is where an order is serviced: an existing LocationNo, an
// Address to geocode, or Latitude and Longitude with a LocationName.
type Location struct {
	LocationNo         string   `json:"locationNo,omitempty"`
	LocationName       string   `json:"locationName,omitempty"`
	Address            string   `json:"address,omitempty"`
	Latitude           *float64 `json:"latitude,omitempty"`
	Longitude          *float64 `json:"longitude,omitempty"`
	AcceptPartialMatch bool     `json:"acceptPartialMatch,omitempty"`
}

// Driver names a driver by serial or external id.
type Driver struct {
	Serial     string `json:"serial,omitempty"`
	ExternalID string `json:"externalId,omitempty"`
}

// orderFields is Order without its methods, so that encoding/json does not
// recurse into MarshalJSON.
type orderFields Order

// MarshalJSON writes the order with its custom fields at the top level.
func (o Order) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(orderFields(o))
	if err != nil || len(o.CustomFields) == 0 {
		return b, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, v := range o.CustomFields {
		if k == "" || standardField(k) {
			return nil, fmt.Errorf("order %s: custom field %q clashes with a standard field", o.OrderNo, k)
		}
		m[k], _ = json.Marshal(v)
	}
	return json.Marshal(m)
}

// standardField reports whether name is the JSON name of a field of Order.
func standardField(name string) bool {
	t := reflect.TypeFor[orderFields]()
	for i := range t.NumField() {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); tag == name {
			return true
		}
	}
	return false
}

// UnmarshalJSON reads an order, collecting string fields named
// customField… into CustomFields and ignoring other unknown fields.
func (o *Order) UnmarshalJSON(b []byte) error {
	var f orderFields
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	for k, v := range m {
		var s string
		if strings.HasPrefix(k, "customField") && json.Unmarshal(v, &s) == nil {
			if f.CustomFields == nil {
				f.CustomFields = make(map[string]string)
			}
			f.CustomFields[k] = s
		}
	}
	*o = Order(f)
	return nil
}

// OrderResult is the outcome for one order of a bulk call. Results are in
// the order of the caller's slice.
type OrderResult struct {
	OrderNo string
	// ID is OptimoRoute's id of the order, when the response carries it.
	ID string
	// Err is nil when the order was written (or deleted, or found); an
	// *APIError when OptimoRoute refused this order; the *ChunkError of the
	// call when the whole call failed; ErrNotSent when an earlier chunk
	// failed and this order was never sent.
	Err error
	// Order is the order as OptimoRoute holds it (GetOrders only).
	Order *Order
}

// itemResult is one entry of a bulk response's "orders" list.
type itemResult struct {
	Success          bool            `json:"success"`
	OrderNo          string          `json:"orderNo"`
	ID               json.RawMessage `json:"id"`
	Code             Code            `json:"code"`
	Message          string          `json:"message"`
	GeocodingResults json.RawMessage `json:"geocodingResults"`
	Data             *Order          `json:"data"`
}

type bulkResponse struct {
	Orders []itemResult `json:"orders"`
}

type orderRef struct {
	OrderNo string `json:"orderNo"`
}

// CreateOrUpdateOrders writes orders with create_or_update_orders, at most
// 500 a call, one call after the other. Orders without an Operation are sent
// as SYNC (create or replace).
//
// The results match orders by position. The error is nil when every call
// succeeded, even if OptimoRoute refused some orders: look at each
// OrderResult.Err. When a call fails as a whole, it returns a *ChunkError
// (errors.Is works with the Code sentinels through it) and sends no more
// chunks; the orders of that chunk carry the same error, and the later ones
// ErrNotSent.
func (c *Client) CreateOrUpdateOrders(ctx context.Context, orders []Order) ([]OrderResult, error) {
	return c.bulk(ctx, OpCreateOrUpdateOrders, orderNosOf(orders), func(lo, hi int) any {
		chunk := make([]Order, hi-lo)
		copy(chunk, orders[lo:hi])
		for i := range chunk {
			if chunk[i].Operation == "" {
				chunk[i].Operation = OrderSync
			}
		}
		return struct {
			Orders []Order `json:"orders"`
		}{chunk}
	}, nil)
}

// DeleteOrders deletes orders with delete_orders, at most 500 a call. An
// order that OptimoRoute does not know (ERR_ORD_NOT_FOUND) counts as
// deleted: its result has no error. Results and errors are as for
// CreateOrUpdateOrders.
func (c *Client) DeleteOrders(ctx context.Context, orderNos []string) ([]OrderResult, error) {
	return c.bulk(ctx, OpDeleteOrders, orderNos, refsBody(orderNos), func(it itemResult) bool {
		return it.Code == ErrOrderNotFound
	})
}

// GetOrders reads orders with get_orders, at most 500 a call. A missing
// order has an Err matching ErrOrderNotFound; the others carry Order.
// Results and errors are as for CreateOrUpdateOrders.
func (c *Client) GetOrders(ctx context.Context, orderNos []string) ([]OrderResult, error) {
	return c.bulk(ctx, OpGetOrders, orderNos, refsBody(orderNos), nil)
}

func orderNosOf(orders []Order) []string {
	nos := make([]string, len(orders))
	for i, o := range orders {
		nos[i] = o.OrderNo
	}
	return nos
}

func refsBody(orderNos []string) func(lo, hi int) any {
	return func(lo, hi int) any {
		refs := make([]orderRef, 0, hi-lo)
		for _, no := range orderNos[lo:hi] {
			refs = append(refs, orderRef{OrderNo: no})
		}
		return struct {
			Orders []orderRef `json:"orders"`
		}{refs}
	}
}

// bulk runs op over orderNos in chunks. body builds the request for
// orderNos[lo:hi]; okCode, when set, says which per-order failures count as
// success.
func (c *Client) bulk(ctx context.Context, op string, orderNos []string, body func(lo, hi int) any, okCode func(itemResult) bool) ([]OrderResult, error) {
	results := make([]OrderResult, len(orderNos))
	for i, no := range orderNos {
		results[i] = OrderResult{OrderNo: no, Err: ErrNotSent}
	}
	for lo := 0; lo < len(orderNos); lo += MaxOrdersPerCall {
		hi := min(lo+MaxOrdersPerCall, len(orderNos))
		var resp bulkResponse
		err := c.post(ctx, op, body(lo, hi), &resp)
		if err == nil {
			err = checkPositions(op, resp.Orders, orderNos[lo:hi])
		}
		if err != nil {
			cerr := &ChunkError{Operation: op, Offset: lo, Count: hi - lo, Total: len(orderNos), Err: err}
			for i := lo; i < hi; i++ {
				results[i].Err = cerr
			}
			return results, cerr
		}
		// Results are positional: a failed entry may not name its order.
		for j, it := range resp.Orders {
			r := &results[lo+j]
			r.ID = idString(it.ID)
			r.Order = it.Data
			r.Err = nil
			if !it.Success && (okCode == nil || !okCode(it)) {
				r.Err = &APIError{
					Operation:        op,
					Code:             it.Code,
					Message:          c.redact(it.Message),
					HTTPStatus:       200,
					GeocodingResults: it.GeocodingResults,
				}
			}
		}
	}
	return results, nil
}

// checkPositions makes sure results can be matched to orders by position:
// as many results as orders, and none naming another order.
func checkPositions(op string, items []itemResult, orderNos []string) error {
	if len(items) != len(orderNos) {
		return fmt.Errorf("optimoroute %s: %d results for %d orders", op, len(items), len(orderNos))
	}
	for i, it := range items {
		if it.OrderNo != "" && it.OrderNo != orderNos[i] {
			return fmt.Errorf("optimoroute %s: result %d names order %q, sent %q", op, i, it.OrderNo, orderNos[i])
		}
	}
	return nil
}

// idString reads an id that may be sent as a string or a number.
func idString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}
