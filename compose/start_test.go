package compose_test

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/nats-io/nats-server/v2/server"
)

// TestServicesStartWithComposeEnvironment builds each service (in the
// workspace, as make build does, sharing the tests' build cache: the
// image's GOWORK=off build would rebuild every dependency, minutes in CI)
// and starts it with the environment
// docker-compose.yml gives it (.env.example's placeholders), against a
// 3-node NATS cluster run from compose/nats/nats-N.conf (hosts and ports
// rewritten for one machine) and a migrated SQLite file in place of SQL
// Server: a value compose sets that a service refuses (a bad type, a
// missing required variable, SMS_CLAIM_LEASE not above SMS_SEND_TIMEOUT, a
// max_payload ingest cannot live with, R3 streams the cluster cannot hold)
// fails here, where docker compose would leave the container restarting.
// Healthy means /healthz answers 200 to compose/healthcheck's request.
func TestServicesStartWithComposeEnvironment(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts every service: not with -short")
	}
	p := loadProject(t)
	root := repoRoot(t)
	bin := t.TempDir()

	var wg sync.WaitGroup
	errs := make(chan error, len(appServices)+1)
	for _, name := range append([]string{"primectl"}, appServices...) {
		wg.Go(func() {
			cmd := exec.Command("go", "build", "-o", filepath.Join(bin, name), "./cmd/"+name)
			cmd.Dir = filepath.Join(root, "services", name)
			if out, err := cmd.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("build %s: %v\n%s", name, err, out)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	natsURL := startCluster(t, p)
	db := "sqlite:" + filepath.Join(t.TempDir(), "primeflow.db")
	migrate := exec.Command(filepath.Join(bin, "primectl"), "migrate")
	migrate.Env = []string{"DATABASE_URL=" + db}
	if out, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("primectl migrate: %v\n%s", err, out)
	}
	// nats-streams, the operators' step, before any service; then the
	// tools' primectl, as the read-only user, finds it all as defined.
	for _, step := range []struct {
		service string
		args    []string
	}{{"nats-streams", nil}, {"primectl", []string{"streams", "check"}}} {
		s := service(t, p, step.service)
		cmd := exec.Command(filepath.Join(bin, "primectl"), append(s.Command, step.args...)...)
		cmd.Env = append(composeEnv(t, p, s, natsURL(s)), "DATABASE_URL="+db)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: primectl %s: %v\n%s", step.service, strings.Join(cmd.Args[1:], " "), err, out)
		}
	}

	for _, name := range appServices {
		t.Run(name, func(t *testing.T) {
			s := service(t, p, name)
			port := freePort(t)
			vars := append(composeEnv(t, p, s, natsURL(s)), "DATABASE_URL="+db, fmt.Sprintf("HTTP_ADDR=127.0.0.1:%d", port))
			health := port
			if s.Environment["OPS_ADDR"] != nil {
				health = freePort(t)
				vars = append(vars, fmt.Sprintf("OPS_ADDR=127.0.0.1:%d", health))
			}
			if s.Environment["TRIAGE_INITIAL_CONTACT_MADE_STATUS_ID"] != nil {
				// .env.example's placeholder, which job-mirror refuses: a
				// status GUID, as an operator sets it.
				vars = append(vars, "TRIAGE_INITIAL_CONTACT_MADE_STATUS_ID=3c1f4e2a-7b6d-4c8e-9a0f-1d2e3f4a5b6c")
			}
			cmd := exec.Command(filepath.Join(bin, name))
			cmd.Env = vars
			proc := startProcess(t, name, cmd)
			waitFor(t, 60*time.Second, name+": /healthz 200 with compose's environment", func() bool {
				proc.failIfExited(t)
				req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/healthz", health), nil)
				req.SetBasicAuth(env(s, "ADMIN_USER"), p.Environment["ADMIN_PASSWORD"])
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return false
				}
				resp.Body.Close()
				return resp.StatusCode == http.StatusOK // healthy, as compose/healthcheck sees it
			})
		})
	}
}

