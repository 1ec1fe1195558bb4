package childmirror

import (
	"context"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

// ladder is a store whose only job has the ladder rungs given.
type ladder struct {
	store.Store
	rungs []store.MakesafeCheck
}

func (l ladder) ListMakesafeChecks(context.Context, string) ([]store.MakesafeCheck, error) {
	return l.rungs, nil
}

// The grace's asks of an item Prime answered empty back off: 30s, 1m, 2m,
// 4m, 8m … apart from the first ask, back by the end of the grace; a job's
// allocations wait for the next rung of its make-safe ladder instead, when
// the rung asks Prime for them (a job created out of hours, §5.5, §6).
func TestTheGraceBacksOff(t *testing.T) {
	cfg := Config{Drain: DrainConfig{EmptyWait: 30 * time.Second, EmptyGrace: 15 * time.Minute}}
	outOfHours := time.Date(2026, 10, 3, 12, 14, 0, 0, time.UTC) // a Saturday night in Melbourne
	inHours := time.Date(2026, 10, 6, 0, 30, 0, 0, time.UTC)     // a Tuesday morning
	now := time.Now()
	due := func(in time.Duration) store.MakesafeCheck { return store.MakesafeCheck{DueUTC: now.Add(in)} }
	for _, tc := range []struct {
		name    string
		object  string
		created time.Time
		rungs   []store.MakesafeCheck
		asks    []time.Duration // the waits from one ask to the next, the first ask at age 0
	}{
		{"status histories", store.TableJobStatusHistory, outOfHours, nil,
			[]time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 7*time.Minute + 31*time.Second}},
		{"allocations of a job created in business hours: its rungs ask Prime nothing", store.TableAllocations, inHours, []store.MakesafeCheck{due(time.Minute)},
			[]time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 7*time.Minute + 31*time.Second}},
		{"allocations of a job on the ladder: the next rung asks", store.TableAllocations, outOfHours, []store.MakesafeCheck{due(time.Minute), due(4 * time.Minute)},
			[]time.Duration{90 * time.Second}},
		{"the last rung fired: back to the grace's own", store.TableAllocations, outOfHours, []store.MakesafeCheck{{DueUTC: now.Add(-time.Minute), FiredUTC: now}},
			[]time.Duration{30 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			c := &ChildMirror{cfg: cfg, store: ladder{rungs: tc.rungs}}
			job := store.Job{JobID: "8707a01d-6329-483f-87df-1bd4a477b564", CreatedAt: tc.created}
			age := time.Duration(0)
			for _, want := range tc.asks {
				wait, err := c.reaskIn(context.Background(), drain{object: tc.object}, job, age)
				is.NoErr(err)
				is.True((wait - want).Abs() < time.Second) // the next ask after want
				age += wait
			}
		})
	}
}
