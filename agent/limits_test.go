package agent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent"
	"github.com/vmpayload/vmpayload/agent/api"
	"github.com/vmpayload/vmpayload/agent/api/client"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/agent/spool"
	"github.com/vmpayload/vmpayload/libvirtx"
	pjob "github.com/vmpayload/vmpayload/payload/job"
)

// gatedHost holds every domain lookup until the gate is opened, so that
// jobs stay queued or running for as long as a test wants.
type gatedHost struct {
	*libvirtx.LibvirtHost
	gate    chan struct{}
	once    sync.Once
	started chan string
}

func (g *gatedHost) Domain(ctx context.Context, name string) (libvirtx.DomainInfo, error) {
	select {
	case g.started <- name:
	default:
	}
	select {
	case <-g.gate:
	case <-ctx.Done():
		return libvirtx.DomainInfo{}, ctx.Err()
	}
	return g.LibvirtHost.Domain(ctx, name)
}

func (g *gatedHost) open() { g.once.Do(func() { close(g.gate) }) }

// limitsAgent runs an in-process agent on a gated test-driver host with the
// given queue limit, one worker, and the API (srv) on a socket.
func limitsAgent(t *testing.T, queueLimit int, srv *api.Server) (*agent.Agent, *gatedHost, *http.Client, string) {
	t.Helper()
	var g *gatedHost
	h := startAgentWith(t, "", nil, agentSetup{
		srv: srv,
		wrap: func(host *libvirtx.LibvirtHost) libvirtx.Host {
			g = &gatedHost{LibvirtHost: host, gate: make(chan struct{}), started: make(chan string, 64)}
			return g
		},
		opts: func(o *agent.Options) {
			o.Workers, o.QueueLimit, o.RescanInterval = 1, queueLimit, 100*time.Millisecond
		},
	})
	t.Cleanup(g.open) // runs first: held lookups return before the agent stops
	return h.agent, g, client.New(h.sock).HTTP(), h.dir
}

// limitJob is a job attaching a payload to domain dom, defining it (stopped)
// when it does not exist.
func limitJob(id, dom string) string {
	return fmt.Sprintf(`{"version": 1, "id": %q, "domain": %q, "action": "attach", "hostname": %q, "domain_xml": %q}`, id, dom, id, domainXML(dom, "pc", ""))
}

func postJob(t *testing.T, c *http.Client, body string) (int, http.Header, map[string]any) {
	t.Helper()
	resp, err := c.Post("http://x/v1/jobs", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("POST answer %d is not JSON: %v: %s", resp.StatusCode, err, b)
	}
	return resp.StatusCode, resp.Header, m
}

func waitDone(t *testing.T, c *http.Client, id string) result.Result {
	t.Helper()
	for {
		resp, err := c.Get("http://x/v1/jobs/" + id + "?wait=60s")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusNotFound {
			// A job dropped into the spool is known once the agent has
			// claimed it (the rescan may not have run yet).
			resp.Body.Close()
			time.Sleep(20 * time.Millisecond)
			continue
		}
		var r result.Result
		err = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("job %s: %v", id, err)
		}
		if r.State.Final() {
			return r
		}
	}
}

