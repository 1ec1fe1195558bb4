package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

const (
	jobA = "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"
	jobB = "7d3f8e21-9c4b-4d1e-8f6a-5b2c9e0a1d34"
)

func newRow(action string) store.NewWebhookLogRow {
	return store.NewWebhookLogRow{
		ReceivedUTC:     time.Now().UTC(),
		EventAction:     action,
		Payload:         `{"eventAction":"` + action + `","jobId":259047}`,
		Headers:         `{"API-Key":["(redacted)"]}`,
		RemoteIP:        "203.0.113.7",
		IsAuthenticated: true,
	}
}

func insert(t *testing.T, s store.Store, n int) []int64 {
	t.Helper()
	ids := make([]int64, n)
	for i := range ids {
		id, err := s.InsertWebhookLog(context.Background(), newRow("change-job-status"))
		if err != nil {
			t.Fatalf("insert: %v", err)
		}
		ids[i] = id
	}
	return ids
}

func ids(rows []store.WebhookLogRow) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

func testWebhookLog(t *testing.T, open Opener) {
	ctx := context.Background()

	t.Run("insert and get keep every column", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		row := newRow("create-appointment")
		row.JobID = jobA
		row.ReceivedUTC = time.Date(2026, 3, 4, 5, 6, 7, 890e6, time.UTC)
		id, err := s.InsertWebhookLog(ctx, row)
		is.NoErr(err)
		is.True(id > 0) // an identity
		got, err := s.GetWebhookLog(ctx, id)
		is.NoErr(err)
		is.Equal(got.ID, id)
		is.True(got.ReceivedUTC.Equal(row.ReceivedUTC)) // millisecond precision, UTC
		is.Equal(got.EventAction, row.EventAction)
		is.Equal(got.JobID, jobA)
		is.Equal(got.Payload, row.Payload)
		is.Equal(got.Headers, row.Headers)
		is.Equal(got.RemoteIP, row.RemoteIP)
		is.True(got.IsAuthenticated)
		is.True(!got.Processed())        // queued
		is.Equal(got.ProcessAttempts, 0) // no attempts yet
		is.True(got.PublishedUTC.IsZero())

		second, err := s.InsertWebhookLog(ctx, newRow(""))
		is.NoErr(err)
		is.True(second > id) // ids grow
		got, err = s.GetWebhookLog(ctx, second)
		is.NoErr(err)
		is.Equal(got.JobID, "")       // no jobId is NULL
		is.Equal(got.EventAction, "") // no action is NULL

		_, err = s.GetWebhookLog(ctx, second+1000)
		is.True(errors.Is(err, store.ErrNotFound)) // a missing row
	})

	t.Run("batch insert returns ids in order", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		rows := []store.NewWebhookLogRow{newRow("a"), newRow("b"), newRow("c")}
		got, err := s.InsertWebhookLogs(ctx, rows)
		is.NoErr(err)
		is.Equal(len(got), 3)
		for i, id := range got {
			r, err := s.GetWebhookLog(ctx, id)
			is.NoErr(err)
			is.Equal(r.EventAction, rows[i].EventAction) // id i holds row i
		}
	})

	t.Run("unprocessed oldest first under the cap", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		all := insert(t, s, 60)
		got, err := s.GetWebhookLogUnprocessed(ctx, 0, 0)
		is.NoErr(err)
		is.Equal(ids(got), all[:store.DefaultTop]) // top defaults to 50, oldest first

		is.NoErr(s.SetWebhookLogProcessed(ctx, all[0], "", "Processed"))
		for range store.MaxAttempts {
			_, err := s.IncrementWebhookLogAttempt(ctx, all[1], "", "boom")
			is.NoErr(err)
		}
		_, err = s.IncrementWebhookLogAttempt(ctx, all[2], "", "boom")
		is.NoErr(err)
		got, err = s.GetWebhookLogUnprocessed(ctx, 3, 0)
		is.NoErr(err)
		is.Equal(ids(got), []int64{all[2], all[3], all[4]}) // processed and capped rows are skipped

		got, err = s.GetWebhookLogUnprocessed(ctx, 2, 1)
		is.NoErr(err)
		is.Equal(ids(got), []int64{all[3], all[4]}) // maxAttempts 1 skips the row with one attempt
	})

	t.Run("set processed writes jobId only when given", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		id := insert(t, s, 1)[0]
		_, err := s.IncrementWebhookLogAttempt(ctx, id, jobA, "first try failed")
		is.NoErr(err)
		is.NoErr(s.SetWebhookLogProcessed(ctx, id, "", "Processed"))
		got, err := s.GetWebhookLog(ctx, id)
		is.NoErr(err)
		is.True(got.Processed())
		is.Equal(got.JobID, jobA) // an empty jobId leaves the earlier one
		is.Equal(got.ProcessStatus, "Processed")
		is.Equal(got.ProcessAttempts, 1) // the failed attempt stays counted

		is.NoErr(s.SetWebhookLogProcessed(ctx, id, strings.ToUpper(jobB), "Processed again"))
		got, err = s.GetWebhookLog(ctx, id)
		is.NoErr(err)
		is.Equal(strings.ToLower(got.JobID), jobB) // a given jobId is written

		err = s.SetWebhookLogProcessed(ctx, id+1000, "", "x")
		is.True(errors.Is(err, store.ErrNotFound)) // a missing row
	})

	t.Run("set processed if unprocessed writes a queued row once", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		id := insert(t, s, 1)[0]
		_, err := s.IncrementWebhookLogAttempt(ctx, id, jobA, "first try failed")
		is.NoErr(err)
		written, err := s.SetWebhookLogProcessedIfUnprocessed(ctx, id, "", "Processed")
		is.NoErr(err)
		is.True(written) // a queued row is written
		first, err := s.GetWebhookLog(ctx, id)
		is.NoErr(err)
		is.True(first.Processed())
		is.Equal(first.JobID, jobA) // an empty jobId leaves the earlier one
		is.Equal(first.ProcessStatus, "Processed")
		is.Equal(first.ProcessAttempts, 1) // the failed attempt stays counted

		written, err = s.SetWebhookLogProcessedIfUnprocessed(ctx, id, jobB, "Processed again")
		is.NoErr(err)
		is.True(!written) // a processed row is not written again
		got, err := s.GetWebhookLog(ctx, id)
		is.NoErr(err)
		is.Equal(got, first) // and nothing about it changed

		n, err := s.ResetWebhookLog(ctx, store.LogFilter{IDs: []int64{id}})
		is.NoErr(err)
		is.Equal(n, 1)
		written, err = s.SetWebhookLogProcessedIfUnprocessed(ctx, id, "", "Processed")
		is.NoErr(err)
		is.True(written) // a row reset for replay is queued again, and written

		_, err = s.SetWebhookLogProcessedIfUnprocessed(ctx, id+1000, "", "x")
		is.True(errors.Is(err, store.ErrNotFound)) // a missing row
	})

	t.Run("set processed if unprocessed lets one of two transactions write", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		id := insert(t, s, 1)[0]
		var wrote [2]bool
		errs := make(chan error, 2)
		for i := range wrote {
			go func() {
				errs <- s.InTx(ctx, func(tx store.Store) error {
					w, err := tx.SetWebhookLogProcessedIfUnprocessed(ctx, id, "", "Processed")
					wrote[i] = w
					time.Sleep(50 * time.Millisecond) // hold the row: the other transaction waits on it
					return err
				})
			}()
		}
		is.NoErr(<-errs)
		is.NoErr(<-errs)
		is.True(wrote[0] != wrote[1]) // exactly one wrote: the other saw the first's commit
	})

	t.Run("increment attempt keeps the row queued and counts", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		id := insert(t, s, 1)[0]
		for want := 1; want <= 3; want++ {
			n, err := s.IncrementWebhookLogAttempt(ctx, id, "", "Prime answered 503")
			is.NoErr(err)
			is.Equal(n, want) // the attempts so far
		}
		got, err := s.GetWebhookLog(ctx, id)
		is.NoErr(err)
		is.True(!got.Processed()) // still queued
		is.Equal(got.ProcessStatus, "Prime answered 503")
		_, err = s.IncrementWebhookLogAttempt(ctx, id+1000, "", "x")
		is.True(errors.Is(err, store.ErrNotFound)) // a missing row
	})

	t.Run("no attempt is recorded on a processed row", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		id := insert(t, s, 1)[0]
		is.NoErr(s.SetWebhookLogProcessed(ctx, id, "", "Processed"))
		_, err := s.IncrementWebhookLogAttempt(ctx, id, "", "Prime answered 503")
		is.True(errors.Is(err, store.ErrAlreadyProcessed)) // another run finished it
		got, err := s.GetWebhookLog(ctx, id)
		is.NoErr(err)
		is.True(got.Processed())                 // still processed
		is.Equal(got.ProcessAttempts, 0)         // no attempt
		is.Equal(got.ProcessStatus, "Processed") // nor its error
	})

	t.Run("status is truncated to 500 characters", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		id := insert(t, s, 2)
		long := strings.Repeat("é", 700)
		is.NoErr(s.SetWebhookLogProcessed(ctx, id[0], "", long))
		_, err := s.IncrementWebhookLogAttempt(ctx, id[1], "", long)
		is.NoErr(err)
		for _, i := range id {
			got, err := s.GetWebhookLog(ctx, i)
			is.NoErr(err)
			is.Equal(got.ProcessStatus, strings.Repeat("é", store.MaxStatusLen)) // 500 characters kept
		}
	})

	t.Run("relay bookkeeping and replay reset", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		all := insert(t, s, 4)
		later := time.Now().Add(time.Minute)
		got, err := s.GetWebhookLogUnpublished(ctx, 0, later, 10)
		is.NoErr(err)
		is.Equal(ids(got), all) // nothing published yet
		got, err = s.GetWebhookLogUnpublished(ctx, 0, time.Now().Add(-time.Hour), 10)
		is.NoErr(err)
		is.Equal(len(got), 0) // rows received after the cut-off wait
		got, err = s.GetWebhookLogUnpublished(ctx, all[1], later, 10)
		is.NoErr(err)
		is.Equal(ids(got), all[2:]) // the relay pages on after the last id it saw

		is.NoErr(s.SetWebhookLogPublished(ctx, all, time.Now()))
		got, err = s.GetWebhookLogUnpublished(ctx, 0, later, 10)
		is.NoErr(err)
		is.Equal(len(got), 0) // all published

		is.NoErr(s.SetWebhookLogProcessed(ctx, all[0], jobA, "Processed"))
		for range store.MaxAttempts {
			_, err := s.IncrementWebhookLogAttempt(ctx, all[1], "", "boom")
			is.NoErr(err)
		}
		n, err := s.ResetWebhookLog(ctx, store.LogFilter{IDs: all[:2]})
		is.NoErr(err)
		is.Equal(n, 2) // two rows reset
		for _, id := range all[:2] {
			r, err := s.GetWebhookLog(ctx, id)
			is.NoErr(err)
			is.True(!r.Processed())          // queued again
			is.Equal(r.ProcessAttempts, 0)   // attempts cleared
			is.True(r.PublishedUTC.IsZero()) // the relay publishes it again
			is.Equal(r.ReplayCount, 1)       // a new replay generation
		}
		got, err = s.GetWebhookLogUnpublished(ctx, 0, later, 10)
		is.NoErr(err)
		is.Equal(ids(got), all[:2]) // the reset rows wait for the relay
	})

	t.Run("list and count filter", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		t0 := time.Now().UTC().Add(-time.Hour)
		mk := func(action, job string, at time.Time) int64 {
			r := newRow(action)
			r.JobID, r.ReceivedUTC = job, at
			id, err := s.InsertWebhookLog(ctx, r)
			is.NoErr(err)
			return id
		}
		a := mk("change-job-status", jobA, t0)
		b := mk("create-appointment", jobA, t0.Add(10*time.Minute))
		c := mk("change-job-status", jobB, t0.Add(20*time.Minute))
		is.NoErr(s.SetWebhookLogProcessed(ctx, a, "", "Processed"))
		for range store.MaxAttempts {
			_, err := s.IncrementWebhookLogAttempt(ctx, b, "", "boom")
			is.NoErr(err)
		}
		is.NoErr(s.SetWebhookLogPublished(ctx, []int64{a, b}, time.Now()))
		for _, tc := range []struct {
			name string
			f    store.LogFilter
			want []int64
		}{
			{"all", store.LogFilter{}, []int64{a, b, c}},
			{"action", store.LogFilter{Action: "change-job-status"}, []int64{a, c}},
			{"job", store.LogFilter{JobID: jobA}, []int64{a, b}},
			{"time window", store.LogFilter{From: t0.Add(5 * time.Minute), To: t0.Add(15 * time.Minute)}, []int64{b}},
			{"unprocessed", store.LogFilter{State: store.Unprocessed}, []int64{c}},
			{"capped", store.LogFilter{State: store.Capped}, []int64{b}},
			{"processed", store.LogFilter{State: store.Processed}, []int64{a}},
			{"ids and action", store.LogFilter{IDs: []int64{a, b}, Action: "create-appointment"}, []int64{b}},
			{"limit", store.LogFilter{Limit: 2}, []int64{a, b}},
			{"newest first", store.LogFilter{Limit: 2, Newest: true}, []int64{c, b}},
			{"newest of a filter", store.LogFilter{Action: "change-job-status", Newest: true}, []int64{c, a}},
			{"unpublished", store.LogFilter{Unpublished: true, Action: "change-job-status"}, []int64{c}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				is := is.New(t)
				rows, err := s.ListWebhookLog(ctx, tc.f)
				is.NoErr(err)
				is.Equal(ids(rows), tc.want) // the selected rows, oldest first (Newest: newest first)
				if tc.f.Limit == 0 {
					n, err := s.CountWebhookLog(ctx, tc.f)
					is.NoErr(err)
					is.Equal(n, len(tc.want)) // count agrees with list
				}
			})
		}
	})
}

