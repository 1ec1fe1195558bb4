// Command job-mirror mirrors Prime's jobs (change-job-status, §5.1) and
// answers ensure-job requests (§4.3).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ethosbuilding/primeflow/pkg/service"
	jobmirror "github.com/ethosbuilding/primeflow/services/job-mirror"
)

func main() {
	if done, code := service.Command(os.Args[1:], os.Stdout, os.Stderr, jobmirror.Help()); done {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := jobmirror.Main(ctx, os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "job-mirror:", err)
		os.Exit(1)
	}
}
