package events

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStreamRetry paces the attempts of a JetStream request that did not
// answer (a failover's "no response from stream", a timeout, no quorum), by
// attempt.
var JetStreamRetry = retry.Backoff{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second}

// UntilAnswered runs f until it succeeds, each attempt bounded by attempt,
// and again after JetStreamRetry's pause while JetStream does not answer (a
// failover at start-up, no quorum, a bucket a node without a leader says
// does not exist), each wait logged as msg with logArgs, the pause and the
// error. A request JetStream refuses (400) is returned at once, as is the
// end of ctx.
func UntilAnswered(ctx context.Context, log *slog.Logger, msg string, attempt time.Duration, f func(context.Context) error, logArgs ...any) error {
	for n := 1; ; n++ {
		actx, cancel := context.WithTimeout(ctx, attempt)
		err := f(actx)
		cancel()
		var api *jetstream.APIError
		if err == nil || ctx.Err() != nil || errors.As(err, &api) && api.Code == 400 {
			return err
		}
		pause := JetStreamRetry.After(n)
		log.Warn(msg, append(logArgs, "in", pause, "err", err)...)
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(pause):
		}
	}
}
