// Package primeflow is the whole pipeline in one process — `make run`:
// every service over one embedded nats-server (unless NATS_URL names one),
// one store (SQLite under DATA_DIR unless DATABASE_URL names another), and,
// where no Prime, OptimoRoute or Graph credentials are given, the simulators
// of those APIs, so a newcomer sees the pipeline work end to end. Once
// Prime is real, a simulator stands in only where SIMULATE names it.
package primeflow

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/database"
	"github.com/ethosbuilding/primeflow/pkg/datadir"
	"github.com/ethosbuilding/primeflow/pkg/dryrun"
	"github.com/ethosbuilding/primeflow/pkg/graph"
	"github.com/ethosbuilding/primeflow/pkg/graphsim"
	"github.com/ethosbuilding/primeflow/pkg/logging"
	"github.com/ethosbuilding/primeflow/pkg/metrics"
	"github.com/ethosbuilding/primeflow/pkg/natsserver"
	"github.com/ethosbuilding/primeflow/pkg/opshttp"
	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
	"github.com/ethosbuilding/primeflow/pkg/optimorun"
	"github.com/ethosbuilding/primeflow/pkg/optimosim"
	"github.com/ethosbuilding/primeflow/pkg/outbox"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primebudget"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/pkg/secureurl"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/ethosbuilding/primeflow/pkg/simcontrol"
	"github.com/ethosbuilding/primeflow/pkg/status"
	"github.com/ethosbuilding/primeflow/pkg/version"
	childmirror "github.com/ethosbuilding/primeflow/services/child-mirror"
	"github.com/ethosbuilding/primeflow/services/ingest"
	jobmirror "github.com/ethosbuilding/primeflow/services/job-mirror"
	mailintake "github.com/ethosbuilding/primeflow/services/mail-intake"
	"github.com/ethosbuilding/primeflow/services/makesafe"
	newjobpipeline "github.com/ethosbuilding/primeflow/services/newjob-pipeline"
	optimocreate "github.com/ethosbuilding/primeflow/services/optimo-create"
	optimoplan "github.com/ethosbuilding/primeflow/services/optimo-plan"
	"github.com/ethosbuilding/primeflow/services/resolver"
	"github.com/google/uuid"
	"github.com/gorilla/mux"
)

// Config is the all-in-one process's configuration: the shared service
// settings and every service's own.
type Config struct {
	Logging logging.Config
	Admin   opshttp.Credentials
	// NATSURL empty runs an embedded nats-server listening on NATSListen,
	// with JetStream stored under DataDir/jetstream.
	NATSURL      string `env:"NATS_URL" secret:"true"`
	NATSUser     string `env:"NATS_USER"`
	NATSPassword string `env:"NATS_PASSWORD" secret:"true"`
	NATSListen   string `env:"NATS_LISTEN" envDefault:"127.0.0.1:4222"`
	// NATSMonitorListen is the embedded server's monitoring port (/jsz,
	// what prometheus-nats-exporter reads for stream lag); "off" serves none.
	NATSMonitorListen string `env:"NATS_MONITOR_LISTEN" envDefault:"127.0.0.1:8222"`
	StreamReplicas    int    `env:"NATS_STREAM_REPLICAS"`
	DatabaseURL       string `env:"DATABASE_URL" secret:"true"`
	// DatabasePassword: see service.Config.
	DatabasePassword string `env:"DATABASE_PASSWORD" secret:"true"`
	DataDir          string `env:"DATA_DIR" envDefault:"./data"`
	// HTTPAddr is loopback, as every other port of make run, unless told
	// otherwise (HTTP_ADDR=:8080 for every interface).
	HTTPAddr string `env:"HTTP_ADDR" envDefault:"127.0.0.1:8080"`
	// OpsAddr, when set, serves /healthz, /metrics and the relay trigger, and
	// HTTPAddr the webhook alone; unset, HTTPAddr serves them all.
	OpsAddr string `env:"OPS_ADDR"`
	HTTP    opshttp.ServerConfig
	// SimAddr serves the Prime, OptimoRoute and Graph simulators (under
	// /prime, /optimoroute and /graph) when they stand in for the real APIs.
	// Their clients reach it by plain http, so it is a loopback address or
	// a port on every interface (checkSimAddr).
	SimAddr string `env:"SIM_ADDR" envDefault:"127.0.0.1:8081"`
	// Simulate names the simulators that stand in for outside APIs,
	// comma-separated (prime, optimoroute, graph): unset, every API given
	// no credentials while Prime is simulated too (make run), and none once
	// Prime is real (simulators).
	Simulate string `env:"SIMULATE"`
	// SimToken is what the simulators' control APIs take (/_sim/…,
	// "Authorization: Bearer <token>", pkg/simcontrol); unset, one is made on
	// the first run and kept under DATA_DIR (SimTokenFile).
	SimToken string `env:"SIM_TOKEN" secret:"true"`

	Ingest         ingest.Config
	Resolver       resolver.Config
	JobMirror      jobmirror.Config
	NewJobPipeline newjobpipeline.Config
	ChildMirror    childmirror.Config
	Makesafe       makesafe.Config
	OptimoCreate   optimocreate.Config
	OptimoPlan     optimoplan.Config
	MailIntake     mailintake.Config
	Prime          prime.Config
	PrimeBudget    primebudget.Config
	OptimoRoute    optimoroute.Config
}

