// Command optimo-plan plans OptimoRoute's days as a service of its own.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ethosbuilding/primeflow/pkg/service"
	optimoplan "github.com/ethosbuilding/primeflow/services/optimo-plan"
)

func main() {
	if done, code := service.Command(os.Args[1:], os.Stdout, os.Stderr, optimoplan.Help()); done {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := optimoplan.Main(ctx, os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "optimo-plan:", err)
		os.Exit(1)
	}
}
