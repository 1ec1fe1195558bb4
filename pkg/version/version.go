// Package version is what a primeflow binary says it is: the version, the
// commit and the build date, stamped at build by the Makefile's -ldflags
// (make build):
//
//	-X github.com/ethosbuilding/primeflow/pkg/version.Version=1.4.0
//	-X github.com/ethosbuilding/primeflow/pkg/version.Commit=9c7147a
//	-X github.com/ethosbuilding/primeflow/pkg/version.Date=2026-12-01T11:22:07Z
//
// A plain go build (a test, go run) leaves them at their defaults. Every
// binary prints String for --version, and every NATS micro service reports
// Semver, so `nats micro ls` shows one version for a deployment.
package version

import (
	"fmt"
	"regexp"
	"strings"
)

// Stamped at build; see the package doc.
var (
	// Version is the release, semantic (1.4.0, 1.4.0-3-g9c7147a); a build
	// from a tree with no release tag is 0.0.0-dev.
	Version = "0.0.0-dev"
	// Commit is the git commit built ("-dirty" when the tree had changes).
	Commit = "unknown"
	// Date is when it was built (UTC, RFC 3339).
	Date = "unknown"
)

// String is the one line --version prints for the binary name.
func String(name string) string {
	return fmt.Sprintf("%s %s (commit %s, built %s)", name, Version, Commit, Date)
}

// semver is semver.org's pattern, which NATS micro refuses a service's
// version without.
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// notIdentifier is what a semantic version's build identifiers cannot hold.
var notIdentifier = regexp.MustCompile(`[^0-9A-Za-z-]+`)

// Semver is Version for a NATS micro service: Version when it is a semantic
// version, else 0.0.0-dev+ and what it can keep of it, so that a stamp
// micro refuses never stops a service from serving.
func Semver() string {
	if semver.MatchString(Version) {
		return Version
	}
	keep := strings.Trim(notIdentifier.ReplaceAllString(Version, "."), ".")
	if s := "0.0.0-dev+" + keep; keep != "" && semver.MatchString(s) {
		return s
	}
	return "0.0.0-dev"
}
