package reliability

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/agent/spool"
)

// binPath is the vmpayload binary under test.
var binPath string

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "reliability:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	if p := os.Getenv("VMPAYLOAD_BIN"); p != "" {
		binPath = p
		return m.Run(), nil
	}
	dir, err := os.MkdirTemp("", "vmpx-rel-bin-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	binPath = filepath.Join(dir, "vmpayload")
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(gobin, "build", "-tags", "libvirt_dlopen", "-o", binPath, "github.com/vmpayload/vmpayload/cmd/vmpayload")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("building vmpayload: %w", err)
	}
	return m.Run(), nil
}

// agentProc is one agent installation (directories, socket, log) that can
// be started, killed and restarted as a real process.
type agentProc struct {
	t          *testing.T
	dir        string
	spoolDir   string
	payloadDir string
	secretsDir string
	sock       string
	uri        string
	logPath    string
	extra      []string
	env        []string // added to the agent's environment

	cmd  *exec.Cmd
	exit chan error
	runs int
}

// newAgent prepares directories under base (t.TempDir() when empty) for an
// agent on uri. extra flags are appended to every start.
func newAgent(t *testing.T, base, uri string, extra ...string) *agentProc {
	t.Helper()
	if base == "" {
		base = t.TempDir()
	}
	a := &agentProc{t: t, dir: base, spoolDir: filepath.Join(base, "spool"), payloadDir: filepath.Join(base, "payload"),
		secretsDir: filepath.Join(base, "secrets"), sock: filepath.Join(base, "agent.sock"), uri: uri,
		logPath: filepath.Join(base, "agent.log"), extra: extra}
	for _, d := range []string{a.payloadDir, a.secretsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if a.cmd != nil {
			a.kill()
		}
	})
	return a
}

// start runs the agent binary; its stderr goes (appended) to a.logPath.
func (a *agentProc) start() {
	a.t.Helper()
	if a.cmd != nil {
		a.t.Fatal("agent already running")
	}
	args := []string{"agent", "--config=", "--libvirt-uri", a.uri, "--spool-dir", a.spoolDir, "--payload-dir", a.payloadDir,
		"--secrets-dir", a.secretsDir, "--socket", a.sock, "--log-level", "debug", "--rescan-interval", "500ms"}
	args = append(args, a.extra...)
	lf, err := os.OpenFile(a.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		a.t.Fatal(err)
	}
	a.runs++
	fmt.Fprintf(lf, "=== reliability: agent start #%d\n", a.runs)
	cmd := exec.Command(binPath, args...)
	cmd.Env = append(os.Environ(), a.env...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		a.t.Fatalf("starting agent: %v", err)
	}
	lf.Close() // the child has its own copy
	a.cmd = cmd
	a.exit = make(chan error, 1)
	go func() { a.exit <- cmd.Wait() }()
}

// pid returns the running agent's process id.
func (a *agentProc) pid() int { return a.cmd.Process.Pid }

// kill sends SIGKILL and reaps the process.
func (a *agentProc) kill() {
	if a.cmd == nil {
		return
	}
	_ = a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.exit
	a.cmd = nil
}

// stop sends SIGTERM and waits for a clean exit.
func (a *agentProc) stop() {
	a.t.Helper()
	if a.cmd == nil {
		return
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-a.exit:
		a.cmd = nil
		if err != nil {
			a.t.Errorf("agent exited with %v after SIGTERM", err)
		}
	case <-time.After(60 * time.Second):
		a.kill()
		a.t.Error("agent did not stop within 60s of SIGTERM")
	}
}

// exited reports whether the agent process has ended (and how).
func (a *agentProc) exited() (error, bool) {
	select {
	case err := <-a.exit:
		a.exit <- err
		return err, true
	default:
		return nil, false
	}
}

// client returns an HTTP client that dials the agent's socket.
func (a *agentProc) client() *http.Client {
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", a.sock)
		}}}
}

