package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestScheduleAtRoundsUp(t *testing.T) {
	base := time.Date(2026, 10, 3, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		in   time.Time
		want time.Time
	}{
		{"a whole second stays", base, base},
		{"a millisecond past goes to the next second", base.Add(time.Millisecond), base.Add(time.Second)},
		{"a nanosecond short of the next second", base.Add(time.Second - 1), base.Add(time.Second)},
		{"another zone comes out in UTC", base.In(time.FixedZone("AEST", 10*3600)).Add(500 * time.Millisecond), base.Add(time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			got := events.ScheduleAt(tc.in)
			is.True(got.Equal(tc.want))        // rounded up to a whole second
			is.Equal(got.Location(), time.UTC) // in UTC
		})
	}
	is := is.New(t)
	h := events.ScheduleHeaders(base.Add(1500*time.Millisecond), events.SubjectMakesafeRecheck)
	is.Equal(h[jetstream.ScheduleHeader], "@at 2026-10-03T12:00:02Z")          // the @at form the server parses
	is.Equal(h[jetstream.ScheduleTargetHeader], events.SubjectMakesafeRecheck) // delivered to the target
}

// The ladder relies on how nats-server (v2.15) runs an @at schedule: the
// body is delivered once on the target at the time, not before, with the
// schedule subject in Nats-Scheduler; the schedule message is then purged;
// a second publish with the same Nats-Msg-Id is dropped; a time already
// past fires at once.
func TestMakesafeScheduleOnTheServer(t *testing.T) {
	is := is.New(t)
	srv := natstest.Server(t)
	_, js := natstest.Connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := js.Stream(ctx, events.StreamMakesafe)
	is.NoErr(err)
	is.True(stream.CachedInfo().Config.AllowMsgSchedules) // streams/MAKESAFE.json allows schedules

	// The scheduler stores what it delivers in the stream; read it there.
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{events.SubjectMakesafeRecheck}})
	is.NoErr(err)

	const job = "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"
	publish := func(rung int, due time.Time) *jetstream.PubAck {
		t.Helper()
		body, err := json.Marshal(events.MakesafeRecheck{JobID: job, Rung: rung, DueUTC: events.ScheduleAt(due)})
		is.NoErr(err)
		m := nats.NewMsg(events.MakesafeScheduleSubject(job, rung))
		m.Data = body
		for k, v := range events.ScheduleHeaders(due, events.SubjectMakesafeRecheck) {
			m.Header.Set(k, v)
		}
		m.Header.Set(nats.MsgIdHdr, events.MakesafeRungMsgID(job, rung))
		ack, err := js.PublishMsg(ctx, m)
		is.NoErr(err) // the server takes the schedule
		return ack
	}

	due := events.ScheduleAt(time.Now().Add(1500 * time.Millisecond))
	is.True(!publish(1, due).Duplicate)                          // the first publish of a rung is stored
	is.True(publish(1, due).Duplicate)                           // a retried publish of it is dropped
	is.True(!publish(2, time.Now().Add(-time.Minute)).Duplicate) // a rung published late

	got := map[int]int{}
	for range 2 {
		msg, err := cons.Next(jetstream.FetchMaxWait(20 * time.Second))
		is.NoErr(err) // the rungs fire
		arrived := time.Now()
		var rc events.MakesafeRecheck
		is.NoErr(json.Unmarshal(msg.Data(), &rc))
		is.Equal(rc.JobID, job)                                                                              // the body is delivered as scheduled
		is.Equal(msg.Headers().Get(jetstream.SchedulerHeader), events.MakesafeScheduleSubject(job, rc.Rung)) // naming its schedule
		if rc.Rung == 1 {
			is.True(!arrived.Before(due)) // never before its time
		}
		got[rc.Rung]++
	}
	is.Equal(got, map[int]int{1: 1, 2: 1}) // each rung once, the past one too
	_, err = cons.Next(jetstream.FetchMaxWait(2 * time.Second))
	is.True(errors.Is(err, nats.ErrTimeout)) // and the duplicate never

	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := stream.GetLastMsgForSubject(ctx, events.MakesafeScheduleSubject(job, 1))
		if err != nil {
			is.True(errors.Is(err, jetstream.ErrMsgNotFound)) // the fired schedule is purged
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the schedule message was not purged after it fired")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
