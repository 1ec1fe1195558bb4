package version

import (
	"testing"

	"github.com/matryer/is"
)

func TestSemver(t *testing.T) {
	for _, tc := range []struct{ stamped, want string }{
		{"0.0.0-dev", "0.0.0-dev"},
		{"1.4.0", "1.4.0"},
		{"1.4.0-3-g9c7147a-dirty", "1.4.0-3-g9c7147a-dirty"},
		{"9c7147a", "0.0.0-dev+9c7147a"},       // git describe --always with no tag
		{"v1.4.0", "0.0.0-dev+v1.4.0"},         // a leading v is not semantic
		{"build 7/12", "0.0.0-dev+build.7.12"}, // what micro cannot take is dropped
		{"", "0.0.0-dev"},
	} {
		t.Run(tc.stamped, func(t *testing.T) {
			is := is.New(t)
			Version = tc.stamped
			t.Cleanup(func() { Version = "0.0.0-dev" })
			is.Equal(Semver(), tc.want)           // a version NATS micro accepts
			is.True(semver.MatchString(Semver())) // always semantic
		})
	}
}
