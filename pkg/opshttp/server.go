package opshttp

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"golang.org/x/net/netutil"
)

// ServerConfig bounds what a client can hold of an HTTP server: how long it
// may take to send a request, to take the answer and to sit idle between
// requests, and how many connections the server holds at once. Every
// primeflow HTTP server (each service's, bin/primeflow's and its
// simulators') is built from it.
//
// The defaults are sized for Prime's webhook: a body of at most
// INGEST_MAX_BODY_BYTES (1 MiB) has 30 s to arrive (about 35 KB/s), and the
// answer, which follows the row's commit, has until a minute after the
// headers. A client without credentials is answered at once when its
// headers are in (401, and the connection closed), so it holds a connection
// for at most the header timeout.
type ServerConfig struct {
	// ReadHeaderTimeout bounds the wait for a request's headers.
	ReadHeaderTimeout time.Duration `env:"HTTP_READ_HEADER_TIMEOUT" envDefault:"10s"`
	// ReadTimeout bounds the reading of a whole request, body included.
	ReadTimeout time.Duration `env:"HTTP_READ_TIMEOUT" envDefault:"30s"`
	// WriteTimeout bounds a request from the end of its headers to the end
	// of its answer; a route that may run longer (the relay run) lifts it
	// for itself.
	WriteTimeout time.Duration `env:"HTTP_WRITE_TIMEOUT" envDefault:"60s"`
	// IdleTimeout closes a keep-alive connection that sends no request.
	IdleTimeout time.Duration `env:"HTTP_IDLE_TIMEOUT" envDefault:"30s"`
	// MaxConns caps the connections served at once; more wait in the
	// kernel's accept queue until one closes.
	MaxConns int `env:"HTTP_MAX_CONNS" envDefault:"512"`
}

// DefaultServerConfig is ServerConfig with its defaults, read from its tags.
func DefaultServerConfig() ServerConfig { return config.MustDefaults[ServerConfig]() }

// Validate refuses the settings that cannot work, each naming its
// variable (config.Refusal).
func (c ServerConfig) Validate() error {
	errs := []error{config.Positive("HTTP_MAX_CONNS", c.MaxConns)}
	for _, t := range []struct {
		name string
		d    time.Duration
	}{
		{"HTTP_READ_HEADER_TIMEOUT", c.ReadHeaderTimeout},
		{"HTTP_READ_TIMEOUT", c.ReadTimeout},
		{"HTTP_WRITE_TIMEOUT", c.WriteTimeout},
		{"HTTP_IDLE_TIMEOUT", c.IdleTimeout},
	} {
		if t.d <= 0 {
			errs = append(errs, config.Refuse(t.name, "must be above zero (a connection would be held for ever)"))
		}
	}
	switch {
	case c.ReadHeaderTimeout <= 0 || c.ReadTimeout <= 0 || c.WriteTimeout <= 0:
	case c.ReadHeaderTimeout > c.ReadTimeout:
		errs = append(errs, config.Refuse("HTTP_READ_HEADER_TIMEOUT", "must not be above HTTP_READ_TIMEOUT (%s)", c.ReadTimeout))
	case c.WriteTimeout < c.ReadTimeout:
		errs = append(errs, config.Refuse("HTTP_WRITE_TIMEOUT", "must not be below HTTP_READ_TIMEOUT (%s): a body that arrives late would have no time left for its answer", c.ReadTimeout))
	}
	return errors.Join(errs...)
}

// Server is an http.Server for h with these bounds.
func (c ServerConfig) Server(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		ReadTimeout:       c.ReadTimeout,
		WriteTimeout:      c.WriteTimeout,
		IdleTimeout:       c.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}

// maxHeaderBytes bounds a request's headers: Prime's are a few hundred
// bytes (net/http's default is 1 MiB).
const maxHeaderBytes = 64 << 10

// Listen listens on addr, serving at most MaxConns connections at once.
// what names the address's variable in the error.
func (c ServerConfig) Listen(addr, what string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s (%s): %w", addr, what, err)
	}
	return netutil.LimitListener(ln, c.MaxConns), nil
}

// Refuse answers status with msg and closes the connection after the
// answer, so that the server never waits for, or reads, a body the client
// may still be sending: for requests refused before their body is read
// (401, 413, a public port's 404). Connection: close alone is not enough:
// net/http still reads up to 256 KiB of an unread body before it closes,
// until HTTP_READ_TIMEOUT, so the read deadline is cut to now.
func Refuse(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Connection", "close")
	http.Error(w, msg, status)
	_ = http.NewResponseController(w).SetReadDeadline(time.Now()) // not every ResponseWriter has one (a test's recorder)
}

// LocalURL is the URL a client on this machine reaches a server listening
// on addr at: http://127.0.0.1:8080 for ":8080" or "0.0.0.0:8080", the
// host itself for any other. primectl's INGEST_URL defaults to it.
func LocalURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	switch host {
	case "", "0.0.0.0", "::":
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}