// TestQueueLimitAnswers503 fills the queue (queue_limit 3) while the worker
// is held: the fourth POST is answered 503 "queue full" with Retry-After,
// Submit's error wraps ErrQueueFull, a file dropped meanwhile waits in
// incoming/; once the worker runs again every accepted job and the dropped
// one finish, and the API accepts jobs again.
func TestQueueLimitAnswers503(t *testing.T) {
	a, g, c, dir := limitsAgent(t, 3, &api.Server{})
	jobDoc := func(id string) string { return limitJob(id, "vm-queue") }
	var accepted []string
	for i := 0; i < 3; i++ {
		id := fmt.Sprintf("q-%d", i)
		code, _, m := postJob(t, c, jobDoc(id))
		if code != http.StatusAccepted {
			t.Fatalf("POST %s: %d %v", id, code, m)
		}
		accepted = append(accepted, id)
	}
	<-g.started // the worker holds the first job
	code, hdr, m := postJob(t, c, jobDoc("q-over"))
	if code != http.StatusServiceUnavailable || !strings.Contains(fmt.Sprint(m["error"]), "queue full") || hdr.Get("Retry-After") == "" {
		t.Fatalf("POST over the limit: %d %v Retry-After %q; want 503 queue full", code, m, hdr.Get("Retry-After"))
	}
	if _, err := a.Submit([]byte(jobDoc("q-over2"))); !errors.Is(err, agent.ErrQueueFull) || !strings.Contains(err.Error(), "queue_limit 3") {
		t.Fatalf("Submit over the limit: %v", err)
	}
	// A spooled job is not refused: it waits in incoming/ for room.
	in := filepath.Join(dir, "spool", "incoming")
	if err := os.WriteFile(filepath.Join(in, ".q-file.tmp"), []byte(jobDoc("q-file")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(in, ".q-file.tmp"), filepath.Join(in, "q-file.json")); err != nil {
		t.Fatal(err)
	}
	if h := a.Health(); h["status"] != "ok" || h["in_flight"] != int64(1) {
		t.Errorf("health while full: %v, want ok with 1 job in flight", h)
	}
	g.open()
	for _, id := range append(accepted, "q-file") {
		if r := waitDone(t, c, id); r.State != result.StateDone {
			t.Errorf("%s: %s %+v", id, r.State, r.Error)
		}
	}
	code, _, m = postJob(t, c, jobDoc("q-after"))
	if code != http.StatusAccepted {
		t.Fatalf("POST after the queue drained: %d %v", code, m)
	}
	if r := waitDone(t, c, "q-after"); r.State != result.StateDone {
		t.Errorf("q-after: %s %+v", r.State, r.Error)
	}
	if _, ok := a.Job("q-over"); ok {
		t.Error("the refused job q-over is known to the agent")
	}
}

// rawPost opens a connection and sends a POST's headers announcing n body
// bytes, and the first part bytes of the body.
func rawPost(t *testing.T, sock string, n int, part string) net.Conn {
	t.Helper()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", n, part)
	return conn
}

// TestSubmitSlotsAndSlowClients: POSTs whose bodies trickle in hold the
// submission slots (MaxSubmits 2) — a third POST is answered 503 "too many
// job submissions" once it waited SlotWait; a declared body over the limit
// is answered 413 before it is read; a stalled body is cut off at
// BodyTimeout; freed slots take jobs again.
func TestSubmitSlotsAndSlowClients(t *testing.T) {
	// The test's clients are all root: no reserve for root, so that its
	// slow POSTs fill the slots (TestAdmissionByWeight has tenants).
	srv := &api.Server{MaxSubmits: 2, SlotWait: 200 * time.Millisecond, BodyTimeout: time.Hour, RootSubmits: -1, RootReserve: -1}
	_, g, c, dir := limitsAgent(t, 100, srv)
	g.open()
	sock := filepath.Join(dir, "agent.sock")
	slow1 := rawPost(t, sock, 100, `{"version"`)
	slow2 := rawPost(t, sock, 100, `{"version"`)
	defer slow1.Close()
	defer slow2.Close()
	// Both slow clients hold a slot once the server read their headers;
	// until then a POST may still get in.
	m := postUntil(t, c, "slot", http.StatusServiceUnavailable, http.StatusAccepted, "POST while slots are busy")
	if !strings.Contains(fmt.Sprint(m["error"]), api.ErrTooManySubmits.Error()) {
		t.Errorf("503 answer: %v, want %q", m, api.ErrTooManySubmits)
	}
	// Content-Length over the limit: 413 without the body being sent.
	big := rawPost(t, sock, pjob.MaxJobBytes+1, "")
	defer big.Close()
	resp, err := http.ReadResponse(bufio.NewReader(big), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("declared oversize body: %d, want 413", resp.StatusCode)
	}
	// Slow clients that give up free their slots.
	slow1.Close()
	slow2.Close()
	postUntil(t, c, "freed", http.StatusAccepted, http.StatusServiceUnavailable, "POST after the slow clients left")
}

// postUntil posts jobs for vm-slot (ids prefix-0, prefix-1, …) until one
// is answered want, while the others are answered meanwhile; any other
// answer, or more than 1000 tries, fails t with what. It returns the
// answer's body.
func postUntil(t *testing.T, c *http.Client, prefix string, want, meanwhile int, what string) map[string]any {
	t.Helper()
	for i := 0; ; i++ {
		code, _, m := postJob(t, c, limitJob(fmt.Sprintf("%s-%d", prefix, i), "vm-slot"))
		if code == want {
			return m
		}
		if code != meanwhile || i > 1000 {
			t.Fatalf("%s: %d %v", what, code, m)
		}
	}
}

// TestSlowBodyIsCutOff: a client that stops sending its body is answered
// (400, i/o timeout) or dropped at BodyTimeout instead of holding its
// goroutine and slot forever.
func TestSlowBodyIsCutOff(t *testing.T) {
	srv := &api.Server{MaxSubmits: 1, BodyTimeout: 300 * time.Millisecond, SlotWait: time.Hour}
	_, g, c, dir := limitsAgent(t, 100, srv)
	g.open()
	slow := rawPost(t, filepath.Join(dir, "agent.sock"), 100, `{"version"`)
	defer slow.Close()
	resp, err := http.ReadResponse(bufio.NewReader(slow), nil)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "timeout") {
			t.Errorf("stalled body: %d %s, want 400 i/o timeout", resp.StatusCode, b)
		}
	}
	// The only slot is free again: a normal POST is accepted.
	code, _, m := postJob(t, c, limitJob("after-slow", "vm-slow"))
	if code != http.StatusAccepted {
		t.Fatalf("POST after the stalled body: %d %v", code, m)
	}
	if r := waitDone(t, c, "after-slow"); r.State != result.StateDone {
		t.Errorf("after-slow: %s %+v", r.State, r.Error)
	}
}

