package primeflow_test

import (
	"net"
	"strings"
	"testing"
)

// Every address a binary listens on is loopback unless a variable says
// otherwise (HTTP_ADDR, OPS_ADDR, SIM_ADDR, NATS_LISTEN,
// NATS_MONITOR_LISTEN): make run reachable from this machine only, and a
// service that must be reached from elsewhere (a container: compose, the
// image) is told so. Each has one default in every binary that reads it, so
// primectl, reading the variables bin/primeflow reads, finds it.
func TestEveryBinaryListensOnLoopbackUnlessTold(t *testing.T) {
	defaults := map[string]map[string]string{} // variable → binary → default
	for _, b := range docBinaries(t) {
		for _, v := range b.vars {
			if !strings.HasSuffix(v.Name, "_ADDR") && !strings.HasSuffix(v.Name, "_LISTEN") {
				continue
			}
			if defaults[v.Name] == nil {
				defaults[v.Name] = map[string]string{}
			}
			defaults[v.Name][b.name] = v.Default
			if v.Default == "" || v.Default == "off" {
				continue // none unless set
			}
			host, _, err := net.SplitHostPort(v.Default)
			if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
				t.Errorf("%s: %s defaults to %q, not a loopback address", b.name, v.Name, v.Default)
			}
		}
	}
	for name, by := range defaults {
		seen := map[string]bool{}
		for _, d := range by {
			seen[d] = true
		}
		if len(seen) > 1 {
			t.Errorf("%s has different defaults: %v", name, by)
		}
	}
	if len(defaults["HTTP_ADDR"]) == 0 || len(defaults["NATS_LISTEN"]) == 0 {
		t.Fatalf("no HTTP_ADDR or NATS_LISTEN read: %v", defaults)
	}
}
