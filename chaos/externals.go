package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/delivery"
	"github.com/ethosbuilding/primeflow/pkg/graphsim"
	"github.com/ethosbuilding/primeflow/pkg/optimosim"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
)

// Latencies of the outside world: long enough that a kill often lands while
// a call is in flight.
const (
	primeLatency   = 150 * time.Millisecond
	optimoLatency  = 200 * time.Millisecond
	gatewayLatency = 300 * time.Millisecond
)

// externals are what the pipeline talks to outside itself, served by the
// harness on one address: Prime (/prime), OptimoRoute (/optimoroute), the
// mailbox of Prime's new-job emails (/graph), the SMS gateway (/sms) and the
// triage invite endpoint (/invites). They are never killed.
type externals struct {
	prime   *primesim.Sim
	optimo  *optimosim.Sim
	graph   *graphsim.Sim
	sms     *gateway
	invites *gateway
	url     string
	srv     *http.Server
}

func startExternals(dir string, seed uint64) (*externals, error) {
	ps, err := primesim.New(primesim.Options{Seed: seed})
	if err != nil {
		return nil, err
	}
	e := &externals{prime: ps, optimo: optimosim.New(optimosim.Options{PlanningDuration: time.Second}), graph: graphsim.New(graphsim.Options{}),
		sms: &gateway{posts: map[string]int{}}, invites: &gateway{posts: map[string]int{}}}
	e.calm()
	mux := http.NewServeMux()
	mux.Handle("/prime/", http.StripPrefix("/prime", e.prime))
	mux.Handle("/optimoroute/", http.StripPrefix("/optimoroute", e.optimo))
	mux.Handle("/graph/", http.StripPrefix("/graph", e.graph))
	mux.Handle("/sms", e.sms)
	mux.Handle("/invites", e.invites)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e.url = "http://" + ln.Addr().String()
	e.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go e.srv.Serve(ln)
	return e, nil
}

// calm takes every fault back: only the latencies stay.
func (e *externals) calm() {
	e.prime.SetFaults(primesim.Faults{Latency: primeLatency})
	e.optimo.ClearFaults()
	e.optimo.SetLatency("", optimoLatency)
	e.graph.SetFaults(graphsim.Faults{})
}

func (e *externals) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e.srv.Shutdown(ctx)
}

// gateway is an endpoint a send queue posts to: the SMS gateway makesafe
// posts to, the triage invite endpoint job-mirror posts to. It counts the
// posts that reach it by Idempotency-Key, before it answers (slowly): a post
// whose answer a kill cuts off still reached it.
type gateway struct {
	mu    sync.Mutex
	posts map[string]int
}

func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil && !json.Valid(body) {
		err = errors.New("the body is not JSON")
	}
	key := r.Header.Get(delivery.IdempotencyKeyHeader)
	if err == nil && key == "" {
		err = errors.New("no " + delivery.IdempotencyKeyHeader)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	g.mu.Lock()
	g.posts[key]++
	g.mu.Unlock()
	select {
	case <-time.After(gatewayLatency):
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"accepted":true}`))
}

// received is the posts by Idempotency-Key.
func (g *gateway) received() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]int, len(g.posts))
	for k, n := range g.posts {
		out[k] = n
	}
	return out
}
