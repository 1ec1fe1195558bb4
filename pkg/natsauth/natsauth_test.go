package natsauth_test

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/lock"
	"github.com/ethosbuilding/primeflow/pkg/natsauth"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primebudget"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var update = flag.Bool("update", false, "write compose/nats/users.conf from the roles")

// usersConf is the file compose's NATS nodes include.
var usersConf = filepath.Join("..", "..", "compose", "nats", "users.conf")

// compose/nats/users.conf is what the roles of pkg/events make: a subject,
// consumer or role added there cannot be missing from the cluster's users.
func TestUsersConf(t *testing.T) {
	is := is.New(t)
	want, err := natsauth.Config()
	is.NoErr(err) // the roles render
	if *update {
		is.NoErr(os.WriteFile(usersConf, []byte(want), 0o644))
	}
	got, err := os.ReadFile(usersConf)
	is.NoErr(err) // compose/nats/users.conf reads
	if string(got) != want {
		t.Fatalf("%s is not what pkg/events' roles make: go test ./pkg/natsauth -run TestUsersConf -update", usersConf)
	}
}

// conn connects as a role's user, as service.Connect does, and collects the
// errors the server sends it (permissions violations).
type conn struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	mu   sync.Mutex
	errs []string
}

func connect(t *testing.T, url, user string, opts ...nats.Option) *conn {
	t.Helper()
	c := &conn{}
	opts = append(opts, nats.UserInfo(user, user), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.errs = append(c.errs, err.Error())
	}))
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	c.nc = nc
	c.js, err = jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// refused waits for the server to say the user may not touch subject.
func (c *conn) refused(t *testing.T, what, subject string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		for _, e := range c.errs {
			if strings.Contains(strings.ToLower(e), "permissions violation") && strings.Contains(e, subject) {
				c.mu.Unlock()
				return
			}
		}
		c.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("%s: no permissions violation for %s (errors: %v)", what, subject, c.errs)
}

// server starts a server with pkg/natsauth's users, applies the streams
// and consumers as the operators' step does, and returns its URL and the
// operators' connection.
func server(t *testing.T) (string, *conn) {
	t.Helper()
	srv := natstest.ServerWithUsers(t)
	natstest.ApplyAsOperators(t, srv)
	return srv.ClientURL(), connect(t, srv.ClientURL(), natsauth.Operators, inbox(natsauth.Operators))
}

func inbox(user string) nats.Option { return nats.CustomInboxPrefix(events.InboxPrefix(user)) }

func short(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// refusedCtx bounds a request the server refuses, which no answer ends:
// what proves the refusal is the permissions violation (refused) and what
// NATS holds after.
func refusedCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}

// A service's user is refused what the service must not touch: ingest may
// publish webhooks, and neither a make-safe SMS nor a purge of a stream,
// nor read what the resolver hands on, nor another service's replies.
func TestServiceIsRefusedWhatItMustNotTouch(t *testing.T) {
	is := is.New(t)
	url, ops := server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	in := connect(t, url, events.RoleIngest.Name, inbox(events.RoleIngest.Name))
	_, err := in.js.Publish(ctx, events.WebhookSubject("change-job-status"), []byte("{}"))
	is.NoErr(err) // ingest publishes a webhook, and reads JetStream's ack

	_, err = in.js.Publish(short(t), events.SubjectSMSSend, []byte(`{"source":"ingest"}`))
	is.True(err != nil) // no make-safe SMS from ingest
	in.refused(t, "publish "+events.SubjectSMSSend, events.SubjectSMSSend)

	s, err := ops.js.Stream(ctx, events.StreamWebhook)
	is.NoErr(err)
	inStream, err := in.js.Stream(ctx, events.StreamWebhook)
	is.NoErr(err)                            // ingest may look at its stream
	is.True(inStream.Purge(short(t)) != nil) // but not purge it
	in.refused(t, "purge", "$JS.API.STREAM.PURGE."+events.StreamWebhook)
	info, err := s.Info(ctx)
	is.NoErr(err)
	is.Equal(info.State.Msgs, uint64(1)) // the webhook is still there

	_, err = in.nc.SubscribeSync(events.SubjectResolvedAll)
	is.NoErr(err) // the client sends it; the server refuses it
	in.refused(t, "subscribe", events.SubjectResolvedAll)
	_, err = in.nc.SubscribeSync("_INBOX_resolver.>")
	is.NoErr(err)
	in.refused(t, "another service's replies", "_INBOX_resolver.>")

	_, err = in.js.CreateOrUpdateConsumer(short(t), events.StreamWebhook, jetstream.ConsumerConfig{Durable: events.DurableResolver})
	is.True(err != nil) // nor make the resolver's consumer
	in.refused(t, "create the resolver's consumer", "$JS.API.CONSUMER.CREATE."+events.StreamWebhook)
}

