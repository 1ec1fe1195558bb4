// Package dryrun is the shadow run's stand-in for everything primeflow sends
// out of the process (the cutover runbook's first phase): with
// OPTIMOROUTE_DRY_RUN, OptimoRoute is answered inside the process and its
// writes are recorded; with SEND_DRY_RUN, SMS (and any sender wrapped in a
// Sink) are recorded instead of sent. Nothing it stands in for leaves the
// process.
//
// A Recorder appends one JSON line a record to DRY_RUN_DIR/<kind>.jsonl
// (DRY_RUN_DIR defaults to DATA_DIR/dryrun; the files 0600, the folder 0700
// when it makes it), and logs each at WARN. To make
// a sender of any message type record instead of send, wrap it where the
// process builds it, in one line:
//
//	if dry.Send { sender = dryrun.Sink[invite.Message]{Recorder: rec, Kind: "triage-invite"} }
//
// Sink[T] has the method Send(ctx, T) error, so it stands in for any sender
// interface of that shape (sms.Sender is Sink[sms.Message]); OpenSink opens
// the recorder and says so in the log.
package dryrun

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Config is the dry runs a process makes, read from the environment.
type Config struct {
	// OptimoRoute answers OptimoRoute inside the process (a simulator that
	// keeps the orders and plans the days) and records each write.
	OptimoRoute bool `env:"OPTIMOROUTE_DRY_RUN"`
	// Send records SMS (and every other send wrapped in a Sink) instead of
	// sending them.
	Send bool `env:"SEND_DRY_RUN"`
	// Dir is where the records go; empty is DataDir/dryrun.
	Dir     string `env:"DRY_RUN_DIR"`
	DataDir string `env:"DATA_DIR" envDefault:"./data"`
}

// Path is the file the records of kind go to.
func (c Config) Path(kind string) string {
	dir := c.Dir
	if dir == "" {
		dir = filepath.Join(c.DataDir, "dryrun")
	}
	return filepath.Join(dir, kind+".jsonl")
}

// Record is one thing a dry run did not send.
type Record struct {
	At   time.Time `json:"at"`
	Kind string    `json:"kind"`
	// Op is what it would have been: the OptimoRoute operation, for one.
	Op   string          `json:"op,omitempty"`
	Body json.RawMessage `json:"body"`
}

// Recorder appends Records to a file, one JSON line each. It is safe for
// concurrent use, and for several processes appending to one file (each
// record is one write to a file opened for appending).
type Recorder struct {
	mu   sync.Mutex
	f    *os.File
	path string
	log  *slog.Logger
}

// Open opens (making it and its folder if need be) the file at path for
// appending. The records hold SMS bodies and customers' phone numbers: the
// file is readable and writable by its owner only (0600; one an earlier
// release made readable by others is narrowed), and a folder it makes is
// its owner's (0700).
func Open(path string, log *slog.Logger) (*Recorder, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("dryrun: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("dryrun: %w", err)
	}
	if err := narrow(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("dryrun: %w", err)
	}
	return &Recorder{f: f, path: path, log: log}, nil
}

// narrow makes f readable by its owner only when others may read it; a
// file of another owner (several processes may append to one), which this
// process may not change, is left as that owner made it.
func narrow(f *os.File) error {
	fi, err := f.Stat()
	if err != nil || fi.Mode().Perm()&0o077 == 0 {
		return err
	}
	if err := f.Chmod(fi.Mode().Perm() & 0o700); err != nil && !errors.Is(err, fs.ErrPermission) {
		return err
	}
	return nil
}

// Path is the file the records go to.
func (r *Recorder) Path() string { return r.path }

// Record writes v (as JSON) as a record of kind and op.
func (r *Recorder) Record(kind, op string, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("dryrun: record %s: %w", kind, err)
	}
	return r.RecordJSON(kind, op, body)
}

// RecordJSON writes a body that is JSON already (or null when it is not).
func (r *Recorder) RecordJSON(kind, op string, body []byte) error {
	if !json.Valid(body) {
		body = []byte("null")
	}
	line, err := json.Marshal(Record{At: time.Now().UTC(), Kind: kind, Op: op, Body: body})
	if err != nil {
		return fmt.Errorf("dryrun: record %s: %w", kind, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("dryrun: record %s: %w", kind, err)
	}
	r.log.Warn("dry run: recorded, not sent", "kind", kind, "op", op, "file", r.path)
	return nil
}

// Close closes the file.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.f.Close()
}

// Read reads the records of a file, oldest first; a file not written yet
// holds none.
func Read(path string) ([]Record, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dryrun: %w", err)
	}
	defer f.Close()
	var out []Record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for sc.Scan() {
		var rec Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return out, fmt.Errorf("dryrun: %s: %w", path, err)
		}
		out = append(out, rec)
	}
	return out, sc.Err()
}

// Sink records every message it is given instead of sending it: a stand-in
// for any sender whose method is Send(ctx, T) error.
type Sink[T any] struct {
	Recorder *Recorder
	Kind     string
}

// Send records m and accepts it.
func (s Sink[T]) Send(_ context.Context, m T) error { return s.Recorder.Record(s.Kind, "", m) }

// NotSent says that a Sink sends nothing, and where it records (what
// pkg/delivery's NotSender asks): a drainer records its messages Logged,
// never Sent, so that nothing counts a recorded message as sent.
func (s Sink[T]) NotSent() string { return "SEND_DRY_RUN, recorded in " + s.Recorder.Path() }

// OpenSink opens the recorder of kind under cfg and returns a Sink on it,
// saying loudly in the log that nothing of kind is sent.
func OpenSink[T any](cfg Config, kind string, log *slog.Logger) (Sink[T], error) {
	rec, err := Open(cfg.Path(kind), log)
	if err != nil {
		return Sink[T]{}, err
	}
	log.Warn("SEND_DRY_RUN is on: "+kind+" is recorded, NOT SENT", "file", rec.Path())
	return Sink[T]{Recorder: rec, Kind: kind}, nil
}
