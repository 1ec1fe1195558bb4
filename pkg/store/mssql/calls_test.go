package mssql

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

func TestCallsMatchTheProcedures(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, rec := recording(t)

	const job = "0B6A3C52-3E0F-4A57-9A39-2F1D7C1E4B10"
	row := store.NewWebhookLogRow{ReceivedUTC: time.Now(), EventAction: "create-appointment", JobID: job,
		Payload: "{}", Headers: "{}", RemoteIP: "203.0.113.7", IsAuthenticated: true}
	filter := store.LogFilter{IDs: []int64{1, 2, 2}, Action: "change-job-status", JobID: job,
		From: time.Now().Add(-time.Hour), To: time.Now(), State: store.Capped, Unpublished: true, Limit: 5}
	errs := []error{}
	try := func(err error) { errs = append(errs, err) }
	_, err := s.InsertWebhookLog(ctx, row)
	try(err)
	_, err = s.InsertWebhookLogs(ctx, []store.NewWebhookLogRow{row, {Payload: "{}"}})
	try(err)
	_, err = s.GetWebhookLog(ctx, 1)
	try(err)
	_, err = s.GetWebhookLogUnprocessed(ctx, 0, 0)
	try(err)
	try(s.SetWebhookLogProcessed(ctx, 1, job, "Processed"))
	_, err = s.SetWebhookLogProcessedIfUnprocessed(ctx, 1, job, "Processed")
	try(err)
	_, err = s.IncrementWebhookLogAttempt(ctx, 1, "", "boom")
	try(err)
	_, err = s.GetWebhookLogUnpublished(ctx, 0, time.Now(), 10)
	try(err)
	try(s.SetWebhookLogPublished(ctx, []int64{1, 2}, time.Now()))
	_, err = s.ResetWebhookLog(ctx, filter)
	try(err)
	_, err = s.ListWebhookLog(ctx, filter)
	try(err)
	_, err = s.CountWebhookLog(ctx, store.LogFilter{})
	try(err)
	_, _, err = s.GetJobIDByReference(ctx, 2402073)
	try(err)
	_, err = s.SaveJobReference(ctx, 2402073, job)
	try(err)
	for _, err := range errs {
		is.True(errors.Is(err, errRecorded)) // every method reached the database
	}

	// The procedures of this subject's script are all used; later scripts
	// bring their own methods and their own checks.
	is.True(checkCalls(t, rec, scriptModules(t, "001_webhook_log.sql"), fits, nil) > 0) // the script has procedures
}

func TestBatchInsertBindsEveryRow(t *testing.T) {
	is := is.New(t)
	s, rec := recording(t)
	rows := make([]store.NewWebhookLogRow, insertBatchRows+3)
	for i := range rows {
		rows[i] = store.NewWebhookLogRow{EventAction: strconv.Itoa(i), Payload: "{}"}
	}
	_, err := s.InsertWebhookLogs(context.Background(), rows)
	is.True(errors.Is(err, errRecorded)) // the first request reached the database
	sends := rec.take()
	is.Equal(len(sends), 1) // the transaction stops at the first failure
	cs := calls(t, sends)
	is.Equal(len(cs), insertBatchRows) // one request carries a full chunk
	for i, c := range cs {
		is.Equal(c.args["EventAction"], strconv.Itoa(i)) // row i is bound to EXEC i
	}
	is.True(len(sends[0].args) <= 2100) // under SQL Server's parameter limit
}

func TestNoCallForImpossibleArguments(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, rec := recording(t)

	_, err := s.InsertWebhookLog(ctx, store.NewWebhookLogRow{JobID: "259047", Payload: "{}"})
	is.True(err != nil && !errors.Is(err, errRecorded)) // a jobId that is not a GUID is refused here
	_, err = s.SaveJobReference(ctx, 1, "not-a-guid")
	is.True(err != nil && !errors.Is(err, errRecorded)) // so is a mapping to one
	rows, err := s.ListWebhookLog(ctx, store.LogFilter{JobID: "259047"})
	is.NoErr(err)
	is.Equal(len(rows), 0) // no row's jobId equals a non-GUID
	n, err := s.CountWebhookLog(ctx, store.LogFilter{JobID: "259047"})
	is.NoErr(err)
	is.Equal(n, 0) // nor counts
	n, err = s.ResetWebhookLog(ctx, store.LogFilter{JobID: "259047"})
	is.NoErr(err)
	is.Equal(n, 0)                                           // nor resets
	is.NoErr(s.SetWebhookLogPublished(ctx, nil, time.Now())) // no ids, nothing to send
	got, err := s.GetWebhookLogUnpublished(ctx, 0, time.Now(), 0)
	is.NoErr(err)
	is.Equal(len(got), 0)        // a limit of 0 returns nothing
	is.Equal(len(rec.take()), 0) // and none of this reached the database
}

// Every function call in the scripts passes as many arguments as the
// function has parameters (T-SQL has no named arguments for functions).
func TestFunctionCallsHaveEveryArgument(t *testing.T) {
	is := is.New(t)
	scripts := loaded(t)
	mods := modules(t, scripts)
	n := 0
	for name, m := range mods {
		if m.kind != "FUNCTION" {
			continue
		}
		re := regexp.MustCompile(`(?i)dbo\.` + name + `\s*\(`)
		for _, sc := range scripts {
			for _, b := range sc.batches {
				c := code(b.sql)
				for _, loc := range re.FindAllStringIndex(c, -1) {
					if regexp.MustCompile(`(?i)FUNCTION\s+$`).MatchString(c[:loc[0]]) {
						continue // the definition, not a call
					}
					open := loc[1] - 1
					args := splitTop(c[open+1 : closing(c, open)])
					is.Equal(len(args), len(m.params)) // one argument a parameter
					n++
				}
			}
		}
	}
	is.True(n > 0) // there are calls to check
}

// The status overview calls 070_status.sql's procedure as it is declared.
func TestStatusOverviewCallsItsProcedure(t *testing.T) {
	is := is.New(t)
	s, rec := recording(t)
	_, err := s.StatusOverview(context.Background(), store.OverviewQuery{SyncQueuedSince: time.Now()})
	is.True(errors.Is(err, errRecorded))                                           // the method reached the database
	is.Equal(checkCalls(t, rec, scriptModules(t, "070_status.sql"), fits, nil), 1) // the script's one procedure
}
