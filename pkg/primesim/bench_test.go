package primesim_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
)

// BenchmarkGetJob measures pkg/prime calls per second against the simulator
// and, in the same run, against a bare handler that answers the same bytes
// with no work at all. sim/baseline near 1 means the simulator adds little
// to the cost of a call.
func BenchmarkGetJob(b *testing.B) {
	const calls, workers = 3000, 8
	sim, err := primesim.New(primesim.Options{})
	if err != nil {
		b.Fatal(err)
	}
	job := sim.NewJob()
	doc := getDoc(b, sim, job.ID)

	baseline := http.NewServeMux()
	baseline.HandleFunc("POST /oauth/token", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"token_type":"Bearer","expires_in":21600,"access_token":"t"}`))
	})
	baseline.HandleFunc("GET /jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.api+json")
		_, _ = w.Write(doc)
	})

	run := func(h http.Handler) float64 {
		srv := httptest.NewServer(h)
		defer srv.Close()
		cfg := sim.ClientConfig(srv.URL)
		cfg.RatePerMinute, cfg.RateBurst, cfg.MaxConcurrent = 1<<30, 1<<20, workers
		c, err := prime.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.GetJob(context.Background(), job.ID); err != nil { // token and warm connections
			b.Fatal(err)
		}
		jobs := make(chan struct{}, calls)
		for range calls {
			jobs <- struct{}{}
		}
		close(jobs)
		start := time.Now()
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range jobs {
					if _, err := c.GetJob(context.Background(), job.ID); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return calls / time.Since(start).Seconds()
	}

	b.ResetTimer()
	for b.Loop() {
		base := run(baseline)
		simulated := run(sim)
		b.ReportMetric(base, "baseline-calls/s")
		b.ReportMetric(simulated, "sim-calls/s")
		b.ReportMetric(simulated/base, "sim/baseline")
	}
}

// getDoc is the document the simulator serves for a job.
func getDoc(b *testing.B, sim *primesim.Sim, id string) []byte {
	b.Helper()
	srv := httptest.NewServer(sim)
	defer srv.Close()
	cfg := sim.ClientConfig(srv.URL)
	c, err := prime.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	j, err := c.GetJob(context.Background(), id)
	if err != nil {
		b.Fatal(err)
	}
	return []byte(`{"data":{"type":"jobs","id":"` + j.ID + `","attributes":` + string(j.Raw) + `}}`)
}
