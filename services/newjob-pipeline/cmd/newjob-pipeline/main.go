// Command newjob-pipeline runs the new-job pipeline (§6) for each job seen
// for the first time.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ethosbuilding/primeflow/pkg/service"
	newjobpipeline "github.com/ethosbuilding/primeflow/services/newjob-pipeline"
)

func main() {
	if done, code := service.Command(os.Args[1:], os.Stdout, os.Stderr, newjobpipeline.Help()); done {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newjobpipeline.Main(ctx, os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "newjob-pipeline:", err)
		os.Exit(1)
	}
}
