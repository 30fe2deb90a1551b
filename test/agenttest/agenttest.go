// Package agenttest runs a real `vmpayload agent` process for tests and
// benchmarks: it builds the binary once per process, gives each agent its
// own directory (spool, payload, secrets, socket, log), starts it, waits
// until its socket answers /healthz, stops or kills it, and hands out the
// one API client (agent/api/client) the CLI uses too.
//
// The core (Binary, New, Agent's methods) returns errors so that a command
// such as test/bench can use it; Start and the T-suffixed helpers wrap it
// for tests, registering clean-ups that run in reverse and are joined with
// errors.Join (see Cleanups). Only tests and test tools import this package.
package agenttest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/api/client"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/agent/spool"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// ReadyTimeout bounds the wait for a started agent's /healthz; it is a
// deadline for a stuck start, not a timing assertion.
const ReadyTimeout = 60 * time.Second

// StopTimeout is how long Stop waits after SIGTERM before SIGKILL.
const StopTimeout = 60 * time.Second

// BinaryEnv names environment variables holding an already built vmpayload
// binary, checked in this order, that Binary uses instead of building one.
var BinaryEnv = []string{"VMPAYLOAD_AGENT_BIN", "VMPAYLOAD_BIN"}

var (
	binOnce sync.Once
	binPath string
	binDir  string
	binErr  error
)

