package events

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Request sends req as JSON to a NATS micro endpoint and reads its JSON
// reply into R. Our endpoints answer a failure as a micro error whose body,
// when there is one, is still the reply that says what went wrong; an error
// without such a body comes back as the endpoint's code and description.
func Request[R any](ctx context.Context, nc *nats.Conn, subject string, req any) (R, error) {
	var reply R
	body, err := json.Marshal(req)
	if err != nil {
		return reply, err
	}
	msg, err := nc.RequestWithContext(ctx, subject, body)
	if err != nil {
		return reply, err
	}
	if err := json.Unmarshal(msg.Data, &reply); err != nil {
		if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
			return reply, fmt.Errorf("%s answered %s: %s", subject, code, msg.Header.Get(micro.ErrorHeader))
		}
		return reply, fmt.Errorf("reply: %w", err)
	}
	return reply, nil
}
