package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestApplyIsRepeatable(t *testing.T) {
	is := is.New(t)
	srv := natstest.Server(t)
	_, js := natstest.Connect(t, srv) // applies the streams and consumers once
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	did, err := events.Apply(ctx, js, 0)
	is.NoErr(err)
	is.Equal(did, []string(nil)) // and again: nothing to change
	is.NoErr(events.CheckAll(ctx, js, 0))

	cfgs, err := events.StreamConfigs(0)
	is.NoErr(err)
	for _, cfg := range cfgs {
		s, err := js.Stream(ctx, cfg.Name)
		is.NoErr(err)                                          // every stream in streams/ exists
		is.Equal(s.CachedInfo().Config.Subjects, cfg.Subjects) // with the file's subjects
	}
	for _, c := range events.Consumers() {
		_, err := c.Info(ctx, js)
		is.NoErr(err) // and every durable consumer, of its kind
	}
	_, err = js.KeyValue(ctx, events.BucketLocks)
	is.NoErr(err) // the KV_locks stream binds as the locks bucket
}

// TestApplyUpdatesOnlyWhatDiffers: applying again updates no stream that
// matches its file, and puts back one that was changed, and a consumer
// too, saying what it changed.
func TestApplyUpdatesOnlyWhatDiffers(t *testing.T) {
	is := is.New(t)
	srv := natstest.Server(t)
	nc, js := natstest.Connect(t, srv) // applies the streams once
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	updates, err := nc.SubscribeSync("$JS.EVENT.ADVISORY.STREAM.UPDATED.>")
	is.NoErr(err)
	is.NoErr(nc.Flush())

	_, err = events.Apply(ctx, js, 0)
	is.NoErr(err)
	is.NoErr(nc.Flush())
	_, err = updates.NextMsg(200 * time.Millisecond)
	is.True(errors.Is(err, nats.ErrTimeout)) // nothing updated

	s, err := js.Stream(ctx, events.StreamWebhook)
	is.NoErr(err)
	changed := s.CachedInfo().Config
	want := changed.MaxAge
	changed.MaxAge = time.Hour
	_, err = js.UpdateStream(ctx, changed)
	is.NoErr(err)
	_, err = updates.NextMsg(2 * time.Second) // that change's advisory
	is.NoErr(err)
	c := events.ConsumerResolver
	cfg := c.Config()
	cfg.AckWait = time.Hour
	_, err = js.UpdateConsumer(ctx, c.Stream, cfg)
	is.NoErr(err)
	var notApplied *events.NotAppliedError
	err = events.CheckRole(ctx, js, events.RoleResolver, 0)
	is.True(errors.As(err, &notApplied)) // the resolver would wait for the operators' step
	is.Equal(notApplied.Problems, []string{
		"stream PRIME_WEBHOOK differs from streams/PRIME_WEBHOOK.json in max_age",
		"consumer PRIME_WEBHOOK/resolver differs from its definition (pkg/events) in ack_wait",
	})
	is.True(strings.Contains(err.Error(), events.ApplyCommand)) // naming it

	did, err := events.Apply(ctx, js, 0)
	is.NoErr(err)
	is.Equal(did, []string{"stream PRIME_WEBHOOK updated: max_age", "consumer PRIME_WEBHOOK/resolver updated: ack_wait"})
	msg, err := updates.NextMsg(2 * time.Second)
	is.NoErr(err)
	is.Equal(msg.Subject, "$JS.EVENT.ADVISORY.STREAM.UPDATED."+events.StreamWebhook) // the changed one is put back
	s, err = js.Stream(ctx, events.StreamWebhook)
	is.NoErr(err)
	is.Equal(s.CachedInfo().Config.MaxAge, want)
	_, err = updates.NextMsg(200 * time.Millisecond)
	is.True(errors.Is(err, nats.ErrTimeout)) // and only it
	is.NoErr(events.CheckRole(ctx, js, events.RoleResolver, 0))
}