// TestNoServiceChangesTheStreams is issue 27's first attack, as every role:
// as ingest, a republish rule on PRIME_WEBHOOK had one webhook land on
// sms.send.requested, and max_msgs=1 cut PRIME_WEBHOOK from 5 messages to
// 1; as the portals, sealed=true on OPTIMO stopped every later publish.
// No service's user may create, update or delete a stream: only the
// operators' step may (events.Apply).
func TestNoServiceChangesTheStreams(t *testing.T) {
	url, ops := server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	in := connect(t, url, events.RoleIngest.Name, inbox(events.RoleIngest.Name))
	for range 5 {
		if _, err := in.js.Publish(ctx, events.WebhookSubject("change-job-status"), []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	defs, err := events.StreamConfigs(0)
	if err != nil {
		t.Fatal(err)
	}
	def := func(name string) jetstream.StreamConfig {
		i := slices.IndexFunc(defs, func(c jetstream.StreamConfig) bool { return c.Name == name })
		return defs[i]
	}
	t.Run("as each user", func(t *testing.T) {
		for _, r := range natsauth.Roles() {
			t.Run(r.Name, func(t *testing.T) {
				t.Parallel()
				streams, err := r.Streams()
				if err != nil {
					t.Fatal(err)
				}
				c := connect(t, url, r.Name, inbox(r.Name))
				for _, name := range streams {
					cfg := def(name)
					cfg.MaxMsgs, cfg.Sealed = 1, name == events.StreamOptimo
					if name == events.StreamWebhook {
						cfg.RePublish = &jetstream.RePublish{Source: "prime.webhook.*", Destination: "sms.{{wildcard(1)}}"}
					}
					if _, err := c.js.UpdateStream(refusedCtx(t), cfg); err == nil {
						t.Errorf("%s updated stream %s", r.Name, name)
					}
					c.refused(t, r.Name+" updates "+name, "$JS.API.STREAM.UPDATE."+name)
					if err := c.js.DeleteStream(refusedCtx(t), name); err == nil {
						t.Errorf("%s deleted stream %s", r.Name, name)
					}
					c.refused(t, r.Name+" deletes "+name, "$JS.API.STREAM.DELETE."+name)
				}
				if _, err := c.js.CreateStream(refusedCtx(t), jetstream.StreamConfig{Name: "TAKEOVER", Subjects: []string{"takeover.>"}}); err == nil {
					t.Errorf("%s created a stream", r.Name)
				}
				c.refused(t, r.Name+" creates a stream", "$JS.API.STREAM.CREATE.TAKEOVER")
			})
		}
	})

	_, err = in.js.Publish(ctx, events.WebhookSubject("change-job-status"), []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	if err := events.CheckAll(ctx, ops.js, 0); err != nil {
		t.Errorf("the streams changed: %v", err)
	}
	for stream, want := range map[string]uint64{events.StreamWebhook: 6, events.StreamSMS: 0} {
		s, err := ops.js.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().State.Msgs; got != want {
			t.Errorf("%s holds %d messages, not %d", stream, got, want)
		}
	}
	_, err = connect(t, url, events.RolePortals.Name, inbox(events.RolePortals.Name)).js.Publish(ctx, events.SubjectOptimoPlan, []byte(`{"source":"AdminPortal"}`))
	if err != nil {
		t.Errorf("OPTIMO takes no more plan requests: %v", err)
	}
}

// No service's user may make or change a consumer, its own either: a
// consumer's maker chooses where a push consumer delivers, and how long
// messages wait. The operators' step makes them (events.Apply).
func TestNoServiceMakesAConsumer(t *testing.T) {
	url, ops := server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, r := range events.ServiceRoles {
		c := connect(t, url, r.Name, inbox(r.Name))
		for _, cons := range r.Consumes {
			push := cons.Config()
			push.DeliverSubject = events.SubjectSMSSend
			if _, err := c.js.CreateOrUpdateConsumer(refusedCtx(t), cons.Stream, push); err == nil {
				t.Errorf("%s made %s/%s a push consumer", r.Name, cons.Stream, cons.Durable)
			}
			c.refused(t, r.Name+" makes its consumer", "$JS.API.CONSUMER.CREATE."+cons.Stream+"."+cons.Durable)
			if err := c.js.DeleteConsumer(refusedCtx(t), cons.Stream, cons.Durable); err == nil {
				t.Errorf("%s deleted %s/%s", r.Name, cons.Stream, cons.Durable)
			}
			got, err := cons.Info(ctx, c.js)
			if err != nil {
				t.Fatalf("%s cannot read its consumer's info: %v", r.Name, err) // which it checks at start
			}
			if d := cons.Drift(got.Config); len(d) > 0 {
				t.Errorf("%s/%s changed: %v", cons.Stream, cons.Durable, d)
			}
		}
	}
	if err := events.CheckAll(ctx, ops.js, 0); err != nil {
		t.Error(err)
	}
}

// The portals may publish their one subject, with JetStream's ack on their
// own inbox prefix, and nothing else: no stream's info or change, no
// other user's replies (issue 27: the portals' user read a webhook, a
// customer's name and number in it, that an operator had asked for).
func TestThePortalsPublishTheirSubjectAlone(t *testing.T) {
	is := is.New(t)
	url, ops := server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in := connect(t, url, events.RoleIngest.Name, inbox(events.RoleIngest.Name))
	_, err := in.js.Publish(ctx, events.WebhookSubject("create-appointment"), []byte(`{"customer":"Jo Citizen","phone":"0400 000 000"}`))
	is.NoErr(err)

	portal := connect(t, url, events.RolePortals.Name, inbox(events.RolePortals.Name))
	var got []string
	var mu sync.Mutex
	for _, replies := range []string{"_INBOX.>", events.InboxPrefix(natsauth.Operators) + ".>"} {
		_, err := portal.nc.Subscribe(replies, func(m *nats.Msg) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, string(m.Data))
		})
		is.NoErr(err)
		portal.refused(t, "the portals read replies not theirs", replies)
	}
	s, err := ops.js.Stream(ctx, events.StreamWebhook)
	is.NoErr(err)
	msg, err := s.GetMsg(ctx, 1)
	is.NoErr(err) // an operator reads the webhook
	is.True(strings.Contains(string(msg.Data), "Jo Citizen"))
	is.NoErr(portal.nc.Flush())
	mu.Lock()
	for _, g := range got {
		is.True(!strings.Contains(g, "Jo Citizen")) // the portals did not
	}
	mu.Unlock()

	_, err = portal.js.Publish(ctx, events.SubjectOptimoPlan, []byte(`{"source":"AdminPortal"}`))
	is.NoErr(err) // a portal asks for planning, and hears JetStream's ack
	_, err = portal.js.Publish(short(t), events.SubjectOptimoCreate, []byte(`{}`))
	is.True(err != nil) // and nothing else
	portal.refused(t, "portal", events.SubjectOptimoCreate)
	_, err = portal.js.Stream(short(t), events.StreamOptimo)
	is.True(err != nil) // not even its stream's info
	portal.refused(t, "portal", "$JS.API.STREAM.INFO."+events.StreamOptimo)
}

// The operators' user reads replies on its own inbox prefix only: the nats
// CLI's default inbox (which a portal could once read) is refused, so an
// operator's CLI runs with --inbox-prefix _INBOX_operators; and it may not
// read a service's replies either.
func TestOperatorsRepliesAreTheirOwn(t *testing.T) {
	is := is.New(t)
	srv := natstest.ServerWithUsers(t)
	url := srv.ClientURL()
	natstest.ApplyAsOperators(t, srv)
	bare := connect(t, url, natsauth.Operators) // nats.go's default inbox prefix
	_, err := bare.js.Stream(short(t), events.StreamWebhook)
	is.True(err != nil) // its reply could not come
	bare.refused(t, "the default inbox", "_INBOX.")
	for _, u := range []string{events.RoleResolver.Name, events.RolePortals.Name, natsauth.OperatorsReadOnly} {
		_, err := bare.nc.SubscribeSync(events.InboxPrefix(u) + ".>")
		is.NoErr(err)
		bare.refused(t, "another user's replies", events.InboxPrefix(u)+".>")
	}

	cli := os.Getenv("NATS_CLI")
	if cli == "" {
		t.Log("NATS_CLI is not set: the nats CLI's --inbox-prefix not tried (make test sets it)")
		return
	}
	out, err := exec.Command(cli, "--server", url, "--user", natsauth.Operators, "--password", natsauth.Operators,
		"--inbox-prefix", events.InboxPrefix(natsauth.Operators), "stream", "info", events.StreamWebhook).CombinedOutput()
	is.True(err == nil) // the operators' nats CLI, with its inbox prefix
	if err != nil {
		t.Log(string(out))
	}
}

// The read-only operators' user reads what primectl status reads — the
// streams and consumers, who holds a lock, the Prime budget — and nothing
// else: no message, no change.
func TestOperatorsReadOnly(t *testing.T) {
	is := is.New(t)
	url, ops := server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := ops.js.Publish(ctx, events.WebhookSubject("create-appointment"), []byte(`{"customer":"Jo Citizen"}`))
	is.NoErr(err)
	ro := connect(t, url, natsauth.OperatorsReadOnly, inbox(natsauth.OperatorsReadOnly))
	is.NoErr(events.CheckAll(ctx, ro.js, 0)) // every stream's and consumer's info
	names := ro.js.StreamNames(ctx)
	for range names.Name() {
	}
	is.NoErr(names.Err()) // the list of streams
	_, _, err = lock.Held(ctx, ro.js, events.LockOptimoPlan)
	is.NoErr(err) // who holds a lock
	_, err = primebudget.Read(ctx, ro.js)
	is.True(errors.Is(err, primebudget.ErrNotSpent)) // the budget, read

	s, err := ro.js.Stream(ctx, events.StreamWebhook)
	is.NoErr(err)
	_, err = s.GetMsg(short(t), 1)
	is.True(err != nil) // but no message
	ro.refused(t, "a webhook", "$JS.API.STREAM.MSG.GET."+events.StreamWebhook)
	is.True(s.Purge(short(t)) != nil)
	ro.refused(t, "purge", "$JS.API.STREAM.PURGE."+events.StreamWebhook)
	cfg := s.CachedInfo().Config
	cfg.Sealed = true
	_, err = ro.js.UpdateStream(short(t), cfg)
	is.True(err != nil)
	ro.refused(t, "seal", "$JS.API.STREAM.UPDATE."+events.StreamWebhook)
	_, err = ro.js.Publish(short(t), events.WebhookSubject("x"), nil)
	is.True(err != nil)
	ro.refused(t, "publish", events.WebhookSubject("x"))
	_, err = ro.nc.SubscribeSync(events.SubjectWebhookAll)
	is.NoErr(err)
	ro.refused(t, "subscribe", events.SubjectWebhookAll)
}

// TestOnlyMakesafeSchedules is issue 27's third attack: as child-mirror
// (or newjob-pipeline), which may publish makesafe.detect, one publish
// with Nats-Schedule: @every 1s aimed at makesafe.recheck had the server
// deliver a re-check every second, without end. makesafe.detect lands on
// MAKESAFE_DETECT, which takes no schedule; MAKESAFE, which does, only
// makesafe writes.
func TestOnlyMakesafeSchedules(t *testing.T) {
	is := is.New(t)
	url, ops := server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	schedule := func(subject string) *nats.Msg {
		m := nats.NewMsg(subject)
		m.Data = []byte(`{"jobId":"6f0a3c2e-1b2d-4e5f-8a9b-0c1d2e3f4a5b","rung":1}`)
		m.Header.Set(jetstream.ScheduleHeader, "@every 1s")
		m.Header.Set(jetstream.ScheduleTargetHeader, events.SubjectMakesafeRecheck)
		return m
	}
	for _, r := range []events.Role{events.RoleChildMirror, events.RoleNewJobPipeline} {
		c := connect(t, url, r.Name, inbox(r.Name))
		_, err := c.js.Publish(ctx, events.SubjectMakesafeDetect, []byte(`{"jobId":"6f0a3c2e-1b2d-4e5f-8a9b-0c1d2e3f4a5b"}`))
		is.NoErr(err) // it asks for detection
		_, err = c.js.PublishMsg(ctx, schedule(events.SubjectMakesafeDetect))
		var apiErr *jetstream.APIError
		is.True(errors.As(err, &apiErr))                       // but its schedule is refused
		is.Equal(apiErr.ErrorCode, jetstream.ErrorCode(10188)) // "message schedules is disabled"
		for _, subject := range []string{events.MakesafeScheduleSubject("6f0a3c2e-1b2d-4e5f-8a9b-0c1d2e3f4a5b", 1), events.SubjectMakesafeRecheck} {
			_, err = c.js.PublishMsg(short(t), schedule(subject))
			is.True(err != nil) // and MAKESAFE is not its to write
			c.refused(t, r.Name+" writes MAKESAFE", subject)
		}
	}
	ms := connect(t, url, events.RoleMakesafe.Name, inbox(events.RoleMakesafe.Name))
	rung := nats.NewMsg(events.MakesafeScheduleSubject("6f0a3c2e-1b2d-4e5f-8a9b-0c1d2e3f4a5b", 1))
	for k, v := range events.ScheduleHeaders(time.Now().Add(time.Hour), events.SubjectMakesafeRecheck) {
		rung.Header.Set(k, v)
	}
	_, err := ms.js.PublishMsg(ctx, rung)
	is.NoErr(err) // makesafe schedules its rungs
	s, err := ops.js.Stream(ctx, events.StreamMakesafe)
	is.NoErr(err)
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(events.SubjectMakesafeRecheck))
	is.NoErr(err)
	is.Equal(len(info.State.Subjects), 0) // and no re-check was made
}