// composeEnv is the environment compose gives s, changed only where the
// stack's hosts are: natsURL for the cluster, the secret files written
// here, and no database password (SQLite has none; the caller gives
// DATABASE_URL).
func composeEnv(t *testing.T, p *types.Project, s types.ServiceConfig, natsURL string) []string {
	t.Helper()
	var vars []string
	for k, v := range s.Environment {
		if v != nil && k != "DATABASE_PASSWORD_FILE" && k != "DATABASE_URL" {
			vars = append(vars, k+"="+*v)
		}
	}
	vars = slices.DeleteFunc(vars, func(v string) bool { return strings.HasPrefix(v, "NATS_URL=") })
	return append(append(vars, "NATS_URL="+natsURL), secretFiles(t, p, s)...)
}

// startCluster runs compose/nats/nats-N.conf as three servers in this
// process, on free ports of 127.0.0.1, and returns what a service's NATS_URL
// becomes: compose's, with each node's host and port rewritten.
func startCluster(t *testing.T, p *types.Project) func(types.ServiceConfig) string {
	t.Helper()
	nodes := []string{"nats-1", "nats-2", "nats-3"}
	client, route := map[string]int{}, map[string]int{}
	var routes []string
	for _, n := range nodes {
		client[n], route[n] = freePort(t), freePort(t)
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", route[n]))
	}
	for _, n := range nodes {
		setNATSPasswords(t, service(t, p, n))
		opts, err := server.ProcessConfigFile(filepath.Join("nats", n+".conf"))
		if err != nil {
			t.Fatalf("%s.conf: %v", n, err)
		}
		opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", client[n], 0
		opts.Cluster.Host, opts.Cluster.Port = "127.0.0.1", route[n]
		opts.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		opts.StoreDir = t.TempDir()
		opts.NoSigs, opts.NoLog = true, true
		ns, err := server.NewServer(opts)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		ns.Start()
		t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
		if !ns.ReadyForConnections(10 * time.Second) {
			t.Fatalf("%s: not ready", n)
		}
	}
	return func(s types.ServiceConfig) string {
		var out []string
		for _, raw := range strings.Split(env(s, "NATS_URL"), ",") {
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatalf("NATS_URL %q: %v", raw, err)
			}
			port, ok := client[u.Hostname()]
			if !ok {
				t.Fatalf("NATS_URL names %s, which is not a node", u.Host)
			}
			u.Host = fmt.Sprintf("127.0.0.1:%d", port)
			out = append(out, u.String())
		}
		return strings.Join(out, ",")
	}
}

// secretFiles writes the secrets s mounts, from .env.example's values as
// compose would, and returns the variables that name them in place of
// compose's /run/secrets paths.
func secretFiles(t *testing.T, p *types.Project, s types.ServiceConfig) []string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{}
	for _, m := range s.Secrets {
		name := m.Target
		if name == "" {
			name = m.Source
		}
		path := filepath.Join(dir, filepath.Base(name))
		if err := os.WriteFile(path, []byte(p.Environment[p.Secrets[m.Source].Environment]), 0o400); err != nil {
			t.Fatal(err)
		}
		files["/run/secrets/"+filepath.Base(name)] = path
	}
	var vars []string
	for k, v := range s.Environment {
		if v == nil || !strings.HasSuffix(k, "_FILE") || k == "DATABASE_PASSWORD_FILE" {
			continue
		}
		path, ok := files[*v]
		if !ok {
			t.Fatalf("%s: %s=%s is not a secret it mounts", s.Name, k, *v)
		}
		vars = append(vars, k+"="+path)
	}
	return vars
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (w *syncWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(b)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.String()
}

// process is a program a test runs: stopped when the test ends (an
// interrupt, a kill after 30s), its stderr logged if the test failed.
type process struct {
	name   string
	exited chan error
	stderr *syncWriter
}

func startProcess(t *testing.T, name string, cmd *exec.Cmd) *process {
	t.Helper()
	p := &process{name: name, exited: make(chan error, 1), stderr: &syncWriter{w: &bytes.Buffer{}}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("%s's log:\n%s", name, p.stderr.String())
		}
	})
	return p
}

// failIfExited fails the test if the process has exited.
func (p *process) failIfExited(t *testing.T) {
	t.Helper()
	select {
	case err := <-p.exited:
		p.exited <- err
		t.Fatalf("%s exited: %v\n%s", p.name, err, p.stderr.String())
	default:
	}
}

// waitFor polls cond every 200ms until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", d, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
