// Command mail-intake reads Prime's new-job emails from a mailbox (§7) and
// puts each job through the new-job path.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	mailintake "github.com/ethosbuilding/primeflow/services/mail-intake"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := mailintake.Main(ctx, os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "mail-intake:", err)
		os.Exit(1)
	}
}
