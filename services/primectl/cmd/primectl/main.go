// Command primectl looks after primeflow's webhook log: list, show, replay,
// the new-job pipeline's state, and SQL Server migrations.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ethosbuilding/primeflow/services/primectl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := primectl.Run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	var exit *primectl.ExitStatus
	switch {
	case errors.Is(err, primectl.ErrUsage):
		os.Exit(2)
	case errors.As(err, &exit):
		if exit.Err != nil {
			fmt.Fprintln(os.Stderr, "primectl:", exit.Err)
		}
		os.Exit(exit.Code)
	case err != nil:
		fmt.Fprintln(os.Stderr, "primectl:", err)
		os.Exit(1)
	}
}
