package outbox_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/outbox"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestFailureReason: what stops a run of publishes (NATS or JetStream
// unavailable) and what is this message's own refusal, skipped.
func TestFailureReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{outbox.ErrDisconnected, outbox.ReasonDisconnected},
		{fmt.Errorf("publish: %w", nats.ErrConnectionClosed), outbox.ReasonDisconnected},
		{context.DeadlineExceeded, outbox.ReasonError},
		{nats.ErrNoResponders, outbox.ReasonError},
		{&jetstream.APIError{Code: 503, ErrorCode: 10023, Description: "insufficient resources"}, outbox.ReasonError},
		{&jetstream.APIError{Code: 500, Description: "stream store failed"}, outbox.ReasonError},
		{&jetstream.APIError{Code: 400, ErrorCode: 10054, Description: "message size exceeds maximum allowed"}, outbox.ReasonRejected},
		{nats.ErrMaxPayload, outbox.ReasonRejected},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			is.New(t).Equal(outbox.FailureReason(tc.err), tc.want)
		})
	}
}
