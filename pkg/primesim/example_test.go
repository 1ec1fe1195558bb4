package primesim_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
)

// A simulated Prime mounted under Prime's base path, a client of it, and a
// webhook fired at a receiver the way Prime fires one.
func Example() {
	sim, err := primesim.New(primesim.Options{})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api.prime/v2/", http.StripPrefix("/api.prime/v2", sim))
	mux.HandleFunc("POST /api/prime/webhook", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Printf("webhook: API-Key %s %s\n", r.Header.Get("API-Key"), body)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	job := sim.NewJob()
	alloc := sim.NewMakeSafeAllocation(job.ID)

	cfg := sim.ClientConfig(srv.URL + "/api.prime/v2")
	cfg.RateBurst = 5 // let the token and the first call go back to back
	client, err := prime.New(cfg)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	got, err := client.GetJob(ctx, fmt.Sprint(job.Ref)) // by numeric reference
	if err != nil {
		panic(err)
	}
	fmt.Println("job:", got.ID == job.ID, got.JobNumber)

	ev, err := sim.Webhook(events.ActionCreateAllocation, alloc.ID)
	if err != nil {
		panic(err)
	}
	ev.ID = "allocation-guid" // a fixed value for the printed body
	if err := sim.FireWebhook(ctx, srv.URL+"/api/prime/webhook", "webhook-key", ev); err != nil {
		panic(err)
	}
	fmt.Println("Prime calls:", client.Stats().Requests, sim.Stats().Calls)
	// Output:
	// job: true J012001
	// webhook: API-Key webhook-key {"allocationTypeId":"allocation-guid","eventAction":"create-allocation","jobId":2400001}
	// Prime calls: 2 2
}
