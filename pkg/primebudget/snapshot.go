package primebudget

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/nats-io/nats.go/jetstream"
)

// Snapshot is the deployment's budget at a moment, as an operator reads it
// (primectl status, bin/primeflow's status page, the metrics).
type Snapshot struct {
	// MinuteLeft is the calls that may still go out in the coming minute.
	MinuteLeft int
	// DayLeft is the day's budget as Prime last told it, less the calls
	// since; nil when Prime has not told it in the last hour.
	DayLeft *int
	// InFlight is the calls in flight, Processes the processes whose lease
	// runs.
	InFlight, Processes int
	// Hold is how long the hold a 429 started still runs.
	Hold time.Duration
	// Forecast is the day's calls and where they head; nil before any
	// process has counted a call in Prime's day.
	Forecast *Forecast
}

// snapshot is st at now: what prune would leave of it, counted without
// changing st (a Budget's view is shared).
func (st state) snapshot(now int64) Snapshot {
	s := Snapshot{
		MinuteLeft: max(0, st.PerMinute-st.in(now-time.Minute.Milliseconds())),
		Hold:       time.Duration(max(0, st.HoldUntil-now)) * time.Millisecond,
	}
	for _, p := range st.Procs {
		if p.live(now) {
			s.Processes++
		}
	}
	for _, sl := range st.Slots {
		if st.Procs[sl.Proc].live(now) {
			s.InFlight++
		}
	}
	if left, ok := st.dayLeft(now, dayStale.Milliseconds()); ok {
		left = max(0, left)
		s.DayLeft = &left
	}
	s.Forecast = st.forecast(now)
	return s
}

// ErrNotSpent is Read's answer when no process has written the budget yet.
var ErrNotSpent = errors.New("no process has spent the deployment's Prime budget yet")

// Read reads the deployment's budget from its bucket, without spending any
// of it: for a process that does not call Prime (primectl).
func Read(ctx context.Context, js jetstream.JetStream) (Snapshot, error) {
	kv, err := js.KeyValue(ctx, events.BucketPrimeBudget)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return Snapshot{}, ErrNotSpent
	}
	if err != nil {
		return Snapshot{}, fmt.Errorf("prime budget bucket %s: %w", events.BucketPrimeBudget, err)
	}
	e, err := kv.Get(ctx, events.PrimeBudgetKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Snapshot{}, ErrNotSpent
	}
	if err != nil {
		return Snapshot{}, fmt.Errorf("prime budget %s/%s: %w", events.BucketPrimeBudget, events.PrimeBudgetKey, err)
	}
	st, err := decode(e.Value())
	if err != nil {
		return Snapshot{}, fmt.Errorf("prime budget %s/%s: %w", events.BucketPrimeBudget, events.PrimeBudgetKey, err)
	}
	return st.snapshot(time.Now().UnixMilli()), nil
}
