package optimoroute

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Code is an OptimoRoute error code ("ERR_OPT_RUNNING", …). The constants
// below are sentinels: errors.Is(err, ErrOptRunning) is true for an
// *APIError (or an error wrapping one) that carries that code.
type Code string

// Error makes a Code usable as an errors.Is target.
func (c Code) Error() string { return "optimoroute: " + string(c) }

// The error codes that external-apis.md lists.
const (
	ErrAuthKeyMissing       Code = "AUTH_KEY_MISSING"
	ErrAuthKeyUnknown       Code = "AUTH_KEY_UNKNOWN"
	ErrMalformedRequest     Code = "MALFORMED_REQUEST"
	ErrMissingMandField     Code = "ERR_MISSING_MAND_FIELD"
	ErrInvalidParamFormat   Code = "ERR_INVALID_PARAM_FORMAT"
	ErrTooManyConnections   Code = "ERR_TOO_MANY_CONNECTIONS"
	ErrInternal             Code = "ERR_INTERNAL"
	ErrOrderNotFound        Code = "ERR_ORD_NOT_FOUND"
	ErrOptRunning           Code = "ERR_OPT_RUNNING"
	ErrLocGeocoding         Code = "ERR_LOC_GEOCODING"
	ErrLocGeocodingPartial  Code = "ERR_LOC_GEOCODING_PARTIAL"
	ErrLocGeocodingMultiple Code = "ERR_LOC_GEOCODING_MULTIPLE"
)

// ErrNotSent marks the orders of a bulk call that were never sent because an
// earlier chunk of the same call failed.
var ErrNotSent = errors.New("optimoroute: not sent after an earlier chunk failed")

// APIError is a failure that OptimoRoute reported, for a whole call or for
// one order of a bulk call. OptimoRoute sends {"success":false,…} with HTTP
// 200 as well as with error statuses, so HTTPStatus may be 200.
type APIError struct {
	// Operation is the API operation, for example "start_planning".
	Operation string
	// Code is OptimoRoute's code; empty when the body was not an
	// OptimoRoute error (a proxy's error page, say).
	Code Code
	// Message is OptimoRoute's message, or the start of a non-JSON body.
	Message string
	// HTTPStatus is the response's status code.
	HTTPStatus int
	// GeocodingResults holds the candidates sent with
	// ERR_LOC_GEOCODING_MULTIPLE, as received.
	GeocodingResults json.RawMessage
}

// Error describes the failure; it never contains the API key.
func (e *APIError) Error() string {
	switch {
	case e.Code == "":
		return fmt.Sprintf("optimoroute %s: HTTP %d: %s", e.Operation, e.HTTPStatus, e.Message)
	case e.Message == "":
		return fmt.Sprintf("optimoroute %s: %s (HTTP %d)", e.Operation, e.Code, e.HTTPStatus)
	default:
		return fmt.Sprintf("optimoroute %s: %s: %s (HTTP %d)", e.Operation, e.Code, e.Message, e.HTTPStatus)
	}
}

// Is reports whether target is the Code of e.
func (e *APIError) Is(target error) bool {
	c, ok := target.(Code)
	return ok && e.Code != "" && c == e.Code
}

// ChunkError reports that one call of a bulk operation failed as a whole:
// none of the orders Offset..Offset+Count-1 is known to be written.
type ChunkError struct {
	// Operation is the API operation, for example "create_or_update_orders".
	Operation string
	// Offset is the index of the chunk's first order in the caller's slice.
	Offset int
	// Count is the number of orders in the chunk.
	Count int
	// Total is the number of orders the caller passed.
	Total int
	// Err is the call's error, often an *APIError.
	Err error
}

// Error names the failed range of orders.
func (e *ChunkError) Error() string {
	return fmt.Sprintf("optimoroute %s: orders %d-%d of %d: %v",
		e.Operation, e.Offset, e.Offset+e.Count-1, e.Total, e.Err)
}

// Unwrap returns the call's error.
func (e *ChunkError) Unwrap() error { return e.Err }