// TestApplyTurnsOffDirectGetsAndRollups: a NATS whose streams were made
// from the earlier files (direct gets allowed on every stream, rollups on
// the Prime answers' and budget's buckets: issue 27's review) is not as
// defined; the role's check says so, and the operators' step turns both
// off on the live streams.
func TestApplyTurnsOffDirectGetsAndRollups(t *testing.T) {
	is := is.New(t)
	js := emptyJetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfgs, err := events.StreamConfigs(0)
	is.NoErr(err)
	rollups := []string{events.StreamPrimeAnswers, events.StreamPrimeBudget}
	for _, cfg := range cfgs {
		cfg.AllowDirect = true
		cfg.AllowRollup = cfg.AllowRollup || slices.Contains(rollups, cfg.Name)
		_, err := js.CreateStream(ctx, cfg)
		is.NoErr(err)
	}
	var notApplied *events.NotAppliedError
	err = events.CheckRole(ctx, js, events.RoleResolver, 0)
	is.True(errors.As(err, &notApplied))
	is.True(slices.Contains(notApplied.Problems, "stream KV_prime_answers differs from streams/KV_prime_answers.json in allow_direct, allow_rollup_hdrs")) // the role waits for the step
	_, err = events.Apply(ctx, js, 0)
	is.NoErr(err)
	is.NoErr(events.CheckAll(ctx, js, 0))
	for _, cfg := range cfgs {
		s, err := js.Stream(ctx, cfg.Name)
		is.NoErr(err)
		is.True(!s.CachedInfo().Config.AllowDirect) // no stream answers a direct get
		if slices.Contains(rollups, cfg.Name) {
			is.True(!s.CachedInfo().Config.AllowRollup) // nor takes a rollup where nothing needs one
		}
	}
}

// emptyJetStream is a server where nothing is applied yet.
func emptyJetStream(t *testing.T) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(natstest.EmptyServer(t).ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// A role's check on a NATS the operators' step has not applied names each
// stream and consumer it lacks.
func TestCheckRoleNamesWhatIsMissing(t *testing.T) {
	is := is.New(t)
	js := emptyJetStream(t)
	var notApplied *events.NotAppliedError
	is.True(errors.As(events.CheckRole(context.Background(), js, events.RoleMakesafe, 0), &notApplied))
	is.Equal(notApplied.Problems, []string{
		"stream KV_prime_answers is missing", "stream KV_prime_budget is missing",
		"stream MAKESAFE is missing", "stream MAKESAFE_DETECT is missing", "stream SMS is missing",
		"consumer MAKESAFE_DETECT/makesafe-detect is missing", "consumer MAKESAFE/makesafe is missing",
		"consumer SMS/makesafe-sms is missing",
	})
}

// TestApplyMovesMakesafeDetectOffALiveMakesafe upgrades a deployment whose
// MAKESAFE stream took makesafe.> (detections and the ladder, schedules
// allowed). JetStream cannot turn message schedules off on a stream, so
// MAKESAFE keeps them and keeps the ladder, and makesafe.detect moves to
// MAKESAFE_DETECT: the detections makesafe had not acked are published
// there again, once; a schedule someone stored on makesafe.detect is
// dropped, not carried; the rungs already scheduled still fire; and a
// second apply finds nothing to do.
func TestApplyMovesMakesafeDetectOffALiveMakesafe(t *testing.T) {
	is := is.New(t)
	js := emptyJetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The layout before: streams/MAKESAFE.json took makesafe.>, and
	// makesafe's consumer read detections and re-checks.
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: events.StreamMakesafe, Subjects: []string{"makesafe.>"},
		MaxAge: 7 * 24 * time.Hour, Duplicates: 15 * time.Minute, AllowDirect: true, AllowMsgSchedules: true, AllowMsgTTL: true})
	is.NoErr(err)
	old := events.ConsumerMakesafe.Config()
	old.FilterSubject, old.FilterSubjects = "", []string{events.SubjectMakesafeDetect, events.SubjectMakesafeRecheck}
	old.DeliverSubject, old.DeliverGroup = "", "" // a pull consumer then
	cons, err := js.CreateOrUpdateConsumer(ctx, events.StreamMakesafe, old)
	is.NoErr(err)
	publishDetect := func(i int) {
		m := nats.NewMsg(events.SubjectMakesafeDetect)
		m.Data = fmt.Appendf(nil, `{"jobId":"%d"}`, i)
		m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("detect-%d", i))
		_, err := js.PublishMsg(ctx, m)
		is.NoErr(err)
	}
	publishDetect(0)
	first, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	is.NoErr(err)
	is.NoErr(first.DoubleAck(ctx)) // makesafe handled the first
	// The attack the old layout let child-mirror make (a schedule rolls
	// up its subject: it purges every detection waiting before it).
	forged := nats.NewMsg(events.SubjectMakesafeDetect)
	forged.Data = []byte(`{"jobId":"forged"}`)
	forged.Header.Set(jetstream.ScheduleHeader, "@every 1h")
	forged.Header.Set(jetstream.ScheduleTargetHeader, events.SubjectMakesafeRecheck)
	_, err = js.PublishMsg(ctx, forged)
	is.NoErr(err)
	publishDetect(1)
	publishDetect(2) // two are owed
	rung := nats.NewMsg(events.MakesafeScheduleSubject("job", 1))
	rung.Data = []byte(`{"jobId":"job","rung":1}`)
	for k, v := range events.ScheduleHeaders(time.Now().Add(2*time.Second), events.SubjectMakesafeRecheck) {
		rung.Header.Set(k, v)
	}
	_, err = js.PublishMsg(ctx, rung)
	is.NoErr(err) // a rung scheduled before the upgrade

	did, err := events.Apply(ctx, js, 0)
	is.NoErr(err)
	is.True(slices.Contains(did, "stream MAKESAFE updated: allow_direct, description, subjects"))
	is.True(slices.Contains(did, "stream MAKESAFE_DETECT created"))
	is.True(slices.Contains(did, "makesafe.detect moved from MAKESAFE to MAKESAFE_DETECT: 2 messages not acked yet published again there, the rest purged; 1 schedules on it dropped (MAKESAFE_DETECT takes none)"))
	is.True(slices.Contains(did, recreated))
	is.True(slices.Contains(did, "consumer MAKESAFE_DETECT/makesafe-detect created"))

	detect, err := js.Consumer(ctx, events.StreamMakesafeDetect, events.DurableMakesafeDetect)
	is.NoErr(err)
	var got []string
	for range 2 {
		m, err := detect.Next(jetstream.FetchMaxWait(5 * time.Second))
		is.NoErr(err)
		got = append(got, string(m.Data())+" "+m.Headers().Get(nats.MsgIdHdr))
		is.NoErr(m.Ack())
	}
	is.Equal(got, []string{`{"jobId":"1"} detect-1`, `{"jobId":"2"} detect-2`}) // the owed detections, with their ids
	info, err := detect.Info(ctx)
	is.NoErr(err)
	is.Equal(info.NumPending, uint64(0)) // and not the forged schedule

	ms, err := js.Stream(ctx, events.StreamMakesafe)
	is.NoErr(err)
	msInfo, err := ms.Info(ctx, jetstream.WithSubjectFilter(events.SubjectMakesafeDetect))
	is.NoErr(err)
	is.Equal(len(msInfo.State.Subjects), 0)  // MAKESAFE holds no detection any more
	is.True(msInfo.Config.AllowMsgSchedules) // and keeps its schedules, for the ladder
	c := events.ConsumerMakesafe
	recheck, err := js.Conn().QueueSubscribeSync(c.DeliverSubject, c.DeliverGroup)
	is.NoErr(err)
	m, err := recheck.NextMsg(20 * time.Second)
	is.NoErr(err)                                      // the rung scheduled before the upgrade fired after it
	is.Equal(m.Subject, events.SubjectMakesafeRecheck) // on its own subject, delivered to the deliver subject
	is.Equal(string(m.Data), `{"jobId":"job","rung":1}`)

	_, err = js.Publish(ctx, events.SubjectMakesafeDetect, []byte(`{}`))
	is.NoErr(err) // detections land on MAKESAFE_DETECT now
	did, err = events.Apply(ctx, js, 0)
	is.NoErr(err)
	is.Equal(did, []string(nil)) // nothing left to do
}

