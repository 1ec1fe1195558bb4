// Command mail-intake reads Prime's new-job emails from a mailbox (§7) and
// puts each job through the new-job path.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ethosbuilding/primeflow/pkg/service"
	mailintake "github.com/ethosbuilding/primeflow/services/mail-intake"
)

func main() {
	if done, code := service.Command(os.Args[1:], os.Stdout, os.Stderr, mailintake.Help()); done {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := mailintake.Main(ctx, os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "mail-intake:", err)
		os.Exit(1)
	}
}
