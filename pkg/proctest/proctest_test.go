package proctest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/proctest"
	"github.com/matryer/is"
)

// The test binary is also the program the tests run: with PROCTEST_HELPER
// set it plays a service instead of running the tests.
func TestMain(m *testing.M) {
	if mode := os.Getenv("PROCTEST_HELPER"); mode != "" {
		helper(mode, os.Getenv("PROCTEST_ADDR"))
		return
	}
	os.Exit(m.Run())
}

// helper is a service: "serve" answers /healthz 200 (with Basic auth
// admin/pw), exits with status 3 on /exit and cleanly on SIGTERM; "sick"
// answers 503; "crash" says why and exits 2 at once.
func helper(mode, addr string) {
	fmt.Println("helper", mode, "pid", os.Getpid())
	if mode == "crash" {
		fmt.Fprintln(os.Stderr, "boom: refusing to start")
		os.Exit(2)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "admin" || p != "pw" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if mode == "sick" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	mux.HandleFunc("/exit", func(http.ResponseWriter, *http.Request) { os.Exit(3) })
	go func() {
		fmt.Fprintln(os.Stderr, http.ListenAndServe(addr, mux))
		os.Exit(1)
	}()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	<-stop
	fmt.Println("helper stopping")
}

func spec(t *testing.T, mode string) proctest.Spec {
	t.Helper()
	addr, err := proctest.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return proctest.Spec{
		Name:    "helper-" + mode,
		Path:    self,
		Env:     []string{"PROCTEST_HELPER=" + mode, "PROCTEST_ADDR=" + addr},
		LogFile: filepath.Join(t.TempDir(), mode+".log"),
		Healthz: &proctest.Healthz{URL: "http://" + addr + "/healthz", User: "admin", Password: "pw"},
	}
}

func TestStartKillRestartStop(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	p, err := proctest.Start(ctx, spec(t, "serve"))
	is.NoErr(err) // started and healthy
	t.Cleanup(func() { p.Kill() })
	is.True(p.Running())    // running
	is.True(p.Healthy(ctx)) // its /healthz answers 200 with the credentials
	first := p.PID()

	is.NoErr(p.Kill())    // kill -9
	is.True(!p.Running()) // gone once Kill returns
	is.True(!p.Healthy(ctx))
	is.Equal(len(p.Exits()), 0) // a kill is not an exit on its own
	is.True(!alive(first))      // and reaped

	is.NoErr(p.Restart(ctx)) // the same program again, healthy
	is.True(p.PID() != first)
	is.Equal(p.Starts(), 2)
	is.NoErr(p.Stop(10 * time.Second)) // SIGTERM, and a clean exit
	is.Equal(len(p.Exits()), 0)        // nor is a stop

	log := p.Log()
	is.Equal(strings.Count(log, "=== proctest: helper-serve start "), 2)    // both incarnations, in one log
	is.True(strings.Contains(log, "helper serve pid "+strconv.Itoa(first))) // what the first wrote
	is.True(strings.Contains(log, "helper stopping"))                       // and the last
	is.True(strings.HasPrefix(p.IncarnationLog(1), "helper serve pid "+strconv.Itoa(first)))
	is.True(!strings.Contains(p.IncarnationLog(1), "helper stopping")) // one incarnation's lines only
	is.True(strings.Contains(p.IncarnationLog(2), "helper stopping"))
}

func TestAnExitOnItsOwnIsRecorded(t *testing.T) {
	is := is.New(t)
	s := spec(t, "serve")
	p, err := proctest.Start(context.Background(), s)
	is.NoErr(err)
	t.Cleanup(func() { p.Kill() })
	resp, err := http.Get(strings.TrimSuffix(s.Healthz.URL, "/healthz") + "/exit")
	if err == nil {
		resp.Body.Close()
	}
	deadline := time.Now().Add(30 * time.Second)
	for p.Running() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	is.True(!p.Running()) // it exited
	exits := p.Exits()
	is.Equal(len(exits), 1) // recorded, nobody asked for it
	var ee *exec.ExitError
	is.True(errors.As(exits[0].Err, &ee)) // with its exit status
	is.Equal(ee.ExitCode(), 3)
}

func TestStartFailsWhenTheProcessExits(t *testing.T) {
	is := is.New(t)
	p, err := proctest.Start(context.Background(), spec(t, "crash"))
	is.True(errors.Is(err, proctest.ErrExited))                       // Start says it exited
	is.True(strings.Contains(err.Error(), "boom: refusing to start")) // with what it wrote
	is.True(!p.Running())
	is.Equal(len(p.Exits()), 1)                                             // an exit on its own
	is.True(strings.Contains(p.IncarnationLog(p.Exits()[0].Start), "boom")) // whose log is at hand
}

func TestStartGivesUpOnAProcessThatStaysUnhealthy(t *testing.T) {
	is := is.New(t)
	s := spec(t, "sick")
	s.StartTimeout = 500 * time.Millisecond
	p, err := proctest.Start(context.Background(), s)
	is.True(err != nil)                                   // never healthy
	is.True(strings.Contains(err.Error(), "not healthy")) // and says so
	is.True(!errors.Is(err, proctest.ErrExited))
	is.True(!p.Running())       // Start killed it
	is.Equal(len(p.Exits()), 0) // which is not an exit on its own
}

func TestFreePortIsBelowTheEphemeralRange(t *testing.T) {
	is := is.New(t)
	seen := map[int]bool{}
	for range 50 {
		port, err := proctest.FreePort()
		is.NoErr(err)
		is.True(!seen[port]) // never the same twice
		seen[port] = true
		is.True(port >= 10000 && port < ephemeralStart(t)) // out of the kernel's way
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		is.NoErr(err) // and free
		ln.Close()
	}
}

func ephemeralStart(t *testing.T) int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 49152
	}
	n, err := strconv.Atoi(strings.Fields(string(b))[0])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func alive(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}