// recreated is what the operators' step says when it turns makesafe's pull
// consumer into the push consumer defined (issue 27).
const recreated = "consumer MAKESAFE/makesafe recreated as a push consumer delivering to makesafe.deliver.recheck (a pull consumer cannot become one): it delivers the stream's messages again from the first"

// TestApplyMakesMakesafesConsumerPush upgrades a deployment where
// MAKESAFE/makesafe was a pull consumer, which makesafe's user pulled with
// a reply subject of its choosing: the role's check names the kind, the
// operators' step deletes it and makes the push consumer defined, saying
// so, and the new one delivers the stream's re-checks again from the
// first, the one the old consumer had acked among them (makesafe finds its
// rung fired and does nothing: services/makesafe).
func TestApplyMakesMakesafesConsumerPush(t *testing.T) {
	is := is.New(t)
	js := emptyJetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := events.Apply(ctx, js, 0)
	is.NoErr(err)
	c := events.ConsumerMakesafe
	is.NoErr(js.DeleteConsumer(ctx, c.Stream, c.Durable))
	old := c.Config()
	old.DeliverSubject, old.DeliverGroup = "", ""
	pull, err := js.CreateOrUpdateConsumer(ctx, c.Stream, old)
	is.NoErr(err) // the pull consumer of before
	_, err = js.Publish(ctx, events.SubjectMakesafeRecheck, []byte(`{"jobId":"job","rung":1}`))
	is.NoErr(err)
	m, err := pull.Next(jetstream.FetchMaxWait(5 * time.Second))
	is.NoErr(err)
	is.NoErr(m.DoubleAck(ctx)) // makesafe worked the rung

	var notApplied *events.NotAppliedError
	is.True(errors.As(events.CheckRole(ctx, js, events.RoleMakesafe, 0), &notApplied))
	is.Equal(notApplied.Problems, []string{"consumer MAKESAFE/makesafe is a pull consumer, not the push consumer defined (deliver_subject makesafe.deliver.recheck)"})
	did, err := events.Apply(ctx, js, 0)
	is.NoErr(err)
	is.Equal(did, []string{recreated})
	is.NoErr(events.CheckAll(ctx, js, 0))
	info, err := c.Info(ctx, js)
	is.NoErr(err)
	is.Equal(info.Config.DeliverSubject, c.DeliverSubject) // delivered where the definition says
	is.Equal(info.Config.DeliverGroup, c.DeliverGroup)     // to one makesafe of the group

	deliveries, err := js.Conn().QueueSubscribeSync(c.DeliverSubject, c.DeliverGroup)
	is.NoErr(err)
	again, err := deliveries.NextMsg(10 * time.Second)
	is.NoErr(err)
	is.Equal(string(again.Data), `{"jobId":"job","rung":1}`) // the acked re-check, delivered again
	did, err = events.Apply(ctx, js, 0)
	is.NoErr(err)
	is.Equal(did, []string(nil)) // and nothing left to do
}

