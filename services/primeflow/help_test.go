package primeflow_test

import (
	"context"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/service"
	childmirror "github.com/ethosbuilding/primeflow/services/child-mirror"
	"github.com/ethosbuilding/primeflow/services/ingest"
	jobmirror "github.com/ethosbuilding/primeflow/services/job-mirror"
	mailintake "github.com/ethosbuilding/primeflow/services/mail-intake"
	"github.com/ethosbuilding/primeflow/services/makesafe"
	newjobpipeline "github.com/ethosbuilding/primeflow/services/newjob-pipeline"
	optimocreate "github.com/ethosbuilding/primeflow/services/optimo-create"
	optimoplan "github.com/ethosbuilding/primeflow/services/optimo-plan"
	"github.com/ethosbuilding/primeflow/services/primeflow"
	"github.com/ethosbuilding/primeflow/services/resolver"
	"github.com/matryer/is"
)

// binaries are the services' binaries with their Help and Main.
var binaries = []struct {
	help func() service.Help
	main func(ctx context.Context, getenv func(string) string, stderr io.Writer) error
}{
	{ingest.Help, ingest.Main},
	{resolver.Help, resolver.Main},
	{jobmirror.Help, jobmirror.Main},
	{childmirror.Help, childmirror.Main},
	{newjobpipeline.Help, newjobpipeline.Main},
	{makesafe.Help, makesafe.Main},
	{optimocreate.Help, optimocreate.Main},
	{optimoplan.Help, optimoplan.Main},
	{mailintake.Help, mailintake.Main},
	{primeflow.Help, func(ctx context.Context, getenv func(string) string, stderr io.Writer) error {
		return primeflow.Main(ctx, getenv, io.Discard, stderr)
	}},
}

// runnable is what each binary must be given to get as far as connecting
// (to a NATS that is not there): every setting it requires, each valid.
func runnable(t *testing.T) map[string]string {
	return map[string]string{
		"DATA_DIR": t.TempDir(), "HTTP_ADDR": flowtest.FreeAddr(t), "NATS_URL": "nats://127.0.0.1:1",
		"SIM_ADDR": flowtest.FreeAddr(t), "NATS_MONITOR_LISTEN": "off",
		"MAKESAFE_SMS_TO": "+61400000000", "SMS_SEND_URL": "http://127.0.0.1:1/sms",
		"TRIAGE_INVITE_SEND_URL": "http://127.0.0.1:1/invites", "AI_SUMMARY_NUDGE_URL": "off",
		"TRIAGE_INITIAL_CONTACT_MADE_STATUS_ID": "3c1f4e2a-7b6d-4c8e-9a0f-1d2e3f4a5b6c",
		"GRAPH_TENANT_ID":                       "tenant", "GRAPH_CLIENT_ID": "client", "GRAPH_CLIENT_SECRET": "secret", "MAIL_USER": "jobs@example.com",
		"MAIL_FOLDER": "Inbox/Prime Jobs", "MAIL_PROCESSED_FOLDER": "Inbox/Prime Jobs/Processed", "MAIL_FAILED_FOLDER": "Inbox/Prime Jobs/Failed",
		"MAIL_ALLOWED_SENDERS": "noreply@primeeco.tech",
		"PRIME_API_URL":        "https://prime.invalid/api.prime/v2", "PRIME_CLIENT_ID": "client", "PRIME_CLIENT_SECRET": "secret",
		"PRIME_USERNAME": "user", "PRIME_PASSWORD": "password", "OPTIMOROUTE_API_KEY": "key",
	}
}

// Every variable a binary's Main reads is on its --help, and --help lists
// no variable it does not read: Main runs (its context already ended, so it
// stops at its first connection) with a getenv that notes what is asked.
func TestHelpListsWhatMainReads(t *testing.T) {
	for _, b := range binaries {
		h := b.help()
		t.Run(h.Name, func(t *testing.T) {
			is := is.New(t)
			set := runnable(t)
			var mu sync.Mutex
			asked := map[string]bool{}
			getenv := func(k string) string {
				mu.Lock()
				defer mu.Unlock()
				if !strings.HasSuffix(k, config.FileSuffix) {
					asked[k] = true
				}
				return set[k]
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			err := b.main(ctx, getenv, io.Discard)
			if err == nil || !strings.Contains(err.Error(), "context canceled") {
				t.Fatalf("Main did not get as far as connecting: %v", err)
			}
			vars, err := h.Variables()
			is.NoErr(err)
			var listed []string
			for _, v := range vars {
				listed = append(listed, v.Name)
			}
			is.Equal(slices.Sorted(maps.Keys(asked)), slices.Sorted(slices.Values(listed))) // --help lists what Main reads
		})
	}
}

// The binaries make build makes answer --help and --version, with the
// version, commit and date it stamped, without starting anything: nothing
// is written where they run, and the port they would serve is not asked
// for (a running instance holds it here).
func TestBinariesAnswerHelpAndVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every binary: not with -short")
	}
	is := is.New(t)
	bin := t.TempDir()
	build := exec.Command("make", "--no-print-directory", "-s", "build", "BIN="+bin,
		"VERSION=9.8.7-test", "COMMIT=0123456789ab", "BUILD_DATE=2026-12-01T10:00:00Z")
	build.Dir = filepath.Join("..", "..")
	out, err := build.CombinedOutput()
	if err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	held, err := net.Listen("tcp", "127.0.0.1:0")
	is.NoErr(err)
	defer held.Close()
	helps := map[string]service.Help{}
	for _, b := range binaries {
		helps[b.help().Name] = b.help()
	}
	for _, name := range append(slices.Sorted(maps.Keys(helps)), "primectl") {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			cwd := t.TempDir()
			run := func(arg string) string {
				cmd := exec.Command(filepath.Join(bin, name), arg)
				cmd.Dir = cwd
				cmd.Env = []string{"HTTP_ADDR=" + held.Addr().String(), "NATS_LISTEN=" + held.Addr().String()}
				out, err := cmd.Output()
				is.NoErr(err) // exit code 0
				return string(out)
			}
			is.Equal(run("--version"), name+" 9.8.7-test (commit 0123456789ab, built 2026-12-01T10:00:00Z)\n") // the stamp
			help := run("--help")
			is.True(strings.HasPrefix(help, name+" — ")) // what it is
			is.True(strings.Contains(help, "docs/"))     // where to read on
			if h, ok := helps[name]; ok {
				vars, err := h.Variables()
				is.NoErr(err)
				for _, v := range vars {
					is.True(strings.Contains(help, "  "+v.Name+" ")) // every variable, v.Name
				}
			}
			left, err := os.ReadDir(cwd)
			is.NoErr(err)
			is.Equal(len(left), 0) // nothing written: no ./data
		})
	}
}
