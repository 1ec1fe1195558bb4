package service

import (
	"context"
	"io"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/metrics"
	"github.com/ethosbuilding/primeflow/pkg/prime"
)

// MainWithPrime runs a service that calls Prime as a process of its own: it
// reads the client's configuration (PRIME_*) from getenv and, inside Main,
// builds the process's one client with the service's logger, registers the
// client's metrics and hands it to build.
func MainWithPrime(ctx context.Context, name string, getenv func(string) string, stderr io.Writer,
	build func(ctx context.Context, d Deps, pc *prime.Client) (Runner, error)) error {
	var cfg prime.Config
	if err := config.Parse(getenv, &cfg); err != nil {
		return err
	}
	return Main(ctx, name, getenv, stderr, func(ctx context.Context, d Deps, _ *Router) (Runner, error) {
		pc, err := prime.New(cfg, prime.WithLogger(d.Log))
		if err != nil {
			return nil, err
		}
		if err := metrics.Replace(d.Metrics, pc); err != nil {
			return nil, err
		}
		return build(ctx, d, pc)
	})
}