func TestWebhookSubjects(t *testing.T) {
	for action, want := range map[string]string{
		"change-job-status": "prime.webhook.change-job-status",
		"":                  "prime.webhook._none",
		"a.b":               "prime.webhook._invalid",
		"has space":         "prime.webhook._invalid",
		">":                 "prime.webhook._invalid",
		"_none":             "prime.webhook._invalid",
	} {
		if got := events.WebhookSubject(action); got != want {
			t.Errorf("WebhookSubject(%q) = %q, want %q", action, got, want)
		}
	}
}

// FuzzActionToken holds ActionToken to its documented rule: the action when
// it is 1 to 100 of A-Z, a-z, 0-9, _ and - (and not one of the two reserved
// tokens), _none when empty, _invalid otherwise.
func FuzzActionToken(f *testing.F) {
	plain := regexp.MustCompile(`^[A-Za-z0-9_-]{1,100}$`)
	for _, seed := range []string{"", "change-job-status", "a.b", "has space", ">", "_none", "_invalid",
		strings.Repeat("x", 100), strings.Repeat("x", 101), "é", "a\x00"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, action string) {
		want := events.ActionInvalid
		switch {
		case action == "":
			want = events.ActionNone
		case plain.MatchString(action) && action != events.ActionNone && action != events.ActionInvalid:
			want = action
		}
		if got := events.ActionToken(action); got != want {
			t.Fatalf("ActionToken(%q) = %q, want %q", action, got, want)
		}
	})
}

// TestNatsCLIAcceptsStreamFiles proves the files in streams/ are what
// `nats stream add --config` takes. The Makefile builds the CLI and sets NATS_CLI.
func TestNatsCLIAcceptsStreamFiles(t *testing.T) {
	cli := natstest.CLI(t)
	is := is.New(t)
	srv := natstest.EmptyServer(t)
	files, err := filepath.Glob("../../streams/*.json")
	is.NoErr(err)
	is.True(len(files) > 0) // stream files found
	for _, f := range files {
		out, err := exec.Command(cli, "--server", srv.ClientURL(), "stream", "add", "--config", f).CombinedOutput()
		is.True(err == nil) // nats stream add --config accepts the file
		if err != nil {
			t.Logf("%s: %s", f, out)
		}
	}
	_, js := natstest.Connect(t, srv)
	var want []jetstream.StreamConfig
	b, err := os.ReadFile("../../streams/PRIME_WEBHOOK.json")
	is.NoErr(err)
	var one jetstream.StreamConfig
	is.NoErr(json.Unmarshal(b, &one))
	want = append(want, one)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, events.StreamWebhook)
	is.NoErr(err)
	is.Equal(s.CachedInfo().Config.Subjects, want[0].Subjects) // the CLI created the stream the services use
}
