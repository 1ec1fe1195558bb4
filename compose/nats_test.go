package compose_test

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/printer"
	"go/token"
	gotypes "go/types"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/matryer/is"
	"github.com/nats-io/nats-server/v2/server"
)

// TestNATSCluster parses each node's configuration with nats-server's own
// parser, with the variables compose gives the container.
func TestNATSCluster(t *testing.T) {
	p := loadProject(t)
	nodes := []string{"nats-1", "nats-2", "nats-3"}
	for _, node := range nodes {
		t.Run(node, func(t *testing.T) {
			is := is.New(t)
			s := service(t, p, node)
			setNATSPasswords(t, s)

			var confDir string
			for _, v := range s.Volumes {
				if filepath.Base(v.Source) == "nats" {
					confDir = v.Target
					is.True(v.ReadOnly) // configuration mounted read-only
				}
			}
			is.True(confDir != "") // compose/nats is mounted
			conf := filepath.Join(confDir, node+".conf")
			is.True(slices.Contains(s.Command, conf)) // the node runs its own file

			opts, err := server.ProcessConfigFile(filepath.Join("nats", node+".conf"))
			is.NoErr(err)                            // nats-server accepts the file
			is.Equal(opts.ServerName, node)          // named after its compose service (the exporters' leader labels use it)
			is.Equal(opts.Port, 4222)                // the port NATS_URL names
			is.Equal(opts.HTTPPort, 8222)            // the port the exporter and the healthcheck read
			is.True(opts.JetStream)                  // JetStream on
			is.Equal(opts.Cluster.Name, "primeflow") // one cluster
			is.Equal(opts.Cluster.Port, 6222)        // the route port
			var routes []string
			for _, r := range opts.Routes {
				routes = append(routes, r.Host)
			}
			is.Equal(routes, []string{"nats-1:6222", "nats-2:6222", "nats-3:6222"}) // routes to all three nodes
			users := map[string]*server.User{}
			for _, u := range opts.Users {
				users[u.Username] = u
			}
			for _, name := range append(slices.Clone(appServices), "portals", "operators", "operators-readonly") {
				u := users[name]
				is.True(u != nil)                                       // a user a service, the portals and the operators' two (users.conf)
				is.Equal(u.Password, env(s, natsauthPasswordVar(name))) // its password from the node's environment
				is.True(u.Password != "")                               // set
				is.True(u.Permissions != nil)                           // each held to its permissions
				is.True(u.Permissions.Subscribe != nil)
				everything := slices.Contains(u.Permissions.Publish.Allow, ">")
				is.Equal(everything, name == "operators") // only the operators may publish anything
				own := "_INBOX_" + name + ".>"
				if everything {
					is.True(!slices.Contains(u.Permissions.Subscribe.Deny, own))       // the operators read their own replies
					is.True(slices.Contains(u.Permissions.Subscribe.Deny, "_INBOX.>")) // and no one else's
				} else {
					is.True(slices.Contains(u.Permissions.Subscribe.Allow, own)) // each reads replies on its own inbox prefix
				}
			}
			is.Equal(len(opts.Users), len(appServices)+3)           // and no one else
			is.Equal(opts.Username, "")                             // no shared user
			is.True(opts.MaxPayload > 1<<20)                        // a 1 MiB webhook (INGEST_MAX_BODY_BYTES) plus headers fits
			is.Equal(int64(opts.MaxPayload), embeddedMaxPayload(t)) // as much as the embedded server (bin/primeflow) takes

			for _, v := range s.Volumes {
				if v.Type == "volume" {
					is.True(strings.HasPrefix(opts.StoreDir, v.Target)) // JetStream stores on the node's volume
				}
			}
			is.True(s.HealthCheck != nil)                                                                           // healthy means JetStream is ready
			is.True(slices.Contains(s.HealthCheck.Test, fmt.Sprintf("http://127.0.0.1:%d/healthz", opts.HTTPPort))) // on the monitoring port
		})
	}
}

// setNATSPasswords sets the users' password variables a node's container gets
// (compose/nats/users.conf reads them), for nats-server's parser.
func setNATSPasswords(t *testing.T, node types.ServiceConfig) {
	t.Helper()
	for k, v := range node.Environment {
		if strings.HasPrefix(k, "NATS_") && strings.HasSuffix(k, "_PASSWORD") && v != nil {
			t.Setenv(k, *v)
		}
	}
}

// embeddedMaxPayload is the value of natsserver.MaxPayload, the embedded
// server's max_payload, read from pkg/natsserver.
func embeddedMaxPayload(t *testing.T) int64 {
	t.Helper()
	for _, f := range parseDir(t, filepath.Join("..", "pkg", "natsserver")).files {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if name.Name != "MaxPayload" || i >= len(vs.Values) {
						continue
					}
					var expr strings.Builder
					if err := printer.Fprint(&expr, token.NewFileSet(), vs.Values[i]); err != nil {
						t.Fatal(err)
					}
					tv, err := gotypes.Eval(token.NewFileSet(), nil, token.NoPos, expr.String())
					if err != nil {
						t.Fatalf("natsserver.MaxPayload = %s: %v", expr.String(), err)
					}
					n, ok := constant.Int64Val(tv.Value)
					if !ok {
						t.Fatalf("natsserver.MaxPayload = %s is not an integer", expr.String())
					}
					return n
				}
			}
		}
	}
	t.Fatal("no const MaxPayload in pkg/natsserver")
	return 0
}

// TestNATSExporters checks one prometheus-nats-exporter per node, reading
// its monitoring port with the JetStream consumer metrics on (DESIGN.md,
// "Known sharp edges": -jsz=consumers or all).
func TestNATSExporters(t *testing.T) {
	p := loadProject(t)
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("nats-exporter-%d", i)
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			s := service(t, p, name)
			is.True(strings.HasPrefix(s.Image, "natsio/prometheus-nats-exporter:")) // the NATS exporter
			args := []string(s.Command)
			is.True(slices.Contains(args, "-jsz=all") || slices.Contains(args, "-jsz=consumers")) // consumer gauges on
			is.Equal(args[len(args)-1], fmt.Sprintf("http://nats-%d:8222", i))                    // its own node's monitoring port
		})
	}
}

// TestNATSImageMatchesTheTestedServer keeps the cluster on the nats-server
// version the tests embed (pkg/go.mod), where the sharp edges of DESIGN.md
// were checked and message schedules exist (≥ 2.12).
func TestNATSImageMatchesTheTestedServer(t *testing.T) {
	is := is.New(t)
	p := loadProject(t)
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "pkg", "go.mod"))
	is.NoErr(err) // pkg/go.mod reads
	m := regexp.MustCompile(`github\.com/nats-io/nats-server/v2 v(\d+\.\d+\.\d+)`).FindStringSubmatch(string(b))
	is.True(m != nil) // pkg requires nats-server
	for _, node := range []string{"nats-1", "nats-2", "nats-3"} {
		is.Equal(service(t, p, node).Image, "nats:"+m[1]+"-alpine") // the same server the tests run against
	}
}