// demoSMSTo is where make-safe SMS go in a local run with no
// MAKESAFE_SMS_TO: no SMS leaves the process without SMS_SEND_URL anyway.
const demoSMSTo = "+61400000000"

// The simulators bin/primeflow serves in place of an outside API, as
// SIMULATE names them.
const (
	SimulatePrime       = "prime"
	SimulateOptimoRoute = "optimoroute"
	SimulateGraph       = "graph"
)

// simulators says which outside APIs a simulator stands in for.
type simulators struct{ prime, optimoRoute, graph bool }

func (s simulators) any() bool { return s.prime || s.optimoRoute || s.graph }

// simulators decides which simulators stand in (SIMULATE). Unset, every API
// given no credentials is simulated while Prime is too (make run), and none
// once Prime is real; set, those it names and no other. Production never
// runs on a simulator it did not ask for: an API neither given nor named is
// refused, naming its variables — but for Graph, whose mail intake is then
// off (Main says so) — and so is one both given and named.
func (c Config) simulators(dry dryrun.Config) (simulators, error) {
	realPrime, realOptimo, realGraph := c.Prime.Enabled(), c.OptimoRoute.APIKey != "" || dry.OptimoRoute, c.MailIntake.Graph.Enabled()
	if strings.TrimSpace(c.Simulate) == "" {
		if !realPrime {
			return simulators{prime: true, optimoRoute: !realOptimo, graph: !realGraph}, nil
		}
		if !realOptimo {
			return simulators{}, config.Refuse("OPTIMOROUTE_API_KEY", "is required with a real Prime (PRIME_API_URL): give the key, "+
				"or OPTIMOROUTE_DRY_RUN=true for a shadow run, or SIMULATE=optimoroute for the OptimoRoute simulator")
		}
		return simulators{}, nil
	}
	var s simulators
	var errs []error
	for _, name := range strings.Split(c.Simulate, ",") {
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "":
		case SimulatePrime:
			s.prime = true
		case SimulateOptimoRoute:
			s.optimoRoute = true
		case SimulateGraph:
			s.graph = true
		default:
			errs = append(errs, config.Refuse("SIMULATE", "%q is not a simulator (prime, optimoroute, graph, comma-separated)", name))
		}
	}
	both := func(sim, vars string) error {
		return config.Refuse("SIMULATE", "names %s, and %s is set: the simulator or the real one, not both", sim, vars)
	}
	switch {
	case s.prime && realPrime:
		errs = append(errs, both(SimulatePrime, c.Prime.Given()))
	case !s.prime && !realPrime:
		errs = append(errs, config.Refuse("PRIME_API_URL", "is required: SIMULATE does not name prime"))
	}
	switch {
	case s.optimoRoute && realOptimo:
		errs = append(errs, both(SimulateOptimoRoute, "OPTIMOROUTE_API_KEY (or OPTIMOROUTE_DRY_RUN)"))
	case !s.optimoRoute && !realOptimo:
		errs = append(errs, config.Refuse("OPTIMOROUTE_API_KEY", "is required: SIMULATE does not name optimoroute (OPTIMOROUTE_DRY_RUN=true is a shadow run's)"))
	}
	if s.graph && realGraph {
		errs = append(errs, both(SimulateGraph, "GRAPH_TENANT_ID, GRAPH_CLIENT_ID or GRAPH_CLIENT_SECRET"))
	}
	return s, errors.Join(errs...)
}

