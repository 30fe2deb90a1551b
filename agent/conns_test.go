package agent_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/api"
	"github.com/vmpayload/vmpayload/agent/api/client"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// holderEnv makes the test binary a connection holder (TestConnHolder):
// "SOCKET MODE N" with MODE conn (GET /healthz) or events (GET /v1/events).
const holderEnv = "VMPAYLOAD_TEST_CONN_HOLDER"

// holderReport is what a holder prints once it has opened its connections.
type holderReport struct {
	Admitted, Refused int
	Message           string // the first refusal's error
	Other             string // anything else that went wrong
}

// TestConnHolder is not a test: run by TestConnectionCapsAsRealUsers as
// another uid, it opens N connections to the socket one after another,
// sends a request on each and reads the answer's head: 200 is a
// connection the agent admitted (kept open), 503 one it refused. It prints
// the counts as JSON and keeps the admitted connections until its
// standard input closes.
func TestConnHolder(t *testing.T) {
	spec := os.Getenv(holderEnv)
	if spec == "" {
		t.Skip("a helper process of TestConnectionCapsAsRealUsers")
	}
	f := strings.Fields(spec)
	sock, mode := f[0], f[1]
	n, _ := strconv.Atoi(f[2])
	path := "/healthz"
	if mode == "events" {
		path = "/v1/events"
	}
	var rep holderReport
	var keep []net.Conn
	for range n {
		c, err := net.Dial("unix", sock)
		if err != nil {
			rep.Other = "dial: " + err.Error()
			break
		}
		// hang guard only
		_ = c.SetReadDeadline(time.Now().Add(time.Minute))
		// a refused connection may be closed before the request is
		// written; its answer is read all the same
		_, _ = io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: agent\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			rep.Other = "reading the answer: " + err.Error()
			c.Close()
			break
		}
		switch resp.StatusCode {
		case http.StatusOK:
			if mode != "events" {
				_, _ = io.Copy(io.Discard, resp.Body)
			}
			rep.Admitted++
			keep = append(keep, c)
		case http.StatusServiceUnavailable:
			var a client.Answer
			_ = json.NewDecoder(resp.Body).Decode(&a)
			if rep.Refused == 0 {
				rep.Message = a.Error
			}
			rep.Refused++
			c.Close()
		default:
			rep.Other = "status " + resp.Status
			c.Close()
		}
	}
	b, _ := json.Marshal(rep)
	fmt.Println(string(b))
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, c := range keep {
		c.Close()
	}
}

// holder is a running TestConnHolder process.
type holder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	rep   holderReport
}

// hold runs a holder as user u (its own uid, gid and the socket group)
// opening n connections in mode, and returns once it has reported.
func hold(t *testing.T, bin string, u testUser, sockGID int, sock, mode string, n int) *holder {
	t.Helper()
	cmd := exec.Command(bin, "-test.run=^TestConnHolder$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %d", holderEnv, sock, mode, n))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid), Groups: []uint32{uint32(sockGID)}}}
	cmd.Dir = "/"
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, stdout := startPiped(t, cmd)
	h := &holder{cmd: cmd, stdin: stdin}
	t.Cleanup(h.stop)
	line, err := stdout.ReadString('\n')
	if err != nil {
		h.stop()
		t.Fatalf("holder as %s: %v\n%s", u.name, err, stderr.String())
	}
	if err := json.Unmarshal([]byte(line), &h.rep); err != nil {
		t.Fatalf("holder as %s printed %q: %v\n%s", u.name, line, err, stderr.String())
	}
	if h.rep.Other != "" {
		t.Fatalf("holder as %s: %s", u.name, h.rep.Other)
	}
	go io.Copy(io.Discard, stdout)
	return h
}

// startPiped starts cmd with pipes to its standard input and output; it
// fails t when it cannot.
func startPiped(t *testing.T, cmd *exec.Cmd) (io.WriteCloser, *bufio.Reader) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return stdin, bufio.NewReader(stdout)
}

// stop makes the holder close its connections and exit.
func (h *holder) stop() {
	if h.stdin != nil {
		h.stdin.Close()
		h.stdin = nil
		_ = h.cmd.Wait()
	}
}

