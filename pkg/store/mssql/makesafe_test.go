package mssql

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/migration"
	"github.com/matryer/is"
	mssql "github.com/microsoft/go-mssqldb"
)

// The make-safe and SMS methods call their procedures with parameters that
// exist, of fitting types, leaving out none that is required, and every
// procedure of 030_sms.sql and 031_makesafe.sql is called.
func TestMakesafeAndSMSCallsMatchTheProcedures(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, rec := recording(t)

	const job = "0B6A3C52-3E0F-4A57-9A39-2F1D7C1E4B10"
	now := time.Now()
	var errs []error
	try := func(err error) { errs = append(errs, err) }
	_, err := s.UpsertMakeSafePhoneCallFromJob(ctx, store.MakesafeDetection{JobID: job, QueueChecks: true,
		Checks: []time.Duration{time.Minute, 4 * time.Minute}, ChecksFrom: now.Add(time.Second), Now: now, SMSRecipient: "+61400000000"})
	try(err)
	_, err = s.UpsertMakeSafePhoneCallFromJob(ctx, store.MakesafeDetection{JobID: job})
	try(err)
	_, _, err = s.GetMakesafePhoneCall(ctx, job)
	try(err)
	_, err = s.ListMakesafeChecks(ctx, job)
	try(err)
	try(s.SetMakesafeCheckFired(ctx, job, 1, "done", now))
	_, _, err = s.QueueSMS(ctx, store.NewSMS{Recipient: "+61400000000", Body: "b", Source: "makesafe", DedupeKey: "k", Now: now})
	try(err)
	_, _, err = s.QueueSMS(ctx, store.NewSMS{Recipient: "+61400000000", Body: "b"})
	try(err)
	_, err = s.ClaimSMS(ctx, now, time.Minute, 5, 10)
	try(err)
	try(s.SetSMSSent(ctx, 1, 1, now))
	try(s.SetSMSLogged(ctx, 1, 1, now))
	try(s.SetSMSFailed(ctx, 1, 1, "boom", now.Add(time.Minute), now))
	try(s.SetSMSFailed(ctx, 1, 1, "boom", time.Time{}, now))
	try(s.ReleaseSMS(ctx, 1, 1, now))
	try(s.DeferSMS(ctx, 1, 1, "HTTP 503", now.Add(time.Minute), now))
	_, err = s.GetSMS(ctx, 1)
	try(err)
	_, _, err = s.NextSMSDue(ctx)
	try(err)
	_, err = s.CountSMS(ctx)
	try(err)
	_, _, err = s.OldestSMSWaiting(ctx)
	try(err)
	for _, err := range errs {
		is.True(errors.Is(err, errRecorded)) // every method reached the database
	}

	is.Equal(checkCalls(t, rec, scriptModules(t, "030_sms.sql", "031_makesafe.sql"), fits, nil), 13) // both scripts were found
}

func TestMakesafeOffsetsGoAsSeconds(t *testing.T) {
	is := is.New(t)
	s, rec := recording(t)
	_, err := s.UpsertMakeSafePhoneCallFromJob(context.Background(), store.MakesafeDetection{
		JobID: "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10", QueueChecks: true,
		Checks: []time.Duration{time.Minute, 4 * time.Minute, 10 * time.Minute, 15 * time.Minute}})
	is.True(errors.Is(err, errRecorded))
	cs := calls(t, rec.take())
	is.Equal(len(cs), 1)
	tvp, ok := cs[0].args["CheckOffsets"].(mssql.TVP)
	is.True(ok)                                             // the offsets go as a table
	is.Equal(tvp.Value, []idRow{{60}, {240}, {600}, {900}}) // of seconds, in rung order
	is.Equal(cs[0].args["QueueMakeAllocationChecks"], true) // with the flag
	_, err = s.UpsertMakeSafePhoneCallFromJob(context.Background(), store.MakesafeDetection{JobID: "J012345"})
	is.True(err != nil && !errors.Is(err, errRecorded)) // a job id that is not a GUID never reaches the database
}

// The methods behind the callers' defaults call the procedures of
// 032_callers.sql, and every procedure of that script is called.
func TestCallersCallsMatchTheProcedures(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, rec := recording(t)
	_, err := s.ListDueMakesafeChecks(ctx, time.Now(), 10)
	is.True(errors.Is(err, errRecorded))
	is.True(errors.Is(s.SetSetting(ctx, store.SettingMakesafeSMSRecipient, "+61400000000"), errRecorded))
	_, _, err = s.GetSetting(ctx, store.SettingMakesafeSMSRecipient)
	is.True(errors.Is(err, errRecorded))
	is.Equal(checkCalls(t, rec, scriptModules(t, "032_callers.sql"), fits, nil), 3) // the script's three procedures

	err = s.SetSetting(ctx, "x", strings.Repeat("9", store.MaxSettingLen+1))
	is.True(err != nil && !errors.Is(err, errRecorded)) // a value over the column is refused before the call
	_, err = s.ListDueMakesafeChecks(ctx, time.Now(), 0)
	is.NoErr(err)
	is.Equal(len(rec.take()), 0) // and nothing was sent for either
}

// The detection's defaults for the spec's two-parameter call are the Go
// side's: the ladder of store.DefaultMakesafeLadder and the setting named
// store.SettingMakesafeSMSRecipient.
func TestMakesafeDefaultsAreTheStores(t *testing.T) {
	is := is.New(t)
	objs, err := migration.Objects(plainScripts(loaded(t)))
	is.NoErr(err)
	var text string
	for _, o := range objs {
		if o.Name == "spMakesafeUpsertPhoneCallFromPrimeJob" {
			text = o.Definition
		}
	}
	m := regexp.MustCompile(`(?is)IF\s+NOT\s+EXISTS\s*\(\s*SELECT\s+1\s+FROM\s+@ladder\s*\)\s*INSERT\s+INTO\s+@ladder\s*\(\s*id\s*\)\s*VALUES\s*((?:\(\s*\d+\s*\)\s*,?\s*)+)`).FindStringSubmatch(code(text))
	is.True(m != nil) // the default ladder is there
	var got []time.Duration
	for _, n := range regexp.MustCompile(`\d+`).FindAllString(m[1], -1) {
		secs, _ := strconv.Atoi(n)
		got = append(got, time.Duration(secs)*time.Second)
	}
	is.Equal(got, store.DefaultMakesafeLadder)                                         // §6's rungs, the same as Go's
	is.True(strings.Contains(text, "name = N'"+store.SettingMakesafeSMSRecipient+"'")) // the setting migrate writes
}