// validate refuses every setting the process cannot run with, each naming
// its variable (config.Refusal), before anything binds, connects or writes:
// the shared ones a service checks (service.Config's), the embedded NATS
// server's addresses, each service's own (Config.Validate), Prime's and its
// budget's and OptimoRoute's, and, with a real Prime, what job-mirror,
// child-mirror and makesafe need of a process of their own too
// (ValidateRealPrime); only a run on the Prime simulator goes without a
// triage status and an AI summary nudge, and it or a shadow run (dry.Send)
// without an SMS or triage invite sender. Which simulators stand in is
// checked too (simulators); where one does, the settings it gives are not
// asked for (Prime's address and credentials, Graph's and the mailbox's).
func (c Config) validate(dry dryrun.Config) error {
	sims, simErr := c.simulators(dry)
	ms := c.makesafe()
	jobMirror, childMirror, makesafe := c.JobMirror.Validate, c.ChildMirror.Validate, ms.Validate
	primeAPI := c.Prime.ValidateLimits
	if c.Prime.Enabled() {
		jobMirror = func() error { return c.JobMirror.ValidateRealPrime(dry) }
		childMirror = c.ChildMirror.ValidateRealPrime
		makesafe = func() error { return ms.ValidateRealPrime(dry) }
		primeAPI = c.Prime.Validate
	}
	mailIntake := c.MailIntake.ValidatePolling // the Graph simulator's mailbox is filled in later
	if c.MailIntake.Graph.Enabled() {
		mailIntake = c.MailIntake.Validate
	}
	natsServer := service.CheckNATSURL(c.NATSURL)
	if c.NATSURL == "" {
		natsServer = c.natsServer().Validate()
	}
	return errors.Join(simErr, c.Logging.Validate(), service.Addresses(c.HTTPAddr, c.OpsAddr), checkSimAddr(c.SimAddr, sims.any()),
		natsServer, service.Replicas(c.StreamReplicas), database.Check(c.DatabaseURL, c.DatabasePassword), c.HTTP.Validate(),
		c.Ingest.Validate(), c.Resolver.Validate(), jobMirror(), c.NewJobPipeline.Validate(), childMirror(), makesafe(),
		c.OptimoCreate.Validate(), c.OptimoPlan.Validate(), mailIntake(), primeAPI(), c.PrimeBudget.Validate(), c.OptimoRoute.Validate())
}

// checkSimAddr refuses a SIM_ADDR the simulators' clients could not use
// when any simulator runs: they reach it at opshttp.LocalURL(addr) by
// plain http, which goes to a loopback address alone (secureurl.Check), the
// simulators' credentials as much as any.
func checkSimAddr(addr string, used bool) error {
	if err := config.Address("SIM_ADDR", addr); err != nil || !used {
		return err
	}
	if secureurl.Check(opshttp.LocalURL(addr)) != nil {
		return config.Refuse("SIM_ADDR", "must be a loopback address (127.0.0.1:8081), or a port on every interface (:8081): the simulators' clients reach it by plain http, which goes to this machine alone")
	}
	return nil
}

// makesafe is makesafe's configuration: with neither MAKESAFE_SMS_TO nor
// SMS_SEND_URL, the SMS go to demoSMSTo (the log-only sender says it logs
// them).
func (c Config) makesafe() makesafe.Config {
	ms := c.Makesafe
	if ms.SMSTo == "" && ms.SMS.URL == "" {
		ms.SMSTo = demoSMSTo
	}
	return ms
}

// natsServer is the embedded nats-server's configuration, used when
// NATS_URL is unset.
func (c Config) natsServer() natsserver.Config {
	monitor := c.NATSMonitorListen
	if monitor == "off" {
		monitor = ""
	}
	return natsserver.Config{Listen: c.NATSListen, StoreDir: filepath.Join(c.DataDir, "jetstream"), ServerName: "primeflow", MonitorListen: monitor}
}

