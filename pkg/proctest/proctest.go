// Package proctest runs programs as processes of their own, for tests,
// benchmarks and fault-injection runs that need the real binaries: start one
// with its environment, wait until its /healthz answers 200, kill -9 it,
// start it again, and keep what every incarnation wrote in one log file.
//
//	p, err := proctest.Start(ctx, proctest.Spec{
//		Name:    "ingest",
//		Path:    filepath.Join(bin, "ingest"),
//		Env:     []string{"HTTP_ADDR=" + addr, …},
//		LogFile: filepath.Join(dir, "ingest.log"),
//		Healthz: &proctest.Healthz{URL: "http://" + addr + "/healthz", User: "admin", Password: pw},
//	})
//	…
//	p.Kill()         // SIGKILL, waits until the process is gone
//	p.Restart(ctx)   // the same Spec again, healthy before it returns
//	p.Exits()        // the times it exited without being told to
//	p.Stop(10 * time.Second)
//
// A process runs in a process group of its own and, on Linux, is killed if
// the program that started it dies, so a crashed test leaves nothing behind.
// Ports come from FreePort, which picks them below the kernel's ephemeral
// range: a port a process gives up when it is killed is not handed to
// another program's listen(":0") or outgoing connection before it comes back.
package proctest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Spec says how to run a program.
type Spec struct {
	// Name names the process in errors and in its log.
	Name string
	// Path is the program's binary.
	Path string
	Args []string
	// Env is the process's whole environment (KEY=value): nothing is
	// inherited from the caller's.
	Env []string
	// Dir is the working directory; empty is the caller's.
	Dir string
	// LogFile receives the process's stdout and stderr, every incarnation
	// appended after a line that says which one it is. Empty discards them.
	LogFile string
	// Healthz, when set, is what Start and Restart wait for; nil waits for
	// nothing beyond the process starting.
	Healthz *Healthz
	// StartTimeout bounds the wait for Healthz when the caller's context has
	// no deadline (default 60s).
	StartTimeout time.Duration
}

// Healthz is an HTTP health check: a GET that answers 200.
type Healthz struct {
	URL string
	// User and Password, when User is set, are sent as Basic auth.
	User, Password string
}

// Exit is the end of an incarnation that nobody asked for: not Kill, not
// Stop.
type Exit struct {
	At  time.Time
	PID int
	// Start is which incarnation it was (1 the first), for IncarnationLog.
	Start int
	// Err is what the process's Wait returned: its exit status.
	Err error
}

// Proc is a program run as a process, again after each Kill or Stop by
// Restart. Its methods are safe for concurrent use.
type Proc struct {
	spec Spec

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{} // closed when the current incarnation has exited
	waitErr  error         // the current incarnation's, once done is closed
	stopping bool          // the current incarnation is being killed or stopped
	starts   int
	exits    []Exit
}

// ErrExited is returned, wrapped with the tail of the log, when a process
// exits while Start or Restart waits for it to become healthy.
var ErrExited = errors.New("process exited")

// New returns the Proc of spec, not started: Restart starts it.
func New(spec Spec) *Proc { return &Proc{spec: spec} }

// Start starts the program and waits until it is healthy (Spec.Healthz).
// When it does not become healthy, Start kills it and returns the error
// with the tail of its log; the Proc is returned all the same, so that its
// log can be read.
func Start(ctx context.Context, spec Spec) (*Proc, error) {
	p := New(spec)
	return p, p.Restart(ctx)
}

// Restart starts the program again (or the first time) and waits until it
// is healthy; a process that stays unhealthy is killed. It fails if the
// process is running.
func (p *Proc) Restart(ctx context.Context) error {
	if err := p.launch(); err != nil {
		return err
	}
	if err := p.WaitHealthy(ctx); err != nil {
		if !errors.Is(err, ErrExited) {
			p.Kill()
		}
		return fmt.Errorf("%s: %w\n%s", p.spec.Name, err, p.LogTail(40))
	}
	return nil
}

func (p *Proc) launch() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !isClosed(p.done) {
		return fmt.Errorf("%s: already running (pid %d)", p.spec.Name, p.cmd.Process.Pid)
	}
	out := io.Discard
	if p.spec.LogFile != "" {
		f, err := os.OpenFile(p.spec.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("%s: log: %w", p.spec.Name, err)
		}
		defer f.Close() // once started, the child holds its own copy
		out = f
	}
	cmd := exec.Command(p.spec.Path, p.spec.Args...)
	cmd.Env = append([]string{}, p.spec.Env...)
	cmd.Dir = p.spec.Dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	p.starts++
	fmt.Fprintf(out, "%s%d at %s\n", p.header(), p.starts, time.Now().UTC().Format(time.RFC3339Nano))
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: start: %w", p.spec.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.stopping, p.waitErr = cmd, done, false, nil
	go p.wait(cmd, p.starts, done)
	return nil
}

