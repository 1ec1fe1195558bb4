package compose_test

import (
	"bufio"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/matryer/is"
	"github.com/microsoft/go-mssqldb/msdsn"
)

// appServices are the primeflow services of DESIGN.md, each an image built
// from compose/Dockerfile with SERVICE set to its directory under services/.
var appServices = []string{
	"ingest", "resolver", "job-mirror", "child-mirror",
	"newjob-pipeline", "makesafe", "optimo-create", "optimo-plan",
	"mail-intake",
}

// notComposed are directories under services/ that are not services of
// the stack: the all-in-one process of `make run`, and primectl, which
// compose runs as the one-shot migrate.
var notComposed = []string{"primeflow", "primectl"}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// loadProject loads docker-compose.yml the way `docker compose
// --env-file compose/.env` does, with .env.example as the env file: schema
// validation, interpolation (every ${VAR:?} must be set), merge keys.
func loadProject(t *testing.T) *types.Project {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{"docker-compose.yml"},
		cli.WithWorkingDirectory("."),
		cli.WithEnvFiles(".env.example"),
		cli.WithDotEnv,
	)
	if err != nil {
		t.Fatalf("compose options: %v", err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("load docker-compose.yml with .env.example: %v", err)
	}
	return p
}

// service is a service of the project, including those of profiles that
// `up` does not start.
func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	if s, ok := p.DisabledServices[name]; ok {
		return s
	}
	s, err := p.GetService(name)
	if err != nil {
		t.Fatalf("service %s: %v", name, err)
	}
	return s
}

func env(s types.ServiceConfig, key string) string {
	if v := s.Environment[key]; v != nil {
		return *v
	}
	return ""
}

// envVar is one variable of .env.example.
type envVar struct {
	name, value string
	documented  bool // a comment sits right above it or above its group
}

func readEnvExample(t *testing.T) []envVar {
	t.Helper()
	f, err := os.Open(".env.example")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var vars []envVar
	prevComment, inGroup, groupDocumented := false, false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
			prevComment, inGroup = false, false
		case strings.HasPrefix(line, "#"):
			prevComment, inGroup = true, false
		default:
			name, value, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf(".env.example: %q is neither a comment nor NAME=value", line)
			}
			if !inGroup {
				groupDocumented = prevComment
			}
			vars = append(vars, envVar{name: name, value: value, documented: groupDocumented})
			prevComment, inGroup = false, true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return vars
}