// Help is what bin/primeflow --help prints: what it is and the variables
// its Main reads.
func Help() service.Help {
	return service.Help{Name: "primeflow", Docs: []string{"README.md#a-tour-with-make-run", "docs/operations.md"}, Configs: []any{Config{}, dryrun.Config{}},
		Summary: "the whole pipeline in one process (make run): every service over an embedded nats-server (or NATS_URL's), " +
			"SQLite under DATA_DIR (or DATABASE_URL's), and the Prime, OptimoRoute and Graph simulators at SIM_ADDR where no credentials " +
			"of theirs are given (once Prime is real, only those SIMULATE names). A webhook key, an admin password and the simulators' " +
			"control token left unset are made on the first run and kept under DATA_DIR."}
}

// Main runs the pipeline until ctx ends.
func Main(ctx context.Context, getenv func(string) string, stdout, stderr io.Writer) error {
	// Every setting first, all refused at once: nothing is bound, made or
	// written for a configuration the process cannot run with.
	var cfg Config
	var dry dryrun.Config
	if err := config.Load(getenv, config.Read(&cfg, func(c Config) error { return c.validate(dry) }), config.Read(&dry, nil)); err != nil {
		return err
	}
	sims, _ := cfg.simulators(dry) // validate checked it
	log, err := logging.New(stderr, cfg.Logging)
	if err != nil {
		return err
	}

	// Every port first, then the data folder: a port in use, or another
	// bin/primeflow on the same folder, stops the start naming its variable
	// before anything is written.
	bound, err := service.Bind(cfg.HTTP, cfg.HTTPAddr, cfg.OpsAddr)
	if err != nil {
		return err
	}
	defer bound.Close()
	var simLn net.Listener
	if sims.any() {
		if simLn, err = cfg.HTTP.Listen(cfg.SimAddr, "SIM_ADDR: the simulators"); err != nil {
			return err
		}
		defer simLn.Close()
	}
	nsCfg := cfg.natsServer()
	if cfg.NATSURL == "" {
		if err := nsCfg.Free(); err != nil {
			return err
		}
	}
	unlock, err := datadir.Lock(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("DATA_DIR %w: is another bin/primeflow running on it?", err)
	}
	defer unlock()
	fmt.Fprintln(stdout, version.String("primeflow"))
	if err := credentials(stdout, &cfg, sims); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "status page: %s/ (the admin login); bin/primectl status says the same\n", opshttp.LocalURL(cfg.opsAddr()))

	natsURL := cfg.NATSURL
	if natsURL == "" {
		ns, err := natsserver.Start(nsCfg)
		if err != nil {
			return err
		}
		defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
		natsURL = ns.ClientURL()
		monitoring := "off"
		if a := ns.MonitorAddr(); a != nil {
			monitoring = "http://" + a.String()
		}
		log.Info("embedded nats-server", "url", natsURL, "jetstream", nsCfg.StoreDir, "monitoring", monitoring)
	} else {
		// Said at once: a NATS_URL left exported in the shell is otherwise
		// only a wait for streams on a server nobody meant.
		log.Info("NATS_URL is set: connecting to it, no embedded nats-server", "servers", natsHosts(natsURL))
	}
	// One store for every service, so all their transactions share commits.
	// The streams and consumers are applied first, as the operators' step
	// does (primectl streams apply): the services find them made, and one
	// command starts the whole pipeline.
	d, closeDeps, err := service.OpenLog(ctx, "primeflow", service.Config{
		NATSURL: natsURL, NATSUser: cfg.NATSUser, NATSPassword: cfg.NATSPassword, StreamReplicas: cfg.StreamReplicas, ApplyStreams: true,
		DatabaseURL: cfg.DatabaseURL, DatabasePassword: cfg.DatabasePassword, DataDir: cfg.DataDir,
	}, log)
	if err != nil {
		return err
	}
	defer closeDeps()

	simMux := mux.NewRouter()
	// The simulators keep what they hold under DATA_DIR, so a restart
	// serves what the mirror already has and hands out no id twice.
	states := filepath.Join(cfg.DataDir, "simulators")
	if sims.prime {
		state := filepath.Join(states, "prime.json")
		sim, err := primeSimulator(state, cfg.SimToken, time.Now(), log)
		if err != nil {
			return err
		}
		simMux.PathPrefix("/prime/").Handler(http.StripPrefix("/prime", sim))
		// The simulator's address and credentials; the budget (PRIME_RATE_*,
		// PRIME_MAX_CONCURRENT, PRIME_TIMEOUT, PRIME_PAGE_SIZE) stays as set.
		sc := sim.ClientConfig(opshttp.LocalURL(cfg.SimAddr) + "/prime")
		cfg.Prime.URL, cfg.Prime.ClientID, cfg.Prime.ClientSecret = sc.URL, sc.ClientID, sc.ClientSecret
		cfg.Prime.Username, cfg.Prime.Password = sc.Username, sc.Password
		log.Info("using the Prime simulator", "url", cfg.Prime.URL, "state", state)
		if cfg.JobMirror.TriageInitialContactMadeStatusID == "" {
			cfg.JobMirror.TriageInitialContactMadeStatusID = primesim.StatusInitialContactMade
			log.Info("TRIAGE_INITIAL_CONTACT_MADE_STATUS_ID is not set: a job's arrival in the Prime simulator's Initial Contact Made status queues its triage invite",
				"status", primesim.StatusInitialContactMade)
		}
	}
	if sims.optimoRoute {
		state := filepath.Join(states, "optimoroute.json")
		sim, err := optimosim.Open(optimosim.Options{ControlToken: cfg.SimToken}, state)
		if err != nil {
			return err
		}
		simMux.PathPrefix("/optimoroute/").Handler(http.StripPrefix("/optimoroute", sim))
		cfg.OptimoRoute.APIURL = opshttp.LocalURL(cfg.SimAddr) + "/optimoroute"
		cfg.OptimoRoute.APIKey = optimosim.DefaultAPIKey
		log.Info("using the OptimoRoute simulator: no order reaches OptimoRoute", "url", cfg.OptimoRoute.APIURL, "state", state)
	}
	switch {
	case sims.graph:
		sim := graphsim.New(graphsim.Options{ControlToken: cfg.SimToken})
		simMux.PathPrefix("/graph/").Handler(http.StripPrefix("/graph", sim))
		mailboxOfSimulator(&cfg.MailIntake, sim, opshttp.LocalURL(cfg.SimAddr)+"/graph")
		log.Info("the mail intake reads the Graph simulator's mailbox",
			"url", cfg.MailIntake.Graph.APIURL, "user", cfg.MailIntake.User, "folder", cfg.MailIntake.Folder)
	case !cfg.MailIntake.Graph.Enabled():
		log.Warn("GRAPH_TENANT_ID, GRAPH_CLIENT_ID and GRAPH_CLIENT_SECRET are not set: the mail intake is off (SIMULATE=graph reads the Graph simulator's mailbox instead)")
	}

	// One client for every service, spending the deployment's budget in
	// NATS: shared with any other process on the same NATS (NATS_URL).
	pc, budget, err := service.PrimeClient(ctx, d, cfg.Prime, cfg.PrimeBudget)
	if err != nil {
		return err
	}

	r := service.NewRouter(cfg.Admin)
	// The status page: the one process that holds every part of the
	// pipeline may read every part (a service's NATS user may not).
	r.Admin.Handle("/", status.Page(func(ctx context.Context) (status.Report, error) {
		return status.Gather(ctx, status.Sources{Store: d.Store, JS: d.JS, Budget: status.FromBudgetBucket(d.JS, status.FromRegistry(d.Metrics)),
			SyncGrace: cfg.ChildMirror.Drain.EmptyGrace})
	})).Methods(http.MethodGet, http.MethodHead)
	in, err := ingest.New(cfg.Ingest, d, r)
	if err != nil {
		return err
	}
	spenders, err := services(ctx, cfg, dry, d, pc, sims.graph || cfg.MailIntake.Graph.Enabled())
	if err != nil {
		return err
	}
	// The services spend the budget until they have stopped, as each does
	// in a process of its own (service.MainWithPrime).
	runners := []service.Runner{in, service.Spending(budget, service.RunnerFunc(func(ctx context.Context) error {
		runs := make([]func(context.Context) error, len(spenders))
		for i, r := range spenders {
			runs[i] = r.Run
		}
		return service.RunAll(ctx, runs...)
	}))}

	srv, ln, ops := bound.Serve(r, d)
	runners = append(runners, ops...)
	if simLn != nil {
		runners = append(runners, service.Serving(cfg.HTTP.Server(simMux), simLn))
	}
	log.Info("primeflow started", "version", version.Version, "http", ln.Addr().String(), "ops", cfg.OpsAddr, "webhook", "POST "+ingest.WebhookPath)
	err = service.Run(ctx, srv, ln, runners...)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	if err != nil {
		log.Error("primeflow stopped", "err", err)
	} else {
		log.Info("primeflow stopped")
	}
	return err
}

