package proctest

import (
	"context"
	"fmt"
	"os/exec"
)

// Build builds the main packages pkgs (import paths or ./relative to dir,
// the module or workspace they are built in) into binDir with one go build,
// each binary named as go build names it (the package's last path element,
// without a major version suffix). It shares the caller's build cache.
func Build(ctx context.Context, dir, binDir string, pkgs ...string) error {
	args := append([]string{"build", "-o", binDir + "/"}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %v: %w\n%s", pkgs, err, out)
	}
	return nil
}
