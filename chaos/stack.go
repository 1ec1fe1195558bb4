package chaos

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/proctest"
	"github.com/ethosbuilding/primeflow/services/ingest"
	"github.com/google/uuid"
)

// Services are the binaries a scenario runs, one process each; the mail
// scenario runs mailService as well.
var Services = []string{"ingest", "resolver", "job-mirror", "child-mirror", "newjob-pipeline", "makesafe", "optimo-create", "optimo-plan"}

// triageStatus is the status GUID job-mirror queues a triage invite on;
// the workload's second status change moves jobs to it.
const triageStatus = "3c1f4e2a-7b6d-4c8e-9a0f-1d2e3f4a5b6c"

// stack is a scenario's processes: the NATS nodes and the services.
type stack struct {
	dir        string
	db         string // the SQLite file
	nats       []*proctest.Proc
	names      []string // the services the scenario runs
	services   map[string]*proctest.Proc
	addrs      map[string]string // service → HTTP address
	webhookKey string
	// unhealthy are restarts that did not come up within the start budget.
	mu        sync.Mutex
	unhealthy []string
}

// startBudget is how long a restarted process may take to be healthy: a
// service waits out NATS and the database at start, for as long as a
// fault lasts.
const startBudget = 3 * time.Minute

func startStack(ctx context.Context, opts Options, sc Scenario, dir string, ext *externals, logf func(string, ...any)) (*stack, error) {
	st := &stack{dir: dir, db: filepath.Join(dir, "primeflow.db"), services: map[string]*proctest.Proc{},
		addrs: map[string]string{}, webhookKey: uuid.NewString(), names: Services}
	if sc.Mail {
		st.names = append(slices.Clip(Services), mailService)
	}
	urls, err := st.startNATS(ctx, opts, sc.NATSNodes)
	if err != nil {
		st.stop(logf)
		return nil, err
	}
	migrate := exec.CommandContext(ctx, filepath.Join(opts.Bin, "primectl"), "migrate")
	migrate.Env = []string{"DATABASE_URL=sqlite:" + st.db}
	if out, err := migrate.CombinedOutput(); err != nil {
		st.stop(logf)
		return nil, fmt.Errorf("primectl migrate: %w\n%s", err, out)
	}
	// The operators' step for NATS: the services only check the streams
	// and consumers, and wait until they are as defined.
	apply := exec.CommandContext(ctx, filepath.Join(opts.Bin, "primectl"), "streams", "apply")
	apply.Env = []string{"NATS_URL=" + strings.Join(urls, ","), fmt.Sprintf("NATS_STREAM_REPLICAS=%d", sc.NATSNodes)}
	if out, err := apply.CombinedOutput(); err != nil {
		st.stop(logf)
		return nil, fmt.Errorf("primectl streams apply: %w\n%s", err, out)
	}
	admin := rand.Text()
	prime := ext.prime.ClientConfig(ext.url + "/prime")
	env := []string{
		"NATS_URL=" + strings.Join(urls, ","),
		"DATABASE_URL=sqlite:" + st.db,
		"ADMIN_USER=chaos", "ADMIN_PASSWORD=" + admin,
		"LOG_FORMAT=json", "LOG_LEVEL=info",
		"PRIME_WEBHOOK_API_KEY=" + st.webhookKey,
		"PRIME_API_URL=" + prime.URL, "PRIME_CLIENT_ID=" + prime.ClientID, "PRIME_CLIENT_SECRET=" + prime.ClientSecret,
		"PRIME_USERNAME=" + prime.Username, "PRIME_PASSWORD=" + prime.Password,
		// Prime's budget is not what is under test: the storms are.
		"PRIME_RATE_PER_MINUTE=6000", "PRIME_RATE_BURST=20", "PRIME_TIMEOUT=10s",
		"TRIAGE_INITIAL_CONTACT_MADE_STATUS_ID=" + triageStatus,
		"TRIAGE_INVITE_SEND_URL=" + ext.url + "/invites", "AI_SUMMARY_NUDGE_URL=off",
		"MAKESAFE_SMS_TO=+61400000000", "SMS_SEND_URL=" + ext.url + "/sms",
		"SMS_SEND_TIMEOUT=5s", "SMS_CLAIM_LEASE=15s", "SMS_RETRY_BACKOFF=1s,2s,5s,10s", "SMS_SWEEP_INTERVAL=5s",
		"MAKESAFE_LADDER=2s,4s,6s,8s",
		"OPTIMOROUTE_API_URL=" + ext.url + "/optimoroute", "OPTIMOROUTE_API_KEY=" + ext.optimo.ClientConfig("").APIKey,
		"OPTIMOROUTE_MAX_CONCURRENT=2", "OPTIMOROUTE_TIMEOUT=10s",
		// A killed holder's lock expires by its TTL: 30 s, not 12 minutes,
		// so that the run sees what follows.
		"OPTIMO_CREATE_LOCK_TTL=30s", "OPTIMO_CREATE_LOCK_WAIT=2m", "OPTIMO_PLAN_LOCK_TTL=30s", "OPTIMO_PLAN_LOCK_WAIT=2m",
		"OPTIMO_PLAN_POLL_INTERVAL=1s",
	}
	if sc.NATSNodes > 1 {
		env = append(env, fmt.Sprintf("NATS_STREAM_REPLICAS=%d", sc.NATSNodes))
	}
	if sc.Mail {
		env = append(env, mailEnv(ext)...)
	}
	if sc.PrimeOutage > 0 {
		// The ladder short, so that the outage is far longer than it; and
		// Prime tried again within seconds of its end.
		env = append(env, "RESOLVER_BACKOFF="+outageLadder, "PRIME_OUTAGE_BACKOFF=1s,2s,4s")
	}
	var wg sync.WaitGroup
	errs := make([]error, len(st.names))
	for i, name := range st.names {
		addr, err := proctest.FreeAddr()
		if err != nil {
			st.stop(logf)
			return nil, err
		}
		st.addrs[name] = addr
		p := proctest.New(proctest.Spec{
			Name:         name,
			Path:         filepath.Join(opts.Bin, name),
			Env:          append(append([]string{}, env...), "HTTP_ADDR="+addr),
			LogFile:      filepath.Join(dir, name+".log"),
			Healthz:      &proctest.Healthz{URL: "http://" + addr + "/healthz", User: "chaos", Password: admin},
			StartTimeout: startBudget,
		})
		st.services[name] = p
		wg.Go(func() { errs[i] = p.Restart(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		st.stop(logf)
		return nil, err
	}
	logf("up: %d NATS node(s), %d services", len(st.nats), len(st.services))
	return st, nil
}

// startNATS runs the nodes and returns their client URLs.
func (st *stack) startNATS(ctx context.Context, opts Options, nodes int) ([]string, error) {
	type ports struct{ client, monitor, route int }
	ps := make([]ports, nodes)
	var routes []string
	for i := range ps {
		for _, p := range []*int{&ps[i].client, &ps[i].monitor, &ps[i].route} {
			port, err := proctest.FreePort()
			if err != nil {
				return nil, err
			}
			*p = port
		}
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ps[i].route))
	}
	var urls []string
	var wg sync.WaitGroup
	errs := make([]error, nodes)
	for i, p := range ps {
		name := fmt.Sprintf("nats-%d", i+1)
		conf := fmt.Sprintf("server_name: %s\nlisten: 127.0.0.1:%d\nhttp: 127.0.0.1:%d\nmax_payload: 4MB\njetstream { store_dir: %q }\n",
			name, p.client, p.monitor, filepath.Join(st.dir, name))
		if nodes > 1 {
			conf += fmt.Sprintf("cluster { name: chaos, listen: 127.0.0.1:%d, routes: [%s] }\n", p.route, strings.Join(routes, ", "))
		}
		file := filepath.Join(st.dir, name+".conf")
		if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
			return nil, err
		}
		proc := proctest.New(proctest.Spec{
			Name:         name,
			Path:         opts.NATSServer,
			Args:         []string{"-c", file},
			LogFile:      filepath.Join(st.dir, name+".log"),
			Healthz:      &proctest.Healthz{URL: fmt.Sprintf("http://127.0.0.1:%d/healthz", p.monitor)},
			StartTimeout: startBudget,
		})
		st.nats = append(st.nats, proc)
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", p.client))
		// A cluster node is healthy once it has a leader: start them together.
		wg.Go(func() { errs[i] = proc.Restart(ctx) })
	}
	wg.Wait()
	return urls, errors.Join(errs...)
}