// services builds every service but ingest (which owns the HTTP routes),
// sharing one Prime client and one OptimoRoute client, so one rate limit of
// each, and the outbox sweeper every stage's hand-offs rely on; dry says
// which sends a shadow run records instead (pkg/dryrun), and mail whether
// the mail intake has a mailbox to read.
func services(ctx context.Context, cfg Config, dry dryrun.Config, d service.Deps, pc *prime.Client, mail bool) ([]service.Runner, error) {
	oc, err := optimorun.NewClient(cfg.OptimoRoute, dry, d.Log)
	if err != nil {
		return nil, err
	}
	if err := metrics.Replace(d.Metrics, oc.Collectors()...); err != nil {
		return nil, err
	}
	sender, err := makesafe.SenderFor(cfg.Makesafe.SMS, dry, d.Log)
	if err != nil {
		return nil, err
	}
	invites, err := jobmirror.InviteSenderFor(cfg.JobMirror.Invites, dry, d.Log)
	if err != nil {
		return nil, err
	}
	builds := []func() (service.Runner, error){
		func() (service.Runner, error) { return resolver.New(cfg.Resolver, d, pc) },
		func() (service.Runner, error) { return jobmirror.New(cfg.JobMirror, d, pc, invites) },
		func() (service.Runner, error) { return newjobpipeline.New(cfg.NewJobPipeline, d) },
		func() (service.Runner, error) { return childmirror.New(cfg.ChildMirror, d, pc) },
		func() (service.Runner, error) { return makesafe.New(cfg.makesafe(), d, pc, sender) },
		func() (service.Runner, error) { return optimocreate.New(ctx, cfg.OptimoCreate, d, oc) },
		func() (service.Runner, error) { return optimoplan.New(ctx, cfg.OptimoPlan, d, oc) },
	}
	if mail {
		builds = append(builds, func() (service.Runner, error) {
			mailbox, err := graph.New(cfg.MailIntake.Graph, nil)
			if err != nil {
				return nil, err
			}
			return mailintake.New(cfg.MailIntake, d, mailbox)
		})
	}
	var runners []service.Runner
	for _, build := range builds {
		r, err := build()
		if err != nil {
			return nil, err
		}
		runners = append(runners, r)
	}
	sweeper, err := outbox.NewSweeper(d.JS, d.Store, d.Log, d.Metrics)
	if err != nil {
		return nil, err
	}
	return append(runners, service.RunnerFunc(func(ctx context.Context) error { return sweeper.Run(ctx, 5*time.Second) })), nil
}

