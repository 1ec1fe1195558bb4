// Package service is what every primeflow service process shares: its
// configuration, its command line (--help, --version: Command), its
// connections (NATS with its streams and consumers checked, the store), its HTTP surface
// (/healthz and /metrics behind Basic auth, /livez for probes) and the way
// it runs and shuts down.
package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/database"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/logging"
	"github.com/ethosbuilding/primeflow/pkg/metrics"
	"github.com/ethosbuilding/primeflow/pkg/opshttp"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/groupcommit"
	"github.com/ethosbuilding/primeflow/pkg/version"
	"github.com/gorilla/mux"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
)

// Config is the configuration every service reads.
type Config struct {
	Logging logging.Config
	Admin   opshttp.Credentials
	// NATSURL is the NATS server to use (a URL may hold a user and
	// password; NATSUser and NATSPassword are the other way to give them).
	NATSURL      string `env:"NATS_URL" envDefault:"nats://127.0.0.1:4222" secret:"true"`
	NATSUser     string `env:"NATS_USER"`
	NATSPassword string `env:"NATS_PASSWORD" secret:"true"`
	// StreamReplicas, when above zero, overrides num_replicas of
	// streams/*.json: the streams are checked (and, with ApplyStreams,
	// applied) with that many.
	StreamReplicas int `env:"NATS_STREAM_REPLICAS"`
	// ApplyStreams: the process applies streams/ and the consumers itself,
	// as the operators' step does (events.Apply), instead of checking
	// them: bin/primeflow, before its services start. Not a variable.
	ApplyStreams bool
	// DatabaseURL is sqlite:<path> or sqlserver://…; empty is SQLite under DataDir.
	DatabaseURL string `env:"DATABASE_URL" secret:"true"`
	// DatabasePassword, when set, is the password of DatabaseURL's user
	// (sqlserver:// only), so the URL need hold no secret.
	DatabasePassword string `env:"DATABASE_PASSWORD" secret:"true"`
	DataDir          string `env:"DATA_DIR" envDefault:"./data"`
	// HTTPAddr serves the public routes (ingest's webhook) and, unless
	// OpsAddr is set, /healthz, /metrics and the admin routes too. Loopback
	// unless told otherwise: the image (compose/Dockerfile) and compose set
	// ":8080", every interface of the container.
	HTTPAddr string `env:"HTTP_ADDR" envDefault:"127.0.0.1:8080"`
	// OpsAddr, when set, serves /healthz, /metrics and the admin routes,
	// and HTTPAddr the public routes alone.
	OpsAddr string `env:"OPS_ADDR"`
	HTTP    opshttp.ServerConfig
}

// Validate refuses the settings no service can run with, each naming its
// variable (config.Refusal): checked before anything binds, connects or
// writes.
func (c Config) Validate() error {
	return errors.Join(c.Logging.Validate(), CheckNATSURL(c.NATSURL), Addresses(c.HTTPAddr, c.OpsAddr), Replicas(c.StreamReplicas),
		database.Check(c.DatabaseURL, c.DatabasePassword), c.HTTP.Validate())
}

// Addresses refuses an HTTP_ADDR or OPS_ADDR (optional) of the wrong form,
// and an OPS_ADDR that is HTTP_ADDR: its routes are there already.
func Addresses(httpAddr, opsAddr string) error {
	errs := []error{config.Address("HTTP_ADDR", httpAddr)}
	switch {
	case opsAddr == "":
	case opsAddr == httpAddr:
		errs = append(errs, config.Refuse("OPS_ADDR", "is HTTP_ADDR: leave it unset to serve both there"))
	default:
		errs = append(errs, config.Address("OPS_ADDR", opsAddr))
	}
	return errors.Join(errs...)
}

// Replicas refuses a NATS_STREAM_REPLICAS JetStream cannot make: 0 keeps
// each stream's num_replicas (streams/*.json), 1 to 5 overrides it.
func Replicas(n int) error { return config.Between("NATS_STREAM_REPLICAS", n, 0, 5) }

// Deps are the shared things a service is built from. In the all-in-one
// process every service gets the same Deps.
type Deps struct {
	// Name is the process's: the service's, or primeflow's (bin/primeflow).
	Name    string
	Log     *slog.Logger
	NC      *nats.Conn
	JS      jetstream.JetStream
	Store   store.Store
	Metrics *prometheus.Registry
}