// do sends one request to the API and returns status and body.
func (a *agentProc) do(c *http.Client, method, path string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://vmpayload"+path, rd)
	if err != nil {
		return 0, nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// waitReady waits until /healthz answers 200.
func (a *agentProc) waitReady(timeout time.Duration) {
	a.t.Helper()
	c := a.client()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if err, done := a.exited(); done {
			a.t.Fatalf("agent exited before it was ready: %v\n%s", err, a.tail(30))
		}
		if code, _, err := a.do(c, "GET", "/healthz", nil); err == nil && code == http.StatusOK {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.t.Fatalf("agent not ready after %v\n%s", timeout, a.tail(30))
}

// healthy fails the test unless /healthz answers 200 with status ok.
func (a *agentProc) healthy(c *http.Client) {
	a.t.Helper()
	code, b, err := a.do(c, "GET", "/healthz", nil)
	if err != nil || code != http.StatusOK || !bytes.Contains(b, []byte(`"status": "ok"`)) {
		a.t.Fatalf("agent unhealthy: %d %s %v", code, b, err)
	}
}

// tail returns the last n lines of the agent log.
func (a *agentProc) tail(n int) string {
	b, _ := os.ReadFile(a.logPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// logCount counts log lines containing s.
func (a *agentProc) logCount(s string) int {
	f, err := os.Open(a.logPath)
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

// drop writes a job into incoming/ the way writers must (dot temp file,
// then rename).
func (a *agentProc) drop(name string, data []byte) {
	a.t.Helper()
	in := filepath.Join(a.spoolDir, spool.Incoming)
	if err := os.MkdirAll(in, 0o700); err != nil {
		a.t.Fatal(err)
	}
	tmp := filepath.Join(in, "."+name+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		a.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(in, name+".json")); err != nil {
		a.t.Fatal(err)
	}
}

// spoolResult reads the final result of id from the spool, if it is there
// and its job has been retired from processing/.
func (a *agentProc) spoolResult(id string) (result.Result, bool) {
	sp := &spool.Spool{Root: a.spoolDir}
	r, ok := sp.Lookup(id)
	if !ok {
		return r, false
	}
	if _, err := os.Lstat(filepath.Join(a.spoolDir, spool.Processing, id+".json")); err == nil {
		return r, false
	}
	return r, true
}

// waitResult waits for the spool result of id.
func (a *agentProc) waitResult(id string, timeout time.Duration) result.Result {
	a.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if r, ok := a.spoolResult(id); ok {
			return r
		}
		if err, done := a.exited(); done {
			a.t.Fatalf("agent exited while waiting for %s: %v\n%s", id, err, a.tail(30))
		}
		time.Sleep(10 * time.Millisecond)
	}
	a.t.Fatalf("no result for %s after %v\n%s", id, timeout, a.tail(30))
	return result.Result{}
}

// submit posts a job; it returns the status and decoded body.
func (a *agentProc) submit(c *http.Client, data []byte) (int, map[string]any) {
	a.t.Helper()
	code, b, err := a.do(c, "POST", "/v1/jobs", data)
	if err != nil {
		a.t.Fatalf("POST /v1/jobs: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		a.t.Fatalf("POST /v1/jobs: %d, body is not JSON: %v\n%s", code, err, b)
	}
	return code, m
}

// apiResult waits (?wait=) for the final state of id through the API.
func (a *agentProc) apiResult(c *http.Client, id string) result.Result {
	a.t.Helper()
	for i := 0; i < 10; i++ {
		code, b, err := a.do(c, "GET", "/v1/jobs/"+id+"?wait=30s", nil)
		if err != nil {
			a.t.Fatalf("GET job %s: %v", id, err)
		}
		if code != http.StatusOK {
			a.t.Fatalf("GET job %s: %d %s", id, code, b)
		}
		var r result.Result
		if err := json.Unmarshal(b, &r); err != nil {
			a.t.Fatalf("GET job %s: %v", id, err)
		}
		if r.State.Final() {
			return r
		}
	}
	a.t.Fatalf("job %s not final after 300s", id)
	return result.Result{}
}

// metric returns the value of the first sample of name in /metrics whose
// line contains all of labels.
func (a *agentProc) metric(c *http.Client, name string, labels ...string) (float64, error) {
	code, b, err := a.do(c, "GET", "/metrics", nil)
	if err != nil || code != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: %d %w", code, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if !ok {
			continue
		}
		var v float64
		f := strings.Fields(line)
		if _, err := fmt.Sscan(f[len(f)-1], &v); err != nil {
			return 0, fmt.Errorf("metric line %q: %w", line, err)
		}
		return v, nil
	}
	return 0, fmt.Errorf("metric %s%v: %w", name, labels, errNoMetric)
}

var errNoMetric = errors.New("not in /metrics")

// rssKB reads VmRSS of pid in KiB.
func rssKB(pid int) (int, error) { return procStatusKB(pid, "VmRSS") }

// procStatusKB reads a "Vm…:  N kB" line of /proc/pid/status.
func procStatusKB(pid int, key string) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the status of pid %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			var kb int
			if _, err := fmt.Sscanf(v, "%d", &kb); err != nil {
				return 0, fmt.Errorf("%s line %q of pid %d: %w", key, line, pid, err)
			}
			return kb, nil
		}
	}
	return 0, fmt.Errorf("pid %d: no %q line in /proc/%d/status: %w", pid, key, pid, errNoStatusLine)
}

var errNoStatusLine = errors.New("missing status line")

// testDomain is the XML of a stopped (runstate 5: shut off) test-driver
// domain; the test driver starts node-file domains running otherwise.
func testDomain(name, uuid string) string {
	return fmt.Sprintf(`  <domain type='test' xmlns:test='http://libvirt.org/schemas/domain/test/1.0'>
    <test:runstate>5</test:runstate>
    <name>%s</name>
    <uuid>%s</uuid>
    <memory>65536</memory>
    <vcpu>1</vcpu>
    <os><type arch='x86_64' machine='pc'>hvm</type></os>
  </domain>
`, name, uuid)
}

// domainUUID is a deterministic UUID for domain number i.
func domainUUID(i int) string {
	return fmt.Sprintf("7e1ab1e0-0000-4000-8000-%012d", i)
}

// nodeFile writes a test-driver node file with n domains named
// prefix-%04d and returns the test:// URI.
func nodeFile(t *testing.T, dir, prefix string, n int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("<node>\n")
	for i := 0; i < n; i++ {
		b.WriteString(testDomain(fmt.Sprintf("%s-%04d", prefix, i), domainUUID(i)))
	}
	b.WriteString("</node>\n")
	p := filepath.Join(dir, "node.xml")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return "test://" + p
}

// jsonJob encodes a job document.
func jsonJob(t *testing.T, m map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
