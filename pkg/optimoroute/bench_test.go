package optimoroute_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
	"github.com/ethosbuilding/primeflow/pkg/optimosim"
)

// BenchmarkOrderWrites writes 1,000 orders in chunks of 500 and, as the
// baseline in the same run, one order a call. It reports calls per order
// and how many times faster the chunked writes are.
func BenchmarkOrderWrites(b *testing.B) {
	const n = 1000
	sim := optimosim.New(optimosim.Options{APIKey: testKey})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	c, err := optimoroute.New(optimoroute.Config{APIURL: srv.URL, APIKey: testKey})
	if err != nil {
		b.Fatal(err)
	}
	orders := make([]optimoroute.Order, n)
	for i := range orders {
		orders[i] = order(fmt.Sprintf("B%04d", i), "2026-03-02")
	}
	ctx := context.Background()
	var chunked, single time.Duration
	for b.Loop() {
		start := time.Now()
		for i := range orders {
			if _, err := c.CreateOrUpdateOrders(ctx, orders[i:i+1]); err != nil {
				b.Fatal(err)
			}
		}
		single += time.Since(start)

		before := c.Calls()[optimoroute.OpCreateOrUpdateOrders]
		start = time.Now()
		if _, err := c.CreateOrUpdateOrders(ctx, orders); err != nil {
			b.Fatal(err)
		}
		chunked += time.Since(start)
		b.ReportMetric(float64(c.Calls()[optimoroute.OpCreateOrUpdateOrders]-before)/n, "calls/order")
	}
	b.ReportMetric(float64(single)/float64(chunked), "x-faster-than-one-a-call")
}
