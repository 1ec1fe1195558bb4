// Package service is what every primeflow service process shares: its
// configuration, its connections (NATS with the streams applied, the store),
// its HTTP surface (/healthz and /metrics behind Basic auth) and the way it
// runs and shuts down.
package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/database"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/logging"
	"github.com/ethosbuilding/primeflow/pkg/metrics"
	"github.com/ethosbuilding/primeflow/pkg/opshttp"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/groupcommit"
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
	// NATSURL is the NATS server to use.
	NATSURL string `env:"NATS_URL" envDefault:"nats://127.0.0.1:4222"`
	// StreamReplicas, when above zero, overrides num_replicas of streams/*.json.
	StreamReplicas int `env:"NATS_STREAM_REPLICAS"`
	// DatabaseURL is sqlite:<path> or sqlserver://…; empty is SQLite under DataDir.
	DatabaseURL string `env:"DATABASE_URL"`
	DataDir     string `env:"DATA_DIR" envDefault:"./data"`
	// HTTPAddr serves /healthz and /metrics (and ingest's routes).
	HTTPAddr string `env:"HTTP_ADDR" envDefault:":8080"`
}

// Deps are the shared things a service is built from. In the all-in-one
// process every service gets the same Deps.
type Deps struct {
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

// Handler finishes the router: /healthz and /metrics for d on Admin, and
// Admin behind Basic auth for everything Public does not take. Call it once,
// after every route is added.
func (r *Router) Handler(d Deps) http.Handler {
	r.Admin.Handle("/healthz", opshttp.Healthz(map[string]opshttp.Check{
		"nats": func(context.Context) error {
			if !d.NC.IsConnected() {
				return errors.New("not connected")
			}
			return nil
		},
		"store": d.Store.Ping,
	})).Methods(http.MethodGet)
	r.Admin.Handle("/metrics", opshttp.Metrics(d.Metrics)).Methods(http.MethodGet)
	r.public.PathPrefix("/").Handler(opshttp.BasicAuth(r.creds, r.Admin))
	return r.public
}

// Connect connects to NATS, waiting for the server if it is not up yet, and
// applies the streams in streams/.
func Connect(ctx context.Context, url, name string, replicas int, log *slog.Logger) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(url,
		nats.Name(name),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", "server", nc.ConnectedUrlRedacted())
		}),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("nats connect: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	for attempt := 0; ; attempt++ {
		err = events.EnsureStreams(ctx, js, replicas)
		if err == nil {
			return nc, js, nil
		}
		if attempt%20 == 0 {
			log.Warn("waiting for NATS JetStream to apply the streams", "err", err)
		}
		select {
		case <-ctx.Done():
			nc.Close()
			return nil, nil, fmt.Errorf("apply streams: %w", errors.Join(ctx.Err(), err))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

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
	nc, js, err := Connect(ctx, cfg.NATSURL, name, cfg.StreamReplicas, log)
	if err != nil {
		return d, nil, err
	}
	st, err := database.Open(ctx, cfg.DatabaseURL, cfg.DataDir)
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
	d = Deps{Log: log, NC: nc, JS: js, Store: grouped, Metrics: reg}
	return d, func() { nc.Drain(); grouped.Close() }, nil
}

// Main runs one service as its own process: configuration from getenv, logs
// on stderr, the Deps, and an HTTP server on HTTP_ADDR with /healthz and
// /metrics. build makes the service and may add routes to r.
func Main(ctx context.Context, name string, getenv func(string) string, stderr io.Writer,
	build func(ctx context.Context, d Deps, r *Router) (Runner, error)) error {
	var cfg Config
	if err := config.Parse(getenv, &cfg); err != nil {
		return err
	}
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
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.HTTPAddr, err)
	}
	d.Log.Info("started", "http", ln.Addr().String(), "nats", d.NC.ConnectedUrlRedacted())
	srv := &http.Server{Handler: r.Handler(d), ReadHeaderTimeout: 10 * time.Second}
	err = Run(ctx, srv, ln, svc)
	d.Log.Info("stopped", "err", err)
	return err
}

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
