package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/metrics"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/guestreport"
)

// chanHost is a libvirt host whose only call is LiveXML: a running domain
// whose report channel is a unix socket the test listens on, standing in
// for QEMU's end of the virtio-serial port.
type chanHost struct {
	libvirtx.Host
	mu      sync.Mutex
	sock    string
	running bool
}

func (h *chanHost) LiveXML(ctx context.Context, uuid string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.running {
		return "", fmt.Errorf("domain %s is not running", uuid)
	}
	return fmt.Sprintf(`<domain type='qemu'><name>g</name><uuid>%s</uuid><devices><channel type='unix'><source mode='bind' path='%s'/><target type='virtio' name='%s' state='connected'/></channel></devices></domain>`,
		uuid, h.sock, guestreport.Channel), nil
}

func (h *chanHost) setRunning(b bool) {
	h.mu.Lock()
	h.running = b
	h.mu.Unlock()
}

// fakeGuest is the fake channel: it accepts the agent's connections.
type fakeGuest struct {
	t  *testing.T
	ln net.Listener
}

func (f *fakeGuest) accept() net.Conn {
	f.t.Helper()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() { c, err := f.ln.Accept(); ch <- res{c, err} }()
	select {
	case r := <-ch:
		if r.err != nil {
			f.t.Fatalf("accept: %v", r.err)
		}
		return r.c
	case <-time.After(10 * time.Second):
		f.t.Fatal("the agent did not connect to the channel within 10s")
	}
	return nil
}

// send writes a report line and returns the agent's acknowledgement.
func send(t *testing.T, c net.Conn, line string) string {
	t.Helper()
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	ack, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("no acknowledgement: %v", err)
	}
	return ack
}

const testUUID = "5b8e4f1c-0000-4000-8000-00000000c0de"

// guestMetrics summarises m's guest metrics: the statuses counted (with
// their counts, in label order) and how many provisioning times were
// recorded, in exposition order, e.g. "timed=1 done=2 timeout=1".
func guestMetrics(t *testing.T, m *metrics.Agent) string {
	t.Helper()
	var b strings.Builder
	if _, err := m.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(b.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, `vmpayload_guest_reports_total{status="`); ok {
			status, n, _ := strings.Cut(rest, `"} `)
			if n != "0" {
				out = append(out, status+"="+n)
			}
		}
		if n, ok := strings.CutPrefix(line, "vmpayload_guest_provision_seconds_count "); ok {
			out = append(out, "timed="+n)
		}
	}
	return strings.Join(out, " ")
}

type guestEnv struct {
	met  *metrics.Agent
	a    *Agent
	host *chanHost
	fg   *fakeGuest
	evs  <-chan Event
	stop func()
}

func newGuestEnv(t *testing.T, spoolDir string, timeout time.Duration) *guestEnv {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, "chan.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	host := &chanHost{sock: sock, running: true}
	met := metrics.New()
	a, err := New(Options{Metrics: met, Host: host, SpoolDir: spoolDir, PayloadDir: filepath.Join(dir, "payload"), GuestTimeout: timeout, ImageGID: -1})
	if err != nil {
		t.Fatal(err)
	}
	a.guest.retry, a.guest.gap = 20*time.Millisecond, 0
	evs, cancelSub := a.Subscribe()
	ctx, cancel := context.WithCancel(context.Background())
	a.guest.start(ctx)
	e := &guestEnv{met: met, a: a, host: host, fg: &fakeGuest{t: t, ln: ln}, evs: evs}
	e.stop = func() { cancel(); a.guest.stop(); cancelSub() }
	t.Cleanup(e.stop)
	return e
}

// finishJob writes a done result with a pending guest section, as a job
// that attached a payload with the report and started the domain leaves.
func (e *guestEnv) finishJob(t *testing.T, id string) result.Result {
	t.Helper()
	now := time.Now().UTC()
	res := result.Result{ID: id, Domain: "g", DomainUUID: testUUID, Action: "start", State: result.StateDone,
		Payload: &result.Payload{Image: payload.Image{InstanceID: "iid-payload"}}, DomainState: "running", FinishedAt: &now,
		Guest: &result.Guest{Status: result.GuestPending, Channel: guestreport.Channel, Errors: []string{}, RecoverableErrors: []string{}}}
	b, _ := json.Marshal(res)
	if err := os.WriteFile(e.a.spool.ResultPath(id, result.StateDone), b, 0o600); err != nil {
		t.Fatal(err)
	}
	e.a.reg.set(res)
	e.a.guest.finished(res)
	return res
}

// event waits for the next guest event.
func (e *guestEnv) event(t *testing.T) Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-e.evs:
			if ev.Kind == "guest" {
				return ev
			}
		case <-deadline:
			t.Fatal("no guest event within 10s")
		}
	}
}

