package compose_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// healthcheckBinary is where compose/Dockerfile puts compose/healthcheck,
// which the services' compose healthcheck runs.
const healthcheckBinary = "/usr/local/bin/healthcheck"

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd, args string
}

func readDockerfile(t *testing.T) []instruction {
	t.Helper()
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var out []instruction
	var cur strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)})
		cur.Reset()
	}
	return out
}

func TestDockerfile(t *testing.T) {
	is := is.New(t)
	root := repoRoot(t)
	ins := readDockerfile(t)

	var stages []string
	var build, final []instruction // instructions of the first and the last stage
	for _, in := range ins {
		if in.cmd == "FROM" {
			stages = append(stages, in.args)
			continue
		}
		switch len(stages) {
		case 1:
			build = append(build, in)
		case 2:
			final = append(final, in)
		}
	}
	is.Equal(len(stages), 2)                                                // multi-stage: build, then run
	is.True(strings.HasPrefix(stages[0], "golang:"))                        // built with Go
	is.True(strings.Contains(stages[1], "distroless/static"))               // into a static distroless image
	is.True(strings.HasSuffix(stages[1], ":nonroot"))                       // whose default user is not root
	is.True(slices.Contains(final, instruction{"USER", "nonroot:nonroot"})) // and runs as that user
	is.True(slices.Contains(build, instruction{"ARG", "SERVICE"}))          // the service is a build argument
	is.True(slices.Contains(final, instruction{"ARG", "SERVICE"}))          // (both stages read it)
	// A binary listens on loopback unless HTTP_ADDR says otherwise: in a
	// container every interface, or nothing outside it reaches the service.
	is.True(slices.Contains(final, instruction{"ENV", "HTTP_ADDR=:8080"}))

	var envs, runs, copies []string
	for _, in := range build {
		switch in.cmd {
		case "ENV":
			envs = append(envs, strings.Fields(in.args)...)
		case "RUN":
			runs = append(runs, in.args)
		case "COPY":
			copies = append(copies, strings.Fields(in.args)[0])
		}
	}
	is.True(slices.Contains(envs, "CGO_ENABLED=0")) // a static binary
	is.True(slices.Contains(envs, "GOWORK=off"))    // each service's own module, not the workspace
	var builds []string
	for _, r := range runs {
		if strings.Contains(r, "go build") {
			builds = append(builds, r)
		}
	}
	is.Equal(len(builds), 2)                                         // the service and the healthcheck
	is.True(strings.Contains(builds[0], `cd "services/${SERVICE}"`)) // from the service's module
	is.True(strings.Contains(builds[0], `"./cmd/${SERVICE}"`))       // its command
	is.True(strings.Contains(builds[1], "cd compose/healthcheck"))   // and compose/healthcheck
	for _, stamp := range []string{"Version=${VERSION}", "Commit=${COMMIT}", "Date=${BUILD_DATE}"} {
		is.True(strings.Contains(builds[0], "-X github.com/ethosbuilding/primeflow/pkg/version."+stamp)) // stamped as make build stamps, stamp
	}
	for _, arg := range []string{"VERSION=0.0.0-dev", "COMMIT=unknown", "BUILD_DATE=unknown"} {
		is.True(slices.Contains(build, instruction{"ARG", arg})) // from build arguments, arg
	}

	// Every module a service replaces with a relative path is in the context
	// the build copies.
	for _, c := range copies {
		_, err := os.Stat(filepath.Join(root, c))
		is.NoErr(err) // what the Dockerfile copies exists
	}
	mods, err := filepath.Glob(filepath.Join(root, "services", "*", "go.mod"))
	is.NoErr(err) // the services' modules list
	replace := regexp.MustCompile(`=>\s*(\.\.?/\S*)`)
	for _, mod := range mods {
		b, err := os.ReadFile(mod)
		is.NoErr(err) // go.mod reads
		for _, m := range replace.FindAllStringSubmatch(string(b), -1) {
			target, err := filepath.Rel(root, filepath.Join(filepath.Dir(mod), m[1]))
			is.NoErr(err) // a replace inside the repository
			copied := false
			for _, c := range copies {
				if target == filepath.Clean(c) || strings.HasPrefix(target+"/", filepath.Clean(c)+"/") {
					copied = true
				}
			}
			if !copied {
				t.Errorf("%s replaces %s, which compose/Dockerfile does not copy", mod, target)
			}
		}
	}

	is.True(slices.Contains(final, instruction{"COPY", "--from=build /out/healthcheck " + healthcheckBinary})) // the healthcheck where compose runs it
	is.True(slices.Contains(final, instruction{"ENTRYPOINT", `["/usr/local/bin/service"]`}))                   // the service is the entrypoint

	ignore, err := os.ReadFile("Dockerfile.dockerignore")
	is.NoErr(err) // BuildKit's per-Dockerfile ignore file exists
	lines := strings.Split(string(ignore), "\n")
	is.True(slices.Contains(lines, "**/.env")) // secrets never enter the build context
	is.True(slices.Contains(lines, ".git"))    // nor the history
}
