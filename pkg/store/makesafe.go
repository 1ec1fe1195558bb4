package store

import (
	"context"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // the Melbourne zone rules travel inside the binary
)

// BusinessZone is the zone business hours are kept in (§5.5: Melbourne). SQL
// Server names the same rules 'AUS Eastern Standard Time'.
const BusinessZone = "Australia/Melbourne"

// Business hours, Monday to Friday in BusinessZone: from BusinessOpens up to,
// not including, BusinessCloses (fnIsOutsideBusinessHours, §5.5).
const (
	BusinessOpens  = 8*time.Hour + 30*time.Minute
	BusinessCloses = 17 * time.Hour
)

// melbourne is loaded once from the embedded zone data; it never changes.
var melbourne = mustLoadZone(BusinessZone)

func mustLoadZone(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(fmt.Sprintf("store: zone %s: %v", name, err)) // cannot happen: time/tzdata is embedded
	}
	return loc
}

// RungAsksPrime reports whether a rung of the re-check ladder (§6) asks
// Prime for the allocations of a job created at created: only for a job a
// phone call can be raised for, one created outside business hours (§5.5).
// For any other, detection raises nothing whatever Prime holds, and the
// job's own events and the sync drains mirror its allocations.
func RungAsksPrime(created time.Time) bool { return IsOutsideBusinessHours(created) }

// IsOutsideBusinessHours is dbo.fnIsOutsideBusinessHours (§5.5): true on a
// Saturday or Sunday, or before 08:30 or from 17:00 on a weekday, in
// Melbourne local time with daylight saving applied. The zero time (a job
// with no createdAt) is not outside business hours: nothing is raised for a
// time nobody knows.
func IsOutsideBusinessHours(t time.Time) bool {
	if t.IsZero() {
		return false
	}
	local := t.In(melbourne)
	switch local.Weekday() {
	case time.Saturday, time.Sunday:
		return true
	}
	// The wall clock, not the time since midnight: on a changeover day they differ.
	clock := time.Duration(local.Hour())*time.Hour + time.Duration(local.Minute())*time.Minute +
		time.Duration(local.Second())*time.Second + time.Duration(local.Nanosecond())
	return clock < BusinessOpens || clock >= BusinessCloses
}

// Phone-call states. primeflow raises calls; the people who make them move
// them on (a column other tools write).
const PhoneCallRaised = "Raised"

// MakesafePhoneCall is a row of makesafePhoneCall: the call a person must make
// for a job that needs a Make Safe out of hours (§5.5, §6). At most one a job.
type MakesafePhoneCall struct {
	ID         int64
	PrimeJobID string
	JobNumber  string
	// JobCreatedUTC is the job's createdAt, the time the business-hours rule read.
	JobCreatedUTC time.Time
	RaisedUTC     time.Time
	State         string
	// SMSID is the smsQueue row queued with the call.
	SMSID int64
}

// MakesafeCheck is a row of makesafeAllocationCheck: one rung of a job's
// re-check ladder (§6, the spec's ethTask rows of
// spEthTaskInsertMakeSafeAllocation).
type MakesafeCheck struct {
	PrimeJobID string
	// Rung counts from 1 in the order of the ladder's offsets.
	Rung      int
	DueUTC    time.Time
	QueuedUTC time.Time
	// FiredUTC is when the rung ran; zero while it waits.
	FiredUTC time.Time
	// Outcome says what the rung did (cut to MaxStatusLen).
	Outcome string
}

// MakesafeDetection is one call of spMakesafeUpsertPhoneCallFromPrimeJob.
type MakesafeDetection struct {
	JobID string
	// QueueChecks is @QueueMakeAllocationChecks: queue the re-check ladder
	// when the job has no Make Safe allocation yet (§6 on, §5.5 off).
	QueueChecks bool
	// Checks are the ladder's rungs as offsets from ChecksFrom, in whole
	// seconds, ascending (§6: 1, 4, 10 and 15 minutes). None, with
	// QueueChecks, is DefaultMakesafeLadder: the spec's callers pass no
	// offsets.
	Checks []time.Duration
	// ChecksFrom is when the ladder starts; zero is Now. A whole second
	// (events.ScheduleAt) gives due times a JetStream schedule holds exactly.
	ChecksFrom time.Time
	// Now is the detection's clock, stamped on the call and its SMS; zero is
	// the database's.
	Now time.Time
	// SMSRecipient is who the make-safe SMS goes to (the on-call number).
	// Blank is the setting SettingMakesafeSMSRecipient (the spec's callers
	// name nobody), and with no setting either the SMS is queued with no
	// recipient, to fail visibly.
	SMSRecipient string
}

