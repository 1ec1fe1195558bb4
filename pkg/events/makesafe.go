package events

import (
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The make-safe re-check ladder (§6) runs on JetStream message schedules
// (nats-server ≥ 2.12, stream MAKESAFE with allow_msg_schedules): each rung
// is a schedule message on its own subject, MakesafeScheduleSubject, which
// the server turns into a MakesafeRecheck on SubjectMakesafeRecheck at its
// time and then purges.
//
// A schedule's target must be a subject of its own stream, and the server
// checks no permission when it delivers one: whoever may publish to a
// stream that takes schedules may have the server publish any of its
// subjects, at any time, for ever (@every). So MAKESAFE, the one stream
// that takes them, is written by makesafe alone, and the detection
// requests others send live on MAKESAFE_DETECT, which takes none; makesafe
// still works a rung only when its own row says that rung is due.

// SubjectMakesafeScheduleAll matches every rung's schedule subject.
const SubjectMakesafeScheduleAll = makesafeSchedulePrefix + ">"

const makesafeSchedulePrefix = "makesafe.schedule."

// MakesafeScheduleSubject is the subject that holds the schedule of one rung
// of a job's ladder. A subject holds one schedule (a second replaces the
// first), so each rung has its own. jobID is a GUID, a valid subject token.
func MakesafeScheduleSubject(jobID string, rung int) string {
	return makesafeSchedulePrefix + jobID + "." + strconv.Itoa(rung)
}

// MakesafeRungMsgID is the Nats-Msg-Id of a rung's schedule message, so a
// retried publish of the same rung is dropped.
func MakesafeRungMsgID(jobID string, rung int) string {
	return "makesafe-rung:" + jobID + ":" + strconv.Itoa(rung)
}

// ScheduleAt is the time a schedule for t can hold: @at keeps whole seconds,
// so t is rounded up to the next one (DESIGN.md), never early.
func ScheduleAt(t time.Time) time.Time {
	r := t.Truncate(time.Second)
	if r.Before(t) {
		r = r.Add(time.Second)
	}
	return r.UTC()
}

// ScheduleHeaders are the headers that make a message a one-off schedule
// delivering its body to target at ScheduleAt(at).
func ScheduleHeaders(at time.Time, target string) map[string]string {
	return map[string]string{
		jetstream.ScheduleHeader:       "@at " + ScheduleAt(at).Format(time.RFC3339),
		jetstream.ScheduleTargetHeader: target,
	}
}

// MakesafeRecheck, on SubjectMakesafeRecheck (delivered by a rung's
// schedule), asks for one rung of the ladder: sync the job's allocations
// from Prime and run detection again without queue-checks (§6).
type MakesafeRecheck struct {
	JobID string `json:"jobId"`
	// Rung counts from 1.
	Rung int `json:"rung"`
	// DueUTC is when the rung was scheduled for.
	DueUTC time.Time `json:"dueUtc"`
}