// TestRecoveryBeyondQueueLimit: a run with a large queue_limit left more
// claimed jobs (for different domains) in processing/ than a restart with
// a small queue_limit can hold in its ready queue. Recovery used to queue
// them before the workers ran and blocked for ever; every job must finish.
func TestRecoveryBeyondQueueLimit(t *testing.T) {
	dir := t.TempDir()
	payload := filepath.Join(dir, "payload")
	if err := os.MkdirAll(payload, 0o711); err != nil {
		t.Fatal(err)
	}
	sp, err := spool.OpenGroup(filepath.Join(dir, "spool"), -1)
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	for i := 0; i < n; i++ {
		if err := sp.Put(fmt.Sprintf("rec-%d", i), []byte(limitJob(fmt.Sprintf("rec-%d", i), fmt.Sprintf("vm-rec-%d", i)))); err != nil {
			t.Fatal(err)
		}
	}
	names, err := sp.Pending()
	if err != nil {
		t.Fatal(err)
	}
	if claimed, errs := sp.ClaimAll(names); len(claimed) != n || len(errs) != 0 {
		t.Fatalf("claimed %d of %d: %v", len(claimed), n, errs)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	host, err := libvirtx.OpenHost("test://"+nodeFile(t, dir, payload), libvirtx.HostOptions{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	a, err := agent.New(agent.Options{Host: host, SpoolDir: filepath.Join(dir, "spool"), PayloadDir: payload,
		SecretsDir: filepath.Join(dir, "secrets"), Workers: 1, QueueLimit: 2, RescanInterval: 100 * time.Millisecond, ImageGID: -1, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	cancel, done := runAgent(t, a)
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("rec-%d", i)
		r, ok := a.Wait(context.Background(), id)
		for ok && !r.State.Final() {
			r, ok = a.Wait(context.Background(), id)
		}
		if !ok || r.State != result.StateDone {
			t.Errorf("%s: %v %s %+v", id, ok, r.State, r.Error)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
