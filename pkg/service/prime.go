package service

import (
	"context"
	"io"
	"slices"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/metrics"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primebudget"
)

// MainWithPrime runs a service that calls Prime as a process of its own: it
// reads the client's configuration (PRIME_*) with the service's own (own,
// see Main) and, inside Main, builds the process's one client with the
// service's logger, spending the deployment's budget in NATS
// (pkg/primebudget), registers the metrics of both and hands the client to
// build.
func MainWithPrime(ctx context.Context, name string, getenv func(string) string, stderr io.Writer, own []config.Part,
	build func(ctx context.Context, d Deps, pc *prime.Client) (Runner, error)) error {
	var pcfg prime.Config
	var bcfg primebudget.Config
	own = slices.Concat(own, []config.Part{config.Read(&pcfg, prime.Config.Validate), config.Read(&bcfg, primebudget.Config.Validate)})
	return Main(ctx, name, getenv, stderr, own, func(ctx context.Context, d Deps, _ *Router) (Runner, error) {
		pc, budget, err := PrimeClient(ctx, d, pcfg, bcfg)
		if err != nil {
			return nil, err
		}
		svc, err := build(ctx, d, pc)
		if err != nil {
			return nil, err
		}
		return Spending(budget, svc), nil
	})
}

// PrimeClient is a process's one Prime client, spending the deployment's
// budget in NATS and sharing its answers with the other processes there,
// with the metrics of both registered. The budget must run as long as the
// client is used (Spending).
func PrimeClient(ctx context.Context, d Deps, cfg prime.Config, bcfg primebudget.Config) (*prime.Client, *primebudget.Budget, error) {
	budget, err := primebudget.New(ctx, d.JS, cfg, bcfg, d.Log)
	if err != nil {
		return nil, nil, err
	}
	answers, err := primebudget.NewAnswers(ctx, d.JS, bcfg, d.Log, rolesOf(d.Name)...)
	if err != nil {
		return nil, nil, err
	}
	pc, err := prime.New(cfg, prime.WithLogger(d.Log), prime.WithBudget(budget), prime.WithSharedAnswers(answers))
	if err != nil {
		return nil, nil, err
	}
	if err := metrics.Replace(d.Metrics, pc, budget); err != nil {
		return nil, nil, err
	}
	return pc, budget, nil
}

// rolesOf are the roles a process called name runs as: a service's own;
// every role that calls Prime for a process that runs them all
// (bin/primeflow).
func rolesOf(name string) []events.Role {
	if r, ok := events.RoleNamed(name); ok {
		return []events.Role{r}
	}
	var out []events.Role
	for _, r := range events.ServiceRoles {
		if r.CallsPrime {
			out = append(out, r)
		}
	}
	return out
}

// Spending runs svc with the budget its Prime client spends running beside
// it, from before svc starts until after it has stopped, so that its last
// calls are still given back.
func Spending(budget *primebudget.Budget, svc Runner) Runner {
	return RunnerFunc(func(ctx context.Context) error {
		bctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		go func() { defer close(done); budget.Run(bctx) }()
		defer func() { stop(); <-done }()
		return svc.Run(ctx)
	})
}
