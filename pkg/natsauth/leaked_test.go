package natsauth_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
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

// answerHashOf is the hash a request's answer is keyed on.
func answerHashOf(request string) string {
	sum := sha256.Sum256([]byte(request))
	return hex.EncodeToString(sum[:])
}

// jobMirrorsClient is job-mirror's Prime client on the simulator at
// simURL, taking the answers the roles share as its user reads them.
func jobMirrorsClient(t *testing.T, url string, sim *primesim.Sim, simURL string) *prime.Client {
	t.Helper()
	v := connect(t, url, events.RoleJobMirror.Name, inbox(events.RoleJobMirror.Name))
	answers, err := primebudget.NewAnswers(context.Background(), v.js, primebudget.Config{Timeout: 5 * time.Second}, slog.New(slog.DiscardHandler), events.RoleJobMirror)
	if err != nil {
		t.Fatal(err)
	}
	cfg := sim.ClientConfig(simURL)
	cfg.RatePerMinute, cfg.RateBurst = 6000, 100
	cfg.CoalesceWindow, cfg.CoalesceKeep = 2*time.Second, 5*time.Minute
	pc, err := prime.New(cfg, prime.WithSharedAnswers(answers))
	if err != nil {
		t.Fatal(err)
	}
	return pc
}

// forge writes a stored answer to request under every key of the answers'
// bucket a reader might look at — the request's hash alone, and under each
// role's name — as the forger's user, and reports which writes NATS took.
func forge(t *testing.T, c *conn, request string, page []byte, sent time.Time) (stored []string) {
	t.Helper()
	hash := answerHashOf(request)
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

			pc := jobMirrorsClient(t, url, sim, hs.URL)
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

// TestNoLeakedUserReflectsAStoredMessage is the review's attack on the
// direct gets (issue 27): child-mirror's user wrote a forged jobs.get
// answer under a key of its own, then asked JetStream for that key by
// direct get with the reply subject set to job-mirror's answer key;
// nats-server checks no reply subject against permissions, the server's
// answer is the stored message itself, and the answers' bucket stored it
// as job-mirror's: job-mirror mirrored jobNumber FORGED without asking
// Prime. No stream allows direct gets and no role may send one; the
// leader's message get, which a role reading its bucket still may, answers
// with JSON wrapping the message, which no reader takes for an answer.
func TestNoLeakedUserReflectsAStoredMessage(t *testing.T) {
	is := is.New(t)
	url, ops := server(t)
	sim, err := primesim.New(primesim.Options{})
	is.NoErr(err)
	hs := httptest.NewServer(sim)
	t.Cleanup(hs.Close)
	job := sim.NewJob()
	request := prime.EndpointJob + " /jobs/" + job.ID
	hash := answerHashOf(request)
	body, err := json.Marshal(map[string]any{"request": request, "answer": map[string]any{"sent": time.Now(), "pages": [][]byte{forgedJob(t, job.ID)}}})
	is.NoErr(err)

	f := connect(t, url, events.RoleChildMirror.Name, inbox(events.RoleChildMirror.Name))
	own := "$KV." + events.BucketPrimeAnswers + "." + events.PrimeAnswerKey(events.RoleChildMirror.Name, "contacts.get", hash)
	_, err = f.js.Publish(short(t), own, body)
	is.NoErr(err) // its own key: allowed
	victim := "$KV." + events.BucketPrimeAnswers + "." + events.PrimeAnswerKey(events.RoleJobMirror.Name, prime.EndpointJob, hash)
	get, err := json.Marshal(map[string]string{"last_by_subj": own})
	is.NoErr(err)
	is.NoErr(f.nc.PublishMsg(&nats.Msg{Subject: "$JS.API.STREAM.MSG.GET." + events.StreamPrimeAnswers, Reply: victim, Data: get}))
	kv, err := ops.js.KeyValue(short(t), events.BucketPrimeAnswers)
	is.NoErr(err)
	flowtest.Eventually(t, "the leader's get, which it may send, answered on job-mirror's key", func() bool {
		_, err := kv.Get(short(t), strings.TrimPrefix(victim, "$KV."+events.BucketPrimeAnswers+"."))
		return err == nil
	})
	direct := "$JS.API.DIRECT.GET." + events.StreamPrimeAnswers + "." + own
	is.NoErr(f.nc.PublishMsg(&nats.Msg{Subject: direct, Reply: victim}))
	f.refused(t, "a direct get", direct)

	pc := jobMirrorsClient(t, url, sim, hs.URL)
	before := sim.Stats().ByEndpoint["GET /jobs/{id}"]
	got, err := pc.GetJob(prime.WithEventTime(context.Background(), time.Now().Add(-time.Minute)), job.ID)
	is.NoErr(err)
	is.Equal(got.JobNumber, job.JobNumber)                       // Prime's job, not the forger's
	is.Equal(sim.Stats().ByEndpoint["GET /jobs/{id}"], before+1) // Prime was asked
	is.Equal(pc.Stats().Coalesced["shared"], int64(0))           // the wrapper was not taken for an answer
	_, err = ops.nc.Request(direct, nil, 2*time.Second)
	is.True(errors.Is(err, nats.ErrNoResponders)) // no stream answers a direct get, the operators' either
}

// preEmptedID is the Nats-Msg-Id of the webhook log row the attacks on
// ingest take ahead of it.
const preEmptedID = "ethPrimeWebhookLog:1001"

// forgedWebhook is what an attacker writes at subject to have it reflected
// onto a webhook's: a body of its own, with the next row's Nats-Msg-Id.
func forgedWebhook(subject string) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = []byte(`{"forged":"webhook"}`)
	m.Header.Set(jetstream.MsgIDHeader, preEmptedID)
	return m
}

