package datadir_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/datadir"
	"github.com/matryer/is"
)

func TestWriteFile(t *testing.T) {
	is := is.New(t)
	path := filepath.Join(t.TempDir(), "new", "state.json")
	is.NoErr(datadir.WriteFile(path, []byte("one")))
	is.NoErr(datadir.WriteFile(path, []byte("two")))
	b, err := os.ReadFile(path)
	is.NoErr(err)
	is.Equal(string(b), "two") // the last write, whole
	fi, err := os.Stat(path)
	is.NoErr(err)
	is.Equal(fi.Mode().Perm(), os.FileMode(0o600)) // the owner's only
	left, err := os.ReadDir(filepath.Dir(path))
	is.NoErr(err)
	is.Equal(len(left), 1) // no temporary file left behind
}

// A secret is made once and the same one is read back after a restart.
func TestSecretIsKept(t *testing.T) {
	is := is.New(t)
	path := filepath.Join(t.TempDir(), "admin-password")
	n := 0
	gen := func() string { n++; return "secret-" + strconv.Itoa(n) }
	first, made, err := datadir.Secret(path, gen)
	is.NoErr(err)
	is.True(made) // made the first time
	again, made, err := datadir.Secret(path, gen)
	is.NoErr(err)
	is.True(!made)         // read, not made, the second time
	is.Equal(again, first) // the same secret
	is.Equal(first, "secret-1")
	fi, err := os.Stat(path)
	is.NoErr(err)
	is.Equal(fi.Mode().Perm(), os.FileMode(0o600)) // kept readable by its owner only

	is.NoErr(os.Chmod(path, 0o644))
	_, _, err = datadir.Secret(path, gen)
	is.True(err != nil && strings.Contains(err.Error(), "readable by others")) // refused, not used
	is.NoErr(os.Chmod(path, 0o600))
	is.NoErr(os.WriteFile(path, []byte("\n"), 0o600))
	_, _, err = datadir.Secret(path, gen)
	is.True(err != nil && strings.Contains(err.Error(), "empty")) // refused, not used
}

func TestLock(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	release, err := datadir.Lock(dir)
	is.NoErr(err)
	_, err = datadir.Lock(dir)
	is.True(errors.Is(err, datadir.ErrLocked))                               // one holder at a time
	is.True(strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid()))) // naming the holder
	if flock, err := exec.LookPath("flock"); err == nil {
		// What make clean-data asks: flock(1) sees the lock too.
		is.True(exec.Command(flock, "-n", filepath.Join(dir, datadir.LockFile), "true").Run() != nil) // held
		release()
		is.NoErr(exec.Command(flock, "-n", filepath.Join(dir, datadir.LockFile), "true").Run()) // free once released
	} else {
		release()
	}
	release, err = datadir.Lock(dir)
	is.NoErr(err) // free again once released
	release()
}
