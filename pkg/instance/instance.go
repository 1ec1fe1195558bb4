// Package instance tells whether a database and a NATS belong to one
// primeflow instance. Nothing is added to NATS for it: the PRIME_WEBHOOK
// stream's creation time, which JetStream keeps for the stream's life (on
// disk, and the same on every server of a cluster), names the NATS, and
// the resolver records it in the database it works on when it starts
// (Pair). A reader with both — primectl status, the status page — compares
// the two (Check): a database read beside another instance's NATS (a
// stopped instance's DATA_DIR beside a running one's embedded server, a
// shadow's DATABASE_URL beside the live cluster) shows one's rows with the
// other's lag, and Check says so.
package instance

import (
	"context"
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/nats-io/nats.go/jetstream"
)

// Setting is the primeflowSettings row a database is paired under: the
// creation time of the PRIME_WEBHOOK stream its webhooks go to.
const Setting = "PrimeWebhookStreamCreated"

// Stream is the creation time of js's PRIME_WEBHOOK stream, as Setting
// holds it (RFC 3339, nanoseconds, UTC).
func Stream(ctx context.Context, js jetstream.JetStream) (string, error) {
	s, err := js.Stream(ctx, events.StreamWebhook)
	if err != nil {
		return "", fmt.Errorf("stream %s: %w", events.StreamWebhook, err)
	}
	return s.CachedInfo().Created.UTC().Format(time.RFC3339Nano), nil
}

// Pair records js's PRIME_WEBHOOK stream in the database as the one its
// webhooks go to. It returns the stream recorded before when that was
// another ("" when it was the same, or none was): another instance's
// NATS, or the stream made anew (its messages lost, or deleted by hand).
func Pair(ctx context.Context, js jetstream.JetStream, st store.Settings) (previous string, err error) {
	created, err := Stream(ctx, js)
	if err != nil {
		return "", err
	}
	was, found, err := st.GetSetting(ctx, Setting)
	if err != nil || (found && was == created) {
		return "", err
	}
	if err := st.SetSetting(ctx, Setting, created); err != nil {
		return "", err
	}
	return was, nil
}

// Pairing is what each side says of the instance.
type Pairing struct {
	// Database is the stream the database was paired with; "" when it
	// never was (no resolver has started on it since pairing came in).
	Database string `json:"database"`
	// NATS is the PRIME_WEBHOOK stream of the NATS read.
	NATS string `json:"nats"`
}

// Known reports whether the database was paired at all.
func (p Pairing) Known() bool { return p.Database != "" }

// Same reports whether both sides are one instance's, or the database was
// never paired (nothing to tell them apart by).
func (p Pairing) Same() bool { return !p.Known() || p.Database == p.NATS }

// Check reads both sides.
func Check(ctx context.Context, js jetstream.JetStream, st store.Settings) (Pairing, error) {
	var p Pairing
	var err error
	if p.NATS, err = Stream(ctx, js); err != nil {
		return p, err
	}
	p.Database, _, err = st.GetSetting(ctx, Setting)
	return p, err
}
