package storetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

const onCall = "+61400000000"

func makesafeJob(id string, created time.Time) store.Job {
	return store.Job{JobID: id, JobNumber: "J014370", CreatedAt: created, Version: 1,
		AddressLine1: "12 Smith St", Suburb: "Richmond", State: "VIC", Postcode: "3121"}
}

// saveAllocation gives a job an allocation of a type; SQL derives its
// isMakeSafe.
func saveAllocation(t *testing.T, s store.Store, id, jobID, typ string) {
	t.Helper()
	if _, err := s.SaveAllocation(context.Background(), store.Allocation{AllocationID: id, JobID: jobID,
		AllocationType: typ, Version: 1}); err != nil {
		t.Fatalf("save allocation: %v", err)
	}
}

func detect(jobID string, queue bool, now time.Time) store.MakesafeDetection {
	// The ladder of §6, given as makesafe gives it.
	ladder := []time.Duration{time.Minute, 4 * time.Minute, 10 * time.Minute, 15 * time.Minute}
	return store.MakesafeDetection{JobID: jobID, QueueChecks: queue, Checks: ladder, Now: now, SMSRecipient: onCall}
}

func testMakesafe(t *testing.T, open Opener) {
	ctx := context.Background()
	// Saturday 2026-10-03 22:14:33 in Melbourne (AEST, UTC+10), and Tuesday
	// 2026-09-01 10:00 there.
	afterHours := time.Date(2026, 10, 3, 12, 14, 33, 0, time.UTC)
	officeHours := time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
	now := time.Date(2026, 10, 3, 12, 15, 0, 0, time.UTC)
	ladder := detect(jobA, true, now).Checks

	t.Run("ladder is queued once while the job lacks a Make Safe", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		_, err := s.UpsertJob(ctx, makesafeJob(jobA, afterHours))
		is.NoErr(err)
		saveAllocation(t, s, "a1000000-0000-4000-8000-000000000001", jobA, "Assessment")

		out, err := s.UpsertMakeSafePhoneCallFromJob(ctx, detect(strings.ToUpper(jobA), true, now))
		is.NoErr(err)
		is.True(out.JobFound)                        // the job is mirrored
		is.Equal(out.JobNumber, "J014370")           // and read
		is.True(out.JobCreatedUTC.Equal(afterHours)) // with its creation time
		is.True(out.OutsideBusinessHours)            // a Saturday night
		is.True(!out.HasMakeSafe)                    // an Assessment is not a Make Safe
		is.True(out.LacksMakeSafe())                 // so the ladder waits for one
		is.Equal(out.PhoneCallID, int64(0))          // no call
		is.True(!out.Raised)                         // nothing raised
		is.Equal(len(out.Checks), 4)                 // four rungs queued
		for i, c := range out.Checks {
			is.Equal(c.Rung, i+1)                       // in order
			is.Equal(c.PrimeJobID, jobA)                // for the job, lower case
			is.True(c.DueUTC.Equal(now.Add(ladder[i]))) // due at now + offset
		}

		again, err := s.UpsertMakeSafePhoneCallFromJob(ctx, detect(jobA, true, now.Add(time.Hour)))
		is.NoErr(err)
		is.Equal(len(again.Checks), 0) // a second detection adds no second ladder
		listed, err := s.ListMakesafeChecks(ctx, jobA)
		is.NoErr(err)
		is.Equal(len(listed), 4)                            // still four rungs
		is.True(listed[3].DueUTC.Equal(now.Add(ladder[3]))) // at the first detection's times
		is.True(listed[0].FiredUTC.IsZero())                // none fired yet
		is.NoErr(s.SetMakesafeCheckFired(ctx, jobA, 1, "no Make Safe yet", now.Add(time.Minute)))
		listed, err = s.ListMakesafeChecks(ctx, jobA)
		is.NoErr(err)
		is.True(listed[0].FiredUTC.Equal(now.Add(time.Minute))) // the rung's run is recorded
		is.Equal(listed[0].Outcome, "no Make Safe yet")         // with what it did
		err = s.SetMakesafeCheckFired(ctx, jobA, 9, "x", now)
		is.True(errors.Is(err, store.ErrNotFound)) // a rung never queued

		off, err := s.UpsertMakeSafePhoneCallFromJob(ctx, detect(jobB, false, now))
		is.NoErr(err)
		is.True(!off.JobFound) // an unknown job: nothing decided
		_, err = s.UpsertJob(ctx, makesafeJob(jobB, afterHours))
		is.NoErr(err)
		off, err = s.UpsertMakeSafePhoneCallFromJob(ctx, detect(jobB, false, now))
		is.NoErr(err)
		is.True(off.LacksMakeSafe()) // lacking a Make Safe
		is.Equal(len(off.Checks), 0) // but queue-checks off never queues rungs (§5.5)
		listed, err = s.ListMakesafeChecks(ctx, jobB)
		is.NoErr(err)
		is.Equal(len(listed), 0) // none stored
	})

	t.Run("the ladder starts from ChecksFrom", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		_, err := s.UpsertJob(ctx, makesafeJob(jobA, afterHours))
		is.NoErr(err)
		d := detect(jobA, true, now.Add(250*time.Millisecond))
		d.ChecksFrom = now.Add(time.Second)
		out, err := s.UpsertMakeSafePhoneCallFromJob(ctx, d)
		is.NoErr(err)
		is.Equal(len(out.Checks), 4)                                            // the rungs
		is.True(out.Checks[0].DueUTC.Equal(now.Add(time.Second + ladder[0])))   // due from ChecksFrom
		is.True(out.Checks[0].QueuedUTC.Equal(now.Add(250 * time.Millisecond))) // queued at Now
		listed, err := s.ListMakesafeChecks(ctx, jobA)
		is.NoErr(err)
		is.True(listed[3].DueUTC.Equal(now.Add(time.Second + ladder[3]))) // stored so
	})

	t.Run("a Make Safe out of hours raises one call and queues its SMS", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		_, err := s.UpsertJob(ctx, makesafeJob(jobA, afterHours))
		is.NoErr(err)
		saveAllocation(t, s, "a1000000-0000-4000-8000-000000000002", jobA, "Make Safe")

		out, err := s.UpsertMakeSafePhoneCallFromJob(ctx, detect(jobA, true, now))
		is.NoErr(err)
		is.True(out.HasMakeSafe)      // the allocation is a Make Safe
		is.True(!out.LacksMakeSafe()) // nothing to wait for
		is.True(out.Raised)           // the call is raised
		is.True(out.PhoneCallID > 0)  // with an id
		is.True(out.SMSID > 0)        // and an SMS queued with it
		is.Equal(len(out.Checks), 0)  // no ladder: the wait is over
		call, found, err := s.GetMakesafePhoneCall(ctx, strings.ToUpper(jobA))
		is.NoErr(err)
		is.True(found)                                // the call is stored
		is.Equal(call.ID, out.PhoneCallID)            // as returned
		is.Equal(call.PrimeJobID, jobA)               // for the job
		is.Equal(call.JobNumber, "J014370")           // with its number
		is.True(call.JobCreatedUTC.Equal(afterHours)) // and creation time
		is.True(call.RaisedUTC.Equal(now))            // raised at the detection's clock
		is.Equal(call.State, store.PhoneCallRaised)   // in state Raised
		is.Equal(call.SMSID, out.SMSID)               // pointing at its SMS

		sms, err := s.GetSMS(ctx, out.SMSID)
		is.NoErr(err)
		is.Equal(sms.Recipient, onCall) // to the on-call number
		is.Equal(sms.Body, "MAKE SAFE after hours: job J014370, 12 Smith St, Richmond, VIC, 3121. Please call the customer now.")
		is.Equal(sms.Body, store.MakesafeSMSBody(jobA, "J014370", "12 Smith St", "Richmond", "VIC", "3121")) // the one text
		is.Equal(sms.Source, store.MakesafeSMSSource)                                                        // from make-safe
		is.Equal(sms.DedupeKey, store.MakesafeSMSKey(jobA))                                                  // once a job
		is.Equal(sms.State, store.SendQueued)                                                                // waiting to be sent
		is.True(sms.NextAttemptUTC.Equal(now))                                                               // now

		again, err := s.UpsertMakeSafePhoneCallFromJob(ctx, detect(jobA, false, now.Add(time.Minute)))
		is.NoErr(err)
		is.True(!again.Raised)                       // a replay raises nothing
		is.Equal(again.PhoneCallID, out.PhoneCallID) // and finds the call
		is.Equal(again.SMSID, int64(0))              // queues no SMS
		counts, err := s.CountSMS(ctx)
		is.NoErr(err)
		is.Equal(counts[store.SendQueued], 1) // one SMS in all
	})

	t.Run("business hours raise nothing", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		_, err := s.UpsertJob(ctx, makesafeJob(jobA, officeHours))
		is.NoErr(err)
		saveAllocation(t, s, "a1000000-0000-4000-8000-000000000003", jobA, "Make Safe")
		out, err := s.UpsertMakeSafePhoneCallFromJob(ctx, detect(jobA, true, now))
		is.NoErr(err)
		is.True(!out.OutsideBusinessHours) // Tuesday 10:00 in Melbourne
		is.True(out.HasMakeSafe)           // a Make Safe
		is.True(!out.Raised)               // but no call
		is.Equal(len(out.Checks), 0)       // and no ladder
		_, found, err := s.GetMakesafePhoneCall(ctx, jobA)
		is.NoErr(err)
		is.True(!found) // nothing stored
		counts, err := s.CountSMS(ctx)
		is.NoErr(err)
		is.Equal(counts[store.SendQueued], 0) // no SMS
	})

	t.Run("concurrent detections raise one call", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		_, err := s.UpsertJob(ctx, makesafeJob(jobA, afterHours))
		is.NoErr(err)
		saveAllocation(t, s, "a1000000-0000-4000-8000-000000000004", jobA, "Make Safe")
		const n = 8
		outs := make([]store.MakesafeOutcome, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { outs[i], errs[i] = s.UpsertMakeSafePhoneCallFromJob(ctx, detect(jobA, true, now)) })
		}
		wg.Wait()
		raised := 0
		for i := range n {
			is.NoErr(errs[i])                                  // every call succeeds
			is.Equal(outs[i].PhoneCallID, outs[0].PhoneCallID) // and sees the one call
			if outs[i].Raised {
				raised++
			}
		}
		is.Equal(raised, 1) // exactly one raised it
		counts, err := s.CountSMS(ctx)
		is.NoErr(err)
		is.Equal(counts[store.SendQueued], 1) // one SMS
	})

	t.Run("a rolled-back detection leaves nothing", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		_, err := s.UpsertJob(ctx, makesafeJob(jobA, afterHours))
		is.NoErr(err)
		saveAllocation(t, s, "a1000000-0000-4000-8000-000000000005", jobA, "Make Safe")
		boom := errors.New("boom")
		err = s.InTx(ctx, func(tx store.Store) error {
			out, err := tx.UpsertMakeSafePhoneCallFromJob(ctx, detect(jobA, true, now))
			is.NoErr(err)
			is.True(out.Raised) // raised inside the transaction
			return boom
		})
		is.True(errors.Is(err, boom))
		_, found, err := s.GetMakesafePhoneCall(ctx, jobA)
		is.NoErr(err)
		is.True(!found) // rolled back with it
		counts, err := s.CountSMS(ctx)
		is.NoErr(err)
		is.Equal(counts[store.SendQueued], 0) // and so is its SMS
	})
}