// metricValue returns a sample of the agent's exposition (-1: absent).
func metricValue(t *testing.T, h *harness, series string) float64 {
	t.Helper()
	var b bytes.Buffer
	if _, err := h.met.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

// TestConnectionCapsAsRealUsers: real non-root uids (separate processes,
// SO_PEERCRED) hold connections to the agent's socket beyond their caps.
// A uid gets max_connections_per_uid connections and every further one is
// answered 503 naming the cap; a second uid gets what is left of the total
// but the reserve kept for root; root's POST /v1/jobs is still taken and
// done meanwhile. /v1/events streams are capped per uid and in all the
// same way, root still subscribes, and every refusal is counted by reason.
func TestConnectionCapsAsRealUsers(t *testing.T) {
	sfx := userTestSuffix(t, "useradd", "groupadd")
	sockGroup := "conns" + sfx
	sockGID := addGroup(t, sockGroup)
	ua, ub := addUser(t, "connsa"+sfx, sockGroup), addUser(t, "connsb"+sfx, sockGroup)

	dir := testenv.WorkDir(t, "conns-")
	// The test binary, where the other uids can run it.
	bin := filepath.Join(dir, "holder.test")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}

	const total, perUID, subs, subsPerUID = 50, 20, 8, 3
	srv := &api.Server{MaxConnections: total, MaxConnectionsPerUID: perUID, MaxEventSubscribers: subs, MaxEventSubscribersPerUID: subsPerUID}
	h := startAgentWith(t, "", nil, agentSetup{sock: filepath.Join(dir, "agent.sock"), sockGID: sockGID, srv: srv})
	if _, err := h.host.DefineXML(context.Background(), domainXML("existing", "pc", "")); err != nil {
		t.Fatal(err)
	}
	root := client.New(h.sock).HTTP()
	rootPost := func(id string) {
		t.Helper()
		code, _, ans := postJob(t, root, fmt.Sprintf(`{"version":1,"id":%q,"domain":"existing","hostname":"h","action":"attach"}`, id))
		if code != http.StatusAccepted {
			t.Fatalf("root's POST /v1/jobs: status %d: %v", code, ans)
		}
		if r := waitJob(t, root, id); r.State != result.StateDone {
			t.Fatalf("root's job: %+v %+v", r, r.Error)
		}
	}
	refused := func(reason string) float64 {
		return metricValue(t, h, `vmpayload_connections_refused_total{reason="`+reason+`"}`)
	}

	// uid A: 30 connections, 20 admitted.
	a := hold(t, bin, ua, sockGID, h.sock, "conn", 30)
	if a.rep.Admitted != perUID || a.rep.Refused != 10 || !strings.Contains(a.rep.Message, "max_connections_per_uid") ||
		!strings.Contains(a.rep.Message, "uid "+strconv.Itoa(ua.uid)) {
		t.Fatalf("uid A: %+v; want %d admitted, 10 refused naming max_connections_per_uid and its uid", a.rep, perUID)
	}
	rootPost("conns-root-1")

	// uid B: what is left for non-root uids is total - perUID (the
	// reserve for root) - 20 (A's) = 10.
	bh := hold(t, bin, ub, sockGID, h.sock, "conn", 20)
	if bh.rep.Admitted != total-perUID-perUID || bh.rep.Refused != 10 || !strings.Contains(bh.rep.Message, "max_connections 50") {
		t.Fatalf("uid B: %+v; want %d admitted, 10 refused naming max_connections 50", bh.rep, total-2*perUID)
	}
	// Root still gets in, more than once at a time.
	rootPost("conns-root-2")
	for i := range 5 {
		c, err := net.Dial("unix", h.sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		resp, err := root.Get("http://x/healthz")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("root's GET /healthz with %d more connections: %v %v", i+1, resp, err)
		}
		resp.Body.Close()
	}
	if got := refused("per_uid"); got != 10 {
		t.Errorf(`vmpayload_connections_refused_total{reason="per_uid"} = %v, want 10`, got)
	}
	if got := refused("total"); got != 10 {
		t.Errorf(`vmpayload_connections_refused_total{reason="total"} = %v, want 10`, got)
	}
	if got := metricValue(t, h, "vmpayload_api_connections"); got < 2*perUID-10+5 || got > total {
		t.Errorf("vmpayload_api_connections = %v, want %d..%d", got, 2*perUID-10+5, total)
	}

	// Event streams: A gets subsPerUID, B what is left of subs - subsPerUID.
	a.stop()
	bh.stop()
	waitFor(t, "the holders' connections to close", func() bool { return metricValue(t, h, "vmpayload_api_connections") < total-2*perUID })
	ae := hold(t, bin, ua, sockGID, h.sock, "events", 5)
	if ae.rep.Admitted != subsPerUID || ae.rep.Refused != 2 || !strings.Contains(ae.rep.Message, "max_event_subscribers_per_uid") {
		t.Fatalf("uid A's event streams: %+v; want %d admitted, 2 refused naming max_event_subscribers_per_uid", ae.rep, subsPerUID)
	}
	be := hold(t, bin, ub, sockGID, h.sock, "events", 4)
	if be.rep.Admitted != subs-2*subsPerUID || be.rep.Refused != 2 || !strings.Contains(be.rep.Message, "max_event_subscribers 8") {
		t.Fatalf("uid B's event streams: %+v; want %d admitted, 2 refused naming max_event_subscribers 8", be.rep, subs-2*subsPerUID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://x/v1/events", nil)
	ev, err := root.Do(req)
	if err != nil || ev.StatusCode != http.StatusOK {
		t.Fatalf("root's GET /v1/events with the non-root share taken: %v %v", ev, err)
	}
	defer ev.Body.Close()
	rootPost("conns-root-3")
	if got := metricValue(t, h, "vmpayload_event_subscribers"); got != subs-subsPerUID+1 {
		t.Errorf("vmpayload_event_subscribers = %v, want %d", got, subs-subsPerUID+1)
	}
	if got := refused("subscribers_per_uid"); got != 2 {
		t.Errorf(`vmpayload_connections_refused_total{reason="subscribers_per_uid"} = %v, want 2`, got)
	}
	if got := refused("subscribers_total"); got != 2 {
		t.Errorf(`vmpayload_connections_refused_total{reason="subscribers_total"} = %v, want 2`, got)
	}
}
