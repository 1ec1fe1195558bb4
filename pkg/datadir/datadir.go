// Package datadir is what a process keeps under DATA_DIR besides its
// database and JetStream's store: files written whole or not at all and
// readable by their owner only (WriteFile), a secret made once and kept
// (Secret), and the lock bin/primeflow holds while it runs (Lock), which
// `make clean-data` asks for before it removes anything.
package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// WriteFile writes data to path (mode 0600, its folder made 0700 if it is
// not there) through a temporary file renamed over it, so a reader, or the
// next start after a crash, finds the old contents or the new, never part.
func WriteFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after the rename there is nothing to remove
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path) // CreateTemp made it 0600
}

// Secret returns the secret kept in path, made by gen and written there
// (WriteFile: 0600) the first time, so that it stays the same across
// restarts; made reports whether it was made now. A file that holds
// nothing, or is readable by others, is an error rather than a secret to
// use.
func Secret(path string, gen func() string) (secret string, made bool, err error) {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		secret = gen()
		if err := WriteFile(path, []byte(secret+"\n")); err != nil {
			return "", false, fmt.Errorf("keep a secret in %s: %w", path, err)
		}
		return secret, true, nil
	case err != nil:
		return "", false, err
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return "", false, fmt.Errorf("%s is readable by others (mode %v): chmod 600 it, or remove it to make a new one", path, fi.Mode().Perm())
	}
	if secret = strings.TrimSpace(string(b)); secret == "" {
		return "", false, fmt.Errorf("%s is empty: remove it to make a new one", path)
	}
	return secret, false, nil
}

// LockFile is the name of the lock file under DATA_DIR.
const LockFile = "primeflow.lock"

// ErrLocked: another process holds the lock of the folder.
var ErrLocked = errors.New("in use by another process")

// Lock takes the lock of the folder dir (making it if need be), which one
// process holds at a time until it calls release or exits: an flock(2) on
// dir/primeflow.lock, which also holds the holder's process id. It fails
// with ErrLocked, naming the holder, when another process holds it.
func Lock(dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			if pid := strings.TrimSpace(string(holder)); pid != "" {
				return nil, fmt.Errorf("%s: %w (pid %s)", dir, ErrLocked, pid)
			}
			return nil, fmt.Errorf("%s: %w", dir, ErrLocked)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() {
		_ = f.Truncate(0)
		f.Close() // closing the descriptor drops the lock
	}, nil
}
