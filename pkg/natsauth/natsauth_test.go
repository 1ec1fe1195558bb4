package natsauth_test

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
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

// A service's user is refused what the service must not touch: ingest may
// publish webhooks, and neither a make-safe SMS nor a purge of a stream,
// nor read what the resolver hands on, nor another service's replies.
func TestServiceIsRefusedWhatItMustNotTouch(t *testing.T) {
	is := is.New(t)
	url := natstest.ServerWithUsers(t).ClientURL()
	ops := connect(t, url, natsauth.Operators)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	is.NoErr(events.EnsureStreams(ctx, ops.js, 0)) // the operators' user may do anything

	in := connect(t, url, events.RoleIngest.Name, nats.CustomInboxPrefix(events.RoleIngest.InboxPrefix()))
	_, err := in.js.Publish(ctx, events.WebhookSubject("change-job-status"), []byte("{}"))
	is.NoErr(err) // ingest publishes a webhook, and reads JetStream's ack

	short, stop := context.WithTimeout(ctx, 2*time.Second)
	defer stop()
	_, err = in.js.Publish(short, events.SubjectSMSSend, []byte(`{"source":"ingest"}`))
	is.True(err != nil) // no make-safe SMS from ingest
	in.refused(t, "publish "+events.SubjectSMSSend, events.SubjectSMSSend)

	s, err := ops.js.Stream(ctx, events.StreamWebhook)
	is.NoErr(err)
	short, stop = context.WithTimeout(ctx, 2*time.Second)
	defer stop()
	inStream, err := in.js.Stream(ctx, events.StreamWebhook)
	is.NoErr(err)                         // ingest may look at its stream
	is.True(inStream.Purge(short) != nil) // but not purge it
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

	short, stop = context.WithTimeout(ctx, 2*time.Second)
	defer stop()
	_, err = in.js.CreateOrUpdateConsumer(short, events.StreamWebhook, jetstream.ConsumerConfig{Durable: events.DurableResolver})
	is.True(errors.Is(err, context.DeadlineExceeded) || err != nil) // nor make the resolver's consumer
	in.refused(t, "create the resolver's consumer", "$JS.API.CONSUMER.CREATE."+events.StreamWebhook)

	portal := connect(t, url, events.RolePortals.Name)
	_, err = portal.js.Publish(ctx, events.SubjectOptimoPlan, []byte(`{"source":"AdminPortal"}`))
	is.NoErr(err) // a portal asks for planning, with nats.go's default inbox
	short, stop = context.WithTimeout(ctx, 2*time.Second)
	defer stop()
	_, err = portal.js.Publish(short, events.SubjectOptimoCreate, []byte(`{}`))
	is.True(err != nil) // and nothing else
	portal.refused(t, "portal", events.SubjectOptimoCreate)
}

// A lock's whole life is allowed to the role that takes it — create, a
// second holder watching while it waits, renew, release — and another
// role's key is not.
func TestLocksUnderTheirRoles(t *testing.T) {
	is := is.New(t)
	url := natstest.ServerWithUsers(t).ClientURL()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	role := events.RoleOptimoPlan
	plan := connect(t, url, role.Name, nats.CustomInboxPrefix(role.InboxPrefix()))
	streams, err := role.Streams()
	is.NoErr(err)
	is.NoErr(events.EnsureStreams(ctx, plan.js, 0, streams...)) // the role applies its streams, the locks' bucket among them
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
	url := natstest.ServerWithUsers(t).ClientURL()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	cfg := primebudget.Config{Lease: 2 * time.Second, Margin: time.Second, DayReserve: 1, Timeout: 5 * time.Second}
	var budgets []*primebudget.Budget
	var conns []*conn
	for _, role := range []events.Role{events.RoleResolver, events.RoleMakesafe} {
		is.True(role.CallsPrime) // a role that calls Prime
		c := connect(t, url, role.Name, nats.CustomInboxPrefix(role.InboxPrefix()))
		streams, err := role.Streams()
		is.NoErr(err)
		is.NoErr(events.EnsureStreams(ctx, c.js, 0, streams...)) // applies its streams, the budget's bucket among them
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
