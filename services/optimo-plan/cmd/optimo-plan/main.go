// Command optimo-plan plans OptimoRoute's days as a service of its own.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	optimoplan "github.com/ethosbuilding/primeflow/services/optimo-plan"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := optimoplan.Main(ctx, os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "optimo-plan:", err)
		os.Exit(1)
	}
}