func testJobReferences(t *testing.T, open Opener) {
	ctx := context.Background()
	is := is.New(t)
	s := open(t)
	_, found, err := s.GetJobIDByReference(ctx, 2402073)
	is.NoErr(err)
	is.True(!found) // an unknown reference

	inserted, err := s.SaveJobReference(ctx, 2402073, jobA)
	is.NoErr(err)
	is.True(inserted) // first mapping inserts
	got, found, err := s.GetJobIDByReference(ctx, 2402073)
	is.NoErr(err)
	is.True(found)
	is.Equal(strings.ToLower(got), jobA) // the mapped job

	inserted, err = s.SaveJobReference(ctx, 2402073, strings.ToUpper(jobA))
	is.NoErr(err)
	is.True(!inserted) // the same mapping again is a no-op, whatever the GUID's case

	_, err = s.SaveJobReference(ctx, 2402073, jobB)
	is.True(errors.Is(err, store.ErrReferenceConflict)) // a reference never moves to another job
	got, _, err = s.GetJobIDByReference(ctx, 2402073)
	is.NoErr(err)
	is.Equal(strings.ToLower(got), jobA) // and the mapping is unchanged
}

func testInTx(t *testing.T, open Opener) {
	ctx := context.Background()
	is := is.New(t)
	s := open(t)
	boom := errors.New("boom")
	var rolledBack int64
	err := s.InTx(ctx, func(tx store.Store) error {
		id, err := tx.InsertWebhookLog(ctx, newRow("a"))
		is.NoErr(err)
		rolledBack = id
		_, err = tx.SaveJobReference(ctx, 1, jobA)
		is.NoErr(err)
		return boom
	})
	is.True(errors.Is(err, boom)) // fn's error comes back
	_, err = s.GetWebhookLog(ctx, rolledBack)
	is.True(errors.Is(err, store.ErrNotFound)) // the insert rolled back
	_, found, err := s.GetJobIDByReference(ctx, 1)
	is.NoErr(err)
	is.True(!found) // so did the mapping

	var kept int64
	err = s.InTx(ctx, func(tx store.Store) error {
		return tx.InTx(ctx, func(inner store.Store) error { // nested: the same transaction
			id, err := inner.InsertWebhookLog(ctx, newRow("b"))
			kept = id
			if err != nil {
				return err
			}
			got, err := inner.GetWebhookLog(ctx, id)
			is.NoErr(err)
			is.Equal(got.EventAction, "b") // the transaction reads its own write
			return nil
		})
	})
	is.NoErr(err)
	_, err = s.GetWebhookLog(ctx, kept)
	is.NoErr(err) // committed
}
