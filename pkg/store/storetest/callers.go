package storetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

// testCallers holds both backends to what the callers outside primeflow rely
// on (§7, §11): settings, the Make Safe verdict whoever writes the row, and
// the spec's call shapes of the make-safe detection — spMakesafeUpsertPhone
// CallFromPrimeJob @JobId, @QueueMakeAllocationChecks and nothing else (§5.5,
// §6, and the email flow of §7). The other procedures' spec shapes (the
// webhook log's, the reference map's, the GUID probe's, the sync queue's and
// the plan status's, each with the spec's parameters alone) are held in
// their own parts of the suite.
func testCallers(t *testing.T, open Opener) {
	ctx := context.Background()
	afterHours := time.Date(2026, 10, 3, 12, 14, 33, 0, time.UTC) // a Saturday night in Melbourne

	t.Run("settings", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		_, found, err := s.GetSetting(ctx, store.SettingMakesafeSMSRecipient)
		is.NoErr(err)
		is.True(!found) // never written
		is.NoErr(s.SetSetting(ctx, store.SettingMakesafeSMSRecipient, onCall))
		is.NoErr(s.SetSetting(ctx, store.SettingMakesafeSMSRecipient, "+61400000001"))
		v, found, err := s.GetSetting(ctx, store.SettingMakesafeSMSRecipient)
		is.NoErr(err)
		is.True(found)              // written
		is.Equal(v, "+61400000001") // the last value
		err = s.SetSetting(ctx, "long", strings.Repeat("x", store.MaxSettingLen+1))
		is.True(err != nil) // a value longer than the column is refused, not cut
	})

	t.Run("isMakeSafe is the allocation type's, whatever the writer says", func(t *testing.T) {
		for i, typ := range []string{"Make Safe", "make safe", "MAKE-SAFE", "make_safe", "MakeSafe", " Make  Safe ", "Make Safe Inspection", "Assessment", ""} {
			t.Run(typ, func(t *testing.T) {
				is := is.New(t)
				s := open(t)
				want := prime.Allocation{Type: typ}.IsMakeSafe()
				id := "c1c1c1c1-0000-4000-8000-00000000000" + string(rune('0'+i))
				_, err := s.SaveAllocation(ctx, store.Allocation{AllocationID: id, JobID: jobA, AllocationType: typ,
					IsMakeSafe: !want, Version: 1}) // the writer's verdict is wrong on purpose
				is.NoErr(err)
				got, _, err := s.GetAllocation(ctx, id)
				is.NoErr(err)
				is.Equal(got.IsMakeSafe, want) // the rule of prime.Allocation.IsMakeSafe, derived in SQL
				has, err := s.HasMakeSafeAllocation(ctx, jobA)
				is.NoErr(err)
				is.Equal(has, want) // and what detection reads
			})
		}
	})

	t.Run("@QueueMakeAllocationChecks = 1 with no offsets queues the default ladder", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		_, err := s.UpsertJob(ctx, makesafeJob(jobA, afterHours))
		is.NoErr(err)
		out, err := s.UpsertMakeSafePhoneCallFromJob(ctx, store.MakesafeDetection{JobID: jobA, QueueChecks: true})
		is.NoErr(err)
		is.True(out.JobFound && !out.Raised)                        // no Make Safe yet
		is.Equal(len(out.Checks), len(store.DefaultMakesafeLadder)) // §6's four rungs
		for i, c := range out.Checks {
			is.Equal(c.Rung, i+1)                                               // in order
			is.Equal(c.DueUTC.Sub(c.QueuedUTC), store.DefaultMakesafeLadder[i]) // +1, +4, +10, +15 minutes from the call
		}
		due, err := s.ListDueMakesafeChecks(ctx, out.Checks[1].DueUTC.Add(time.Millisecond), 10)
		is.NoErr(err)
		is.Equal(len(due), 2)    // the rungs due by then, for the sweep that fires them
		is.Equal(due[0].Rung, 1) // earliest first
		is.NoErr(s.SetMakesafeCheckFired(ctx, jobA, 1, "done", out.Checks[0].DueUTC))
		due, err = s.ListDueMakesafeChecks(ctx, out.Checks[1].DueUTC.Add(time.Millisecond), 10)
		is.NoErr(err)
		is.Equal(len(due), 1) // a fired rung is not due again
		is.Equal(due[0].Rung, 2)
		due, err = s.ListDueMakesafeChecks(ctx, out.Checks[3].DueUTC.Add(time.Hour), 0)
		is.NoErr(err)
		is.Equal(len(due), 0) // a limit of 0 lists nothing

		out, err = s.UpsertMakeSafePhoneCallFromJob(ctx, store.MakesafeDetection{JobID: jobA, QueueChecks: true})
		is.NoErr(err)
		is.Equal(len(out.Checks), 0) // once
	})

	t.Run("@QueueMakeAllocationChecks = 0 queues no ladder", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		_, err := s.UpsertJob(ctx, makesafeJob(jobA, afterHours))
		is.NoErr(err)
		out, err := s.UpsertMakeSafePhoneCallFromJob(ctx, store.MakesafeDetection{JobID: jobA})
		is.NoErr(err)
		is.True(out.JobFound)        // the job was read
		is.Equal(len(out.Checks), 0) // §5.5: the create-allocation call never queues rungs
	})

	for _, tc := range []struct {
		name, setting, given, want string
	}{
		{"no recipient: the SMS goes to the configured default", onCall, "", onCall},        // primectl migrate wrote it
		{"a recipient given wins over the default", onCall, "+61400000009", "+61400000009"}, // makesafe's own MAKESAFE_SMS_TO
		{"no recipient and no default: queued with none, to fail visibly", "", "", ""},      // the sender refuses it for good
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			s := open(t)
			if tc.setting != "" {
				is.NoErr(s.SetSetting(ctx, store.SettingMakesafeSMSRecipient, tc.setting))
			}
			_, err := s.UpsertJob(ctx, makesafeJob(jobA, afterHours))
			is.NoErr(err)
			saveAllocation(t, s, "a1000000-0000-4000-8000-000000000011", jobA, "Make Safe")
			out, err := s.UpsertMakeSafePhoneCallFromJob(ctx, store.MakesafeDetection{JobID: jobA, QueueChecks: true, SMSRecipient: tc.given})
			is.NoErr(err)
			is.True(out.Raised) // the call is raised whoever the SMS goes to: a person still sees it
			m, err := s.GetSMS(ctx, out.SMSID)
			is.NoErr(err)
			is.Equal(m.Recipient, tc.want) // the SMS's recipient
		})
	}
}
