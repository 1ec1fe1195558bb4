package dryrun_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/dryrun"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
	"github.com/ethosbuilding/primeflow/pkg/sms"
	"github.com/matryer/is"
)

// The SMS sender and a sender of any other message type are one Sink each.
var _ sms.Sender = dryrun.Sink[sms.Message]{}

// outside is where a dry run must not send: it counts what reaches it.
func outside(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { n.Add(1) }))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestConfigPath(t *testing.T) {
	is := is.New(t)
	is.Equal(dryrun.Config{DataDir: "/var/lib/primeflow"}.Path("sms"), "/var/lib/primeflow/dryrun/sms.jsonl") // under DATA_DIR by default
	is.Equal(dryrun.Config{Dir: "/shadow", DataDir: "/x"}.Path("optimoroute"), "/shadow/optimoroute.jsonl")   // or DRY_RUN_DIR
}

func TestSinkRecordsEverythingAndSendsNothing(t *testing.T) {
	is := is.New(t)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	cfg := dryrun.Config{Dir: filepath.Join(t.TempDir(), "records")}
	sink, err := dryrun.OpenSink[sms.Message](cfg, "sms", log)
	is.NoErr(err)
	is.True(strings.Contains(logs.String(), "SEND_DRY_RUN is on: sms is recorded, NOT SENT")) // said loudly at start

	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			is.NoErr(sink.Send(context.Background(), sms.Message{ID: int64(i + 1), To: "+61400000000", Body: "MAKE SAFE", Source: "makesafe", Attempt: 1}))
		})
	}
	wg.Wait()
	is.NoErr(sink.Recorder.Close())
	recs, err := dryrun.Read(cfg.Path("sms"))
	is.NoErr(err)
	is.Equal(len(recs), 20) // every message, one line each, whatever the concurrency
	seen := map[string]bool{}
	for _, r := range recs {
		is.Equal(r.Kind, "sms")
		is.True(strings.Contains(string(r.Body), `"To":"+61400000000"`)) // as it would have gone
		seen[string(r.Body)] = true
	}
	is.Equal(len(seen), 20) // none twice
}

func TestOptimoRouteIsAnsweredInTheProcess(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	srv, reached := outside(t)
	cfg := dryrun.Config{Dir: t.TempDir()}
	var logs bytes.Buffer
	opt, err := dryrun.OpenOptimoRoute(cfg, "the-real-key", slog.New(slog.NewTextHandler(&logs, nil)))
	is.NoErr(err)
	is.True(strings.Contains(logs.String(), "OPTIMOROUTE_DRY_RUN is on")) // said loudly at start
	oc, err := optimoroute.New(optimoroute.Config{APIURL: srv.URL + "/v1", APIKey: "the-real-key"}, opt)
	is.NoErr(err)

	res, err := oc.CreateOrUpdateOrders(ctx, []optimoroute.Order{{OrderNo: "order-1", Type: "T", Date: "2026-10-05", Duration: 60,
		Location: &optimoroute.Location{Address: "12 Smith St, Richmond VIC 3121"}}})
	is.NoErr(err)
	is.Equal(len(res), 1)
	is.NoErr(res[0].Err) // answered as OptimoRoute would
	started, err := oc.StartPlanning(ctx, optimoroute.StartPlanningRequest{Date: "2026-10-05"})
	is.NoErr(err)
	flowtest.Eventually(t, "the plan finishes", func() bool {
		st, err := oc.GetPlanningStatus(ctx, started.PlanningID)
		return err == nil && st.Status == optimoroute.PlanningFinished
	})
	routes, err := oc.GetRoutes(ctx, "2026-10-05")
	is.NoErr(err)
	is.True(len(routes) > 0) // the day planned, its order on a route
	_, err = oc.DeleteOrders(ctx, []string{"order-1"})
	is.NoErr(err)

	is.Equal(reached.Load(), int64(0)) // nothing left the process
	recs, err := dryrun.Read(cfg.Path(dryrun.KindOptimoRoute))
	is.NoErr(err)
	var ops []string
	for _, r := range recs {
		ops = append(ops, r.Op)
	}
	is.Equal(ops, []string{optimoroute.OpCreateOrUpdateOrders, optimoroute.OpStartPlanning, optimoroute.OpDeleteOrders}) // every write, in order; reads are not writes
	is.True(strings.Contains(string(recs[0].Body), `"orderNo":"order-1"`))                                               // with what it would have written
	file, err := os.ReadFile(cfg.Path(dryrun.KindOptimoRoute))
	is.NoErr(err)
	is.True(!strings.Contains(string(file), "the-real-key")) // never the key
}

// The records hold SMS bodies and customers' phone numbers: readable by
// their owner only, in a folder of the owner's when it is made, and a file
// an earlier release made readable by others is narrowed when it is opened.
func TestRecordsAreTheOwnersOnly(t *testing.T) {
	is := is.New(t)
	log := slog.New(slog.DiscardHandler)
	dir := filepath.Join(t.TempDir(), "dryrun")
	rec, err := dryrun.Open(filepath.Join(dir, "sms.jsonl"), log)
	is.NoErr(err)
	is.NoErr(rec.Record("sms", "", sms.Message{To: "+61400000000", Body: "MAKE SAFE"}))
	is.NoErr(rec.Close())
	mode := func(path string) os.FileMode {
		fi, err := os.Stat(path)
		is.NoErr(err)
		return fi.Mode().Perm()
	}
	is.Equal(mode(dir), os.FileMode(0o700))                             // the folder it made
	is.Equal(mode(filepath.Join(dir, "sms.jsonl")), os.FileMode(0o600)) // the records

	older := filepath.Join(dir, "triage-invite.jsonl")
	is.NoErr(os.WriteFile(older, []byte{}, 0o644))
	is.NoErr(os.Chmod(older, 0o644)) // whatever the umask
	rec, err = dryrun.Open(older, log)
	is.NoErr(err)
	is.NoErr(rec.Close())
	is.Equal(mode(older), os.FileMode(0o600)) // narrowed
}
