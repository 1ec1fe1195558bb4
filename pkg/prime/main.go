package prime

import (
	"context"
	"io"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/service"
)

// Main runs a service that calls Prime as a process of its own: it reads
// the client's configuration (PRIME_*) from getenv and, inside service.Main,
// builds the process's one client with the service's logger, registers the
// client's metrics and hands it to build.
func Main(ctx context.Context, name string, getenv func(string) string, stderr io.Writer,
	build func(ctx context.Context, d service.Deps, pc *Client) (service.Runner, error)) error {
	var cfg Config
	if err := config.Parse(getenv, &cfg); err != nil {
		return err
	}
	return service.Main(ctx, name, getenv, stderr, func(ctx context.Context, d service.Deps, _ *service.Router) (service.Runner, error) {
		pc, err := New(cfg, WithLogger(d.Log))
		if err != nil {
			return nil, err
		}
		d.Metrics.MustRegister(pc)
		return build(ctx, d, pc)
	})
}
