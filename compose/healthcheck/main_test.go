package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// service stands in for a primeflow service's /healthz behind Basic auth
// (pkg/opshttp): 200 with the right credentials while healthy, 503 naming the
// failing check otherwise, 401 without the credentials.
func service(t *testing.T, healthy bool) (addr string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != "ops" || p != "s3cret-pw" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		if !healthy {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"status":"unhealthy","failed":{"nats":"not connected"}}`))
			return
		}
		w.Write([]byte(`{"status":"ok"}`))
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestRun(t *testing.T) {
	healthy := service(t, true)
	unhealthy := service(t, false)
	_, healthyPort, _ := net.SplitHostPort(healthy)
	closed := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}()
	pwFile := filepath.Join(t.TempDir(), "admin_password")
	if err := os.WriteFile(pwFile, []byte("s3cret-pw\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string // "" is healthy
	}{
		{"healthy", map[string]string{"HTTP_ADDR": healthy, "ADMIN_USER": "ops", "ADMIN_PASSWORD": "s3cret-pw"}, ""},
		{"listen on every interface", map[string]string{"HTTP_ADDR": ":" + healthyPort, "ADMIN_USER": "ops", "ADMIN_PASSWORD": "s3cret-pw"}, ""},
		{"wrong password", map[string]string{"HTTP_ADDR": healthy, "ADMIN_USER": "ops", "ADMIN_PASSWORD": "wrong-pw"}, "401"},
		{"no credentials", map[string]string{"HTTP_ADDR": healthy}, "401"},
		{"unhealthy", map[string]string{"HTTP_ADDR": unhealthy, "ADMIN_USER": "ops", "ADMIN_PASSWORD": "s3cret-pw"}, "nats"},
		{"nothing listening", map[string]string{"HTTP_ADDR": closed, "ADMIN_USER": "ops", "ADMIN_PASSWORD": "s3cret-pw"}, "connect"},
		{"bad address", map[string]string{"HTTP_ADDR": "8080", "ADMIN_USER": "ops", "ADMIN_PASSWORD": "s3cret-pw"}, "HTTP_ADDR"},
		{"password from a file", map[string]string{"HTTP_ADDR": healthy, "ADMIN_USER": "ops", "ADMIN_PASSWORD_FILE": pwFile}, ""},
		{"password file missing", map[string]string{"HTTP_ADDR": healthy, "ADMIN_USER": "ops", "ADMIN_PASSWORD_FILE": pwFile + ".no"}, "ADMIN_PASSWORD_FILE"},
		{"the ops port first", map[string]string{"OPS_ADDR": healthy, "HTTP_ADDR": closed, "ADMIN_USER": "ops", "ADMIN_PASSWORD": "s3cret-pw"}, ""},
		{"bad ops address", map[string]string{"OPS_ADDR": "8090", "ADMIN_USER": "ops", "ADMIN_PASSWORD": "s3cret-pw"}, "OPS_ADDR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			err := run(context.Background(), env(tt.env), &http.Client{})
			if tt.wantErr == "" {
				is.NoErr(err) // healthy
				return
			}
			is.True(err != nil)                                  // unhealthy
			is.True(strings.Contains(err.Error(), tt.wantErr))   // says why
			is.True(!strings.Contains(err.Error(), "s3cret-pw")) // never shows the password
			is.True(!strings.Contains(err.Error(), "wrong-pw"))  // not even a wrong one
		})
	}
}

func TestHealthzURL(t *testing.T) {
	tests := []struct {
		addr, want string
	}{
		{"", "http://127.0.0.1:8080/healthz"},
		{":8080", "http://127.0.0.1:8080/healthz"},
		{"0.0.0.0:9000", "http://127.0.0.1:9000/healthz"},
		{"[::]:8081", "http://127.0.0.1:8081/healthz"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			is := is.New(t)
			got, err := healthzURL(tt.addr, "HTTP_ADDR")
			is.NoErr(err)          // a listen address
			is.Equal(got, tt.want) // loopback on its port
		})
	}
	t.Run("no port", func(t *testing.T) {
		is := is.New(t)
		_, err := healthzURL("localhost", "HTTP_ADDR")
		is.True(err != nil) // refused
	})
}
