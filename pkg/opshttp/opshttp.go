// Package opshttp holds what every primeflow HTTP surface shares: Basic auth
// for everything but Prime's webhook (§10.1), /healthz and /metrics (the
// registry's, metrics.NewRegistry).
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

// Healthz answers 200 {"status":"ok"} when every check passes within 2s, and
// 503 naming the failing checks otherwise.
func Healthz(checks map[string]Check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		failed := map[string]string{}
		for name, check := range checks {
			if err := check(ctx); err != nil {
				failed[name] = err.Error()
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if len(failed) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			json.NewEncoder(w).Encode(map[string]any{"status": "unhealthy", "failed": failed})
			return
		}
		json.NewEncoder(w).Encode(map[string]string{"status": "ok"})
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
