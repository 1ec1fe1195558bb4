package chaos_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/chaos"
	"github.com/ethosbuilding/primeflow/pkg/proctest"
)

// TestChaosShort is the short profile (chaos.Short): the real binaries as
// processes, a few kills, a database lock and the storms, then every
// invariant. `make chaos` runs the full profile.
func TestChaosShort(t *testing.T) {
	natsServer := os.Getenv("NATS_SERVER")
	if natsServer == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("NATS_SERVER is not set: run the tests through `make test`, which installs nats-server")
		}
		t.Skip("SKIPPED: NATS_SERVER is not set (make test installs nats-server and sets it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin := t.TempDir()
	if err := proctest.Build(ctx, "..", bin, chaos.Packages()...); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "chaos-short-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the processes' logs are kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	sums, err := chaos.Run(ctx, chaos.Options{Bin: bin, NATSServer: natsServer, Dir: dir, Log: &lineLog{t: t}}, chaos.Short())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sums {
		if len(s.Violations) > 0 {
			t.Errorf("%s\n  %s", s, strings.Join(s.Violations, "\n  "))
		}
	}
}

// lineLog writes the harness's progress to the test's log, a line a call.
type lineLog struct {
	mu sync.Mutex
	t  *testing.T
}

func (l *lineLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
