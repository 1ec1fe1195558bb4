package primebudget

import (
	"encoding/json"
	"errors"
	"slices"

	"github.com/ethosbuilding/primeflow/pkg/prime"
)

// state is the value of the budget's one key: every process reads it and
// changes it by compare-and-set. Times are Unix milliseconds, so that `nats
// kv get prime_budget account` reads plainly.
type state struct {
	// Grants are when the most recent calls went out, oldest first: at most
	// PRIME_RATE_PER_MINUTE of them, within the window.
	Grants []int64 `json:"grants,omitempty"`
	// Pace is the theoretical arrival time of the next call at the even
	// pace of PRIME_RATE_PER_MINUTE (a GCRA).
	Pace int64 `json:"pace,omitempty"`
	// Slots are the calls in flight, each held by a process.
	Slots []slot `json:"slots,omitempty"`
	// Procs are the processes spending the budget, by id.
	Procs map[string]*proc `json:"procs,omitempty"`
	// HoldUntil stops every call until then: a 429's Retry-After, as any
	// process saw it.
	HoldUntil int64 `json:"holdUntil,omitempty"`
	// SpentUntil is the minute's reset when Prime said the minute is spent
	// (x-ratelimit-minute-remaining 0): no call goes before it.
	SpentUntil int64 `json:"spentUntil,omitempty"`
	// Day is the day's budget as Prime last told it.
	Day *day `json:"day,omitempty"`
	// Today is the deployment's own count of Prime's day, for the
	// forecast (forecast.go).
	Today *today `json:"today,omitempty"`
	// PerMinute is PRIME_RATE_PER_MINUTE as the processes spend it, for
	// those that only read the budget (Read).
	PerMinute int `json:"perMinute,omitempty"`
}

// slot is a call in flight.
type slot struct {
	Proc string `json:"proc"`
	ID   uint64 `json:"id"`
	At   int64  `json:"at"` // when it went out
}

// proc is a process that spends the budget. Its lease ends at Until unless
// it renews it; then its slots are given back.
type proc struct {
	Until int64  `json:"until"`
	Host  string `json:"host"`
	PID   int    `json:"pid"`
	// Waiting is the turn of the process's first waiting call, so that the
	// other processes let it go first when its class is higher.
	Waiting *turn `json:"waiting,omitempty"`
}

// live reports whether p's lease still runs at now.
func (p *proc) live(now int64) bool { return p != nil && p.Until >= now }

// turn is a process's first waiting call: its class, since when it waits,
// and when the process last said so (an older claim is not heeded).
type turn struct {
	Priority string `json:"priority"`
	Since    int64  `json:"since"`
	At       int64  `json:"at"`
}

func (t *turn) class() prime.Priority {
	p, _ := prime.ParsePriority(t.Priority) // an unknown class is an event's
	return p
}

// day is x-ratelimit-day-remaining as Prime last sent it, at At, less the
// calls that went out since.
type day struct {
	Remaining int   `json:"remaining"`
	At        int64 `json:"at"`
}

// errNotOurs is decode's answer for JSON no process wrote: every state a
// process writes names PerMinute (enrol).
var errNotOurs = errors.New("not a budget any process wrote (no perMinute)")

// decode reads the key's value; none is the budget no process has spent
// yet, and a value no process wrote is an error (errNotOurs, or JSON's).
func decode(raw []byte) (state, error) {
	var st state
	if len(raw) == 0 {
		return st, nil
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return state{}, err
	}
	if st.PerMinute <= 0 {
		return state{}, errNotOurs
	}
	return st, nil
}

// clone is a copy of st that shares nothing with it.
func (st state) clone() state {
	b, _ := json.Marshal(st) // a state always marshals
	var c state
	_ = json.Unmarshal(b, &c)
	return c
}

// prune drops what no longer counts at now: the processes whose lease has
// ended, with their slots and their turns, and the grants older than the
// window but those of the calls still in flight.
func (st *state) prune(now, window int64) {
	for id, p := range st.Procs {
		if !p.live(now) {
			delete(st.Procs, id)
		}
	}
	st.Slots = slices.DeleteFunc(st.Slots, func(s slot) bool { return st.Procs[s.Proc] == nil })
	inFlight := make(map[int64]int, len(st.Slots)) // a call in flight counts until it ends, however long
	for _, s := range st.Slots {
		inFlight[s.At]++
	}
	st.Grants = slices.DeleteFunc(st.Grants, func(g int64) bool {
		if inFlight[g] > 0 {
			inFlight[g]--
			return false
		}
		return g <= now-window
	})
	if st.HoldUntil <= now {
		st.HoldUntil = 0
	}
	if st.SpentUntil <= now {
		st.SpentUntil = 0
	}
}

// counted is the window's grants as the budget counts them at now: each
// call at the latest time Prime may have counted it, so that however late a
// call granted at one moment reaches Prime, no window of Prime's holds more
// than the budget's does. A call still in flight counts as now (a slot's
// grant); one that has ended, as when its answer came back (ended). Oldest
// first.
func (st *state) counted(now int64) []int64 {
	eff := slices.Clone(st.Grants)
	for _, s := range st.Slots {
		if i := slices.Index(eff, s.At); i >= 0 {
			eff[i] = now
		}
	}
	slices.Sort(eff)
	return eff
}

// ended moves the grant of a call that has ended to when its answer came
// back: Prime counted it then at the latest.
func (st *state) ended(e ended) {
	if i := slices.Index(st.Grants, e.at); i >= 0 && e.done > e.at {
		st.Grants[i] = e.done
		slices.Sort(st.Grants)
	}
}

// in counts the grants after since.
func (st *state) in(since int64) int {
	n := 0
	for _, g := range st.Grants {
		if g > since {
			n++
		}
	}
	return n
}

// dayLeft is the day's remaining budget as last known, and whether it is
// known: Prime sent x-ratelimit-day-remaining within stale of now.
func (st *state) dayLeft(now, stale int64) (int, bool) {
	if st.Day == nil || now-st.Day.At > stale {
		return 0, false
	}
	return st.Day.Remaining, true
}

// firstOther is the turn, among the other processes' that are current at
// now, that goes first, with the id of its process.
func (st *state) firstOther(self string, now, fresh int64) (*turn, string) {
	var first *turn
	var firstID string
	for id, p := range st.Procs {
		t := p.Waiting
		if id == self || t == nil || t.At < now-fresh {
			continue
		}
		if first == nil || goesBefore(t, id, first, firstID) {
			first, firstID = t, id
		}
	}
	return first, firstID
}

// goesBefore orders turns: the higher class, then the longer wait, then
// the process id.
func goesBefore(a *turn, aID string, b *turn, bID string) bool {
	if ca, cb := a.class(), b.class(); ca != cb {
		return ca < cb
	}
	if a.Since != b.Since {
		return a.Since < b.Since
	}
	return aID < bID
}