// Runner is a service's long-running part; Run returns when ctx ends.
type Runner interface {
	Run(ctx context.Context) error
}

// Router is an HTTP surface: Public routes answer anyone (only Prime's
// webhook is public), Admin routes need Basic auth, and every path or method
// no public route takes goes to Admin, so it answers 401 without Basic auth
// before it can be a 404 or 405 (§10.1).
type Router struct {
	public *mux.Router
	Admin  *mux.Router
	creds  opshttp.Credentials
}

// NewRouter returns a router whose admin routes need these credentials.
func NewRouter(admin opshttp.Credentials) *Router {
	return &Router{public: mux.NewRouter(), Admin: mux.NewRouter(), creds: admin}
}

// Public is the router for routes without Basic auth.
func (r *Router) Public() *mux.Router { return r.public }

// Handler finishes the router for one port: /healthz and /metrics for d on
// Admin, and Admin behind Basic auth for everything Public does not take
// but /livez, which answers probes without it.
// Call it, or Split, once, after every route is added.
func (r *Router) Handler(d Deps) http.Handler {
	r.public.PathPrefix("/").Handler(r.ops(d))
	return r.public
}

// Split finishes the router for two ports: public serves the public routes
// alone (anything else is 404 and the connection closed), ops serves
// /healthz, /metrics and the Admin routes behind Basic auth, where every
// request without it is 401 before it can be a 404 or 405 (§10.1), and
// /livez, for probes, without it.
func (r *Router) Split(d Deps) (public, ops http.Handler) {
	notFound := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		opshttp.Refuse(w, http.StatusNotFound, "not found")
	})
	r.public.NotFoundHandler = notFound
	r.public.MethodNotAllowedHandler = notFound
	return r.public, r.ops(d)
}

// ops is Admin with /healthz and /metrics for d, behind Basic auth, and
// /livez without it.
func (r *Router) ops(d Deps) http.Handler {
	r.Admin.Handle("/healthz", opshttp.Healthz(opshttp.About{Service: d.Name, Version: version.Version, Commit: version.Commit}, map[string]opshttp.Check{
		"nats": func(context.Context) error {
			if !d.NC.IsConnected() {
				return errors.New("not connected")
			}
			return nil
		},
		"store": d.Store.Ping,
	})).Methods(http.MethodGet)
	r.Admin.Handle("/metrics", opshttp.Metrics(d.Metrics)).Methods(http.MethodGet)
	m := http.NewServeMux()
	m.Handle("GET /livez", opshttp.Livez())
	m.Handle("/", opshttp.BasicAuth(r.creds, r.Admin))
	return m
}

// NATS is how a process reaches NATS.
type NATS struct {
	URL string
	// User and Password log in, unless URL holds them.
	User, Password string
	// Name names the connection; a process of a service (a Role of
	// pkg/events) uses its own inbox prefix, so its user may read the
	// replies to its requests and no one else's, and checks the streams
	// its role touches and its consumers. Any other name uses the inbox
	// prefix of User (when given) and checks every stream and consumer.
	Name string
	// Replicas, above zero, overrides num_replicas of streams/*.json.
	Replicas int
	// Apply applies the streams and consumers (events.Apply, which takes
	// the operators' user) instead of checking them.
	Apply bool
}