func (e *guestEnv) fileResult(t *testing.T, id string) result.Result {
	t.Helper()
	r, err := e.a.spool.ReadResult(id, result.StateDone)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func reportLine(iid, status, bootID string) string {
	return fmt.Sprintf(`{"vmpayload_guest_report":1,"instance_id":%q,"boot_id":%q,"uptime_seconds":60.25,"cloud_init_version":"25.1","status_exit":0,"status":%s,"result":null}`, iid, bootID, status)
}

const (
	statusDone  = `{"status": "done", "datasource": "nocloud", "errors": [], "extended_status": "done", "recoverable_errors": {}}`
	statusError = `{"status": "error", "datasource": "nocloud", "errors": ["('scripts_user', RuntimeError('Runparts: 1 failures (runcmd) in 1 attempted commands'))"], "recoverable_errors": {}}`
)

// TestGuestReports feeds report lines through the fake channel and checks
// the result file, the registry and the events.
func TestGuestReports(t *testing.T) {
	for _, tc := range []struct {
		name, iid, status    string
		want, event, evError string
		mismatch             bool
		errors               int
	}{
		{"done", "iid-payload", statusDone, result.GuestDone, "guest_ready", "", false, 0},
		{"error", "iid-payload", statusError, result.GuestError, "guest_failed", "error", false, 1},
		{"other instance", "iid-datasource-none", statusDone, result.GuestDone, "guest_failed", "instance_id_mismatch", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newGuestEnv(t, filepath.Join(t.TempDir(), "spool"), time.Hour)
			e.finishJob(t, "job-"+strings.ReplaceAll(tc.name, " ", "-"))
			c := e.fg.accept()
			defer c.Close()
			// a line that is not a report is ignored, the next one counts
			if _, err := c.Write([]byte("garbage from the guest\n")); err != nil {
				t.Fatal(err)
			}
			if ack := send(t, c, reportLine(tc.iid, tc.status, "boot-1")); ack != guestreport.Ack {
				t.Fatalf("ack %q", ack)
			}
			ev := e.event(t)
			if ev.Type != tc.event || ev.Error != tc.evError || ev.Guest == nil || ev.Guest.Status != tc.want {
				t.Errorf("event %+v (guest %+v), want type %s error %q status %s", ev, ev.Guest, tc.event, tc.evError, tc.want)
			}
			id := "job-" + strings.ReplaceAll(tc.name, " ", "-")
			r := e.fileResult(t, id)
			g := r.Guest
			if g == nil || g.Status != tc.want || g.InstanceIDMismatch != tc.mismatch || len(g.Errors) != tc.errors ||
				g.Reports != 1 || g.InstanceID != tc.iid || g.BootID != "boot-1" || g.ReportedAt == nil || g.StartedAt == nil || g.Seconds < 0 || g.Datasource != "nocloud" {
				t.Errorf("result file guest %+v", g)
			}
			if reg, ok := e.a.Job(id); !ok || reg.Guest == nil || reg.Guest.Status != tc.want {
				t.Errorf("registry %+v", reg.Guest)
			}
			if got, want := guestMetrics(t, e.met), "timed=1 "+tc.want+"=1"; got != want {
				t.Errorf("metrics %q, want %q: the status with a provisioning time", got, want)
			}
		})
	}
}

// TestGuestTimeoutThenReport: no report within guest_timeout gives status
// timeout; a late report replaces it; a second boot's report counts again.
func TestGuestTimeoutThenReport(t *testing.T) {
	e := newGuestEnv(t, filepath.Join(t.TempDir(), "spool"), 150*time.Millisecond)
	e.finishJob(t, "job-slow")
	c := e.fg.accept()
	defer c.Close()
	ev := e.event(t)
	if ev.Type != "guest_timeout" || ev.Guest.Status != result.GuestTimeout || !strings.Contains(ev.Guest.Detail, "guest_timeout") {
		t.Fatalf("event %+v guest %+v", ev, ev.Guest)
	}
	if g := e.fileResult(t, "job-slow").Guest; g.Status != result.GuestTimeout {
		t.Fatalf("result guest %+v", g)
	}
	if got, want := guestMetrics(t, e.met), "timed=0 timeout=1"; got != want {
		t.Errorf("metrics after the timeout %q, want %q: counted without a time", got, want)
	}
	send(t, c, reportLine("iid-payload", statusDone, "boot-1"))
	if ev := e.event(t); ev.Type != "guest_ready" {
		t.Fatalf("event %+v", ev)
	}
	send(t, c, reportLine("iid-payload", statusDone, "boot-2"))
	if ev := e.event(t); ev.Type != "guest_ready" {
		t.Fatalf("event %+v", ev)
	}
	g := e.fileResult(t, "job-slow").Guest
	if g.Status != result.GuestDone || g.Reports != 2 || g.BootID != "boot-2" || g.Detail != "" {
		t.Errorf("result guest %+v", g)
	}
	// timeout counted without a time, the first report with one, the
	// second boot's without
	if got, want := guestMetrics(t, e.met), "timed=1 done=2 timeout=1"; got != want {
		t.Errorf("metrics %q, want %q", got, want)
	}
}

