package primeflow_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/services/primeflow"
	"github.com/matryer/is"
)

// bad is a value a binary cannot run with, and how its refusal shows it:
// quoted, or for a URL only its scheme and host, or for a secret not at all.
type bad struct{ value, shows string }

// refusedAtOnce are, for each binary, settings it cannot run with: values
// that do not parse, zeros and values out of range, a time zone that is
// none, a secret it cannot use (whose value is never shown). bin/primeflow's
// are issue 28's, on the simulators (no credentials given).
var refusedAtOnce = map[string]map[string]bad{
	"primeflow": {
		"MAIL_POLL_INTERVAL": {"abc", ""}, "RESOLVER_LANES": {"x", ""}, "PRIME_RATE_PER_MINUTE": {"-1", ""},
		"OPTIMO_TIMEZONE": {"Mars/Base", ""}, "PRIME_RATE_BURST": {"0", ""}, "HTTP_MAX_CONNS": {"0", ""}, "LOG_LEVEL": {"loud", ""},
		"NATS_STREAM_REPLICAS": {"7", ""}, "DATABASE_PASSWORD": {"s3cret-pw", secret}, "SIMULATE": {"prime,optimoroute,graph,sms", ""},
		"AI_SUMMARY_NUDGE_URL": {"ftp://n8n.example/webhook/7f3a?key=k3y", `="ftp://n8n.example/…"`},
	},
	"ingest": {
		"INGEST_MAX_BODY_BYTES": {"0", ""}, "INGEST_RELAY_INTERVAL": {"soon", ""}, "HTTP_READ_TIMEOUT": {"abc", ""},
		"LOG_FORMAT": {"xml", ""}, "OPS_ADDR": {"nohost", ""},
	},
	"resolver": {
		"RESOLVER_LANES": {"x", ""}, "RESOLVER_LANE_WAIT": {"0s", ""}, "RESOLVER_BACKOFF": {"2s,,1m", ""},
		"PRIME_RATE_PER_MINUTE": {"0", ""}, "PRIME_BUDGET_LEASE": {"100ms", ""}, "PRIME_PAGE_SIZE": {"501", ""},
	},
	"job-mirror": {
		"JOB_MIRROR_WORKERS": {"0", ""}, "JOBS_SWEEP_EVERY": {"fortnightly", ""},
		"TRIAGE_INITIAL_CONTACT_MADE_STATUS_ID": {"00000000-0000-0000-0000-000000000000", ""},
		"TRIAGE_INVITE_MAX_ATTEMPTS":            {"0", ""}, "TRIAGE_INVITE_SEND_URL": {"ftp://invites.example/send", `="ftp://invites.example/…"`},
		"PRIME_TIMEOUT": {"-5s", ""},
	},
	"child-mirror": {
		"CHILD_MIRROR_WORKERS": {"-1", ""}, "AI_SUMMARY_NUDGE_URL": {"ftp://n8n.example/webhook/7f3a", `="ftp://n8n.example/…"`},
		"SYNC_DRAIN_EVERY_CONTACTS": {"0", ""}, "SYNC_DRAIN_BATCH": {"ten", ""}, "PRIME_MAX_CONCURRENT": {"0", ""},
	},
	"newjob-pipeline": {
		"NEWJOB_PIPELINE_WORKERS": {"0", ""}, "NEWJOB_PIPELINE_BACKOFF": {"soon", ""}, "NEWJOB_PIPELINE_OUTBOX_SWEEP": {"0", ""},
		"DATABASE_URL": {"postgres://app:pw@db/primeflow", secret}, "HTTP_IDLE_TIMEOUT": {"0", ""},
		"NATS_URL": {"nats://app:s3%cret@127.0.0.1:4222", secret},
	},
	"makesafe": {
		"MAKESAFE_LADDER": {"4m,1m", ""}, "MAKESAFE_WORKERS": {"0", ""}, "MAKESAFE_RUNG_SWEEP": {"-1m", ""},
		"SMS_SEND_TIMEOUT": {"0", ""}, "SMS_SEND_WORKERS": {"many", ""},
	},
	"optimo-create": {
		"OPTIMO_CREATE_BATCH": {"0", ""}, "OPTIMO_ORDER_DURATION": {"30s", ""}, "OPTIMO_TIMEZONE": {"Mars/Base", ""},
		"OPTIMO_CREATE_LOCK_TTL": {"1500ms", ""}, "OPTIMOROUTE_MAX_CONCURRENT": {"0", ""}, "OPTIMO_CREATE_EVERY": {"fortnightly", ""},
	},
	"optimo-plan": {
		"OPTIMO_PLAN_MAX_POLLS": {"0", ""}, "OPTIMO_PLAN_DEBOUNCE": {"5m", ""}, "OPTIMO_PLAN_LOCK_RENEW": {"20m", ""},
		"OPTIMOROUTE_API_URL": {"ftp://optimo.example/v1", `="ftp://optimo.example/…"`}, "OPTIMOROUTE_TIMEOUT": {"abc", ""},
	},
	"mail-intake": {
		"MAIL_POLL_INTERVAL": {"abc", ""}, "MAIL_PAGE_SIZE": {"0", ""}, "MAIL_MAX_ATTEMPTS": {"0", ""}, "GRAPH_TIMEOUT": {"0", ""},
		"GRAPH_API_URL":     {"https://graph.example/v1.0?tenant=x", `="https://graph.example/…"`},
		"MAIL_WAIT_BACKOFF": {"1s,0s", ""}, "MAIL_MAX_BODY_BYTES": {"1000", ""}, "MAIL_ALLOWED_SENDERS": {"prime", ""},
	},
}

