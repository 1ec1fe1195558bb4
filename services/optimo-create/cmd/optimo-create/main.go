// Command optimo-create turns Prime appointments and work orders into
// OptimoRoute orders, as a service of its own.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ethosbuilding/primeflow/pkg/service"
	optimocreate "github.com/ethosbuilding/primeflow/services/optimo-create"
)

func main() {
	if done, code := service.Command(os.Args[1:], os.Stdout, os.Stderr, optimocreate.Help()); done {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := optimocreate.Main(ctx, os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "optimo-create:", err)
		os.Exit(1)
	}
}