// composeVariables are the ${VAR…} names docker-compose.yml interpolates.
func composeVariables(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]bool)
	for _, m := range regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)`).FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = true
	}
	return out
}

func TestComposeFileLoads(t *testing.T) {
	is := is.New(t)
	p := loadProject(t)
	is.Equal(p.Name, "primeflow") // the project name docker compose uses
	want := append([]string{
		"mssql", "db-init", "migrate", "db-grants",
		"nats-1", "nats-2", "nats-3", "nats-streams",
		"nats-exporter-1", "nats-exporter-2", "nats-exporter-3",
		"prometheus", "grafana",
	}, appServices...)
	got := p.ServiceNames()
	sort.Strings(want)
	sort.Strings(got)
	is.Equal(got, want) // every piece of the stack, nothing else

	tools := service(t, p, "primectl")
	is.Equal(tools.Profiles, []string{"tools"})              // operators' primectl, never started by up
	is.Equal(tools.Image, service(t, p, "migrate").Image)    // the image migrate builds
	is.Equal(env(tools, "INGEST_URL"), "http://ingest:8090") // replay --now reaches ingest's ops port
	cfg, err := msdsn.Parse(env(tools, "DATABASE_URL"))
	is.NoErr(err)                             // a go-mssqldb DSN
	is.Equal(cfg.User, "primeflow_operators") // with the operators' login: replay runs the procedures
	is.Equal(cfg.Password, "")                // the password from a file, not the URL
	is.Equal(mountedSecret(t, p, tools, "DATABASE_PASSWORD_FILE"), "PRIMEFLOW_OPERATORS_PASSWORD")
	is.Equal(mountedSecret(t, p, tools, "ADMIN_PASSWORD_FILE"), "ADMIN_PASSWORD")
	is.Equal(env(tools, "NATS_URL"), env(service(t, p, "ingest"), "NATS_URL"))                            // the services' cluster
	is.Equal(env(tools, "NATS_USER"), "operators-readonly")                                               // status with the read-only user
	is.Equal(mountedSecret(t, p, tools, "NATS_PASSWORD_FILE"), natsauthPasswordVar("operators-readonly")) // from a file
	is.Equal(env(tools, "NATS_STREAM_REPLICAS"), "3")                                                     // streams check as the services check
}

// nats-streams is the operators' step for NATS, as migrate is for SQL:
// `primectl streams apply` with the operators' user, once the cluster is
// healthy, before any service starts (TestAppServices).
func TestNATSStreams(t *testing.T) {
	is := is.New(t)
	p := loadProject(t)
	s := service(t, p, "nats-streams")
	is.Equal(s.Image, service(t, p, "migrate").Image)                                        // the image migrate builds
	is.Equal([]string(s.Command), []string{"streams", "apply"})                              // running `primectl streams apply`
	is.Equal(s.Restart, "no")                                                                // once
	is.True(s.ReadOnly)                                                                      // read-only root
	is.Equal(s.CapDrop, []string{"ALL"})                                                     // no capabilities
	is.Equal(env(s, "NATS_URL"), env(service(t, p, "ingest"), "NATS_URL"))                   // the services' cluster
	is.Equal(env(s, "NATS_USER"), "operators")                                               // as the operators
	is.Equal(mountedSecret(t, p, s, "NATS_PASSWORD_FILE"), natsauthPasswordVar("operators")) // with their password, from a file
	is.Equal(env(s, "NATS_STREAM_REPLICAS"), "3")                                            // R3, as the services check them
	for _, n := range []string{"nats-1", "nats-2", "nats-3"} {
		is.Equal(s.DependsOn[n].Condition, types.ServiceConditionHealthy) // once every NATS node is healthy
	}
}

func TestEveryServiceDirectoryIsComposed(t *testing.T) {
	is := is.New(t)
	entries, err := os.ReadDir(filepath.Join(repoRoot(t), "services"))
	is.NoErr(err) // services/ lists
	for _, e := range entries {
		if !e.IsDir() || slices.Contains(notComposed, e.Name()) {
			continue
		}
		is.True(slices.Contains(appServices, e.Name())) // a new service under services/ belongs in docker-compose.yml
	}
}

func TestAppServices(t *testing.T) {
	p := loadProject(t)
	root := repoRoot(t)
	for _, name := range appServices {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			s := service(t, p, name)
			is.True(s.Build != nil)                                                    // built here
			is.Equal(filepath.Clean(s.Build.Context), root)                            // from the repository root
			is.Equal(s.Build.Dockerfile, "compose/Dockerfile")                         // with the one Dockerfile
			is.True(s.Build.Args["SERVICE"] != nil)                                    // which needs SERVICE
			is.Equal(*s.Build.Args["SERVICE"], name)                                   // naming this service's directory
			is.True(strings.HasPrefix(s.Image, "primeflow/"+name+":"))                 // tagged after it
			is.True(s.HealthCheck != nil)                                              // has a healthcheck
			is.Equal([]string(s.HealthCheck.Test), []string{"CMD", healthcheckBinary}) // the image's own, with the admin credentials
			is.Equal(s.Restart, "unless-stopped")                                      // comes back after a crash
			is.True(s.ReadOnly)                                                        // read-only root
			is.Equal(s.CapDrop, []string{"ALL"})                                       // no capabilities

			is.Equal(s.DependsOn["migrate"].Condition, types.ServiceConditionCompletedSuccessfully)      // starts after the migration
			is.Equal(s.DependsOn["db-grants"].Condition, types.ServiceConditionCompletedSuccessfully)    // and the grants
			is.Equal(s.DependsOn["nats-streams"].Condition, types.ServiceConditionCompletedSuccessfully) // and the streams and consumers
			for _, n := range []string{"nats-1", "nats-2", "nats-3"} {
				is.Equal(s.DependsOn[n].Condition, types.ServiceConditionHealthy) // and once every NATS node is healthy
			}

			is.Equal(env(s, "NATS_STREAM_REPLICAS"), "3")                             // R3 streams
			is.Equal(env(s, "HTTP_ADDR"), ":8080")                                    // where Prometheus and the healthcheck look
			is.True(env(s, "ADMIN_USER") != "")                                       // /metrics and /healthz need Basic auth
			is.Equal(mountedSecret(t, p, s, "ADMIN_PASSWORD_FILE"), "ADMIN_PASSWORD") // with the password from a file

			var hosts []string
			for _, u := range strings.Split(env(s, "NATS_URL"), ",") {
				nu, err := url.Parse(u)
				is.NoErr(err)               // each NATS URL parses
				is.Equal(nu.Scheme, "nats") // a client URL
				is.True(nu.User == nil)     // holding no credentials
				hosts = append(hosts, nu.Host)
			}
			is.Equal(hosts, []string{"nats-1:4222", "nats-2:4222", "nats-3:4222"})            // all three nodes
			is.Equal(env(s, "NATS_USER"), name)                                               // as its own NATS user (compose/nats/users.conf)
			is.Equal(mountedSecret(t, p, s, "NATS_PASSWORD_FILE"), natsauthPasswordVar(name)) // with its own password, from a file
			for key := range s.Environment {
				if secretName.MatchString(key) && !strings.HasSuffix(key, "_FILE") {
					t.Errorf("%s is given %s in its environment: secrets come from files (%s_FILE)", name, key, key)
				}
			}

			cfg, err := msdsn.Parse(env(s, "DATABASE_URL"))
			is.NoErr(err)                                                      // go-mssqldb takes the DSN (pkg/store/mssql.Open)
			is.True(strings.HasPrefix(env(s, "DATABASE_URL"), "sqlserver://")) // SQL Server, not SQLite
			is.Equal(cfg.Host, "mssql")                                        // the mssql service
			is.Equal(cfg.Database, "primeflow")                                // the database db-init creates
			login := "primeflow_pipeline"
			switch name {
			case "ingest":
				login = "primeflow_ingest"
			case "mail-intake":
				login = "primeflow_mailintake"
			}
			is.Equal(cfg.User, login)                                                                      // its role's login, not sa
			is.Equal(cfg.Password, "")                                                                     // the password not in the URL
			is.Equal(mountedSecret(t, p, s, "DATABASE_PASSWORD_FILE"), strings.ToUpper(login)+"_PASSWORD") // but from a file

			for _, port := range s.Ports {
				if name != "ingest" {
					t.Errorf("%s publishes port %d: only ingest takes traffic from outside", name, port.Target)
				}
			}
		})
	}
}

// TestServiceEnvironmentIsRead checks that every variable compose gives a
// service is one the service's code reads: an `env:"…"` tag (with any
// envPrefix) in a package the service's command imports, as `go list -deps`
// finds them with GOWORK=off, the way compose/Dockerfile builds it. A
// service whose command is not written yet is checked against every
// package under pkg/ and services/.
func TestServiceEnvironmentIsRead(t *testing.T) {
	p := loadProject(t)
	root := repoRoot(t)
	idx := newEnvIndex(t, root)
	everywhere := idx.names(goDirs(t, filepath.Join(root, "pkg"), filepath.Join(root, "services")))
	commands := map[string]string{"migrate": "primectl", "primectl": "primectl", "nats-streams": "primectl"} // compose service → services/<dir>
	for _, name := range appServices {
		commands[name] = name
	}
	for name, dir := range commands {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			s := service(t, p, name)
			read := everywhere
			if _, err := os.Stat(filepath.Join(root, "services", dir, "cmd", dir)); err == nil {
				read = idx.names(serviceDeps(t, root, dir))
			} else {
				t.Logf("services/%s/cmd/%s does not exist yet: checked against every package", dir, dir)
			}
			for key := range s.Environment {
				if !read[key] {
					t.Errorf("%s is given %s, which none of its packages reads", name, key)
				}
			}
			is.True(read["DATABASE_URL"]) // the reading itself works
		})
	}
}

// serviceDeps lists the repository directories of the packages a service's
// command is built from, resolved with GOWORK=off as compose/Dockerfile
// builds it: a module that cannot be resolved alone fails here.
func serviceDeps(t *testing.T, root, name string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.Dir}}", "./cmd/"+name)
	cmd.Dir = filepath.Join(root, "services", name)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("services/%s: GOWORK=off go list -deps ./cmd/%s (what the image build needs): %v\n%s", name, name, err, out)
	}
	var dirs []string
	for _, d := range strings.Fields(string(out)) {
		if strings.HasPrefix(d, root+string(filepath.Separator)) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

func TestMigrate(t *testing.T) {
	is := is.New(t)
	p := loadProject(t)
	s := service(t, p, "migrate")
	is.True(s.Build != nil)                                                                 // built here
	is.Equal(s.Build.Dockerfile, "compose/Dockerfile")                                      // with the one Dockerfile
	is.Equal(*s.Build.Args["SERVICE"], "primectl")                                          // as primectl
	is.Equal([]string(s.Command), []string{"migrate"})                                      // running `primectl migrate`
	is.Equal(s.Restart, "no")                                                               // once
	is.Equal(s.DependsOn["db-init"].Condition, types.ServiceConditionCompletedSuccessfully) // after the database exists
	cfg, err := msdsn.Parse(env(s, "DATABASE_URL"))
	is.NoErr(err)                                                                            // a go-mssqldb DSN
	is.Equal(cfg.Host, "mssql")                                                              // the mssql service
	is.Equal(cfg.Database, "primeflow")                                                      // the primeflow database
	is.Equal(cfg.User, "primeflow_migrate")                                                  // as the schema's owner
	is.Equal(mountedSecret(t, p, s, "DATABASE_PASSWORD_FILE"), "PRIMEFLOW_MIGRATE_PASSWORD") // its password from a file

	dbInit := service(t, p, "db-init")
	is.Equal(dbInit.DependsOn["mssql"].Condition, types.ServiceConditionHealthy) // once SQL Server answers
	is.Equal(dbInit.Restart, "no")                                               // once
	script := ""
	for i, a := range dbInit.Command {
		if a == "-i" && i+1 < len(dbInit.Command) {
			script = dbInit.Command[i+1]
		}
	}
	mounted := false
	for _, v := range dbInit.Volumes {
		if v.Target == script && filepath.Base(v.Source) == "init.sql" && v.ReadOnly {
			mounted = true
		}
	}
	is.True(mounted) // sqlcmd -i reads compose/mssql/init.sql, mounted read-only
	b, err := os.ReadFile(filepath.Join("mssql", "init.sql"))
	is.NoErr(err) // init.sql reads
	sql := string(b)
	is.True(env(dbInit, "SQLCMDPASSWORD") != "") // sqlcmd takes sa's password from the environment
	for _, login := range []string{"primeflow_migrate", "primeflow_ingest", "primeflow_mailintake", "primeflow_pipeline", "primeflow_operators"} {
		v := strings.ToUpper(login) + "_PASSWORD"
		is.True(strings.Contains(sql, "CREATE LOGIN "+login+" WITH PASSWORD = N'$("+v+")'")) // init.sql makes each login the DSNs use
		is.True(env(dbInit, v) != "")                                                        // from the variable
		is.Equal(env(dbInit, v), p.Environment[v])                                           // the services' secret files are made from
	}
	is.True(strings.Contains(sql, "GRANT EXECUTE ON SCHEMA::dbo TO primeflow_pipeline")) // the pipeline runs the procedures

	grants := service(t, p, "db-grants")
	is.Equal(grants.DependsOn["migrate"].Condition, types.ServiceConditionCompletedSuccessfully) // once the objects exist
	is.Equal(grants.Restart, "no")                                                               // once
	b, err = os.ReadFile(filepath.Join("mssql", "grants.sql"))
	is.NoErr(err) // grants.sql reads
	scripts := mssqlScripts(t)
	granted := regexp.MustCompile(`GRANT (\w+) ON (OBJECT|TYPE)::dbo\.(\w+) TO (\w+);`).FindAllStringSubmatch(string(b), -1)
	is.True(len(granted) >= 5) // ingest's procedures, one by one
	for _, g := range granted {
		is.True(g[4] == "primeflow_ingest" || g[4] == "primeflow_mailintake")             // only the narrow logins are granted object by object
		is.True(strings.Contains(strings.ToLower(scripts), "dbo."+strings.ToLower(g[3]))) // an object sql/mssql or the migration table makes
	}
}

// What each narrow login of grants.sql may do is what its service calls,
// and nothing else: ingest's the webhook log's procedures, and the mail
// intake's — the service that parses mail anyone can send — the email
// receipts' alone, with no role and no grant on the schema, so that its
// credential cannot write smsQueue (whose texts makesafe sends to any
// number) or read the mirror, as the pipeline's login it had could
// (issue 27 §4).
func TestNarrowLoginsAreGrantedWhatTheirServiceCalls(t *testing.T) {
	root := repoRoot(t)
	read := func(parts ...string) string {
		b, err := os.ReadFile(filepath.Join(append([]string{root}, parts...)...))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	grants := map[string][]string{}
	for _, g := range regexp.MustCompile(`GRANT (\w+) ON (?:OBJECT|TYPE)::dbo\.(\w+) TO (\w+);`).FindAllStringSubmatch(read("compose", "mssql", "grants.sql"), -1) {
		grants[g[3]] = append(grants[g[3]], g[1]+" "+g[2])
	}
	procs := func(file string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`"dbo\.(sp\w+)"`).FindAllStringSubmatch(read("pkg", "store", "mssql", file), -1) {
			out = append(out, "EXECUTE "+m[1])
		}
		return out
	}
	for login, want := range map[string][]string{
		// The mail intake's store is store.EmailReceipts (below), whose
		// procedures emailjobs.go names; and the applied scripts, read at start.
		"primeflow_mailintake": append(procs("emailjobs.go"), "SELECT primeflowSchemaMigrations"),
		"primeflow_ingest": {"EXECUTE spPrimeInsertWebhookLog", "EXECUTE spPrimeflowGetWebhookLogUnpublished", "EXECUTE spPrimeflowSetWebhookLogPublished",
			"EXECUTE spPrimeflowCountWebhookLog", "EXECUTE primeflowIdList", "SELECT primeflowSchemaMigrations"},
	} {
		t.Run(login, func(t *testing.T) {
			is := is.New(t)
			got := slices.Sorted(slices.Values(grants[login]))
			slices.Sort(want)
			is.Equal(got, want) // granted exactly what the service calls
			for _, line := range strings.Split(read("compose", "mssql", "init.sql"), "\n") {
				if strings.Contains(line, login) && (strings.Contains(line, "ALTER ROLE") || strings.Contains(line, "IS_ROLEMEMBER") || strings.Contains(line, "SCHEMA::")) {
					t.Errorf("init.sql gives %s more than its objects: %s", login, strings.TrimSpace(line))
				}
			}
		})
	}
	// The mail intake calls no store method but the receipts' (what it is
	// granted): its store is a store.EmailReceipts.
	is := is.New(t)
	is.True(regexp.MustCompile(`(?m)^\s+store\s+store\.EmailReceipts$`).MatchString(read("services", "mail-intake", "mailintake.go")))
	is.Equal(len(procs("emailjobs.go")), 3) // RegisterEmail, UpdateEmailReceipt, GetEmailReceipt
}

// mssqlScripts is every script of sql/mssql and the migration code, which
// makes the objects grants.sql names.
func mssqlScripts(t *testing.T) string {
	t.Helper()
	var all strings.Builder
	for _, glob := range []string{filepath.Join(repoRoot(t), "sql", "mssql", "*.sql"), filepath.Join(repoRoot(t), "pkg", "store", "mssql", "migrate.go")} {
		files, err := filepath.Glob(glob)
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: %v", glob, err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			all.Write(b)
		}
	}
	return all.String()
}

// secretName is a variable that holds a secret, by its name.
var secretName = regexp.MustCompile(`(PASSWORD|SECRET|API_KEY|_AUTH|TOKEN)(_FILE)?$`)

// mountedSecret checks that s's variable key names a secret file the
// service mounts, and returns the .env variable the secret is made from.
func mountedSecret(t *testing.T, p *types.Project, s types.ServiceConfig, key string) string {
	t.Helper()
	path := env(s, key)
	target, ok := strings.CutPrefix(path, "/run/secrets/")
	if !ok {
		t.Errorf("%s: %s=%q is not a file under /run/secrets", s.Name, key, path)
		return ""
	}
	for _, m := range s.Secrets {
		name := m.Target
		if name == "" {
			name = m.Source
		}
		if strings.TrimPrefix(name, "/run/secrets/") != target {
			continue
		}
		if m.Mode == nil {
			t.Errorf("%s: secret %s has no mode: older Compose releases make it root's, 0400, and the services run as 65532", s.Name, m.Source)
		}
		return p.Secrets[m.Source].Environment
	}
	t.Errorf("%s: %s=%s, which it does not mount", s.Name, key, path)
	return ""
}

// natsauthPasswordVar is pkg/natsauth.PasswordVar: the variable a NATS
// user's password comes from (compose/nats/users.conf names them).
func natsauthPasswordVar(user string) string {
	return "NATS_" + strings.ToUpper(strings.ReplaceAll(user, "-", "_")) + "_PASSWORD"
}

func TestEnvExample(t *testing.T) {
	is := is.New(t)
	vars := readEnvExample(t)
	defined := make(map[string]envVar)
	for _, v := range vars {
		_, dup := defined[v.name]
		is.True(!dup) // each variable once
		defined[v.name] = v
		if !v.documented {
			t.Errorf(".env.example: %s has no comment saying what it is", v.name)
		}
	}
	used := composeVariables(t)
	for _, sec := range loadProject(t).Secrets {
		used[sec.Environment] = true // a secret file made from the variable
	}
	for name := range used {
		if _, ok := defined[name]; !ok {
			t.Errorf("docker-compose.yml uses ${%s}, which .env.example does not document", name)
		}
	}
	for name := range defined {
		if !used[name] {
			t.Errorf(".env.example documents %s, which docker-compose.yml does not use", name)
		}
	}

	secret := regexp.MustCompile(`(PASSWORD|SECRET|API_KEY|_AUTH)$`)
	for _, v := range vars {
		if secret.MatchString(v.name) && v.value != "" {
			is.True(strings.HasPrefix(strings.ToLower(v.value), "change-me")) // a placeholder, never a real secret
		}
	}

	// Values that compose puts into URLs are not escaped on the way.
	b, err := os.ReadFile("docker-compose.yml")
	is.NoErr(err) // docker-compose.yml reads
	urlSafe := regexp.MustCompile(`^[A-Za-z0-9._~-]+$`)
	inURL := regexp.MustCompile(`://\S*`)
	ref := regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
	for _, u := range inURL.FindAllString(string(b), -1) {
		for _, m := range ref.FindAllStringSubmatch(u, -1) {
			if !urlSafe.MatchString(defined[m[1]].value) {
				t.Errorf(".env.example: %s goes into a URL: letters, digits and - _ . ~ only", m[1])
			}
		}
	}
	// SQL Server's password policy.
	for _, name := range []string{"MSSQL_SA_PASSWORD", "PRIMEFLOW_MIGRATE_PASSWORD", "PRIMEFLOW_INGEST_PASSWORD", "PRIMEFLOW_PIPELINE_PASSWORD", "PRIMEFLOW_OPERATORS_PASSWORD"} {
		v := defined[name].value
		is.True(len(v) >= 8)                                          // long enough for SQL Server
		is.True(strings.ContainsAny(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZ")) // upper case
		is.True(strings.ContainsAny(v, "abcdefghijklmnopqrstuvwxyz")) // lower case
		is.True(strings.ContainsAny(v, "0123456789"))                 // digits
	}
}

func TestEnvFileIsIgnored(t *testing.T) {
	is := is.New(t)
	b, err := os.ReadFile(filepath.Join(repoRoot(t), ".gitignore"))
	is.NoErr(err) // .gitignore reads
	lines := strings.Split(string(b), "\n")
	is.True(slices.Contains(lines, "/compose/.env")) // compose/.env, with the real secrets, is never committed
}

func TestPortsStayLocal(t *testing.T) {
	p := loadProject(t)
	for _, name := range p.ServiceNames() {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			for _, port := range service(t, p, name).Ports {
				if name == "ingest" {
					continue // Prime must reach the webhook
				}
				is.Equal(port.HostIP, "127.0.0.1") // operators' ports listen on the host's loopback only
			}
		})
	}
}
