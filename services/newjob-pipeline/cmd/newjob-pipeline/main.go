// Command newjob-pipeline runs the new-job pipeline (§6) for each job seen
// for the first time.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	newjobpipeline "github.com/ethosbuilding/primeflow/services/newjob-pipeline"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newjobpipeline.Main(ctx, os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "newjob-pipeline:", err)
		os.Exit(1)
	}
}
