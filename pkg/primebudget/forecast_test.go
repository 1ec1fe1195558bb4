package primebudget

import (
	"testing"
	"time"

	"github.com/matryer/is"
)

// spend counts n calls evenly over the d before at, as the budget counts
// each call it lets out.
func spend(st *state, at time.Time, d time.Duration, n int, zone *time.Location) {
	for i := range n {
		t := at.Add(-d + time.Duration(i)*d/time.Duration(n))
		st.count(t.UnixMilli(), 1, zone, 5000, 250)
	}
}

// hours is how long n calls take at perHour.
func hours(n, perHour int) time.Duration {
	return time.Duration(float64(n) / float64(perHour) * float64(time.Hour))
}

func TestTheForecastSaysWhenTheReserveWouldBeReached(t *testing.T) {
	noon := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name      string
		spend     func(st *state)
		primeLeft int // x-ratelimit-day-remaining at noon; 0: not sent
		calls     int
		perHour   float64
		left      int
		reserveAt time.Time // zero: never at this pace
		short     bool
	}{{
		name: "a busy morning: the reserve at 13:02, before midnight",
		spend: func(st *state) {
			spend(st, noon, 3*time.Hour, 1500, time.UTC)
			spend(st, noon, time.Hour, 1200, time.UTC)
		},
		// 2,700 of our calls; Prime counts another client's too.
		primeLeft: 2000, calls: 2700, perHour: 1200 + 500, left: 2000,
		reserveAt: noon.Add(hours(2000-250, 1700)), short: true,
	}, {
		name:  "a quiet day: the reserve after midnight, from the day's limit as Prime said nothing",
		spend: func(st *state) { spend(st, noon, 6*time.Hour, 600, time.UTC) },
		calls: 600, perHour: 100, left: 4400,
		reserveAt: noon.Add(hours(4400-250, 100)),
	}, {
		name:  "no call in the last hour: no pace, no reserve reached",
		spend: func(st *state) { spend(st, noon.Add(-2*time.Hour), time.Hour, 300, time.UTC) },
		calls: 300, perHour: 0, left: 4700,
	}, {
		name:      "down to the reserve already",
		spend:     func(st *state) { spend(st, noon, time.Hour, 60, time.UTC) },
		primeLeft: 200, calls: 60, perHour: 60, left: 200, reserveAt: noon, short: true,
	}, {
		name: "the day before is not today's: counted anew from midnight, the pace across it",
		spend: func(st *state) {
			spend(st, noon.Add(-12*time.Hour), 6*time.Hour, 3000, time.UTC) // yesterday's
			spend(st, noon, 12*time.Hour, 1200, time.UTC)
		},
		calls: 1200, perHour: 100, left: 3800,
		reserveAt: noon.Add(hours(3800-250, 100)),
	}} {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			var st state
			tt.spend(&st)
			if tt.primeLeft > 0 {
				st.Day = &day{Remaining: tt.primeLeft, At: noon.UnixMilli()}
			}
			f := st.forecast(noon.UnixMilli())
			is.True(f != nil)                                                                   // counted today
			is.Equal(f.Start, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Local())             // the day from midnight
			is.Equal(f.End, time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC).Local())               // to the next
			is.Equal(f.Calls, tt.calls)                                                         // the day's calls
			is.True(f.PerHour > tt.perHour-15 && f.PerHour < tt.perHour+15)                     // the last hour's pace, within a slot's worth
			is.Equal(f.Left, tt.left)                                                           // what is left
			is.Equal(f.Reserve, 250)                                                            // PRIME_DAY_RESERVE
			is.Equal(f.ReserveAt == nil, tt.reserveAt.IsZero())                                 // reached at this pace, or never
			is.True(f.ReserveAt == nil || f.ReserveAt.Sub(tt.reserveAt).Abs() < 20*time.Minute) // when
			is.Equal(f.Short, tt.short)                                                         // before the day ends
		})
	}
}

// Prime's day ends at midnight in PRIME_DAY_ZONE, daylight saving and all.
func TestTheDayEndsAtMidnightInItsZone(t *testing.T) {
	is := is.New(t)
	mel, err := time.LoadLocation("Australia/Melbourne")
	is.NoErr(err)
	at := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC) // 01:00 on the 2nd in Melbourne (AEDT, +11)
	var st state
	st.count(at.UnixMilli(), 1, mel, 5000, 250)
	f := st.forecast(at.UnixMilli())
	is.Equal(f.Start.UTC(), time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)) // midnight of the 2nd in Melbourne
	is.Equal(f.End.UTC(), time.Date(2026, 12, 2, 13, 0, 0, 0, time.UTC))   // and of the 3rd
	is.True(st.forecast(f.End.UnixMilli()) == nil)                         // the next day has no count yet
}