// ingestsWebhook publishes the row preEmptedID on subject as ingest does,
// and checks that it is stored, not answered duplicate.
func ingestsWebhook(t *testing.T, in *conn, subject string) *jetstream.PubAck {
	t.Helper()
	real := nats.NewMsg(subject)
	real.Data = []byte(`{"logId":1001}`)
	real.Header.Set(jetstream.MsgIDHeader, preEmptedID)
	ack, err := in.js.PublishMsg(short(t), real)
	if err != nil {
		t.Fatal(err)
	}
	if ack.Duplicate {
		t.Errorf("ingest's real webhook %s was answered duplicate: the forged one took its Nats-Msg-Id", preEmptedID)
	}
	return ack
}

// TestNoLeakedUserPreEmptsAWebhook is the review's third attack: a lock's
// holder wrote its key with Nats-Msg-Id: ethPrimeWebhookLog:<the next log
// id> and reflected it by direct get onto a webhook's subject, so ingest's
// real publish of that row was answered duplicate and the webhook was
// never worked. What a role can reflect now is a server's JSON answer,
// which carries no header of the message it wraps.
func TestNoLeakedUserPreEmptsAWebhook(t *testing.T) {
	is := is.New(t)
	url, _ := server(t)
	subject := events.WebhookSubject("job.updated")
	f := connect(t, url, events.RoleOptimoCreate.Name, inbox(events.RoleOptimoCreate.Name))
	key := "$KV." + events.BucketLocks + "." + events.LockOptimoCreate
	_, err := f.js.PublishMsg(short(t), forgedWebhook(key))
	is.NoErr(err) // its lock's key: allowed
	direct := "$JS.API.DIRECT.GET." + events.StreamLocks + "." + key
	is.NoErr(f.nc.PublishMsg(&nats.Msg{Subject: direct, Reply: subject}))
	f.refused(t, "a direct get", direct)
	get, err := json.Marshal(map[string]string{"last_by_subj": key})
	is.NoErr(err)
	is.NoErr(f.nc.PublishMsg(&nats.Msg{Subject: "$JS.API.STREAM.MSG.GET." + events.StreamLocks, Reply: subject, Data: get}))
	is.NoErr(f.nc.Flush())

	in := connect(t, url, events.RoleIngest.Name, inbox(events.RoleIngest.Name))
	flowtest.Eventually(t, "the get's answer stored on the webhook's subject", func() bool {
		s, err := in.js.Stream(short(t), events.StreamWebhook)
		return err == nil && s.CachedInfo().State.Msgs > 0
	})
	ingestsWebhook(t, in, subject)
}

// TestNoRoleRollsUpTheSharedBuckets is the review's fourth attack: the
// answers' bucket allowed rollup headers, which nothing the project does
// needs, so the resolver's user published to a key of its own with
// Nats-Rollup: all and wiped every role's answers, job-mirror's among
// them. The answers' and the Prime budget's buckets take no rollup.
func TestNoRoleRollsUpTheSharedBuckets(t *testing.T) {
	is := is.New(t)
	url, ops := server(t)
	victim := connect(t, url, events.RoleJobMirror.Name, inbox(events.RoleJobMirror.Name))
	key := events.PrimeAnswerKey(events.RoleJobMirror.Name, events.RoleJobMirror.SharesAnswers[0], "h1")
	_, err := victim.js.Publish(short(t), "$KV."+events.BucketPrimeAnswers+"."+key, []byte(`{"request":"r"}`))
	is.NoErr(err) // job-mirror shares an answer
	f := connect(t, url, events.RoleResolver.Name, inbox(events.RoleResolver.Name))
	for _, subject := range []string{
		"$KV." + events.BucketPrimeAnswers + "." + events.PrimeAnswerKey(events.RoleResolver.Name, events.RoleResolver.SharesAnswers[0], "h1"),
		"$KV." + events.BucketPrimeBudget + "." + events.PrimeBudgetKey,
	} {
		m := nats.NewMsg(subject)
		m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupAll)
		m.Header.Set("KV-Operation", "PURGE")
		_, err := f.js.PublishMsg(short(t), m)
		var apiErr *jetstream.APIError
		is.True(errors.As(err, &apiErr))                       // the stream refuses the rollup
		is.Equal(apiErr.ErrorCode, jetstream.ErrorCode(10111)) // "rollup not permitted"
	}
	kv, err := ops.js.KeyValue(short(t), events.BucketPrimeAnswers)
	is.NoErr(err)
	e, err := kv.Get(short(t), key)
	is.NoErr(err)
	is.Equal(string(e.Value()), `{"request":"r"}`) // job-mirror's answer is still there
}

