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
	"github.com/vmpayload/vmpayload/test/testenv"
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

// watches reports whether g follows the guest of the domain uuid.
func (g *guests) watches(uuid string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.watching[uuid] != nil
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
	ln := testenv.ListenUnix(t, sock)
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
	<-a.guest.loaded
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
	// the agent does not remember it: a start of the domain follows nothing
	if tr, ok := e.a.guest.loadTrack(testUUID); ok {
		t.Errorf("detach left the guest state in memory: %+v", tr)
	}
	e.a.guest.started(testUUID)
	if e.a.guest.watches(testUUID) {
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

// writeResult puts a done (or failed) result into the spool as a finished
// job leaves it, without telling the agent (a restart finds it).
func writeResult(t *testing.T, spoolDir string, res result.Result) {
	t.Helper()
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	sub := "done"
	if res.State == result.StateFailed {
		sub = "failed"
	}
	if err := os.MkdirAll(filepath.Join(spoolDir, sub), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(spoolDir, sub, res.ID+".json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestGuestFollowFromResults: at start-up the follower takes each domain's
// followed job from the latest done result of the domain (issue 14: no
// per-domain state file is written per job), the markers of undefined
// domains, and nothing else; an older version's state file is removed.
func TestGuestFollowFromResults(t *testing.T) {
	const other = "5b8e4f1c-0000-4000-8000-00000000beef"
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := func(s int) *time.Time { x := t0.Add(time.Duration(s) * time.Second); return &x }
	withGuest := func(id string, s int) result.Result {
		return result.Result{ID: id, Domain: "g", DomainUUID: testUUID, Action: "start", State: result.StateDone, FinishedAt: at(s),
			Guest: &result.Guest{Status: result.GuestPending, Channel: guestreport.Channel}}
	}
	without := func(id string, s int) result.Result {
		r := withGuest(id, s)
		r.Guest = nil
		return r
	}
	gone := func(id string, s int) string {
		b, _ := json.Marshal(guestTrack{JobID: id, State: "done", Domain: "g", UUID: testUUID, FinishedAt: *at(s)})
		return string(b)
	}
	for _, tc := range []struct {
		name    string
		results []result.Result
		files   map[string]string // in guest/
		want    string            // followed job of testUUID, "" none
		left    []string          // files left in guest/
	}{
		{name: "one job with the report", results: []result.Result{withGuest("j1", 1)}, want: "j1"},
		{name: "no results", want: ""},
		{name: "the later of two", results: []result.Result{withGuest("j2", 2), withGuest("j1", 1)}, want: "j2"},
		{name: "detached after", results: []result.Result{withGuest("j1", 1), {ID: "j2", DomainUUID: testUUID, Action: "detach", State: result.StateDone, FinishedAt: at(2)}}, want: ""},
		{name: "payload without the report after", results: []result.Result{withGuest("j1", 1), without("j2", 2)}, want: ""},
		{name: "report after a payload without", results: []result.Result{without("j1", 1), withGuest("j2", 2)}, want: "j2"},
		{name: "a failed job after changes nothing", results: []result.Result{withGuest("j1", 1), func() result.Result {
			r := without("j2", 2)
			r.State = result.StateFailed
			return r
		}()}, want: "j1"},
		{name: "another domain's later job changes nothing", results: []result.Result{withGuest("j1", 1), func() result.Result {
			r := without("j2", 2)
			r.DomainUUID = other
			return r
		}()}, want: "j1"},
		{name: "same finishing time: the greater id", results: []result.Result{withGuest("ja", 1), withGuest("jb", 1)}, want: "jb"},
		{name: "undefined while followed", results: []result.Result{withGuest("j1", 1)},
			files: map[string]string{testUUID + ".gone": gone("j1", 1)}, want: "", left: []string{testUUID + ".gone"}},
		{name: "undefined, then a new job", results: []result.Result{withGuest("j1", 1), withGuest("j2", 2)},
			files: map[string]string{testUUID + ".gone": gone("j1", 1)}, want: "j2"},
		{name: "undefined, then the same id again", results: []result.Result{withGuest("j1", 2)},
			files: map[string]string{testUUID + ".gone": gone("j1", 1)}, want: "j1"},
		{name: "damaged marker is ignored", results: []result.Result{withGuest("j1", 1)},
			files: map[string]string{testUUID + ".gone": "{"}, want: "j1", left: []string{testUUID + ".gone"}},
		{name: "an older version's state file goes, the results decide", results: []result.Result{withGuest("j1", 1), without("j2", 2)},
			files: map[string]string{testUUID + ".json": `{"job_id":"j1","state":"done","domain":"g","uuid":"` + testUUID + `"}`}, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spoolDir := filepath.Join(t.TempDir(), "spool")
			for _, r := range tc.results {
				writeResult(t, spoolDir, r)
			}
			if len(tc.files) > 0 {
				if err := os.MkdirAll(filepath.Join(spoolDir, GuestDir), 0o700); err != nil {
					t.Fatal(err)
				}
				for name, body := range tc.files {
					if err := os.WriteFile(filepath.Join(spoolDir, GuestDir, name), []byte(body), 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			// a damaged result is skipped
			if err := os.MkdirAll(filepath.Join(spoolDir, "done"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(spoolDir, "done", "broken.json"), []byte("{"), 0o600); err != nil {
				t.Fatal(err)
			}
			e := newGuestEnv(t, spoolDir, time.Hour)
			got := ""
			if tr, ok := e.a.guest.loadTrack(testUUID); ok {
				got = tr.JobID
			}
			if got != tc.want {
				t.Errorf("followed job %q, want %q", got, tc.want)
			}
			if _, ok := e.a.guest.loadTrack(other); ok {
				t.Error("a domain with no job with the report is followed")
			}
			var left []string
			ents, _ := os.ReadDir(filepath.Join(spoolDir, GuestDir))
			for _, en := range ents {
				left = append(left, en.Name())
			}
			if strings.Join(left, ",") != strings.Join(tc.left, ",") {
				t.Errorf("files left in guest/: %q, want %q", left, tc.left)
			}
		})
	}
}

// TestGuestUndefinedStaysForgotten: a domain undefined while followed is
// not followed after a restart although its results still name the job,
// also when a domain with its UUID is defined again and runs; a job on it
// after the restart is followed.
func TestGuestUndefinedStaysForgotten(t *testing.T) {
	spoolDir := filepath.Join(t.TempDir(), "spool")
	e := newGuestEnv(t, spoolDir, time.Hour)
	e.finishJob(t, "job-u")
	e.fg.accept().Close()
	e.a.guest.gone(testUUID) // libvirt's undefined event
	if _, ok := e.a.guest.loadTrack(testUUID); ok {
		t.Fatal("followed after the undefined event")
	}
	e.stop()

	e2 := newGuestEnv(t, spoolDir, time.Hour) // its host runs a domain with that UUID
	if tr, ok := e2.a.guest.loadTrack(testUUID); ok {
		t.Fatalf("the undefined domain's job is followed after a restart: %+v", tr)
	}
	e2.a.guest.started(testUUID)
	if e2.a.guest.watches(testUUID) {
		t.Fatal("a start of the domain follows the undefined domain's job")
	}
	e2.finishJob(t, "job-new")
	c := e2.fg.accept()
	defer c.Close()
	send(t, c, reportLine("iid-payload", statusDone, "boot-1"))
	if ev := e2.event(t); ev.Type != "guest_ready" || ev.ID != "job-new" {
		t.Fatalf("event %+v", ev)
	}
	e2.stop()
	// the marker is stale now: the next start removes it and follows the new job
	e3 := newGuestEnv(t, spoolDir, time.Hour)
	if tr, ok := e3.a.guest.loadTrack(testUUID); !ok || tr.JobID != "job-new" {
		t.Errorf("after the next restart: %+v %v, want job-new", tr, ok)
	}
	if _, err := os.Stat(filepath.Join(spoolDir, GuestDir, testUUID+goneSuffix)); !os.IsNotExist(err) {
		t.Errorf("the stale marker stayed: %v", err)
	}
}
