package primectl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// streams is the operators' step for NATS, as migrate is for SQL: apply
// makes NATS hold every stream of streams/ and every durable consumer as
// defined (events.Apply, with the operators' NATS user; the services may
// only read their info, and wait at start until they are as defined), and
// says what it changed; check says what is missing or different, changing
// nothing (the read-only operators' user may run it), and fails when
// anything is. NATS_STREAM_REPLICAS sets the streams' replicas in a
// cluster, as it does for the services' check.
func (c *cli) streams(ctx context.Context, args []string) error {
	fs := c.flags("streams")
	wait := fs.Duration("wait", time.Minute, "how long to wait for JetStream to answer (a cluster still forming)")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || pos[0] != "apply" && pos[0] != "check" {
		fmt.Fprintf(c.stderr, "usage:\n%s\n", commandUsage("streams"))
		return ErrUsage
	}
	nc, err := c.connectNATS()
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *wait)
	defer cancel()
	if pos[0] == "check" {
		err := answered(ctx, nc, func(ctx context.Context) error { return events.CheckAll(ctx, js, c.cfg.StreamReplicas) })
		var notApplied *events.NotAppliedError
		if errors.As(err, &notApplied) {
			for _, p := range notApplied.Problems {
				fmt.Fprintln(c.stdout, p)
			}
			return fmt.Errorf("NATS does not hold the streams and consumers as defined: run `%s`", events.ApplyCommand)
		}
		if err == nil {
			fmt.Fprintln(c.stdout, "NATS holds every stream and consumer as defined")
		}
		return err
	}
	var did []string
	err = answered(ctx, nc, func(ctx context.Context) error {
		more, err := events.Apply(ctx, js, c.cfg.StreamReplicas)
		did = append(did, more...)
		return err
	})
	for _, line := range did {
		fmt.Fprintln(c.stdout, line)
	}
	if err != nil {
		return err
	}
	if len(did) == 0 {
		fmt.Fprintln(c.stdout, "NATS held every stream and consumer as defined already: nothing changed")
	}
	return nil
}

// answered runs f until it returns nil or an error JetStream answered
// with (a configuration it refuses: the operator's to fix), waiting while
// JetStream does not answer, until ctx ends; each try has attemptTimeout,
// since a request sent before a new cluster has its leader is never
// answered. A request the user may not make is never answered either: the
// server's permissions violation ends it.
func answered(ctx context.Context, nc *nats.Conn, f func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		err := f(actx)
		cancel()
		var api *jetstream.APIError
		var notApplied *events.NotAppliedError
		if err == nil || errors.As(err, &api) || errors.As(err, &notApplied) {
			return err
		}
		if last := nc.LastError(); errors.Is(last, nats.ErrPermissionViolation) {
			return fmt.Errorf("NATS_USER may not do this (%w): applying takes the operators' user", last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("JetStream did not answer: %w", err)
		case <-time.After(answerRetry.After(attempt)):
		}
	}
}

// attemptTimeout bounds one try of answered.
const attemptTimeout = 10 * time.Second

var answerRetry = retry.Backoff{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second}
