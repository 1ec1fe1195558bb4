package optimocreate

import (
	"time"

	"github.com/ethosbuilding/primeflow/pkg/coalesce"
	"github.com/ethosbuilding/primeflow/pkg/config"
)

// Schedule is OPTIMO_CREATE_EVERY: what requests runs besides
// optimo.create.requested and the run at start.
//   - unset (SpecSchedule): the parent flow's schedule (§8.1, NextRun);
//   - a duration ("30m"): a run that often instead, whatever the time of day;
//   - "0" or "off" (OnRequest): no schedule, runs only on request.
//
// Whatever requests it, a run that starts in M–F 15:00–16:59 sweeps Prime's
// appointments first (§8.1), at most once a quarter hour (sweepDue).
type Schedule time.Duration

const (
	// SpecSchedule is the zero Schedule: the §8.1 schedule.
	SpecSchedule Schedule = 0
	// OnRequest runs only on request.
	OnRequest Schedule = -1
)

// UnmarshalText reads a duration, "0" or "off".
func (s *Schedule) UnmarshalText(b []byte) error {
	d, off, err := config.ParseInterval(string(b))
	switch {
	case err != nil:
		return err
	case off:
		*s = OnRequest
	default:
		*s = Schedule(d)
	}
	return nil
}

// String says what the Schedule is, for the logs.
func (s Schedule) String() string {
	switch {
	case s == SpecSchedule:
		return "§8.1"
	case s < 0:
		return "off"
	}
	return time.Duration(s).String()
}

// next is the coalesce.Schedule of s in zone; nil for OnRequest.
func (s Schedule) next(zone *time.Location) coalesce.Schedule {
	if s == SpecSchedule {
		return func(now time.Time) time.Time { return NextRun(now, zone) }
	}
	return coalesce.Every(time.Duration(s)) // nil for OnRequest
}

// NextRun is the parent flow's schedule (§8.1), the first run after t, in
// the account's zone:
//   - Monday to Friday 15:00–16:59, every 15 minutes (the sweep band);
//   - Monday to Friday 08:00–14:59, every 30 minutes;
//   - Monday to Friday 17:00–07:59, and Saturday and Sunday, every hour.
//
// Each interval divides the hour and every hour starts with a run, so the
// interval of t's local hour gives the next run; on a day that skips or
// repeats an hour (daylight saving) runs go by the hours that pass.
func NextRun(t time.Time, zone *time.Location) time.Time {
	l := t.In(zone)
	hour := t.Add(-(time.Duration(l.Minute())*time.Minute + time.Duration(l.Second())*time.Second + time.Duration(l.Nanosecond())))
	step := interval(l)
	return hour.Add(step * (t.Sub(hour)/step + 1)).In(zone)
}

// interval is how often §8.1 runs in the local hour of l.
func interval(l time.Time) time.Duration {
	switch h := l.Hour(); {
	case sweepBand(l):
		return 15 * time.Minute
	case weekday(l) && h >= 8 && h < 15:
		return 30 * time.Minute
	}
	return time.Hour
}

// InSweepBand reports whether t is in the band whose runs sweep Prime's
// appointments before the queues: M–F 15:00–16:59 in zone (§8.1).
func InSweepBand(t time.Time, zone *time.Location) bool { return sweepBand(t.In(zone)) }

func sweepBand(l time.Time) bool { return weekday(l) && l.Hour() >= 15 && l.Hour() < 17 }

func weekday(l time.Time) bool { return l.Weekday() != time.Saturday && l.Weekday() != time.Sunday }