// secret is how a refusal shows a secret that was set.
const secret = " (set; a secret, not shown)"

// Every binary refuses every setting it cannot run with in one run, before
// it binds a port or writes a file: the error is the configuration's
// (*config.Error), it names each variable once, with the value it got
// (never a secret's), and nothing else; nothing is written under DATA_DIR
// and nothing printed; and every port it was given is held by the test, so
// that a bind would have failed with another error.
func TestBadSettingsAreRefusedAtOnceBeforeAnythingStarts(t *testing.T) {
	for _, b := range binaries {
		name := b.help().Name
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			settings, ok := refusedAtOnce[name]
			is.True(ok) // every binary has its bad settings
			dir := filepath.Join(t.TempDir(), "data")
			env := runnable(t)
			if name == "primeflow" {
				env = map[string]string{} // on the simulators, as issue 28 ran it
			}
			env["DATA_DIR"] = dir
			for _, v := range []string{"HTTP_ADDR", "OPS_ADDR", "SIM_ADDR", "NATS_LISTEN", "NATS_MONITOR_LISTEN"} {
				env[v] = held(t)
			}
			if name != "primeflow" {
				env["NATS_URL"] = "nats://" + held(t)
			}
			for k, v := range settings {
				env[k] = v.value
			}
			var stdout, stderr flowtest.Buffer
			getenv := func(k string) string { return env[k] }
			var err error
			if name == "primeflow" {
				err = primeflow.Main(context.Background(), getenv, &stdout, &stderr) // its first screen is on stdout
			} else {
				err = b.main(context.Background(), getenv, &stderr)
			}
			t.Log(err) // as an operator reads it
			ce, ok := err.(*config.Error)
			if !ok {
				t.Fatalf("not the configuration's error: %v", err)
			}
			var named []string
			for _, r := range ce.Refused {
				line := r.Error()
				v := line[:strings.IndexAny(line, "=: (")]
				named = append(named, v)
				want, known := settings[v]
				if !known {
					t.Errorf("refused a setting that is fine: %s", line)
					continue
				}
				shows := cmp.Or(want.shows, fmt.Sprintf("=%q", want.value))
				is.True(strings.HasPrefix(line, v+shows+": ")) // with the value it got
			}
			slices.Sort(named)
			is.Equal(named, slices.Sorted(maps.Keys(settings))) // every bad setting, each once
			for _, s := range settings {
				if s.shows == secret {
					is.True(!strings.Contains(err.Error(), s.value)) // never a secret's value
				}
			}
			is.Equal(stdout.String(), "") // nothing printed
			is.Equal(stderr.String(), "") // nor logged
			_, statErr := os.Stat(dir)
			is.True(errors.Is(statErr, os.ErrNotExist)) // nothing written
		})
	}
}

// held is an address the test listens on until it ends: a binary that
// tried to bind it would fail, saying so.
func held(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}