// Connect connects to NATS, waiting for the server if it is not up yet,
// and checks that it holds the streams and consumers as defined, waiting
// while it does not (a log line every 5 s names what is missing or
// different and the operators' step that makes it, events.ApplyCommand);
// with c.Apply it applies them itself. An error the server reports later
// (a permissions violation: the user may not publish or subscribe there)
// is logged.
func Connect(ctx context.Context, c NATS, log *slog.Logger) (*nats.Conn, jetstream.JetStream, error) {
	opts := []nats.Option{
		nats.Name(c.Name),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", "server", nc.ConnectedUrlRedacted())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				log.Error("nats error", "subject", sub.Subject, "err", err)
				return
			}
			log.Error("nats error", "err", err)
		}),
	}
	if c.User != "" {
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	role, hasRole := events.RoleNamed(c.Name)
	switch {
	case hasRole:
		opts = append(opts, nats.CustomInboxPrefix(role.InboxPrefix()))
	case c.User != "":
		opts = append(opts, nats.CustomInboxPrefix(events.InboxPrefix(c.User)))
	}
	ready := func(js jetstream.JetStream) error { return events.CheckAll(ctx, js, c.Replicas) }
	switch {
	case c.Apply:
		ready = func(js jetstream.JetStream) error {
			did, err := events.Apply(ctx, js, c.Replicas)
			for _, line := range did {
				log.Info("streams and consumers applied", "change", line)
			}
			return err
		}
	case hasRole:
		ready = func(js jetstream.JetStream) error { return events.CheckRole(ctx, js, role, c.Replicas) }
	}
	streams, err := role.Streams()
	if err != nil {
		return nil, nil, err
	}
	if err := CheckNATSURL(c.URL); err != nil {
		return nil, nil, fmt.Errorf("nats connect: %w", err)
	}
	nc, err := nats.Connect(c.URL, opts...)
	if err != nil {
		return nil, nil, connectError(err, c.URL)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	for attempt := 0; ; attempt++ {
		// A refused login is the configuration's: the client gives up on it
		// (it closes the connection after the server refuses it twice), and
		// so does the process, naming the variables, rather than wait for a
		// server that will never let it in.
		if nc.IsClosed() {
			return nil, nil, refused(c, nc.LastError())
		}
		if hasRole && len(streams) == 0 && len(role.Consumes) == 0 {
			// A role that touches no stream (mail-intake) checks none: it
			// waits for the server to let it in, as the others do.
			if nc.IsConnected() {
				return nc, js, nil
			}
			err = errors.Join(errors.New("not connected yet"), nc.LastError())
		} else if err = ready(js); err == nil {
			return nc, js, nil
		}
		var notApplied *events.NotAppliedError
		if attempt%20 == 0 {
			if errors.As(err, &notApplied) {
				log.Warn("waiting for the operators' step: NATS does not hold the streams and consumers as defined", "run", events.ApplyCommand, "err", err)
			} else {
				log.Warn("waiting for NATS JetStream to answer for the streams", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			nc.Close()
			return nil, nil, fmt.Errorf("streams and consumers: %w", errors.Join(ctx.Err(), err))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// connectError is nats.Connect's error without a password: a URL of
// NATS_URL it quotes is written without its user information (redactURL).
// A URL nats.go would misread never gets this far (CheckNATSURL).
func connectError(err error, urls string) error {
	msg := err.Error()
	for _, raw := range strings.Split(urls, ",") {
		if raw = strings.TrimSpace(raw); raw != "" {
			msg = strings.ReplaceAll(msg, raw, redactURL(raw))
		}
	}
	return fmt.Errorf("nats connect: %s", msg)
}

// CheckNATSURL refuses a NATS_URL nats.go cannot read as it is meant (its
// comma-separated URLs, nats:// where one names no scheme, as nats.Connect
// reads them), before anything connects, without its password or a piece
// of it (config.Refusal). Each URL is redacted before it is parsed, and the
// parser's own words, which quote pieces of the URL, are never repeated: a
// / # or ? in a password ends the URL's host early, so that a parse error
// quoted the password's start as a port, and a parse that succeeded took it
// for the host, which a dial error would name.
func CheckNATSURL(urls string) error {
	for _, raw := range strings.Split(urls, ",") {
		if raw = strings.TrimSpace(raw); raw != "" && !strings.Contains(raw, "://") {
			raw = "nats://" + raw
		}
		if why := unreadableURL(raw); why != "" {
			return config.Refuse("NATS_URL", "%s cannot be read: %s", redactURL(raw), why)
		}
	}
	return nil
}

// unreadableURL says why raw cannot be read as it is meant, "" when it can.
func unreadableURL(raw string) string {
	u, err := url.Parse(raw)
	var esc url.EscapeError
	switch {
	case errors.As(err, &esc):
		return "a % not followed by two hex digits (a % in a password is written %25)"
	case err != nil || strings.Contains(raw, "@") && u.User == nil:
		return "its user information ends before its @ (a / # ? or % in a password is written %2F %23 %3F %25)"
	}
	return ""
}

// redactURL is raw without its password: everything between the scheme
// and raw's last "@" (the user information) is written "***", but for a
// user before a ":" there. It reads raw as a string, never parsed: a
// password that breaks the URL's syntax is hidden as well.
func redactURL(raw string) string {
	at := strings.LastIndex(raw, "@")
	if at < 0 {
		return raw
	}
	start := 0
	if i := strings.Index(raw, "://"); i >= 0 && i < at {
		start = i + 3
	}
	user, _, hasPassword := strings.Cut(raw[start:at], ":")
	if !hasPassword || strings.ContainsAny(user, "/#?") {
		return raw[:start] + "***" + raw[at:]
	}
	return raw[:start] + user + ":***" + raw[at:]
}

// refused is the error of a connection NATS closed: for a refused login,
// which variables to look at.
func refused(c NATS, err error) error {
	if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) {
		who := "NATS_USER and NATS_PASSWORD (or NATS_PASSWORD_FILE)"
		if c.User == "" {
			who = "NATS_URL's user and password, or NATS_USER and NATS_PASSWORD"
		}
		return fmt.Errorf("nats refused the login (%w): check %s", err, who)
	}
	return fmt.Errorf("nats connect: the connection was closed: %w", err)
}

// OpenStore opens the database (database.Open), waiting with backoff while
// it is not ready (database.Transient: locked by another program, SQL
// Server not answering), each wait logged; any other failure is returned at
// once, as the configuration's.
func OpenStore(ctx context.Context, url, dataDir string, log *slog.Logger) (store.Store, error) {
	for attempt := 1; ; attempt++ {
		st, err := database.Open(ctx, url, dataDir)
		if err == nil || !database.Transient(err) {
			return st, err
		}
		pause := openRetry.After(attempt)
		log.Warn("database not ready; waiting", "in", pause, "err", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("open the database: %w", errors.Join(ctx.Err(), err))
		case <-time.After(pause):
		}
	}
}

// openRetry paces OpenStore's attempts.
var openRetry = retry.Backoff{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second}

// Open reads the shared configuration and makes the Deps of a process named
// name, logging to stderr; close releases them.
func Open(ctx context.Context, name string, cfg Config, stderr io.Writer) (d Deps, close func(), err error) {
	log, err := logging.New(stderr, cfg.Logging)
	if err != nil {
		return d, nil, err
	}
	return OpenLog(ctx, name, cfg, log.With("service", name))
}

// OpenLog is Open with the process's logger made already (cfg.Logging is
// not read): the all-in-one process logs which NATS it runs or uses before
// it connects.
func OpenLog(ctx context.Context, name string, cfg Config, log *slog.Logger) (d Deps, close func(), err error) {
	nc, js, err := Connect(ctx, NATS{URL: cfg.NATSURL, User: cfg.NATSUser, Password: cfg.NATSPassword,
		Name: name, Replicas: cfg.StreamReplicas, Apply: cfg.ApplyStreams}, log)
	if err != nil {
		return d, nil, err
	}
	dbURL, err := database.WithPassword(cfg.DatabaseURL, cfg.DatabasePassword)
	if err != nil {
		nc.Close()
		return d, nil, err
	}
	st, err := OpenStore(ctx, dbURL, cfg.DataDir, log)
	if err != nil {
		nc.Close()
		return d, nil, err
	}
	reg := metrics.NewRegistry()
	sizes, err := groupcommit.GroupSizes(reg)
	if err != nil {
		st.Close()
		nc.Close()
		return d, nil, err
	}
	grouped := groupcommit.New(st, sizes)
	d = Deps{Name: name, Log: log, NC: nc, JS: js, Store: grouped, Metrics: reg}
	return d, func() { nc.Drain(); grouped.Close() }, nil
}

// Main runs one service as its own process: configuration from getenv, logs
// on stderr, the Deps, and an HTTP server on HTTP_ADDR with /healthz and
// /metrics (on OPS_ADDR instead when it is set). own are the service's own
// configurations, read and checked with the shared one (config.Load) before
// anything binds, connects or writes, so that every setting refused is
// named at once. build makes the service and may add routes to r.
func Main(ctx context.Context, name string, getenv func(string) string, stderr io.Writer, own []config.Part,
	build func(ctx context.Context, d Deps, r *Router) (Runner, error)) error {
	var cfg Config
	if err := config.Load(getenv, slices.Concat([]config.Part{config.Read(&cfg, Config.Validate)}, own)...); err != nil {
		return err
	}
	bound, err := Bind(cfg.HTTP, cfg.HTTPAddr, cfg.OpsAddr)
	if err != nil {
		return err
	}
	defer bound.Close()
	d, closeDeps, err := Open(ctx, name, cfg, stderr)
	if err != nil {
		return err
	}
	defer closeDeps()
	r := NewRouter(cfg.Admin)
	svc, err := build(ctx, d, r)
	if err != nil {
		return err
	}
	srv, ln, runners := bound.Serve(r, d)
	d.Log.Info("started", "version", version.Version, "commit", version.Commit, "http", ln.Addr().String(), "ops", cfg.OpsAddr, "nats", d.NC.ConnectedUrlRedacted())
	err = Run(ctx, srv, ln, append(runners, svc)...)
	if err != nil {
		d.Log.Error("stopped", "err", err)
	} else {
		d.Log.Info("stopped")
	}
	return err
}

// Bound is a process's HTTP ports, listened on before it connects or
// writes anything (Bind) and served once its routes are made (Serve).
type Bound struct {
	c         opshttp.ServerConfig
	ln, opsLn net.Listener
}

// Bind listens on httpAddr and, when it is set, opsAddr, first thing: a
// port that cannot be had stops the start naming its variable, before
// anything is connected to or written (a data folder, a database).
func Bind(c opshttp.ServerConfig, httpAddr, opsAddr string) (*Bound, error) {
	ln, err := c.Listen(httpAddr, "HTTP_ADDR")
	if err != nil {
		return nil, err
	}
	b := &Bound{c: c, ln: ln}
	if opsAddr != "" {
		if b.opsLn, err = c.Listen(opsAddr, "OPS_ADDR"); err != nil {
			ln.Close()
			return nil, err
		}
	}
	return b, nil
}

// Close closes the listeners; after Serve, serving closes them anyway.
func (b *Bound) Close() {
	b.ln.Close()
	if b.opsLn != nil {
		b.opsLn.Close()
	}
}

// Serve finishes r and returns HTTP_ADDR's server and listener, for Run,
// and, with OPS_ADDR, the ops port's server as a runner to run beside the
// service (it stops after the public server has drained, so /healthz and
// /metrics answer while it does).
func (b *Bound) Serve(r *Router, d Deps) (*http.Server, net.Listener, []Runner) {
	if b.opsLn == nil {
		return b.c.Server(r.Handler(d)), b.ln, nil
	}
	public, ops := r.Split(d)
	return b.c.Server(public), b.ln, []Runner{Serving(b.c.Server(ops), b.opsLn)}
}

// Serving is a Runner that serves srv on ln until its context ends, then
// gives requests in flight a second to finish.
func Serving(srv *http.Server, ln net.Listener) Runner {
	return RunnerFunc(func(ctx context.Context) error { return opshttp.Serve(ctx, srv, ln, time.Second) })
}

// RunnerFunc makes a function a Runner.
type RunnerFunc func(ctx context.Context) error

// Run calls f.
func (f RunnerFunc) Run(ctx context.Context) error { return f(ctx) }

// Run serves srv on ln and runs the runners until ctx ends or one of them
// fails. On the way down the HTTP server drains first, so a request in
// flight still finds the runners it needs, and the runners stop after it.
func Run(ctx context.Context, srv *http.Server, ln net.Listener, runners ...Runner) error {
	httpCtx, stopHTTP := context.WithCancel(ctx)
	defer stopHTTP()
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	var g errgroup.Group
	g.Go(func() error {
		defer stopRun()
		return opshttp.Serve(httpCtx, srv, ln, 10*time.Second)
	})
	for _, r := range runners {
		g.Go(func() error {
			err := r.Run(runCtx)
			if err != nil && runCtx.Err() == nil {
				stopHTTP() // a runner failed: take the process down
				return err
			}
			return nil
		})
	}
	return g.Wait()
}

// WhileServing runs run while the NATS micro service that serve adds
// answers requests, and stops the service when run returns: a service's
// request/reply endpoint lives as long as its consumers. run gets ctx; the
// service's handlers get a context that ends only when run has returned, so
// that while the consumers drain after ctx ends, a request (another stage's
// handler, draining too) is still answered, not failed with ctx's error.
func WhileServing(ctx context.Context, log *slog.Logger, serve func(context.Context) (micro.Service, error), run func(context.Context) error) error {
	serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServing()
	svc, err := serve(serveCtx)
	if err != nil {
		return err
	}
	err = run(ctx)
	stopServing()
	if serr := svc.Stop(); serr != nil {
		log.Warn("stopping the micro service", "service", svc.Info().Name, "err", serr)
	}
	return err
}

// RunAll runs fns until ctx ends or one fails, which stops the others, and
// returns once all have returned, with their errors: the parts of one
// service (its consumers, its drainers) live and stop together.
func RunAll(ctx context.Context, fns ...func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() {
			if errs[i] = fn(ctx); errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