// Binary returns the vmpayload binary under test: the one an environment
// variable of BinaryEnv names, or one built from cmd/vmpayload, with the
// daemon built from cmd/vmpayloadd (with -tags libvirt_dlopen) next to it,
// the first time it is called in this process.
// RemoveBinary removes a built one.
func Binary() (string, error) {
	binOnce.Do(func() {
		for _, env := range BinaryEnv {
			if p := os.Getenv(env); p != "" {
				binPath = p
				return
			}
		}
		dir, err := os.MkdirTemp("", "vmpx-agenttest-bin-")
		if err != nil {
			binErr = fmt.Errorf("building vmpayload: %w", err)
			return
		}
		binDir = dir
		gobin, err := exec.LookPath("go")
		if err != nil {
			gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		// vmpayload runs the agent ("vmpayload agent") by exec'ing the
		// vmpayloadd next to it
		for _, b := range []struct{ name, tags string }{{"vmpayload", ""}, {"vmpayloadd", "libvirt_dlopen"}} {
			out, err := exec.Command(gobin, "build", "-tags", b.tags, "-o", filepath.Join(dir, b.name),
				"github.com/vmpayload/vmpayload/cmd/"+b.name).CombinedOutput()
			if err != nil {
				binErr = fmt.Errorf("building %s: %w\n%s", b.name, err, out)
				return
			}
		}
		binPath = filepath.Join(dir, "vmpayload")
	})
	return binPath, binErr
}

// BinaryT is Binary for tests: an error fails tb.
func BinaryT(tb testing.TB) string {
	tb.Helper()
	p, err := Binary()
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// RemoveBinary removes the binary Binary built, if any; call it from
// TestMain after m.Run.
func RemoveBinary() {
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
}

// Options describe an agent installation.
type Options struct {
	// Bin is the vmpayload binary; empty means Binary().
	Bin string
	// URI is the libvirt URI (--libvirt-uri).
	URI string
	// Dir holds the spool, payload and secrets directories, the socket
	// and the log; it is created (0711) when missing.
	Dir string
	// Args are added after the directory flags on every start (a later
	// flag overrides an earlier one).
	Args []string
	// Env is added to the agent's environment.
	Env []string
}

// Agent is one agent installation whose process can be started, stopped,
// killed and started again on the same directories.
type Agent struct {
	Bin, URI, Dir                    string
	SpoolDir, PayloadDir, SecretsDir string
	Socket, LogPath                  string
	Args, Env                        []string
	client                           *client.Client
	runs                             int
	cmd                              *exec.Cmd
	done                             chan struct{}
	waitErr                          error
}

// New prepares (does not start) an agent described by o.
func New(o Options) (*Agent, error) {
	if o.Bin == "" {
		b, err := Binary()
		if err != nil {
			return nil, err
		}
		o.Bin = b
	}
	if err := os.MkdirAll(o.Dir, 0o711); err != nil {
		return nil, fmt.Errorf("agent directory: %w", err)
	}
	a := &Agent{Bin: o.Bin, URI: o.URI, Dir: o.Dir, Args: o.Args, Env: o.Env,
		SpoolDir: filepath.Join(o.Dir, "spool"), PayloadDir: filepath.Join(o.Dir, "payload"),
		SecretsDir: filepath.Join(o.Dir, "secrets"), Socket: filepath.Join(o.Dir, "agent.sock"),
		LogPath: filepath.Join(o.Dir, "agent.log")}
	return a, nil
}

// Client returns the API client for the agent's Socket (a new one when
// Socket was changed).
func (a *Agent) Client() *client.Client {
	if a.client == nil || a.client.Socket() != a.Socket {
		a.client = client.New(a.Socket)
	}
	return a.client
}

// Launch starts the agent process without waiting for it to be ready; its
// output is appended to LogPath after a line marking the start.
func (a *Agent) Launch() error {
	if a.Running() {
		return errors.New("agent already running")
	}
	args := append([]string{"agent", "--config", "", "--libvirt-uri", a.URI, "--spool-dir", a.SpoolDir,
		"--payload-dir", a.PayloadDir, "--secrets-dir", a.SecretsDir, "--socket", a.Socket}, a.Args...)
	lf, err := os.OpenFile(a.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("agent log: %w", err)
	}
	defer lf.Close() // the child has its own copy
	a.runs++
	fmt.Fprintf(lf, "=== agenttest: agent start #%d\n", a.runs)
	cmd := exec.Command(a.Bin, args...)
	cmd.Env = append(os.Environ(), a.Env...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the agent: %w", err)
	}
	a.cmd, a.done = cmd, make(chan struct{})
	go func(done chan struct{}) { a.waitErr = cmd.Wait(); close(done) }(a.done)
	return nil
}

// Start launches the agent and waits until it is ready.
func (a *Agent) Start() error {
	if err := a.Launch(); err != nil {
		return err
	}
	return a.WaitReady(ReadyTimeout)
}

// WaitReady waits up to timeout until /healthz answers 200; it fails at
// once when the process exits.
func (a *Agent) WaitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if err, done := a.Exited(); done {
			return fmt.Errorf("the agent exited before it was ready (%v); log:\n%s", err, a.Tail(30))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		status, _, err := a.Client().Health(ctx)
		cancel()
		if err == nil && status == http.StatusOK {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the agent did not answer /healthz on %s within %v; log:\n%s", a.Socket, timeout, a.Tail(30))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Running reports whether the process is started and has not exited.
func (a *Agent) Running() bool {
	_, done := a.Exited()
	return a.cmd != nil && !done
}

// Exited reports whether the last started process has ended, and its exit
// error. Before any start it reports false.
func (a *Agent) Exited() (error, bool) {
	if a.done == nil {
		return nil, false
	}
	select {
	case <-a.done:
		return a.waitErr, true
	default:
		return nil, false
	}
}

// Done is closed when the last started process ends (nil before a start).
func (a *Agent) Done() <-chan struct{} { return a.done }

// WaitExit waits up to timeout for the process to end by itself and
// returns its exit error and whether it ended.
func (a *Agent) WaitExit(timeout time.Duration) (error, bool) {
	if a.done == nil {
		return nil, false
	}
	select {
	case <-a.done:
		return a.waitErr, true
	case <-time.After(timeout):
		return nil, false
	}
}

// PID is the process id of the last started process.
func (a *Agent) PID() int { return a.cmd.Process.Pid }

// Runs counts the starts so far.
func (a *Agent) Runs() int { return a.runs }

// Stop sends SIGTERM and waits for the process, sending SIGKILL after
// StopTimeout. It returns the exit error of a process that did not exit
// cleanly, and nil when none runs.
func (a *Agent) Stop() error {
	if !a.Running() {
		return nil
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
		if a.waitErr != nil {
			return fmt.Errorf("agent exited with %w after SIGTERM", a.waitErr)
		}
		return nil
	case <-time.After(StopTimeout):
		_ = a.cmd.Process.Kill()
		<-a.done
		return fmt.Errorf("agent did not stop within %v of SIGTERM", StopTimeout)
	}
}

// Kill sends SIGKILL and reaps the process.
func (a *Agent) Kill() error {
	if !a.Running() {
		return nil
	}
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing the agent: %w", err)
	}
	<-a.done
	return nil
}

// Log returns the agent's log so far.
func (a *Agent) Log() string {
	b, _ := os.ReadFile(a.LogPath)
	return string(b)
}

// Tail returns the last n lines of the agent's log.
func (a *Agent) Tail(n int) string { return testenv.Tail(a.Log(), n) }

// LogCount counts the log lines containing s.
func (a *Agent) LogCount(s string) int {
	f, err := os.Open(a.LogPath)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			n++
		}
	}
	return n
}

// Drop writes a job document into the spool's incoming/ the way writers
// must: a dot temp file, then a rename to name.json.
func (a *Agent) Drop(name string, data []byte) error {
	in := filepath.Join(a.SpoolDir, spool.Incoming)
	if err := os.MkdirAll(in, 0o700); err != nil {
		return fmt.Errorf("job %s: %w", name, err)
	}
	tmp := filepath.Join(in, "."+name+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("job %s: %w", name, err)
	}
	if err := os.Rename(tmp, filepath.Join(in, name+".json")); err != nil {
		return fmt.Errorf("job %s: %w", name, err)
	}
	return nil
}

// ReadResult reads the newest result document of id in the spool (done/
// or failed/), if there is one; dir names where it is.
func (a *Agent) ReadResult(id string) (r result.Result, dir string, ok bool) {
	r, ok = (&spool.Spool{Root: a.SpoolDir}).Lookup(id)
	if !ok {
		return r, "", false
	}
	if r.State == result.StateFailed {
		return r, spool.Failed, true
	}
	return r, spool.Done, true
}

// Retired reports whether job id has left processing/ (its result, if
// written, is final).
func (a *Agent) Retired(id string) bool {
	_, err := os.Lstat(filepath.Join(a.SpoolDir, spool.Processing, id+".json"))
	return errors.Is(err, os.ErrNotExist)
}

// WaitResult waits, until ctx ends, for a result of id whose claim is not
// notClaim ("" accepts any) and for the job to leave processing/. It fails
// at once when the agent exits.
func (a *Agent) WaitResult(ctx context.Context, id, notClaim string) (result.Result, error) {
	for {
		if r, _, ok := a.ReadResult(id); ok && (notClaim == "" || r.Claim != notClaim) && a.Retired(id) {
			return r, nil
		}
		if err, done := a.Exited(); done {
			return result.Result{}, fmt.Errorf("job %s: the agent exited (%v)\n--- agent log tail ---\n%s", id, err, a.Tail(40))
		}
		select {
		case <-ctx.Done():
			return result.Result{}, fmt.Errorf("job %s: no result: %w\n--- agent log tail ---\n%s", id, ctx.Err(), a.Tail(40))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Start prepares an agent for tb in dir (tb.TempDir() when empty), starts
// it and waits until it is ready; tb's clean-up stops it (and logs the tail
// of its log when tb failed). Any error fails tb.
func Start(tb testing.TB, o Options) *Agent {
	tb.Helper()
	a := Prepare(tb, o)
	if err := a.Start(); err != nil {
		tb.Fatal(err)
	}
	return a
}

// Prepare is Start without starting: tb's clean-up stops the agent if it
// runs then.
func Prepare(tb testing.TB, o Options) *Agent {
	tb.Helper()
	if o.Dir == "" {
		o.Dir = tb.TempDir()
	}
	a, err := New(o)
	if err != nil {
		tb.Fatal(err)
	}
	c := ForTest(tb)
	c.Add(func() error {
		if tb.Failed() {
			tb.Logf("agent log (%s), tail:\n%s", a.LogPath, a.Tail(200))
		}
		return nil
	})
	c.Add(func() error {
		// A test asserts the exit status itself where it matters; the
		// clean-up only makes sure the process is gone.
		var exit *exec.ExitError
		if err := a.Stop(); err != nil && !errors.As(err, &exit) {
			return err
		}
		return nil
	})
	return a
}

// ProcStatusKB reads a "Vm…:  N kB" line (VmRSS, VmHWM) of
// /proc/pid/status, in KiB.
func ProcStatusKB(pid int, key string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the status of pid %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			var kb int64
			if _, err := fmt.Sscanf(v, "%d", &kb); err != nil {
				return 0, fmt.Errorf("%s line %q of pid %d: %w", key, line, pid, err)
			}
			return kb, nil
		}
	}
	return 0, fmt.Errorf("pid %d: no %q line in /proc/%d/status: %w", pid, key, pid, ErrNoStatusLine)
}

// ErrNoStatusLine is returned by ProcStatusKB when the line is missing.
var ErrNoStatusLine = errors.New("missing status line")
