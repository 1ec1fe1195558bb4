package flowtest

import (
	"context"
	"io"
	"maps"
	"strconv"
	"time"
)

// MainVars is the environment a service's Main needs to run as its own
// process against e: e's NATS (a cluster's every node, and its replicas),
// the database in dataDir (give New the same
// StoreDir to share it), any free HTTP address and e's Prime simulator,
// tried again every second while it does not answer, as e.Prime does;
// extra adds to it or overrides.
func (e *Env) MainVars(dataDir string, extra map[string]string) map[string]string {
	prime := e.Sim.ClientConfig(e.SimURL)
	vars := map[string]string{
		"NATS_URL":             e.natsURL,
		"DATA_DIR":             dataDir,
		"HTTP_ADDR":            "127.0.0.1:0",
		"PRIME_API_URL":        prime.URL,
		"PRIME_CLIENT_ID":      prime.ClientID,
		"PRIME_CLIENT_SECRET":  prime.ClientSecret,
		"PRIME_USERNAME":       prime.Username,
		"PRIME_PASSWORD":       prime.Password,
		"PRIME_OUTAGE_BACKOFF": "1s",
	}
	if e.replicas > 0 {
		vars["NATS_STREAM_REPLICAS"] = strconv.Itoa(e.replicas)
	}
	maps.Copy(vars, extra)
	return vars
}

// RunMain runs a service's Main with vars as its environment until the
// returned stop is called; stop fails the test unless Main then returns nil
// within 30 seconds. logs is what Main logged.
func (e *Env) RunMain(main func(ctx context.Context, getenv func(string) string, stderr io.Writer) error, vars map[string]string) (logs *Buffer, stop func()) {
	e.T.Helper()
	logs = &Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- main(ctx, func(k string) string { return vars[k] }, logs) }()
	stop = func() {
		e.T.Helper()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				e.T.Errorf("Main did not stop cleanly: %v", err)
			}
		case <-time.After(30 * time.Second):
			e.T.Fatal("Main did not stop")
		}
	}
	return logs, stop
}