// primeSimulator is the Prime simulator the all-in-one process uses: the
// fixture's jobs, made recent on the first start (recentFixture), Prime's
// own rate limits, its records kept in state.
func primeSimulator(state, token string, now time.Time, log *slog.Logger) (*primesim.Sim, error) {
	fx, err := primesim.DefaultFixture()
	if err != nil {
		return nil, err
	}
	if fx, err = recentFixture(fx, now); err != nil {
		return nil, err
	}
	return primesim.New(primesim.Options{Fixture: fx, RateLimit: primesim.PrimeRateLimit(), StateFile: state, Logger: log, ControlToken: token})
}

// mailboxOfSimulator points the mail intake at the Graph simulator served
// at baseURL: its app registration, and its mailbox, folders and sender
// where none are named.
func mailboxOfSimulator(c *mailintake.Config, sim *graphsim.Sim, baseURL string) {
	c.Graph = sim.ClientConfig(baseURL)
	c.User = cmp.Or(c.User, sim.User())
	c.Folder = cmp.Or(c.Folder, graphsim.DefaultFolders[0])
	c.ProcessedFolder = cmp.Or(c.ProcessedFolder, graphsim.DefaultFolders[1])
	c.FailedFolder = cmp.Or(c.FailedFolder, graphsim.DefaultFolders[2])
	if len(c.AllowedSenders) == 0 {
		c.AllowedSenders = []string{graphsim.DefaultFrom}
	}
}

