// Command makesafe runs make-safe detection, the re-check ladder and the SMS
// queue as a service of its own.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/ethosbuilding/primeflow/services/makesafe"
)

func main() {
	if done, code := service.Command(os.Args[1:], os.Stdout, os.Stderr, makesafe.Help()); done {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := makesafe.Main(ctx, os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "makesafe:", err)
		os.Exit(1)
	}
}
