package ingest_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/cputime"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/services/ingest"
)

// load is one measured run: webhooks/s, latency percentiles, and the CPU
// the whole process spent per webhook (load generator, server, NATS and
// SQLite together: they share the machine's cores).
type load struct {
	rate     float64
	p50, p99 time.Duration
	cpu      time.Duration
}

// fire posts n webhooks from c concurrent clients and measures them.
func fire(b *testing.B, url string, n, c int) load {
	b.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c, MaxConnsPerHost: c}}
	defer client.CloseIdleConnections()
	lat := make([]time.Duration, n)
	var next sync.Mutex
	i := 0
	cpu0 := cputime.Process()
	start := time.Now()
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			for {
				next.Lock()
				k := i
				i++
				next.Unlock()
				if k >= n {
					return
				}
				body := fmt.Sprintf(`{"eventAction":"change-job-status","jobId":%d,"jobStatusId":"0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"}`, 200000+k)
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
				req.Header.Set("API-Key", apiKey)
				t0 := time.Now()
				res, err := client.Do(req)
				if err != nil {
					b.Errorf("post: %v", err)
					return
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					b.Errorf("post answered %d", res.StatusCode)
					return
				}
				lat[k] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cputime.Process() - cpu0
	slices.Sort(lat)
	return load{rate: float64(n) / elapsed.Seconds(), p50: lat[n/2], p99: lat[n*99/100], cpu: cpu / time.Duration(n)}
}

// BenchmarkIngestAgainstBaseline measures webhook ingest under concurrent
// load — every 200 after the row's durable commit (SQLite, synchronous=FULL)
// — against a baseline measured in the same run: the same router and HTTP
// server with a handler that only reads the body and answers 200. It runs at
// several levels of concurrency, because group commit is what lets ingest
// keep up: the more webhooks arrive together, the more share a commit.
// Target: ratio ≥ 0.5.
func BenchmarkIngestAgainstBaseline(b *testing.B) {
	const n = 4000
	for range b.N {
		// Baseline: the same surface, no store, no NATS.
		r := service.NewRouter(admin)
		r.Public().HandleFunc(ingest.WebhookPath, func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusOK)
		}).Methods(http.MethodPost)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv := &http.Server{Handler: r.Public()}
		go srv.Serve(ln)
		defer srv.Shutdown(context.Background())
		baseURL := "http://" + ln.Addr().String() + ingest.WebhookPath

		h := start(b)
		url := h.url + ingest.WebhookPath
		fire(b, baseURL, 500, 64) // warm up both
		fire(b, url, 500, 64)
		stored := 500

		fmt.Fprintf(os.Stdout, "\ningest under load (%d webhooks a run; baseline: the same server, read body, 200)\n", n)
		fmt.Fprintf(os.Stdout, "  %-8s %-10s %10s %9s %9s %9s %7s\n", "clients", "", "webhooks/s", "p50", "p99", "CPU/req", "ratio")
		for _, c := range []int{16, 64, 256} {
			base := fire(b, baseURL, n, c)
			got := fire(b, url, n, c)
			stored += n
			ratio := got.rate / base.rate
			fmt.Fprintf(os.Stdout, "  %-8d %-10s %10.0f %9s %9s %9s\n", c, "baseline", base.rate, base.p50.Round(time.Microsecond), base.p99.Round(time.Microsecond), base.cpu.Round(time.Microsecond))
			fmt.Fprintf(os.Stdout, "  %-8s %-10s %10.0f %9s %9s %9s %7.2f\n", "", "ingest", got.rate, got.p50.Round(time.Microsecond), got.p99.Round(time.Microsecond), got.cpu.Round(time.Microsecond), ratio)
			b.ReportMetric(got.rate, fmt.Sprintf("webhooks/s@%d", c))
			b.ReportMetric(ratio, fmt.Sprintf("ratio@%d", c))
			b.ReportMetric(float64(got.p99.Microseconds())/1000, fmt.Sprintf("p99-ms@%d", c))
			b.ReportMetric(float64(got.cpu.Microseconds()), fmt.Sprintf("cpu-µs/webhook@%d", c))
		}
		rows, err := h.store.CountWebhookLog(context.Background(), store.LogFilter{})
		if err != nil || rows != stored {
			b.Fatalf("stored %d rows, want %d (%v)", rows, stored, err)
		}
		fmt.Fprintln(os.Stdout, "  CPU/req: the whole process (load generator included) per request")
		fmt.Fprintln(os.Stdout, "  target: ratio ≥ 0.5; every 200 follows the row's durable commit")
	}
}
