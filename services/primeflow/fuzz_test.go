package primeflow_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/services/primeflow"
)

// FuzzConfig feeds values to the configuration every service reads (the
// all-in-one's holds them all): one that cannot be read is refused with an
// error that names the variable and its value, so that an operator knows
// what to fix (never a panic, never a nameless "parse error").
func FuzzConfig(f *testing.F) {
	var names []string
	if err := config.Parse(func(k string) string { names = append(names, k); return "" }, &primeflow.Config{}); err != nil {
		f.Fatal(err)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	for _, seed := range []struct {
		name, value string
	}{
		{"RESOLVER_BACKOFF", "2s,,1m"}, {"RESOLVER_BACKOFF", "2s,10s"}, {"OPTIMO_CREATE_EVERY", "off"}, {"OPTIMO_CREATE_EVERY", "fortnightly"},
		{"PRIME_RATE_PER_MINUTE", "60.5"}, {"OPTIMO_ASSIGN_DRIVERS", "yes"}, {"LOG_LEVEL", "loud"}, {"INGEST_MAX_BODY_BYTES", "-1"},
		{"SMS_CLAIM_LEASE", "2m"}, {"OPTIMO_PLAN_LOCK_TTL", "1e3s"}, {"NATS_STREAM_REPLICAS", "three"}, {"MAKESAFE_LADDER", "1m,4m,"},
		{"PRIME_PASSWORD_FILE", "0"}, // a secret's file that is not there: named with its path
	} {
		if slices.Contains(names, seed.name) {
			f.Add(uint(slices.Index(names, seed.name)), seed.value)
		}
	}
	f.Fuzz(func(t *testing.T, i uint, value string) {
		name := names[i%uint(len(names))]
		var cfg primeflow.Config
		err := config.Parse(func(k string) string {
			if k == name {
				return value
			}
			return ""
		}, &cfg)
		if err != nil && !strings.Contains(err.Error(), name+"=") {
			t.Fatalf("%s=%q refused without naming it: %v", name, value, err)
		}
	})
}