// A lock's whole life is allowed to the role that takes it — create, a
// second holder watching while it waits, renew, release — and another
// role's key is not.
func TestLocksUnderTheirRoles(t *testing.T) {
	is := is.New(t)
	url, _ := server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	role := events.RoleOptimoPlan
	plan := connect(t, url, role.Name, nats.CustomInboxPrefix(role.InboxPrefix()))
	is.NoErr(events.CheckRole(ctx, plan.js, role, 0)) // the role checks its streams, the locks' bucket among them
	log := slog.New(slog.DiscardHandler)
	cfg := lock.Config{TTL: 3 * time.Second, Wait: 30 * time.Second, Renew: time.Second}
	first, err := lock.New(ctx, plan.js, cfg, log)
	is.NoErr(err) // the bucket is read
	held, err := first.Take(ctx, events.LockOptimoPlan)
	is.NoErr(err) // taken
	second, err := lock.New(ctx, plan.js, cfg, log)
	is.NoErr(err)
	got := make(chan error, 1)
	go func() {
		lk, err := second.Take(ctx, events.LockOptimoPlan) // waits, watching the key
		if err == nil {
			err = lk.Release(ctx)
		}
		got <- err
	}()
	time.Sleep(1500 * time.Millisecond) // renewed once at least while the other waits
	is.NoErr(held.Release(ctx))         // released
	is.NoErr(<-got)                     // the waiter took it, and released it
	plan.mu.Lock()
	is.Equal(plan.errs, []string(nil)) // nothing refused
	plan.mu.Unlock()

	short, stop := context.WithTimeout(ctx, 3*time.Second)
	defer stop()
	_, err = first.Take(short, events.LockOptimoCreate)
	is.True(err != nil) // optimo-create's lock is not optimo-plan's to take
	plan.refused(t, "another role's lock", "$KV."+events.BucketLocks+"."+events.LockOptimoCreate)
}

