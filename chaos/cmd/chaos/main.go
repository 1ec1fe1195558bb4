// Command chaos runs the fault-injection harness (`make chaos`): every
// scenario of the profile, a summary line each, and exit status 1 when an
// invariant failed. See package chaos.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ethosbuilding/primeflow/chaos"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	profile := fs.String("profile", "full", "full (make chaos) or short (make test's)")
	only := fs.String("scenario", "", "run only the scenario of this name")
	bin := fs.String("bin", "bin", "the services' binaries and primectl (make build)")
	natsServer := fs.String("nats-server", os.Getenv("NATS_SERVER"), "the nats-server binary (make tools)")
	dir := fs.String("dir", filepath.Join("data", "chaos", time.Now().Format("20060102-150405")), "where the run keeps its data and logs")
	seed := fs.Uint64("seed", 0, "the faults' seed (0: a new one)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var scenarios []chaos.Scenario
	switch *profile {
	case "full":
		scenarios = chaos.Full()
	case "short":
		scenarios = chaos.Short()
	default:
		return fmt.Errorf("-profile %q: want full or short", *profile)
	}
	if *only != "" {
		var names []string
		kept := scenarios[:0]
		for _, s := range scenarios {
			names = append(names, s.Name)
			if s.Name == *only {
				kept = append(kept, s)
			}
		}
		if len(kept) == 0 {
			return fmt.Errorf("-scenario %q: the %s profile has %s", *only, *profile, strings.Join(names, ", "))
		}
		scenarios = kept
	}
	if *natsServer == "" {
		return fmt.Errorf("no nats-server: set -nats-server or NATS_SERVER (make chaos does)")
	}
	sums, err := chaos.Run(ctx, chaos.Options{Bin: *bin, NATSServer: *natsServer, Dir: *dir, Log: os.Stdout, Seed: *seed}, scenarios)
	if err != nil {
		return err
	}
	fmt.Println()
	failed := 0
	for _, s := range sums {
		fmt.Println(s)
		if len(s.Violations) > 0 {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d scenarios failed; logs in %s", failed, len(sums), *dir)
	}
	return nil
}
