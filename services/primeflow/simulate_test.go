package primeflow_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/optimosim"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/services/primeflow"
	"github.com/matryer/is"
)

// realPrime is what bin/primeflow needs to start on a real Prime (here a
// simulator of the test's own, which bin/primeflow cannot tell from Prime):
// its credentials, and the senders a real Prime needs, recorded (a shadow
// run's SEND_DRY_RUN).
func realPrime(t *testing.T) map[string]string {
	t.Helper()
	sim, err := primesim.New(primesim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	pc := sim.ClientConfig(srv.URL)
	return map[string]string{
		"DATA_DIR": t.TempDir(), "HTTP_ADDR": flowtest.FreeAddr(t), "NATS_LISTEN": flowtest.FreeAddr(t), "SIM_ADDR": flowtest.FreeAddr(t),
		"NATS_MONITOR_LISTEN": "off", "PRIME_WEBHOOK_API_KEY": apiKey, "ADMIN_USER": admin, "ADMIN_PASSWORD": password,
		"PRIME_API_URL": pc.URL, "PRIME_CLIENT_ID": pc.ClientID, "PRIME_CLIENT_SECRET": pc.ClientSecret,
		"PRIME_USERNAME": pc.Username, "PRIME_PASSWORD": pc.Password,
		"TRIAGE_INITIAL_CONTACT_MADE_STATUS_ID": "3c1f4e2a-7b6d-4c8e-9a0f-1d2e3f4a5b6c", "MAKESAFE_SMS_TO": "+61400000000",
		"SEND_DRY_RUN": "true", "AI_SUMMARY_NUDGE_URL": "off", "JOBS_SWEEP_EVERY": "off",
	}
}

// launch runs Main with env until it has started, or has returned; it
// returns its logs and Main's error (nil once it started). A process that
// started runs until the test ends.
func launch(t *testing.T, env map[string]string) (*flowtest.Buffer, error) {
	t.Helper()
	var stdout, stderr flowtest.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- primeflow.Main(ctx, func(k string) string { return env[k] }, &stdout, &stderr) }()
	deadline := time.After(60 * time.Second)
	for !strings.Contains(stderr.String(), "primeflow started") {
		select {
		case err := <-done:
			cancel()
			return &stderr, err
		case <-deadline:
			cancel()
			t.Fatalf("neither started nor refused:\n%s", stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("primeflow did not stop cleanly: %v", err)
		}
	})
	return &stderr, nil
}

