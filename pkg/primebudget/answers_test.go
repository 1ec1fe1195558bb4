package primebudget_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primebudget"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/matryer/is"
	"github.com/nats-io/nats-server/v2/server"
)

// answering is a process of role on srv whose client shares its answers.
func answering(t *testing.T, srv *server.Server, sim *primesim.Sim, url string, role events.Role) *prime.Client {
	t.Helper()
	_, js := natstest.Connect(t, srv)
	answers, err := primebudget.NewAnswers(context.Background(), js, config(), slog.New(slog.DiscardHandler), role)
	if err != nil {
		t.Fatal(err)
	}
	cfg := sim.ClientConfig(url)
	cfg.RatePerMinute, cfg.RateBurst = 6000, 100
	cfg.CoalesceWindow, cfg.CoalesceKeep = 2*time.Second, 5*time.Minute
	c, err := prime.New(cfg, prime.WithSharedAnswers(answers))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Two processes on one NATS: an answer the resolver got from Prime serves
// job-mirror's call for the same record, and no other.
func TestAnswersAreSharedBetweenProcesses(t *testing.T) {
	is := is.New(t)
	srv := natstest.Server(t)
	sim, url := simulator(t, primesim.RateLimit{}, nil)
	a, b := answering(t, srv, sim, url, events.RoleResolver), answering(t, srv, sim, url, events.RoleJobMirror)
	ctx := context.Background()
	calls := func() int64 { return sim.Stats().ByEndpoint["GET /jobs/{id}"] }
	event := time.Now().Add(-time.Second) // the webhook came before a's call

	job, err := a.GetJob(ctx, fixtureJob)
	is.NoErr(err)
	is.Equal(calls(), int64(1)) // a asks Prime
	got, err := b.GetJob(prime.WithEventTime(ctx, event), fixtureJob)
	is.NoErr(err)
	is.Equal(got.ID, job.ID)                          // b has the job...
	is.Equal(string(got.Raw), string(job.Raw))        // as a got it
	is.Equal(calls(), int64(1))                       // without asking Prime
	is.Equal(b.Stats().Coalesced["shared"], int64(1)) // from a's answer in NATS
	_, err = b.GetJob(prime.WithEventTime(ctx, event), "1a2b3c4d-6e7f-4a8b-9c0d-2e3f4a5b6c02")
	is.NoErr(err)
	is.Equal(calls(), int64(2)) // another job is asked of Prime
	_, err = b.GetAppointment(prime.WithEventTime(ctx, event), fixtureJob)
	is.True(errors.Is(err, prime.ErrNotFound)) // and the job's id as an appointment is not the job's answer
}

// An answer is believed from the roles that share its call, and from no
// other, and not when it says it was sent after now: child-mirror's answer
// for a job, or one stored under its name, is not job-mirror's to mirror
// (NATS keeps a role to its own keys: pkg/natsauth's tests).
func TestAnAnswerIsBelievedFromTheRolesThatShareItsCall(t *testing.T) {
	is := is.New(t)
	srv := natstest.Server(t)
	sim, url := simulator(t, primesim.RateLimit{}, nil)
	child := answering(t, srv, sim, url, events.RoleChildMirror)
	mirror := answering(t, srv, sim, url, events.RoleJobMirror)
	ctx := context.Background()
	calls := func() int64 { return sim.Stats().ByEndpoint["GET /jobs/{id}"] }

	_, err := child.GetJob(ctx, fixtureJob)
	is.NoErr(err)
	is.Equal(calls(), int64(1)) // child-mirror asks Prime for the job, for its contacts
	_, err = mirror.GetJob(prime.WithEventTime(ctx, time.Now().Add(-time.Minute)), fixtureJob)
	is.NoErr(err)
	is.Equal(calls(), int64(2)) // and job-mirror does not take child-mirror's answer

	_, js := natstest.Connect(t, srv)
	kv, err := js.KeyValue(ctx, events.BucketPrimeAnswers)
	is.NoErr(err)
	request := prime.EndpointJob + " /jobs/" + fixtureJob
	sum := sha256.Sum256([]byte(request))
	forge := func(writer string, sent time.Time) {
		t.Helper()
		page := fmt.Sprintf(`{"data":{"type":"jobs","id":%q,"attributes":{"jobNumber":"FORGED","version":9007199254740992}}}`, fixtureJob)
		body, err := json.Marshal(map[string]any{"request": request, "answer": prime.Answer{Sent: sent, Pages: [][]byte{[]byte(page)}}})
		is.NoErr(err)
		_, err = kv.Put(ctx, events.PrimeAnswerKey(writer, prime.EndpointJob, hex.EncodeToString(sum[:])), body)
		is.NoErr(err)
	}
	forge(events.RoleChildMirror.Name, time.Now())
	forge(events.RoleJobMirror.Name, time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC))
	fresh := answering(t, srv, sim, url, events.RoleResolver)
	job, err := fresh.GetJob(ctx, fixtureJob)
	is.NoErr(err)
	is.True(job.JobNumber != "FORGED") // neither forgery is believed
	is.Equal(calls(), int64(3))        // Prime is asked
	is.Equal(fresh.Stats().Coalesced["shared"], int64(0))
	reader := answering(t, srv, sim, url, events.RoleChildMirror)
	job, err = reader.GetJob(prime.WithEventTime(ctx, time.Now().Add(-time.Minute)), fixtureJob)
	is.NoErr(err)
	is.True(job.JobNumber != "FORGED")                     // the resolver's answer, which it shared...
	is.Equal(calls(), int64(3))                            // without asking Prime...
	is.Equal(reader.Stats().Coalesced["shared"], int64(1)) // though job-mirror's key says 2099

	forge(events.RoleJobMirror.Name, time.Now())
	job, err = answering(t, srv, sim, url, events.RoleChildMirror).GetJob(prime.WithEventTime(ctx, time.Now().Add(-time.Minute)), fixtureJob)
	is.NoErr(err)
	is.Equal(job.JobNumber, "FORGED") // what job-mirror's own user writes is believed: it is the jobs' authority
	is.Equal(calls(), int64(3))
}