// MakesafeOutcome is what a detection found and did.
type MakesafeOutcome struct {
	// JobFound is false when primeJobs has no row for the job: nothing was
	// decided and nothing written.
	JobFound             bool
	JobNumber            string
	JobCreatedUTC        time.Time
	OutsideBusinessHours bool
	// HasMakeSafe: the job has a Make Safe allocation in primeAllocations.
	HasMakeSafe bool
	// PhoneCallID is the job's phone call, raised now or before; 0 when none.
	PhoneCallID int64
	// Raised: this call raised the phone call and queued SMSID with it.
	Raised bool
	SMSID  int64
	// Checks are the rungs this call queued (none when the ladder was
	// queued before, or was not asked for, or is not needed).
	Checks []MakesafeCheck
}

// LacksMakeSafe reports whether the job still has no Make Safe allocation,
// which is what the ladder waits for.
func (o MakesafeOutcome) LacksMakeSafe() bool { return o.JobFound && !o.HasMakeSafe }

// Makesafe is make-safe detection (§5.5, §6): the phone calls and the
// re-check ladder.
type Makesafe interface {
	// UpsertMakeSafePhoneCallFromJob is spMakesafeUpsertPhoneCallFromPrimeJob
	// @JobId, @QueueMakeAllocationChecks, in one transaction:
	//   - it raises a makesafePhoneCall, and queues its SMS (MakesafeSMSBody
	//     to SMSRecipient, dedupe key MakesafeSMSKey), only for a job with a
	//     Make Safe allocation (primeAllocations.isMakeSafe, which SQL
	//     derives from the row's allocationType) that was created
	//     outside business hours (IsOutsideBusinessHours on
	//     primeJobs.createdAt), and only when the job has no call yet: one
	//     row a job however many calls run at once;
	//   - with QueueChecks, when the job has no Make Safe allocation and no
	//     call, it queues the rungs of Checks (DefaultMakesafeLadder when
	//     none) that are not queued yet, due at ChecksFrom plus each offset,
	//     and returns them.
	UpsertMakeSafePhoneCallFromJob(ctx context.Context, d MakesafeDetection) (MakesafeOutcome, error)
	// GetMakesafePhoneCall returns the job's phone call; found is false when
	// none was raised.
	GetMakesafePhoneCall(ctx context.Context, jobID string) (call MakesafePhoneCall, found bool, err error)
	// ListMakesafeChecks returns the job's rungs in order.
	ListMakesafeChecks(ctx context.Context, jobID string) ([]MakesafeCheck, error)
	// SetMakesafeCheckFired records that a rung ran and what it did (cut to
	// MaxStatusLen). A rung never queued is ErrNotFound.
	SetMakesafeCheckFired(ctx context.Context, jobID string, rung int, outcome string, at time.Time) error
	// ListDueMakesafeChecks returns up to limit rungs that have not fired
	// and were due before dueBefore, earliest first: rungs a caller outside
	// primeflow queued (no JetStream schedule fires those), or whose
	// schedule is late.
	ListDueMakesafeChecks(ctx context.Context, dueBefore time.Time, limit int) ([]MakesafeCheck, error)
}

// MakesafeSMSKey is the dedupe key of a job's make-safe SMS.
func MakesafeSMSKey(jobID string) string { return "makesafe:" + strings.ToLower(jobID) }

// MakesafeSMSSource is the smsQueue source of make-safe messages.
const MakesafeSMSSource = "makesafe"

// MakesafeSMSBody is the text of the make-safe SMS: the job number (the id
// when there is none) and the site address, parts left out when empty:
//
//	MAKE SAFE after hours: job J012345, 12 Smith St, Richmond, VIC, 3121. Please call the customer now.
//
// spMakesafeUpsertPhoneCallFromPrimeJob builds the same text in T-SQL.
func MakesafeSMSBody(jobID, jobNumber, addressLine1, suburb, state, postcode string) string {
	var b strings.Builder
	b.WriteString("MAKE SAFE after hours: job ")
	if n := trimSpaces(jobNumber); n != "" {
		b.WriteString(n)
	} else {
		b.WriteString(strings.ToLower(jobID))
	}
	for _, part := range []string{addressLine1, suburb, state, postcode} {
		if p := trimSpaces(part); p != "" {
			b.WriteString(", ")
			b.WriteString(p)
		}
	}
	b.WriteString(". Please call the customer now.")
	return b.String()
}

// trimSpaces trims what T-SQL's LTRIM(RTRIM()) trims: spaces only.
func trimSpaces(s string) string { return strings.Trim(s, " ") }