// Once Prime is real, no outside API is simulated unless SIMULATE names it:
// no OptimoRoute key is refused rather than have the orders of real jobs go
// to a simulator with an info line, and no Graph credentials leave the mail
// intake off rather than reading a simulated mailbox anyone on the host
// (or a page in a browser there) could fill (issue 27 §6).
func TestRealPrimeRunsOnNoSimulatorItDidNotName(t *testing.T) {
	t.Run("no OptimoRoute key", func(t *testing.T) {
		is := is.New(t)
		_, err := launch(t, realPrime(t))
		is.True(err != nil)                                                // refused
		is.True(strings.Contains(err.Error(), "OPTIMOROUTE_API_KEY"))      // naming the key
		is.True(strings.Contains(err.Error(), "SIMULATE=optimoroute"))     // and the way to ask for the simulator
		is.True(strings.Contains(err.Error(), "OPTIMOROUTE_DRY_RUN=true")) // or a shadow run
	})

	t.Run("no Graph credentials", func(t *testing.T) {
		is := is.New(t)
		env := realPrime(t)
		env["OPTIMOROUTE_API_KEY"], env["OPTIMOROUTE_API_URL"] = optimosim.DefaultAPIKey, "http://127.0.0.1:9/v1"
		logs, err := launch(t, env)
		is.NoErr(err)                                                      // it runs
		is.True(strings.Contains(logs.String(), "the mail intake is off")) // saying the mail intake is off
		is.True(!strings.Contains(logs.String(), "the mail intake reads"))
		_, dialErr := net.DialTimeout("tcp", env["SIM_ADDR"], time.Second)
		is.True(dialErr != nil) // and serving no simulator
	})

	t.Run("simulators named", func(t *testing.T) {
		is := is.New(t)
		env := realPrime(t)
		env["SIMULATE"], env["SIM_TOKEN"] = "optimoroute, graph", simToken
		logs, err := launch(t, env)
		is.NoErr(err) // it runs
		is.True(strings.Contains(logs.String(), "using the OptimoRoute simulator"))
		is.True(strings.Contains(logs.String(), "the mail intake reads the Graph simulator's mailbox"))
		is.True(!strings.Contains(logs.String(), "using the Prime simulator")) // Prime stays real
		res, err := http.Post("http://"+env["SIM_ADDR"]+"/graph/_sim/messages", "text/plain", strings.NewReader(`{"subject":"New Job"}`))
		is.NoErr(err)
		res.Body.Close()
		is.Equal(res.StatusCode, http.StatusUnauthorized)                                  // a cross-origin text/plain POST is refused
		post(t, "http://"+env["SIM_ADDR"]+"/graph/_sim/messages", `{"subject":"New Job"}`) // JSON with the token is taken
	})

	for _, tc := range []struct{ name, simulate, says string }{
		{"a simulator and the real one", "prime,optimoroute", `SIMULATE="prime,optimoroute": names prime, and PRIME_API_URL is set`},
		{"a name that is no simulator", "optimoroute,printer", `"printer" is not a simulator`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			env := realPrime(t)
			env["SIMULATE"] = tc.simulate
			_, err := launch(t, env)
			is.True(err != nil)                             // refused
			is.True(strings.Contains(err.Error(), tc.says)) // saying why
		})
	}

	// Any of Prime's credentials makes Prime real (issue 27's review):
	// with PRIME_API_URL unset, bin/primeflow ran the Prime simulator, with
	// an info line, beside the real credentials and a live OptimoRoute key.
	for _, credential := range []string{"PRIME_CLIENT_ID", "PRIME_CLIENT_SECRET", "PRIME_USERNAME", "PRIME_PASSWORD"} {
		t.Run(credential+" without PRIME_API_URL", func(t *testing.T) {
			is := is.New(t)
			env := realPrime(t)
			env["OPTIMOROUTE_API_KEY"], env["OPTIMOROUTE_API_URL"] = optimosim.DefaultAPIKey, "http://127.0.0.1:9/v1"
			for _, k := range []string{"PRIME_API_URL", "PRIME_CLIENT_ID", "PRIME_CLIENT_SECRET", "PRIME_USERNAME", "PRIME_PASSWORD"} {
				if k != credential {
					delete(env, k)
				}
			}
			_, err := launch(t, env)
			is.True(err != nil)                                                                                   // refused
			is.True(strings.Contains(err.Error(), "PRIME_API_URL (not set): is required: "+credential+" is set")) // naming the URL, and why
		})
	}
	t.Run("SIMULATE=prime beside Prime's credentials", func(t *testing.T) {
		is := is.New(t)
		env := realPrime(t)
		delete(env, "PRIME_API_URL")
		env["SIMULATE"], env["SIM_TOKEN"] = "prime,optimoroute", simToken
		_, err := launch(t, env)
		is.True(err != nil)                                                               // refused
		is.True(strings.Contains(err.Error(), `names prime, and PRIME_CLIENT_ID is set`)) // the simulator or the real one
	})

	t.Run("no Prime, and SIMULATE without it", func(t *testing.T) {
		is := is.New(t)
		env := realPrime(t)
		for _, k := range []string{"PRIME_API_URL", "PRIME_CLIENT_ID", "PRIME_CLIENT_SECRET", "PRIME_USERNAME", "PRIME_PASSWORD"} {
			delete(env, k)
		}
		env["SIMULATE"] = "optimoroute"
		_, err := launch(t, env)
		is.True(err != nil)                                                                                          // refused
		is.True(strings.Contains(err.Error(), "PRIME_API_URL (not set): is required: SIMULATE does not name prime")) // naming Prime
	})
}
