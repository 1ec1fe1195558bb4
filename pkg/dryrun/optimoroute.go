package dryrun

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"strings"

	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
	"github.com/ethosbuilding/primeflow/pkg/optimosim"
)

// KindOptimoRoute is the kind of OptimoRoute's records.
const KindOptimoRoute = "optimoroute"

// optimoWrites are the operations that change what OptimoRoute holds: the
// ones recorded.
var optimoWrites = map[string]bool{
	optimoroute.OpCreateOrder: true, optimoroute.OpCreateOrUpdateOrders: true, optimoroute.OpDeleteOrder: true,
	optimoroute.OpDeleteOrders: true, optimoroute.OpStartPlanning: true, optimoroute.OpStopPlanning: true,
}

// OptimoRoute returns the HTTP client an OptimoRoute client of a dry run
// uses (optimoroute.WithHTTPClient): every request is answered inside the
// process by a simulator (pkg/optimosim: it keeps the orders written, plans
// a day in two seconds, builds its routes), so none leaves the process, and
// each write — orders created, updated or deleted, planning started or
// stopped — is recorded with its body. key is the client's API key, which
// the simulator is given so the client's requests pass; it is never
// recorded. What the simulator holds lasts as long as the process, and is
// the process's alone: the order runs and the plan runs must share one
// client (bin/primeflow) for the plans to see the orders.
func OptimoRoute(rec *Recorder, key string) *http.Client {
	return &http.Client{Transport: &optimoTransport{rec: rec, sim: optimosim.New(optimosim.Options{APIKey: key})}}
}

// OpenOptimoRoute opens the OptimoRoute recorder under cfg and returns the
// client option of a dry run, saying loudly in the log that OptimoRoute is
// not written.
func OpenOptimoRoute(cfg Config, key string, log *slog.Logger) (optimoroute.Option, error) {
	rec, err := Open(cfg.Path(KindOptimoRoute), log)
	if err != nil {
		return nil, err
	}
	log.Warn("OPTIMOROUTE_DRY_RUN is on: OptimoRoute is answered inside the process and NOT WRITTEN; its writes are recorded", "file", rec.Path())
	return optimoroute.WithHTTPClient(OptimoRoute(rec, key)), nil
}

// optimoTransport serves requests from the simulator, in the process.
type optimoTransport struct {
	rec *Recorder
	sim *optimosim.Sim
}

func (t *optimoTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	op := path.Base(req.URL.Path)
	if optimoWrites[op] {
		if err := t.rec.RecordJSON(KindOptimoRoute, op, body); err != nil {
			return nil, err // not recorded: not answered either
		}
	}
	in := req.Clone(req.Context())
	in.URL.Path, in.URL.RawPath = "/"+op, ""
	in.Body = io.NopCloser(bytes.NewReader(body))
	w := &response{header: http.Header{}, status: http.StatusOK}
	if strings.HasPrefix(op, "_") {
		w.status = http.StatusNotFound // the simulator's control routes are not OptimoRoute's
	} else {
		t.sim.ServeHTTP(w, in)
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)), StatusCode: w.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.header, Body: io.NopCloser(&w.body), ContentLength: int64(w.body.Len()), Request: req,
	}, nil
}

// response is an http.ResponseWriter that keeps what it is given.
type response struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (r *response) Header() http.Header { return r.header }

func (r *response) WriteHeader(status int) {
	if !r.wrote {
		r.status, r.wrote = status, true
	}
}

func (r *response) Write(b []byte) (int, error) {
	r.wrote = true
	return r.body.Write(b)
}
