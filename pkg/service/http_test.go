package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/opshttp"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/ethosbuilding/primeflow/pkg/version"
	"github.com/matryer/is"
)

// A port in use stops a service naming its variable, before it connects or
// makes its data folder.
func TestMainListensBeforeItWritesAnything(t *testing.T) {
	for _, variable := range []string{"HTTP_ADDR", "OPS_ADDR"} {
		t.Run(variable, func(t *testing.T) {
			is := is.New(t)
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			is.NoErr(err)
			defer taken.Close()
			dir := filepath.Join(t.TempDir(), "data")
			vars := map[string]string{"DATA_DIR": dir, "HTTP_ADDR": "127.0.0.1:0", "OPS_ADDR": "127.0.0.1:0",
				"NATS_URL": "nats://127.0.0.1:1"} // no server: a connect would wait
			vars[variable] = taken.Addr().String()
			built := false
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a Main that connects first gives up
			defer cancel()
			err = service.Main(ctx, "test", func(k string) string { return vars[k] }, io.Discard, nil,
				func(context.Context, service.Deps, *service.Router) (service.Runner, error) {
					built = true
					return nil, nil
				})
			is.True(err != nil && strings.Contains(err.Error(), variable)) // refused, naming the variable
			is.True(!built)                                                // before the service was built
			_, statErr := os.Stat(dir)
			is.True(errors.Is(statErr, os.ErrNotExist)) // and before the data folder was made
		})
	}
}

// /livez answers anyone with 200 and nothing more; /healthz keeps its
// details, the process's name and version and each check, behind Basic
// auth. With OPS_ADDR, both are on the ops port only.
func TestLivezAndHealthz(t *testing.T) {
	ns := natstest.Server(t)
	for _, split := range []bool{false, true} {
		name := "one port"
		if split {
			name = "OPS_ADDR"
		}
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			httpAddr, opsAddr := flowtest.FreeAddr(t), ""
			vars := map[string]string{"DATA_DIR": t.TempDir(), "HTTP_ADDR": httpAddr, "NATS_URL": ns.ClientURL(),
				"ADMIN_USER": "ops", "ADMIN_PASSWORD": "pw"}
			if split {
				opsAddr = flowtest.FreeAddr(t)
				vars["OPS_ADDR"] = opsAddr
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- service.Main(ctx, "test", func(k string) string { return vars[k] }, io.Discard, nil,
					func(context.Context, service.Deps, *service.Router) (service.Runner, error) {
						return service.RunnerFunc(func(ctx context.Context) error { <-ctx.Done(); return nil }), nil
					})
			}()
			defer func() { cancel(); is.NoErr(<-done) }()
			ops := "http://" + httpAddr
			if split {
				ops = "http://" + opsAddr
			}
			get := func(url string, auth bool) (int, []byte) {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				if auth {
					req.SetBasicAuth("ops", "pw")
				}
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					return 0, nil
				}
				defer res.Body.Close()
				b, _ := io.ReadAll(res.Body)
				return res.StatusCode, b
			}
			flowtest.Poll(t, 30*time.Second, 20*time.Millisecond, "serving", func() bool { code, _ := get(ops+"/livez", false); return code == 200 })
			code, body := get(ops+"/livez", false)
			is.Equal(code, http.StatusOK) // without credentials
			is.Equal(len(body), 0)        // saying nothing more
			code, _ = get(ops+"/healthz", false)
			is.Equal(code, http.StatusUnauthorized) // the details need the login
			code, body = get(ops+"/healthz", true)
			is.Equal(code, http.StatusOK)
			var h opshttp.Health
			is.NoErr(json.Unmarshal(body, &h))
			is.Equal(h.Status, "ok")
			is.Equal(h.Service, "test")                                        // which process answers
			is.Equal(h.Version, version.Version)                               // at which version
			is.Equal(h.Checks, map[string]string{"nats": "ok", "store": "ok"}) // each check
			if split {
				code, _ = get("http://"+httpAddr+"/livez", false)
				is.Equal(code, http.StatusNotFound) // the public port serves the public routes alone
			}
		})
	}
}

// --help and --version print and end without running anything; a service
// takes no other argument.
func TestCommand(t *testing.T) {
	type cfg struct {
		Addr   string `env:"X_ADDR" envDefault:":9"`
		Secret string `env:"X_SECRET" secret:"true"`
	}
	h := service.Help{Name: "thing", Summary: "does a thing.", Configs: []any{cfg{}}, Docs: []string{"docs/production.md"}}
	for _, tc := range []struct {
		args []string
		done bool
		code int
		out  []string
		err  string
	}{
		{nil, false, 0, nil, ""},
		{[]string{"--help"}, true, 0, []string{"thing — does a thing.", "X_ADDR", ":9", "X_SECRET", "X_SECRET_FILE", "docs/configuration.md", "docs/production.md", version.String("thing")}, ""},
		{[]string{"-h"}, true, 0, []string{"X_ADDR"}, ""},
		{[]string{"--version"}, true, 0, []string{version.String("thing")}, ""},
		{[]string{"--port", "1"}, true, 2, nil, `unexpected argument "--port"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			is := is.New(t)
			var stdout, stderr bytes.Buffer
			done, code := service.Command(tc.args, &stdout, &stderr, h)
			is.Equal(done, tc.done) // whether the binary stops here
			is.Equal(code, tc.code) // and its exit code
			for _, want := range tc.out {
				is.True(strings.Contains(stdout.String(), want)) // printed
			}
			is.True(strings.Contains(stderr.String(), tc.err)) // the complaint, if any
		})
	}
}
