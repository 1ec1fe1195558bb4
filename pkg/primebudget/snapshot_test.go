package primebudget

import (
	"testing"
	"time"

	"github.com/matryer/is"
)

// A process whose lease has run out, and its calls in flight, are not
// counted, though no write has pruned them from the key yet; and counting
// leaves the state as it was (a Budget's view is shared).
func TestSnapshotCountsOnlyLiveProcesses(t *testing.T) {
	is := is.New(t)
	now := time.Now().UnixMilli()
	st := state{
		PerMinute: 60,
		Grants:    []int64{now - 2*time.Minute.Milliseconds(), now - 1000},
		Slots:     []slot{{Proc: "live", ID: 1}, {Proc: "gone", ID: 2}, {Proc: "gone", ID: 3}},
		Procs:     map[string]*proc{"live": {Until: now + 5000}, "gone": {Until: now - 1}},
		HoldUntil: now + 3000,
	}
	s := st.snapshot(now)
	is.Equal(s.Processes, 1)        // the lapsed process is gone
	is.Equal(s.InFlight, 1)         // with its slots
	is.Equal(s.MinuteLeft, 59)      // the grant of two minutes ago no longer counts
	is.Equal(s.Hold, 3*time.Second) // the hold still runs
	is.True(s.DayLeft == nil)       // Prime has not told the day
	is.Equal(len(st.Procs), 2)      // st itself is untouched
	is.Equal(len(st.Slots), 3)
}