// The Prime budget's key is the roles' that call Prime — registered,
// spent, watched for another process's writes — and no one else's.
func TestPrimeBudgetUnderTheRolesThatCallPrime(t *testing.T) {
	is := is.New(t)
	url, _ := server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	cfg := primebudget.Config{Lease: 2 * time.Second, Margin: time.Second, DayReserve: 1, Timeout: 5 * time.Second}
	var budgets []*primebudget.Budget
	var conns []*conn
	for _, role := range []events.Role{events.RoleResolver, events.RoleMakesafe} {
		is.True(role.CallsPrime) // a role that calls Prime
		c := connect(t, url, role.Name, nats.CustomInboxPrefix(role.InboxPrefix()))
		is.NoErr(events.CheckRole(ctx, c.js, role, 0)) // checks its streams, the budget's bucket among them
		b, err := primebudget.New(ctx, c.js, prime.Config{RatePerMinute: 6000, RateBurst: 100, MaxConcurrent: 1}, cfg, log)
		is.NoErr(err) // registers in the budget
		rctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); b.Run(rctx) }() // watches it
		t.Cleanup(func() { stop(); <-done })
		budgets, conns = append(budgets, b), append(conns, c)
	}
	permit, _, err := budgets[0].Admit(ctx, prime.Turn{Since: time.Now()})
	is.NoErr(err)
	is.True(permit != nil) // spends it
	_, wait, err := budgets[1].Admit(ctx, prime.Turn{Since: time.Now()})
	is.NoErr(err)
	is.Equal(wait.Reason, prime.WaitConcurrency) // the other process waits for the one slot
	permit.Done(200, nil)
	flowtest.Eventually(t, "the slot given back, seen by the other", func() bool {
		permit, _, err = budgets[1].Admit(ctx, prime.Turn{Since: time.Now()})
		return err == nil && permit != nil
	})
	permit.Done(200, nil)
	for _, c := range conns {
		c.mu.Lock()
		is.Equal(c.errs, []string(nil)) // nothing refused
		c.mu.Unlock()
	}

	role := events.RoleOptimoPlan
	is.True(!role.CallsPrime)
	plan := connect(t, url, role.Name, nats.CustomInboxPrefix(role.InboxPrefix()))
	short, stop := context.WithTimeout(ctx, 3*time.Second)
	defer stop()
	_, err = primebudget.New(short, plan.js, prime.Config{}, cfg, log)
	is.True(err != nil) // a role that does not call Prime may not touch the budget
}

