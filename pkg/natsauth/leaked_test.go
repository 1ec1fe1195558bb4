package natsauth_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/natsauth"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primebudget"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// forgedJob is Prime's answer to GET /jobs/{id} as a forger writes it: a
// job number Prime never gave and a version no real answer could pass.
func forgedJob(t *testing.T, id string) []byte {
	t.Helper()
	doc, err := json.Marshal(map[string]any{"data": map[string]any{"type": "jobs", "id": id,
		"attributes": map[string]any{"jobNumber": "FORGED", "version": int64(1) << 53}}})
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// forge writes a stored answer to request under every key of the answers'
// bucket a reader might look at — the request's hash alone, and under each
// role's name — as the forger's user, and reports which writes NATS took.
func forge(t *testing.T, c *conn, request string, page []byte, sent time.Time) (stored []string) {
	t.Helper()
	sum := sha256.Sum256([]byte(request))
	hash := hex.EncodeToString(sum[:])
	endpoint, _, _ := strings.Cut(request, " ")
	keys := []string{hash}
	for _, r := range natsauth.Roles() {
		keys = append(keys, r.Name+"."+endpoint+"."+hash)
	}
	body, err := json.Marshal(map[string]any{"request": request, "answer": map[string]any{"sent": sent, "pages": [][]byte{page}}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if _, err := c.js.Publish(ctx, "$KV."+events.BucketPrimeAnswers+"."+k, body); err == nil {
				mu.Lock()
				defer mu.Unlock()
				stored = append(stored, k)
			}
		})
	}
	wg.Wait()
	return stored
}

// TestNoLeakedUserForgesPrimesAnswer is the attack on the shared answers
// (issue 27's follow-up): on `make run`, child-mirror's user wrote a
// jobs.get answer for a new job (jobNumber FORGED, version 2^53, sent
// 2099) under the request's key, and job-mirror, asked to ensure the job,
// mirrored it as Prime's without asking Prime. A process believes a shared
// answer only from a role that is already the authority for that record,
// and NATS lets each role write under its own name alone: the forged job
// is not believed, and Prime is asked.
func TestNoLeakedUserForgesPrimesAnswer(t *testing.T) {
	url, _ := server(t)
	sim, err := primesim.New(primesim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(sim)
	t.Cleanup(hs.Close)
	for _, tc := range []struct {
		forger events.Role
		sent   time.Time
	}{
		{events.RoleChildMirror, time.Now()},
		{events.RoleChildMirror, time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)},
		{events.RoleMakesafe, time.Now()},
	} {
		t.Run(fmt.Sprintf("%s sent %s", tc.forger.Name, tc.sent.Format(time.DateOnly)), func(t *testing.T) {
			is := is.New(t)
			job := sim.NewJob()
			f := connect(t, url, tc.forger.Name, inbox(tc.forger.Name))
			stored := forge(t, f, prime.EndpointJob+" /jobs/"+job.ID, forgedJob(t, job.ID), tc.sent)
			for _, k := range stored {
				for _, w := range events.PrimeAnswerWriters(prime.EndpointJob) {
					is.True(!strings.HasPrefix(k, w.Name+".")) // nothing under a name a job is believed from
				}
			}

			victim := events.RoleJobMirror
			v := connect(t, url, victim.Name, inbox(victim.Name))
			answers, err := primebudget.NewAnswers(context.Background(), v.js, primebudget.Config{Timeout: 5 * time.Second}, slog.New(slog.DiscardHandler), victim)
			is.NoErr(err)
			cfg := sim.ClientConfig(hs.URL)
			cfg.RatePerMinute, cfg.RateBurst = 6000, 100
			cfg.CoalesceWindow, cfg.CoalesceKeep = 2*time.Second, 5*time.Minute
			pc, err := prime.New(cfg, prime.WithSharedAnswers(answers))
			is.NoErr(err)
			before := sim.Stats().ByEndpoint["GET /jobs/{id}"]
			got, err := pc.GetJob(prime.WithEventTime(context.Background(), time.Now().Add(-time.Minute)), job.ID) // any answer since serves it
			is.NoErr(err)
			is.Equal(got.JobNumber, job.JobNumber)                       // Prime's job, not the forger's
			is.True(got.Version < 1<<53)                                 // nor its version
			is.Equal(sim.Stats().ByEndpoint["GET /jobs/{id}"], before+1) // Prime was asked
			is.Equal(pc.Stats().Coalesced["shared"], int64(0))           // no shared answer was taken
		})
	}
}

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
