// Command child-mirror mirrors appointments, site forms, estimates,
// allocations and contacts as a service of its own.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ethosbuilding/primeflow/pkg/service"
	childmirror "github.com/ethosbuilding/primeflow/services/child-mirror"
)

func main() {
	if done, code := service.Command(os.Args[1:], os.Stdout, os.Stderr, childmirror.Help()); done {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := childmirror.Main(ctx, os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "child-mirror:", err)
		os.Exit(1)
	}
}
