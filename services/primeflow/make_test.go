package primeflow_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/datadir"
	"github.com/matryer/is"
)

// make clean removes the build outputs only; make clean-data removes
// DATA_DIR, but refuses while bin/primeflow holds its lock, and asks first.
func TestMakeCleanKeepsTheData(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	bin, data := filepath.Join(dir, "bin"), filepath.Join(dir, "data")
	is.NoErr(os.MkdirAll(bin, 0o755))
	is.NoErr(os.MkdirAll(data, 0o700))
	is.NoErr(os.WriteFile(filepath.Join(data, "primeflow.db"), []byte("the system of record"), 0o600))
	make := func(answer string, args ...string) (string, error) {
		cmd := exec.Command("make", append([]string{"--no-print-directory", "-s", "BIN=" + bin, "DATA_DIR=" + data}, args...)...)
		cmd.Dir = filepath.Join("..", "..")
		cmd.Stdin = strings.NewReader(answer)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	there := func(path string) bool {
		_, err := os.Stat(path)
		return !errors.Is(err, os.ErrNotExist)
	}

	_, err := make("", "clean")
	is.NoErr(err)
	is.True(!there(bin)) // the build outputs go
	is.True(there(data)) // the data stays

	release, err := datadir.Lock(data) // bin/primeflow running on it
	is.NoErr(err)
	out, err := make("y\n", "clean-data")
	is.True(err != nil)                               // refused
	is.True(strings.Contains(out, "is in use"))       // saying why
	is.True(strings.Contains(out, "Nothing removed")) // and that nothing changed
	is.True(there(filepath.Join(data, "primeflow.db")))
	release()

	out, err = make("n\n", "clean-data")
	is.NoErr(err)
	is.True(strings.Contains(out, "Nothing removed.")) // a no keeps it
	is.True(there(data))
	_, err = make("", "clean-data")
	is.NoErr(err)
	is.True(there(data)) // and so does no answer at all
	out, err = make("y\n", "clean-data")
	is.NoErr(err)
	is.True(strings.Contains(out, "Removed ")) // a yes removes it
	is.True(!there(data))
}
