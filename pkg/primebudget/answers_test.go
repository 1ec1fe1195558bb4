package primebudget_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primebudget"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/matryer/is"
)

// Two processes on one NATS: an answer one got from Prime serves the
// other's call for the same record, and no other.
func TestAnswersAreSharedBetweenProcesses(t *testing.T) {
	is := is.New(t)
	srv := natstest.Server(t)
	sim, url := simulator(t, primesim.RateLimit{}, nil)
	process := func() *prime.Client {
		_, js := natstest.Connect(t, srv)
		answers, err := primebudget.NewAnswers(context.Background(), js, config(), slog.New(slog.DiscardHandler))
		is.NoErr(err)
		cfg := sim.ClientConfig(url)
		cfg.RatePerMinute, cfg.RateBurst = 6000, 100
		cfg.CoalesceWindow, cfg.CoalesceKeep = 2*time.Second, 5*time.Minute
		c, err := prime.New(cfg, prime.WithSharedAnswers(answers))
		is.NoErr(err)
		return c
	}
	a, b := process(), process()
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
