package natsauth_test

import (
	"sync"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestNoLockOrBudgetUserRedirectsItsKey is the attack on the watches: a
// role that takes a lock or spends the Prime budget watched its key with a
// consumer of its own making, so its user could create one on the key's
// bucket delivering to any subject — another service's request subject —
// and the server delivered the key's value, which the user may write
// (nats-server checks no deliver subject against its maker's permissions;
// tried: it arrived). No role may create a consumer on those buckets: a
// watch is a subscription to the key's own subject.
func TestNoLockOrBudgetUserRedirectsItsKey(t *testing.T) {
	url, ops := server(t)
	target := events.SubjectEnsureJobEmail // job-mirror's, mail-intake's path
	var mu sync.Mutex
	var arrived []string
	_, err := ops.nc.Subscribe(target, func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		arrived = append(arrived, string(m.Data))
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		role        events.Role
		bucket, key string
	}{
		{events.RoleOptimoPlan, events.BucketLocks, events.LockOptimoPlan},
		{events.RoleOptimoCreate, events.BucketLocks, events.LockOptimoCreate},
		{events.RoleMakesafe, events.BucketPrimeBudget, events.PrimeBudgetKey},
		{events.RoleChildMirror, events.BucketPrimeBudget, events.PrimeBudgetKey},
	} {
		t.Run(tc.role.Name, func(t *testing.T) {
			is := is.New(t)
			c := connect(t, url, tc.role.Name, inbox(tc.role.Name))
			stream := "KV_" + tc.bucket
			subject := "$KV." + tc.bucket + "." + tc.key
			for _, cfg := range []jetstream.ConsumerConfig{
				{Name: "redirect", FilterSubject: subject, DeliverSubject: target, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy, AckPolicy: jetstream.AckNonePolicy},
				{FilterSubject: subject, DeliverSubject: target, AckPolicy: jetstream.AckNonePolicy},
			} {
				_, err := c.js.CreateOrUpdateConsumer(refusedCtx(t), stream, cfg)
				is.True(err != nil) // no consumer on its key's bucket
				c.refused(t, tc.role.Name+" makes a consumer on "+stream, "$JS.API.CONSUMER.CREATE."+stream)
			}
			_, err := c.js.Publish(short(t), subject, []byte(`{"jobId":"0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"}`))
			is.NoErr(err) // the key is still its to write
			s, err := ops.js.Stream(short(t), stream)
			is.NoErr(err)
			is.Equal(s.CachedInfo().State.Consumers, 0) // and no consumer delivers it anywhere
			is.NoErr(ops.nc.Flush())
			mu.Lock()
			is.Equal(arrived, []string(nil)) // nothing reached job-mirror's subject
			mu.Unlock()
		})
	}
}
