package outbox

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Why a publish failed, the values of a failure counter's reason label.
const (
	// ReasonDisconnected: not connected to NATS.
	ReasonDisconnected = "disconnected"
	// ReasonError: connected, but JetStream did not answer.
	ReasonError = "error"
	// ReasonRejected: NATS refused the message (one over the server's
	// max_payload, one its stream refuses, one on a subject no stream takes).
	ReasonRejected = "rejected"
)

// ErrDisconnected is the error of a publish not tried because the
// connection to NATS was down.
var ErrDisconnected = errors.New("not connected to NATS")

// FailureReason says why a publish failed, from its error alone:
// ReasonDisconnected or ReasonError when NATS itself is unavailable, so that
// every later publish would fail the same way (each one waiting out its
// timeout) and a run of publishes should stop — JetStream answering with a
// server error (code 5xx) among them; ReasonRejected when NATS refused this
// message, which should hold back no other.
func FailureReason(err error) string {
	var api *jetstream.APIError
	switch {
	case errors.As(err, &api) && api.Code >= 500:
		// JetStream answered that it cannot store now (insufficient
		// resources, a store failure): an outage, not this message.
		return ReasonError
	case errors.Is(err, ErrDisconnected), errors.Is(err, nats.ErrConnectionClosed),
		errors.Is(err, nats.ErrConnectionDraining):
		return ReasonDisconnected
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse):
		return ReasonError
	default:
		return ReasonRejected
	}
}
