// Package opshttp holds what every primeflow HTTP surface shares: Basic auth
// for everything but Prime's webhook and /livez (§10.1), /healthz and
// /metrics (the registry's, metrics.NewRegistry).
package opshttp

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Equal compares a secret with what a request presented in constant time,
// whatever their lengths. A blank secret never matches.
func Equal(secret, presented string) bool {
	if secret == "" {
		return false
	}
	a, b := sha256.Sum256([]byte(secret)), sha256.Sum256([]byte(presented))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// Credentials are the Basic auth user and password of the admin routes.
type Credentials struct {
	User     string `env:"ADMIN_USER"`
	Password string `env:"ADMIN_PASSWORD" secret:"true"`
}

// BasicAuth lets a request through only with these credentials; a blank
// user or password rejects every request (401, the connection closed: a
// body is never waited for).
func BasicAuth(c Credentials, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		userOK := Equal(c.User, u)
		passOK := Equal(c.Password, p)
		if !ok || !userOK || !passOK {
			w.Header().Set("WWW-Authenticate", `Basic realm="primeflow", charset="UTF-8"`)
			Refuse(w, http.StatusUnauthorized, "unauthorized")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Check is one health check; nil means healthy.
type Check func(ctx context.Context) error

// About is what /healthz says of the process answering it.
type About struct {
	Service string `json:"service"`
	Version string `json:"version"`
	Commit  string `json:"commit"`
}

// Health is /healthz's answer: "ok" or "unhealthy", the process, and each
// check's outcome ("ok" or its error); Failed names the failing checks.
type Health struct {
	Status string `json:"status"`
	About
	Checks map[string]string `json:"checks"`
	Failed map[string]string `json:"failed,omitempty"`
}

// Healthz answers 200 when every check passes within 2s, and 503 naming the
// failing checks otherwise, with a Health: the details are for those who
// may see them (it goes behind Basic auth; Livez is for probes).
func Healthz(about About, checks map[string]Check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		h := Health{Status: "ok", About: about, Checks: map[string]string{}}
		for name, check := range checks {
			h.Checks[name] = "ok"
			if err := check(ctx); err != nil {
				h.Checks[name] = err.Error()
				if h.Failed == nil {
					h.Failed = map[string]string{}
				}
				h.Failed[name] = err.Error()
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if len(h.Failed) > 0 {
			h.Status = "unhealthy"
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		json.NewEncoder(w).Encode(h)
	})
}

// Livez answers 200 with an empty body to anyone: the process is up and
// serving HTTP. It says nothing more, so it needs no credentials, which
// load balancers and Kubernetes probes handle badly; Healthz has the
// details.
func Livez() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
	})
}

// Serve runs srv on ln until ctx ends, then shuts it down gracefully,
// giving requests in flight up to grace to finish.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener, grace time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	err := srv.Shutdown(shutdown)
	if serveErr := <-errc; !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return err
}

// Metrics serves a registry in the Prometheus text format.
func Metrics(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}