// TestMakesafeReflectsNoMessageItWrote is the hole issue 27's review left
// (F3): makesafe writes MAKESAFE (its rungs' schedules, whose produced
// re-check carries the body makesafe chose, and the re-checks its sweep
// fires) and read it through a pull consumer, so its user published a
// re-check with ingest's next Nats-Msg-Id and pulled it with a webhook's
// subject as the pull's reply subject (nats-server checks none): the
// server delivered it there, body and headers, PRIME_WEBHOOK stored it,
// and ingest's real publish of that row was answered duplicate.
// MAKESAFE/makesafe is a push consumer now, delivering where the
// operators' step chose: makesafe's user may send no next request, and an
// ack's +NXT, whose reply it does choose, gets the server's refusal (a
// status line with no body), never a message.
func TestMakesafeReflectsNoMessageItWrote(t *testing.T) {
	is := is.New(t)
	url, ops := server(t)
	subject := events.WebhookSubject("job.updated")
	f := connect(t, url, events.RoleMakesafe.Name, inbox(events.RoleMakesafe.Name))
	_, err := f.js.PublishMsg(short(t), forgedWebhook(events.SubjectMakesafeRecheck))
	is.NoErr(err) // a re-check: makesafe's to write

	next := "$JS.API.CONSUMER.MSG.NEXT." + events.StreamMakesafe + "." + events.DurableMakesafe
	is.NoErr(f.nc.PublishMsg(&nats.Msg{Subject: next, Reply: subject, Data: []byte(`{"batch":1}`)}))
	f.refused(t, "a next request with a webhook's subject as its reply", next)

	c := events.ConsumerMakesafe
	deliveries, err := f.nc.QueueSubscribeSync(c.DeliverSubject, c.DeliverGroup)
	is.NoErr(err)
	if d, err := deliveries.NextMsg(10 * time.Second); err != nil {
		t.Errorf("no re-check delivered to makesafe's deliver subject: %v", err)
	} else {
		is.NoErr(f.nc.PublishMsg(&nats.Msg{Subject: d.Reply, Reply: subject, Data: []byte("+NXT")}))
	}
	is.NoErr(f.nc.Flush())

	ack := ingestsWebhook(t, connect(t, url, events.RoleIngest.Name, inbox(events.RoleIngest.Name)), subject)
	s, err := ops.js.Stream(short(t), events.StreamWebhook)
	is.NoErr(err)
	for seq := uint64(1); seq <= ack.Sequence; seq++ {
		m, err := s.GetMsg(short(t), seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		is.NoErr(err)
		is.True(!strings.Contains(string(m.Data), "forged")) // nothing makesafe wrote reached the webhooks
	}
}

// TestTheRolesThatReadWhatTheyWrite is the review's F3 (issue 27): a pull
// request's reply subject is where the server delivers the consumer's
// messages, and nats-server checks it against no permission, so a role
// that may both publish into a stream and pull a consumer that reads what
// it published could have any body and headers of its choosing published
// on any subject (a forged Prime answer under job-mirror's key, a
// webhook's Nats-Msg-Id taken ahead of ingest). A publish into a stream
// that takes schedules may land on any subject of that stream (a
// schedule's target). No role pulls what it writes: makesafe, which
// schedules its rungs' re-checks and reads them, reads them by push, where
// the consumer's definition delivers (TestMakesafeReflectsNoMessageItWrote).
func TestTheRolesThatReadWhatTheyWrite(t *testing.T) {
	is := is.New(t)
	cfgs, err := events.StreamConfigs(0)
	is.NoErr(err)
	var found []string
	for _, r := range natsauth.Roles() {
		written := slices.Clone(r.Publishes)
		for _, subject := range r.Publishes {
			for _, c := range cfgs {
				if c.AllowMsgSchedules && slices.ContainsFunc(c.Subjects, func(s string) bool { return overlap(subject, s) }) {
					written = append(written, c.Subjects...)
				}
			}
		}
		for _, c := range r.Consumes {
			if !c.Push() && slices.ContainsFunc(c.Subjects, func(f string) bool {
				return slices.ContainsFunc(written, func(w string) bool { return overlap(w, f) })
			}) {
				found = append(found, r.Name+" pulls "+c.Stream+"/"+c.Durable)
			}
		}
	}
	is.Equal(found, []string(nil))
}

// overlap reports whether some subject matches both a and b (either may
// hold wildcards).
func overlap(a, b string) bool {
	x, y := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(x) && i < len(y); i++ {
		switch {
		case x[i] == ">" || y[i] == ">":
			return true
		case x[i] != "*" && y[i] != "*" && x[i] != y[i]:
			return false
		}
	}
	return len(x) == len(y)
}
