// Command primeflow runs the whole pipeline in one process (`make run`).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/ethosbuilding/primeflow/services/primeflow"
)

func main() {
	if done, code := service.Command(os.Args[1:], os.Stdout, os.Stderr, primeflow.Help()); done {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := primeflow.Main(ctx, os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "primeflow:", err)
		os.Exit(1)
	}
}
