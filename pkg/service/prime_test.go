package service_test

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/matryer/is"
)

// MainWithPrime builds the process's client from PRIME_*, spending the
// deployment's budget, and hands it to the service, its metrics in the
// process's registry; a configuration it cannot read stops it before
// anything starts.
func TestMainHandsTheServiceAClient(t *testing.T) {
	ns := natstest.Server(t)
	sim, err := primesim.New(primesim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	defer srv.Close()
	cfg := sim.ClientConfig(srv.URL)
	vars := map[string]string{
		"NATS_URL": ns.ClientURL(), "DATA_DIR": t.TempDir(), "HTTP_ADDR": "127.0.0.1:0",
		"PRIME_API_URL": cfg.URL, "PRIME_CLIENT_ID": cfg.ClientID, "PRIME_CLIENT_SECRET": cfg.ClientSecret,
		"PRIME_USERNAME": cfg.Username, "PRIME_PASSWORD": cfg.Password,
	}

	t.Run("a client for the service", func(t *testing.T) {
		is := is.New(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		want := sim.NewJob()
		var job prime.Job
		var callErr error
		registered, budget := false, false
		err := service.MainWithPrime(ctx, "prime-test", func(k string) string { return vars[k] }, io.Discard, nil,
			func(_ context.Context, d service.Deps, pc *prime.Client) (service.Runner, error) {
				return service.RunnerFunc(func(ctx context.Context) error {
					job, callErr = pc.GetJob(ctx, want.ID)
					mfs, err := d.Metrics.Gather()
					for _, mf := range mfs {
						registered = registered || mf.GetName() == "prime_client_requests_total"
						budget = budget || mf.GetName() == "prime_budget_shared"
					}
					cancel()
					return err
				}), nil
			})
		is.NoErr(err)             // Main ran the service and stopped with it
		is.NoErr(callErr)         // the client reached Prime with the configuration from the environment
		is.Equal(job.ID, want.ID) // and read the job
		is.True(registered)       // its metrics are the process's
		is.True(budget)           // and the deployment's budget it spends, in NATS
	})

	t.Run("a configuration it cannot read", func(t *testing.T) {
		is := is.New(t)
		built := false
		err := service.MainWithPrime(context.Background(), "prime-test", func(k string) string {
			if k == "PRIME_RATE_PER_MINUTE" {
				return "sixty"
			}
			return vars[k]
		}, io.Discard, nil, func(context.Context, service.Deps, *prime.Client) (service.Runner, error) {
			built = true
			return nil, nil
		})
		is.True(err != nil) // refused
		is.True(!built)     // before the service is built
	})

	t.Run("a credential without PRIME_API_URL", func(t *testing.T) {
		is := is.New(t)
		built := false
		err := service.MainWithPrime(context.Background(), "prime-test", func(k string) string {
			if k == "PRIME_API_URL" {
				return ""
			}
			return vars[k]
		}, io.Discard, nil, func(context.Context, service.Deps, *prime.Client) (service.Runner, error) {
			built = true
			return nil, nil
		})
		is.True(err != nil && strings.Contains(err.Error(), "PRIME_API_URL (not set): is required: PRIME_CLIENT_ID is set")) // refused, naming the URL
		is.True(!built)
	})
}
