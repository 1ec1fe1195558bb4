// Command optimo-create turns Prime appointments and work orders into
// OptimoRoute orders, as a service of its own.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	optimocreate "github.com/ethosbuilding/primeflow/services/optimo-create"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := optimocreate.Main(ctx, os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "optimo-create:", err)
		os.Exit(1)
	}
}