// wait reaps an incarnation and records an exit nobody asked for.
func (p *Proc) wait(cmd *exec.Cmd, start int, done chan struct{}) {
	err := cmd.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waitErr = err
	if !p.stopping {
		p.exits = append(p.exits, Exit{At: time.Now(), PID: cmd.Process.Pid, Start: start, Err: err})
	}
	close(done)
}

// WaitHealthy waits until the health check answers 200, the process exits
// (an error matching ErrExited), or the wait runs out.
func (p *Proc) WaitHealthy(ctx context.Context) error {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return fmt.Errorf("%s: not started", p.spec.Name)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cmp.Or(p.spec.StartTimeout, 60*time.Second))
		defer cancel()
	}
	for {
		select {
		case <-done:
			return fmt.Errorf("%w before it was healthy: %v", ErrExited, p.waitResult())
		default:
		}
		if p.spec.Healthz == nil || p.spec.Healthz.ok(ctx) {
			return nil
		}
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("not healthy: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (h *Healthz) ok(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.URL, nil)
	if err != nil {
		return false
	}
	if h.User != "" {
		req.SetBasicAuth(h.User, h.Password)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Healthy reports whether the health check answers 200 now.
func (p *Proc) Healthy(ctx context.Context) bool {
	return p.Running() && (p.spec.Healthz == nil || p.spec.Healthz.ok(ctx))
}

func (p *Proc) waitResult() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// Kill sends SIGKILL to the process's group and waits until it is gone.
// Killing a process that is not running does nothing.
func (p *Proc) Kill() error {
	done, pid, ok := p.markStopping()
	if !ok {
		return nil
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%s: kill: %w", p.spec.Name, err)
	}
	<-done
	return nil
}

// Stop asks the process to stop (SIGTERM) and waits for it, killing it
// after grace. It returns the process's exit error when it exited otherwise
// than cleanly on SIGTERM (a non-zero status, or killed after grace).
func (p *Proc) Stop(grace time.Duration) error {
	done, pid, ok := p.markStopping()
	if !ok {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%s: stop: %w", p.spec.Name, err)
	}
	select {
	case <-done:
		if err := p.waitResult(); err != nil {
			return fmt.Errorf("%s: stopped with %w", p.spec.Name, err)
		}
		return nil
	case <-time.After(grace):
		syscall.Kill(-pid, syscall.SIGKILL)
		<-done
		return fmt.Errorf("%s: did not stop within %s: killed", p.spec.Name, grace)
	}
}

// markStopping flags the current incarnation as ended on purpose.
func (p *Proc) markStopping() (done chan struct{}, pid int, running bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || isClosed(p.done) {
		return nil, 0, false
	}
	p.stopping = true
	return p.done, p.cmd.Process.Pid, true
}

// Running reports whether the current incarnation has not exited.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !isClosed(p.done)
}

// PID is the current (or last) incarnation's process id; 0 before the
// first start.
func (p *Proc) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Name is Spec.Name.
func (p *Proc) Name() string { return p.spec.Name }

// Starts is how many times the program was started.
func (p *Proc) Starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// Exits are the incarnations that ended without Kill or Stop, oldest first.
func (p *Proc) Exits() []Exit {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Exit(nil), p.exits...)
}

// LogFile is Spec.LogFile.
func (p *Proc) LogFile() string { return p.spec.LogFile }

// Log is everything the process's incarnations wrote, or "" without a log
// file.
func (p *Proc) Log() string {
	if p.spec.LogFile == "" {
		return ""
	}
	b, err := os.ReadFile(p.spec.LogFile)
	if err != nil {
		return fmt.Sprintf("(log %s: %v)", p.spec.LogFile, err)
	}
	return string(b)
}

// header begins the line that precedes each incarnation's output in the
// log, followed by the incarnation's number.
func (p *Proc) header() string { return "=== proctest: " + p.spec.Name + " start " }

// IncarnationLog is what incarnation n (1 the first, as Exit.Start) wrote.
func (p *Proc) IncarnationLog(n int) string {
	log := p.Log()
	_, after, ok := strings.Cut(log, fmt.Sprintf("%s%d at ", p.header(), n))
	if !ok {
		return ""
	}
	_, after, _ = strings.Cut(after, "\n") // the rest of the header line
	section, _, _ := strings.Cut(after, p.header())
	return section
}

// LogTail is the last n lines of Log.
func (p *Proc) LogTail(n int) string {
	lines := strings.SplitAfter(strings.TrimRight(p.Log(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "") + "\n"
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