// The files under DATA_DIR that keep the credentials a local run makes.
const (
	APIKeyFile        = "webhook-api-key"
	AdminPasswordFile = "admin-password"
	SimTokenFile      = "sim-token"
)

// credentials fills the webhook key, the admin login and, when a simulator
// runs, the simulators' control token left unset for a local run with the
// ones kept under DATA_DIR (datadir.Secret: made on the first run, mode
// 0600, the same on every run after), and says where they are: Prime's
// webhook, scripts and monitoring go on working across a restart. The
// secrets themselves are never printed.
func credentials(stdout io.Writer, cfg *Config, sims simulators) error {
	if cfg.Ingest.APIKey == "" {
		path := filepath.Join(cfg.DataDir, APIKeyFile)
		key, made, err := datadir.Secret(path, uuid.NewString)
		if err != nil {
			return fmt.Errorf("PRIME_WEBHOOK_API_KEY is not set, and the key kept for it: %w", err)
		}
		cfg.Ingest.APIKey = key
		fmt.Fprintf(stdout, "PRIME_WEBHOOK_API_KEY is not set: the webhook key is in %s (%s)\n", path, kept(made))
	}
	if cfg.Admin.User == "" && cfg.Admin.Password == "" {
		path := filepath.Join(cfg.DataDir, AdminPasswordFile)
		password, made, err := datadir.Secret(path, rand.Text)
		if err != nil {
			return fmt.Errorf("ADMIN_USER and ADMIN_PASSWORD are not set, and the password kept for them: %w", err)
		}
		cfg.Admin = opshttp.Credentials{User: "admin", Password: password}
		fmt.Fprintf(stdout, "ADMIN_USER/ADMIN_PASSWORD are not set: the login is admin, with the password in %s (%s)\n", path, kept(made))
		fmt.Fprintf(stdout, "  curl -u admin:$(cat %s) %s/healthz\n", path, opshttp.LocalURL(cfg.opsAddr()))
		fmt.Fprintf(stdout, "  export ADMIN_USER=admin ADMIN_PASSWORD_FILE=%s   # for bin/primectl replay --now\n", path)
	}
	if sims.any() && cfg.SimToken == "" {
		path := filepath.Join(cfg.DataDir, SimTokenFile)
		token, made, err := datadir.Secret(path, simcontrol.NewToken)
		if err != nil {
			return fmt.Errorf("SIM_TOKEN is not set, and the token kept for it: %w", err)
		}
		cfg.SimToken = token
		fmt.Fprintf(stdout, "SIM_TOKEN is not set: the simulators' control API token is in %s (%s)\n", path, kept(made))
		fmt.Fprintf(stdout, "  curl -H \"Authorization: Bearer $(cat %s)\" %s/prime/_sim/stats\n", path, opshttp.LocalURL(cfg.SimAddr))
	}
	return nil
}

// opsAddr is where /healthz, /metrics and the relay trigger are served.
func (c Config) opsAddr() string { return cmp.Or(c.OpsAddr, c.HTTPAddr) }

func kept(made bool) string {
	if made {
		return "made now, kept for the next runs"
	}
	return "kept from an earlier run"
}

// natsHosts are the hosts of NATS_URL's comma-separated URLs, for the log:
// a URL may carry a user and password.
func natsHosts(urls string) []string {
	var hosts []string
	for _, s := range strings.Split(urls, ",") {
		s = strings.TrimSpace(s)
		if !strings.Contains(s, "://") {
			s = "nats://" + s // as nats.Connect reads it
		}
		if u, err := url.Parse(s); err == nil && u.Host != "" {
			hosts = append(hosts, u.Host)
		} else {
			hosts = append(hosts, "(not a URL)")
		}
	}
	return hosts
}
