package primebudget

import (
	"time"
)

// The day's forecast: the deployment's calls in Prime's day, their pace
// over the last hour, and when, at that pace, the day's budget would be
// down to PRIME_DAY_RESERVE (events stop there; sweeps and drains at twice
// it). Every process counts the calls it lets out into the budget's key,
// so an operator reads the forecast without spending anything (Read).
//
// Prime's day is assumed to end at midnight in PRIME_DAY_ZONE: Prime sends
// how much of it is left (x-ratelimit-day-remaining), never when it ends.

// paceSlot and paceSlots are the pace's memory: the calls of each of the
// last twelve five-minute slots.
const (
	paceSlot  = 5 * time.Minute
	paceSlots = 12
	// paceLeast is the shortest time a pace is taken over: a burst in the
	// first minutes counted is not a day's pace.
	paceLeast = 15 * time.Minute
)

// today is the deployment's count of Prime's day, in the budget's key.
type today struct {
	// Start and End are the day's midnights in PRIME_DAY_ZONE.
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// Calls are the calls let out since Start.
	Calls int `json:"calls"`
	// Slots count the calls of each paceSlot, the newest last, the newest
	// starting at SlotAt; Since is when counting began.
	Slots  []int `json:"slots,omitempty"`
	SlotAt int64 `json:"slotAt,omitempty"`
	Since  int64 `json:"since"`
	// PerDay and Reserve are PRIME_RATE_PER_DAY and PRIME_DAY_RESERVE as
	// the processes spend them, for those that only read the budget.
	PerDay  int `json:"perDay"`
	Reserve int `json:"reserve"`
}

// dayOf is the day that holds now (Unix milliseconds) in zone: its
// midnight and the next.
func dayOf(now int64, zone *time.Location) (start, end int64) {
	t := time.UnixMilli(now).In(zone)
	midnight := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, zone)
	return midnight.UnixMilli(), midnight.AddDate(0, 0, 1).UnixMilli()
}

// count adds n calls let out at now to st's day, starting a new day at
// midnight in zone. perDay and reserve are the processes' settings.
func (st *state) count(now int64, n int, zone *time.Location, perDay, reserve int) {
	t := st.Today
	if t == nil {
		t = &today{Since: now}
		st.Today = t
	}
	if now >= t.End || now < t.Start {
		t.Start, t.End = dayOf(now, zone)
		t.Calls = 0
	}
	t.PerDay, t.Reserve = perDay, reserve
	t.Calls += n
	slot := now - now%paceSlot.Milliseconds()
	switch {
	case len(t.Slots) == 0 || slot > t.SlotAt:
		// Slots no call fell in count 0; those older than the pace's
		// memory go.
		gap := 1
		if len(t.Slots) > 0 {
			gap = int(min((slot-t.SlotAt)/paceSlot.Milliseconds(), paceSlots))
		}
		for range gap - 1 {
			t.Slots = append(t.Slots, 0)
		}
		t.Slots = append(t.Slots, n)
		t.SlotAt = slot
	case slot == t.SlotAt:
		t.Slots[len(t.Slots)-1] += n
	default: // an older slot: a call counted late (a local share's)
		if i := len(t.Slots) - 1 - int((t.SlotAt-slot)/paceSlot.Milliseconds()); i >= 0 {
			t.Slots[i] += n
		}
	}
	if len(t.Slots) > paceSlots {
		t.Slots = t.Slots[len(t.Slots)-paceSlots:]
	}
}

// Forecast is the day as the budget counts it, and where it heads.
type Forecast struct {
	// Start and End are Prime's day: its midnights in PRIME_DAY_ZONE.
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Calls are the deployment's calls since Start.
	Calls int `json:"calls"`
	// PerHour is the pace: the calls an hour of the last hour (of the time
	// counted, when that is shorter, but at least a quarter of an hour).
	PerHour float64 `json:"perHour"`
	// Left is the day's calls left: Prime's word when it sent it in the
	// last hour (x-ratelimit-day-remaining, less the calls since),
	// otherwise PRIME_RATE_PER_DAY less Calls. Reserve is PRIME_DAY_RESERVE.
	Left    int `json:"left"`
	Reserve int `json:"reserve"`
	// ReserveAt is when Left would be down to Reserve at this pace: now
	// when it already is, nil when no call goes out at this pace.
	ReserveAt *time.Time `json:"reserveAt,omitempty"`
	// Short: at this pace, the day's budget is down to the reserve before
	// the day ends (ReserveAt before End).
	Short bool `json:"short"`
}

// forecast is st's day at now; nil before any process has counted a call
// today.
func (st state) forecast(now int64) *Forecast {
	t := st.Today
	if t == nil || now >= t.End || now < t.Start {
		return nil
	}
	f := &Forecast{Start: time.UnixMilli(t.Start), End: time.UnixMilli(t.End), Calls: t.Calls, Reserve: t.Reserve,
		Left: max(0, t.PerDay-t.Calls)}
	if left, ok := st.dayLeft(now, dayStale.Milliseconds()); ok {
		f.Left = max(0, left)
	}
	// The slots within the last hour, the newest (still running) included.
	calls, oldest := 0, now-time.Hour.Milliseconds()
	for i, n := range t.Slots {
		if start := t.SlotAt - int64(len(t.Slots)-1-i)*paceSlot.Milliseconds(); start+paceSlot.Milliseconds() > oldest {
			calls += n
		}
	}
	over := time.Duration(min(time.Hour.Milliseconds(), max(paceLeast.Milliseconds(), now-t.Since))) * time.Millisecond
	f.PerHour = float64(calls) / over.Hours()
	switch {
	case f.Left <= f.Reserve:
		at := time.UnixMilli(now)
		f.ReserveAt = &at
	case f.PerHour > 0:
		at := time.UnixMilli(now).Add(time.Duration(float64(f.Left-f.Reserve) / f.PerHour * float64(time.Hour)))
		f.ReserveAt = &at
	}
	f.Short = f.ReserveAt != nil && f.ReserveAt.Before(f.End)
	return f
}
