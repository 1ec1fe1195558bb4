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

func testSMSQueue(t *testing.T, open Opener) {
	ctx := context.Background()
	t0 := time.Date(2026, 10, 3, 12, 0, 0, 0, time.UTC)
	const lease = time.Minute

	t.Run("a message goes queued, sending, failed, queued, sending, sent", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		_, ok, err := s.NextSMSDue(ctx)
		is.NoErr(err)
		is.True(!ok) // nothing waits in an empty queue

		id, queued, err := s.QueueSMS(ctx, store.NewSMS{Recipient: onCall, Body: "hello", Source: "test", DedupeKey: "k1", Now: t0})
		is.NoErr(err)
		is.True(queued) // queued
		is.True(id > 0) // with an id
		again, queued, err := s.QueueSMS(ctx, store.NewSMS{Recipient: onCall, Body: "hello again", DedupeKey: "k1", Now: t0})
		is.NoErr(err)
		is.True(!queued)    // the same dedupe key is not queued twice
		is.Equal(again, id) // and names the first message
		due, ok, err := s.NextSMSDue(ctx)
		is.NoErr(err)
		is.True(ok && due.Equal(t0)) // due when queued

		got, err := s.ClaimSMS(ctx, t0.Add(-time.Second), lease, 3, 10)
		is.NoErr(err)
		is.Equal(len(got), 0) // not due before its time
		got, err = s.ClaimSMS(ctx, t0, lease, 3, 10)
		is.NoErr(err)
		is.Equal(len(got), 1)                                // claimed when due
		is.Equal(got[0].ID, id)                              // the message
		is.Equal(got[0].Body, "hello")                       // as queued first
		is.Equal(got[0].State, store.SendSending)            // now Sending
		is.Equal(got[0].Attempts, 1)                         // first attempt
		is.True(got[0].ClaimedUntilUTC.Equal(t0.Add(lease))) // until the lease ends
		got, err = s.ClaimSMS(ctx, t0.Add(time.Second), lease, 3, 10)
		is.NoErr(err)
		is.Equal(len(got), 0) // a claimed message is not claimed again

		is.NoErr(s.SetSMSFailed(ctx, id, 1, "endpoint said 503", t0.Add(30*time.Second), t0.Add(time.Second)))
		m, err := s.GetSMS(ctx, id)
		is.NoErr(err)
		is.Equal(m.State, store.SendQueued)                       // queued again
		is.Equal(m.LastError, "endpoint said 503")                // with the error
		is.True(m.NextAttemptUTC.Equal(t0.Add(30 * time.Second))) // from the retry time
		is.True(m.ClaimedUntilUTC.IsZero())                       // unclaimed
		due, ok, err = s.NextSMSDue(ctx)
		is.NoErr(err)
		is.True(ok && due.Equal(t0.Add(30*time.Second))) // the retry is what waits
		got, err = s.ClaimSMS(ctx, t0.Add(10*time.Second), lease, 3, 10)
		is.NoErr(err)
		is.Equal(len(got), 0) // not before the retry time
		got, err = s.ClaimSMS(ctx, t0.Add(30*time.Second), lease, 3, 10)
		is.NoErr(err)
		is.Equal(len(got), 1)        // claimed at it
		is.Equal(got[0].Attempts, 2) // second attempt

		is.NoErr(s.SetSMSSent(ctx, id, 2, t0.Add(31*time.Second)))
		m, err = s.GetSMS(ctx, id)
		is.NoErr(err)
		is.Equal(m.State, store.SendSent)                  // sent
		is.True(m.SentUTC.Equal(t0.Add(31 * time.Second))) // when
		is.True(m.QueuedUTC.Equal(t0))                     // queued when it was
		got, err = s.ClaimSMS(ctx, t0.Add(time.Hour), lease, 3, 10)
		is.NoErr(err)
		is.Equal(len(got), 0) // a sent message is never claimed
		_, ok, err = s.NextSMSDue(ctx)
		is.NoErr(err)
		is.True(!ok) // nothing waits
		counts, err := s.CountSMS(ctx)
		is.NoErr(err)
		is.Equal(counts, map[store.SendState]int{store.SendQueued: 0, store.SendSending: 0, store.SendSent: 1, store.SendLogged: 0, store.SendFailed: 0, store.SendDismissed: 0}) // one sent

		// A message a log-only sender handed on is Logged, never Sent.
		logged, _, err := s.QueueSMS(ctx, store.NewSMS{Recipient: onCall, Body: "logged", Now: t0})
		is.NoErr(err)
		claims, err := s.ClaimSMS(ctx, t0.Add(time.Minute), lease, 3, 10)
		is.NoErr(err)
		is.Equal(len(claims), 1)
		is.NoErr(s.SetSMSLogged(ctx, logged, claims[0].Attempts, t0.Add(time.Minute)))
		m, err = s.GetSMS(ctx, logged)
		is.NoErr(err)
		is.Equal(m.State, store.SendLogged) // logged
		counts, err = s.CountSMS(ctx)
		is.NoErr(err)
		is.Equal(counts[store.SendSent], 1)                                                         // the sent one alone is Sent
		is.Equal(counts[store.SendLogged], 1)                                                       // and the logged one is told apart
		is.True(errors.Is(s.SetSMSLogged(ctx, logged, claims[0].Attempts, t0), store.ErrClaimLost)) // once

		_, err = s.GetSMS(ctx, id+100)
		is.True(errors.Is(err, store.ErrNotFound)) // an unknown id
		is.True(errors.Is(s.SetSMSSent(ctx, id+100, 1, t0), store.ErrNotFound))
		is.True(errors.Is(s.SetSMSFailed(ctx, id+100, 1, "x", time.Time{}, t0), store.ErrNotFound))
		is.True(errors.Is(s.ReleaseSMS(ctx, id+100, 1, t0), store.ErrNotFound))
	})

	t.Run("a lapsed claim is claimed again until the last attempt, then fails", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		id, _, err := s.QueueSMS(ctx, store.NewSMS{Recipient: onCall, Body: "x", Now: t0})
		is.NoErr(err)
		for attempt := 1; attempt <= 2; attempt++ {
			now := t0.Add(time.Duration(attempt) * 2 * lease)
			got, err := s.ClaimSMS(ctx, now, lease, 2, 10)
			is.NoErr(err)
			is.Equal(len(got), 1)              // claimed (again, once the claim lapsed)
			is.Equal(got[0].Attempts, attempt) // counting attempts
			due, ok, err := s.NextSMSDue(ctx)
			is.NoErr(err)
			is.True(ok && due.Equal(now.Add(lease))) // the lapse is what waits
		}
		got, err := s.ClaimSMS(ctx, t0.Add(10*lease), lease, 2, 10)
		is.NoErr(err)
		is.Equal(len(got), 0) // the last attempt's lapsed claim is not sent again
		m, err := s.GetSMS(ctx, id)
		is.NoErr(err)
		is.Equal(m.State, store.SendFailed)            // it failed
		is.True(m.LastError != "")                     // saying why
		is.True(m.FailedUTC.Equal(t0.Add(10 * lease))) // when
	})

	// A claim that lapsed while its post ran (SMS_CLAIM_LEASE shorter than
	// the post) is claimed again; what the first sender reports late must not
	// undo the second claim's work, nor re-queue a message already sent.
	t.Run("an outcome counts only for the claim that holds the message", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		id, _, err := s.QueueSMS(ctx, store.NewSMS{Recipient: onCall, Body: "x", Now: t0})
		is.NoErr(err)
		first, err := s.ClaimSMS(ctx, t0, lease, 5, 10)
		is.NoErr(err)
		is.Equal(len(first), 1) // the first claim
		second, err := s.ClaimSMS(ctx, t0.Add(2*lease), lease, 5, 10)
		is.NoErr(err)
		is.Equal(len(second), 1)        // claimed again once the first lapsed
		is.Equal(second[0].Attempts, 2) // the second claim

		err = s.SetSMSSent(ctx, id, first[0].Attempts, t0.Add(2*lease))
		is.True(errors.Is(err, store.ErrClaimLost)) // the lapsed claim records nothing
		m, err := s.GetSMS(ctx, id)
		is.NoErr(err)
		is.Equal(m.State, store.SendSending) // the second claim still holds it
		is.Equal(m.Attempts, 2)

		is.NoErr(s.SetSMSSent(ctx, id, second[0].Attempts, t0.Add(2*lease+time.Second))) // the holder records
		err = s.SetSMSFailed(ctx, id, first[0].Attempts, "context deadline exceeded", t0.Add(3*lease), t0.Add(3*lease))
		is.True(errors.Is(err, store.ErrClaimLost))                                                        // a late failure of the first claim
		is.True(errors.Is(s.ReleaseSMS(ctx, id, second[0].Attempts, t0.Add(3*lease)), store.ErrClaimLost)) // nor can a claim be given back once recorded
		m, err = s.GetSMS(ctx, id)
		is.NoErr(err)
		is.Equal(m.State, store.SendSent) // stays Sent: not queued for a third post
		is.Equal(m.LastError, "")         // with nothing of the late failure
		got, err := s.ClaimSMS(ctx, t0.Add(time.Hour), lease, 5, 10)
		is.NoErr(err)
		is.Equal(len(got), 0) // and is never claimed again
	})

	t.Run("a released claim is queued again without using an attempt", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		id, _, err := s.QueueSMS(ctx, store.NewSMS{Recipient: onCall, Body: "x", Now: t0})
		is.NoErr(err)
		got, err := s.ClaimSMS(ctx, t0, lease, 1, 10)
		is.NoErr(err)
		is.Equal(len(got), 1) // the last (and only) attempt claimed
		is.NoErr(s.ReleaseSMS(ctx, id, got[0].Attempts, t0.Add(time.Second)))
		m, err := s.GetSMS(ctx, id)
		is.NoErr(err)
		is.Equal(m.State, store.SendQueued)              // queued again
		is.Equal(m.Attempts, 0)                          // the attempt not counted
		is.True(m.NextAttemptUTC.Equal(t0))              // as due as it was
		is.True(m.ClaimedUntilUTC.IsZero())              // unclaimed
		is.Equal(m.LastError, "")                        // no failure recorded
		is.True(m.UpdatedUTC.Equal(t0.Add(time.Second))) // when
		got, err = s.ClaimSMS(ctx, t0.Add(time.Second), lease, 1, 10)
		is.NoErr(err)
		is.Equal(len(got), 1)                                                                 // claimed at once
		is.Equal(got[0].Attempts, 1)                                                          // for its one attempt still
		is.True(errors.Is(s.ReleaseSMS(ctx, id, 2, t0.Add(time.Second)), store.ErrClaimLost)) // a claim it does not hold
	})

	// An endpoint that is not there or not taking posts (a 429, a 503, no
	// connection) is a wait: the claim is given back due later, however
	// often, and the message keeps every one of its attempts.
	t.Run("a deferred claim waits without using an attempt", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		id, _, err := s.QueueSMS(ctx, store.NewSMS{Recipient: onCall, Body: "MAKE SAFE", Now: t0})
		is.NoErr(err)
		now := t0
		for wait := range 5 {
			got, err := s.ClaimSMS(ctx, now, lease, 2, 10)
			is.NoErr(err)
			is.Equal(len(got), 1)        // claimed, wait after wait
			is.Equal(got[0].Attempts, 1) // always as its first attempt, of 2
			until := now.Add(time.Duration(wait+1) * time.Minute)
			is.NoErr(s.DeferSMS(ctx, id, 1, "HTTP 503: down for maintenance", until, now))
			m, err := s.GetSMS(ctx, id)
			is.NoErr(err)
			is.Equal(m.State, store.SendQueued)                     // given back
			is.Equal(m.Attempts, 0)                                 // its attempt not counted
			is.True(m.NextAttemptUTC.Equal(until))                  // due when the wait ends
			is.True(m.ClaimedUntilUTC.IsZero())                     // unclaimed
			is.Equal(m.LastError, "HTTP 503: down for maintenance") // saying why it waits
			is.True(m.UpdatedUTC.Equal(now))                        // when
			due, ok, err := s.NextSMSDue(ctx)
			is.NoErr(err)
			is.True(ok && due.Equal(until)) // the drainer sleeps until then
			got, err = s.ClaimSMS(ctx, until.Add(-time.Millisecond), lease, 2, 10)
			is.NoErr(err)
			is.Equal(len(got), 0) // not claimed before
			now = until
		}
		is.True(errors.Is(s.DeferSMS(ctx, id, 1, "again", now, now), store.ErrClaimLost)) // a claim it does not hold
		is.True(errors.Is(s.DeferSMS(ctx, id+100, 1, "x", now, now), store.ErrNotFound))  // an unknown id
		got, err := s.ClaimSMS(ctx, now, lease, 2, 10)
		is.NoErr(err)
		is.Equal(got[0].Attempts, 1) // five waits later, still its first attempt
		is.NoErr(s.DeferSMS(ctx, id, 1, strings.Repeat("e", 2*store.MaxStatusLen), now.Add(time.Minute), now))
		m, err := s.GetSMS(ctx, id)
		is.NoErr(err)
		is.Equal(len(m.LastError), store.MaxStatusLen) // the cause cut to size
		got, err = s.ClaimSMS(ctx, now.Add(time.Minute), lease, 2, 10)
		is.NoErr(err)
		is.NoErr(s.SetSMSSent(ctx, id, got[0].Attempts, now.Add(time.Minute)))
		m, err = s.GetSMS(ctx, id)
		is.NoErr(err)
		is.Equal(m.State, store.SendSent) // sent once the endpoint takes it
		is.Equal(m.Attempts, 1)           // on its first attempt
	})

	t.Run("the oldest message not sent yet is the one that has waited longest", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		_, ok, err := s.OldestSMSWaiting(ctx)
		is.NoErr(err)
		is.True(!ok) // none in an empty queue
		var ids []int64
		for i := range 4 {
			id, _, err := s.QueueSMS(ctx, store.NewSMS{Recipient: onCall, Body: "m", Now: t0.Add(time.Duration(i) * time.Minute)})
			is.NoErr(err)
			ids = append(ids, id)
		}
		oldest, ok, err := s.OldestSMSWaiting(ctx)
		is.NoErr(err)
		is.True(ok && oldest.Equal(t0)) // the first queued
		got, err := s.ClaimSMS(ctx, t0.Add(time.Hour), lease, 5, 3)
		is.NoErr(err)
		is.Equal(len(got), 3)
		oldest, _, err = s.OldestSMSWaiting(ctx)
		is.NoErr(err)
		is.True(oldest.Equal(t0)) // a Sending one still waits
		is.NoErr(s.SetSMSSent(ctx, ids[0], 1, t0.Add(time.Hour)))
		is.NoErr(s.SetSMSFailed(ctx, ids[1], 1, "HTTP 400", time.Time{}, t0.Add(time.Hour)))
		is.NoErr(s.DeferSMS(ctx, ids[2], 1, "HTTP 429", t0.Add(2*time.Hour), t0.Add(time.Hour)))
		oldest, ok, err = s.OldestSMSWaiting(ctx)
		is.NoErr(err)
		is.True(ok && oldest.Equal(t0.Add(2*time.Minute))) // neither the sent nor the failed one: the deferred one
		got, err = s.ClaimSMS(ctx, t0.Add(3*time.Hour), lease, 5, 3)
		is.NoErr(err)
		is.Equal(len(got), 2)
		for _, m := range got {
			is.NoErr(s.SetSMSLogged(ctx, m.ID, m.Attempts, t0.Add(3*time.Hour)))
		}
		_, ok, err = s.OldestSMSWaiting(ctx)
		is.NoErr(err)
		is.True(!ok) // none waits once each is done with
	})

	t.Run("a final failure stays failed", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		id, _, err := s.QueueSMS(ctx, store.NewSMS{Recipient: onCall, Body: "x", Now: t0})
		is.NoErr(err)
		_, err = s.ClaimSMS(ctx, t0, lease, 5, 10)
		is.NoErr(err)
		is.NoErr(s.SetSMSFailed(ctx, id, 1, strings.Repeat("e", 2*store.MaxStatusLen), time.Time{}, t0.Add(time.Second)))
		m, err := s.GetSMS(ctx, id)
		is.NoErr(err)
		is.Equal(m.State, store.SendFailed)            // failed for good
		is.Equal(len(m.LastError), store.MaxStatusLen) // the error cut to size
		got, err := s.ClaimSMS(ctx, t0.Add(time.Hour), lease, 5, 10)
		is.NoErr(err)
		is.Equal(len(got), 0) // never claimed again
	})

	t.Run("concurrent claims share the messages out", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		const n = 20
		for i := range n {
			_, _, err := s.QueueSMS(ctx, store.NewSMS{Recipient: onCall, Body: "m", Now: t0.Add(time.Duration(i) * time.Millisecond)})
			is.NoErr(err)
		}
		seen := map[int64]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() {
				for {
					got, err := s.ClaimSMS(ctx, t0.Add(time.Second), lease, 5, 3)
					if err != nil {
						errs <- err
						return
					}
					if len(got) == 0 {
						return
					}
					mu.Lock()
					for _, m := range got {
						seen[m.ID]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			is.NoErr(err) // every claim works
		}
		is.Equal(len(seen), n) // every message was claimed
		for _, times := range seen {
			is.Equal(times, 1) // by one claim only
		}
	})
}
