package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/api/client"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/test/agenttest"
)

func TestMain(m *testing.M) {
	if _, err := agenttest.Binary(); err != nil {
		fmt.Fprintln(os.Stderr, "reliability:", err)
		os.Exit(2)
	}
	code := m.Run()
	agenttest.RemoveBinary()
	os.Exit(code)
}

// agentProc is one agent installation (directories, socket, log) that can
// be started, killed and restarted as a real process; the methods below
// fail the test on errors.
type agentProc struct {
	*agenttest.Agent
	t *testing.T
}

// newAgent prepares directories under base (t.TempDir() when empty) for an
// agent on uri. extra flags are appended to every start.
func newAgent(t *testing.T, base, uri string, extra ...string) *agentProc {
	t.Helper()
	args := append([]string{"--log-level", "debug", "--rescan-interval", "500ms"}, extra...)
	a := &agentProc{Agent: agenttest.Prepare(t, agenttest.Options{URI: uri, Dir: base, Args: args}), t: t}
	for _, d := range []string{a.PayloadDir, a.SecretsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

// start runs the agent binary; its output goes (appended) to a.LogPath.
func (a *agentProc) start() {
	a.t.Helper()
	if err := a.Launch(); err != nil {
		a.t.Fatal(err)
	}
}

// kill sends SIGKILL and reaps the process.
func (a *agentProc) kill() {
	a.t.Helper()
	if err := a.Kill(); err != nil {
		a.t.Fatal(err)
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (a *agentProc) stop() {
	a.t.Helper()
	if err := a.Stop(); err != nil {
		a.t.Error(err)
	}
}

// client returns the API client for the agent's socket.
func (a *agentProc) client() *client.Client { return a.Client() }

// do sends one request to the API and returns status and body.
func (a *agentProc) do(c *client.Client, method, path string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return c.Raw(ctx, method, path, body)
}

// waitReady waits until /healthz answers 200.
func (a *agentProc) waitReady(timeout time.Duration) {
	a.t.Helper()
	if err := a.WaitReady(timeout); err != nil {
		a.t.Fatal(err)
	}
}

// healthy fails the test unless /healthz answers 200 with status ok.
func (a *agentProc) healthy(c *client.Client) {
	a.t.Helper()
	code, b, err := a.do(c, "GET", "/healthz", nil)
	if err != nil || code != http.StatusOK || !bytes.Contains(b, []byte(`"status": "ok"`)) {
		a.t.Fatalf("agent unhealthy: %d %s %v", code, b, err)
	}
}

// drop writes a job into incoming/ the way writers must (dot temp file,
// then rename).
func (a *agentProc) drop(name string, data []byte) {
	a.t.Helper()
	if err := a.Drop(name, data); err != nil {
		a.t.Fatal(err)
	}
}

// spoolResult reads the final result of id from the spool, if it is there
// and its job has been retired from processing/.
func (a *agentProc) spoolResult(id string) (result.Result, bool) {
	r, _, ok := a.ReadResult(id)
	return r, ok && a.Retired(id)
}

// waitResult waits for the spool result of id.
func (a *agentProc) waitResult(id string, timeout time.Duration) result.Result {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	r, err := a.WaitResult(ctx, id, "")
	if err != nil {
		a.t.Fatal(err)
	}
	return r
}

// submit posts a job; it returns the status and decoded body.
func (a *agentProc) submit(c *client.Client, data []byte) (int, map[string]any) {
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
func (a *agentProc) apiResult(c *client.Client, id string) result.Result {
	a.t.Helper()
	r, err := agenttest.WaitFinal(context.Background(), c, id, 30*time.Second, 10)
	if err != nil {
		a.t.Fatal(err)
	}
	return r
}

// metric returns the value of the first sample of name in /metrics whose
// line contains all of labels.
func (a *agentProc) metric(c *client.Client, name string, labels ...string) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return agenttest.Metric(ctx, c, name, labels...)
}

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