// TestGuestReconnect: the channel closing under the agent (QEMU's end
// reset) and an agent restart both lead to a new connection, and the
// report still lands in the same job's result.
func TestGuestReconnect(t *testing.T) {
	spoolDir := filepath.Join(t.TempDir(), "spool")
	e := newGuestEnv(t, spoolDir, time.Hour)
	e.finishJob(t, "job-re")
	e.fg.accept().Close() // dropped before any report
	c := e.fg.accept()    // the agent dials again
	c.Close()
	e.stop() // the agent stops: the job's guest section stays pending
	if g := e.fileResult(t, "job-re").Guest; g.Status != result.GuestPending || g.StartedAt == nil {
		t.Fatalf("after stop: %+v", g)
	}
	started := *e.fileResult(t, "job-re").Guest.StartedAt

	// a new agent on the same spool resumes the watch from guest/
	e2 := newGuestEnv(t, spoolDir, time.Hour)
	c2 := e2.fg.accept()
	defer c2.Close()
	send(t, c2, reportLine("iid-payload", statusDone, "boot-1"))
	if ev := e2.event(t); ev.Type != "guest_ready" || ev.ID != "job-re" {
		t.Fatalf("event %+v", ev)
	}
	g := e2.fileResult(t, "job-re").Guest
	if g.Status != result.GuestDone || !g.StartedAt.Equal(started) {
		t.Errorf("result guest %+v (started %v)", g, started)
	}
	// WaitGuest returns at once for a final guest section
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if r, ok := e2.a.WaitGuest(ctx, "job-re"); !ok || r.Guest == nil || r.Guest.Status != result.GuestDone {
		t.Errorf("WaitGuest: %v %+v", ok, r.Guest)
	}
}

// TestWaitGuest: WaitGuest blocks while the guest section is pending and
// returns the report; a detach forgets the domain.
func TestWaitGuest(t *testing.T) {
	e := newGuestEnv(t, filepath.Join(t.TempDir(), "spool"), time.Hour)
	e.finishJob(t, "job-w")
	got := make(chan result.Result, 1)
	go func() {
		r, _ := e.a.WaitGuest(context.Background(), "job-w")
		got <- r
	}()
	c := e.fg.accept()
	defer c.Close()
	select {
	case r := <-got:
		t.Fatalf("WaitGuest returned before the report: %+v", r.Guest)
	case <-time.After(100 * time.Millisecond):
	}
	send(t, c, reportLine("iid-payload", statusError, "boot-1"))
	select {
	case r := <-got:
		if r.Guest == nil || r.Guest.Status != result.GuestError {
			t.Errorf("WaitGuest: %+v", r.Guest)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitGuest did not return after the report")
	}
	e.a.guest.finished(result.Result{ID: "job-d", DomainUUID: testUUID, Action: "detach", State: result.StateDone})
	if _, err := os.Stat(e.a.guest.trackPath(testUUID)); !os.IsNotExist(err) {
		t.Errorf("detach left the guest state: %v", err)
	}
	// nor does the agent remember it: a start of the domain follows nothing
	if tr, ok := e.a.guest.loadTrack(testUUID); ok {
		t.Errorf("detach left the guest state in memory: %+v", tr)
	}
	e.a.guest.started(testUUID)
	e.a.guest.mu.Lock()
	w := e.a.guest.watching[testUUID]
	e.a.guest.mu.Unlock()
	if w != nil {
		t.Error("a start after the detach follows the domain again")
	}
}

// TestGuestFlood: lines beyond one report per gap are dropped unanswered
// (the reporter resends until acknowledged), so a guest cannot make the
// agent rewrite the result file in a loop.
func TestGuestFlood(t *testing.T) {
	e := newGuestEnv(t, filepath.Join(t.TempDir(), "spool"), time.Hour)
	e.a.guest.gap = time.Hour
	e.finishJob(t, "job-flood")
	c := e.fg.accept()
	defer c.Close()
	send(t, c, reportLine("iid-payload", statusDone, "boot-1"))
	for i := 0; i < 50; i++ {
		if _, err := c.Write([]byte(reportLine("iid-payload", statusError, fmt.Sprintf("boot-x%d", i)) + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if b, err := bufio.NewReader(c).ReadString('\n'); err == nil {
		t.Errorf("flood line acknowledged: %q", b)
	}
	if g := e.fileResult(t, "job-flood").Guest; g.Reports != 1 || g.Status != result.GuestDone {
		t.Errorf("after the flood: %+v", g)
	}
}