// Each ensure-job subject is its caller's: job-mirror derives from the
// subject which path asks (the first sight it records, the class of its
// Prime call), so mail-intake's user, which parses hostile mail, may ask
// on the email path alone and cannot pass for child-mirror's webhook
// events, nor child-mirror's for the email (issue 27 §2).
func TestEnsureSubjectsUnderTheirRoles(t *testing.T) {
	url := natstest.ServerWithUsers(t).ClientURL()
	for _, tc := range []struct {
		role        events.Role
		may, mayNot []string
	}{
		{events.RoleMailIntake, []string{events.SubjectEnsureJobEmail},
			[]string{events.SubjectEnsureJobEvent, events.SubjectEnsureJobSweep, events.SubjectEnsureJobDrain}},
		{events.RoleChildMirror, []string{events.SubjectEnsureJobEvent, events.SubjectEnsureJobSweep, events.SubjectEnsureJobDrain},
			[]string{events.SubjectEnsureJobEmail}},
	} {
		t.Run(tc.role.Name, func(t *testing.T) {
			is := is.New(t)
			c := connect(t, url, tc.role.Name, nats.CustomInboxPrefix(tc.role.InboxPrefix()))
			for _, s := range append(slices.Clone(tc.may), tc.mayNot...) {
				is.NoErr(c.nc.PublishRequest(s, tc.role.InboxPrefix()+".x", []byte(`{"jobId":"0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"}`)))
			}
			is.NoErr(c.nc.Flush())
			for _, s := range tc.mayNot {
				c.refused(t, "ask on "+s, s)
			}
			is.NoErr(c.nc.Flush()) // a round trip after the refusals: every error the server sent has arrived
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, s := range tc.may {
				for _, e := range c.errs {
					is.True(!strings.Contains(e, `"`+s+`"`)) // its own path is allowed
				}
			}
		})
	}
}