func (st *stack) webhookURL() string { return "http://" + st.addrs["ingest"] + ingest.WebhookPath }

// restart starts p again, as a supervisor would: until it is healthy,
// again after each exit, until ctx ends.
func (st *stack) restart(ctx context.Context, p *proctest.Proc, logf func(string, ...any)) {
	for ctx.Err() == nil {
		err := p.Restart(ctx)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			return
		}
		if !errors.Is(err, proctest.ErrExited) {
			st.mu.Lock()
			st.unhealthy = append(st.unhealthy, fmt.Sprintf("%s not healthy within %s of a restart", p.Name(), startBudget))
			st.mu.Unlock()
		}
		logf("%s did not come back: %v", p.Name(), firstLine(err))
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// all is every process, NATS nodes first.
func (st *stack) all() []*proctest.Proc {
	out := append([]*proctest.Proc{}, st.nats...)
	for _, name := range st.names {
		if p, ok := st.services[name]; ok {
			out = append(out, p)
		}
	}
	return out
}

// upAll starts whatever is down and waits until every process is healthy.
func (st *stack) upAll(ctx context.Context, logf func(string, ...any)) error {
	for _, p := range st.all() {
		if !p.Running() {
			st.restart(ctx, p, logf)
		}
	}
	for _, p := range st.all() {
		if err := p.WaitHealthy(ctx); err != nil {
			return fmt.Errorf("%s: %w", p.Name(), err)
		}
	}
	return ctx.Err()
}

// exits are the processes' exits on their own, and the restarts that never
// became healthy.
func (st *stack) exits() []string {
	var out []string
	for _, p := range st.all() {
		for _, e := range p.Exits() {
			out = append(out, fmt.Sprintf("%s (pid %d) exited on its own at %s: %v: %s", p.Name(), e.PID,
				e.At.Format("15:04:05.000"), e.Err, lastLine(p.IncarnationLog(e.Start))))
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return append(out, st.unhealthy...)
}

// stop stops the services, then the NATS nodes.
func (st *stack) stop(logf func(string, ...any)) {
	var wg sync.WaitGroup
	for _, p := range st.services {
		wg.Go(func() {
			if err := p.Stop(30 * time.Second); err != nil {
				logf("stopping %s: %v", p.Name(), err)
			}
		})
	}
	wg.Wait()
	for _, p := range st.nats {
		if err := p.Stop(30 * time.Second); err != nil {
			logf("stopping %s: %v", p.Name(), err)
		}
	}
}

// lastLine is the last line s holds: what a service says as it exits.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// Packages are the main packages of the binaries a scenario runs, relative
// to the repository's root: the services, mail-intake and primectl.
func Packages() []string {
	out := []string{"./services/primectl/cmd/primectl"}
	for _, name := range append(slices.Clip(Services), mailService) {
		out = append(out, "./services/"+name+"/cmd/"+name)
	}
	return out
}
