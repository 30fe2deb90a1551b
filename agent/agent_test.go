package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent"
	"github.com/vmpayload/vmpayload/agent/api"
	"github.com/vmpayload/vmpayload/agent/api/client"
	"github.com/vmpayload/vmpayload/agent/metrics"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/agent/spool"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// harness runs an in-process agent against a libvirt URI.
type harness struct {
	t       *testing.T
	dir     string
	host    *libvirtx.LibvirtHost
	agent   *agent.Agent
	sock    string
	cancel  context.CancelFunc
	done    chan error
	payload string
	spool   *spool.Spool
	met     *metrics.Agent
}

// nodeFile writes a test-driver node file with domains whose payload drive
// points into payloadDir.
func nodeFile(t *testing.T, dir, payloadDir string) string {
	t.Helper()
	x := fmt.Sprintf(`<node>
  <domain type='test'>
    <name>node-with-payload</name>
    <uuid>6695eb01-f6a4-8304-79aa-97f2502e193f</uuid>
    <memory>65536</memory><vcpu>1</vcpu>
    <os><type arch='x86_64' machine='pc'>hvm</type></os>
    <devices>
      <disk type='file' device='cdrom'>
        <driver name='qemu' type='raw'/>
        <source file='%s/6695eb01-f6a4-8304-79aa-97f2502e193f-0000000000000000.iso' startupPolicy='optional'/>
        <target dev='hdc' bus='ide'/>
        <readonly/>
        <alias name='ua-vmpayload'/>
      </disk>
    </devices>
  </domain>
</node>
`, payloadDir)
	p := filepath.Join(dir, "node.xml")
	if err := os.WriteFile(p, []byte(x), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func startAgent(t *testing.T, uri string, prep func(payloadDir string)) *harness {
	t.Helper()
	return startAgentWith(t, uri, prep, agentSetup{})
}

// agentSetup adjusts the agent startAgentWith runs.
type agentSetup struct {
	opts    func(o *agent.Options) // changes the options before New
	sock    string                 // socket path instead of one in the test's directory
	sockGID int                    // group of the socket (0: keep)
	spool   string                 // spool directory instead of one in the test's directory
	wrap    func(h *libvirtx.LibvirtHost) libvirtx.Host
	srv     *api.Server // the API server to run (its limits); Backend, Log and Metrics are set
}

func startAgentWith(t *testing.T, uri string, prep func(payloadDir string), set agentSetup) *harness {
	t.Helper()
	dir := t.TempDir()
	h := &harness{t: t, dir: dir, payload: filepath.Join(dir, "payload"), sock: filepath.Join(dir, "agent.sock")}
	if set.sock != "" {
		h.sock = set.sock
	}
	if err := os.MkdirAll(h.payload, 0o711); err != nil {
		t.Fatal(err)
	}
	if prep != nil {
		prep(h.payload)
	}
	if uri == "" {
		uri = "test://" + nodeFile(t, dir, h.payload)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	host, err := libvirtx.OpenHost(uri, libvirtx.HostOptions{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	h.host = host
	h.met = metrics.New()
	h.met.SetLibvirtReconnects(host.Reconnects)
	opts := agent.Options{Metrics: h.met, Host: host, SpoolDir: filepath.Join(dir, "spool"), PayloadDir: h.payload,
		SecretsDir: filepath.Join(dir, "secrets"), Workers: 3, RescanInterval: 200 * time.Millisecond, ImageGID: -1, Log: log}
	if set.wrap != nil {
		opts.Host = set.wrap(host)
	}
	if set.spool != "" {
		opts.SpoolDir = set.spool
	}
	if set.opts != nil {
		set.opts(&opts)
	}
	a, err := agent.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	h.agent, h.spool = a, a.Spool()
	sockGID := -1
	if set.sockGID > 0 {
		sockGID = set.sockGID
	}
	l, err := api.Listen(h.sock, sockGID)
	if err != nil {
		t.Fatal(err)
	}
	srv := set.srv
	if srv == nil {
		srv = &api.Server{}
	}
	srv.Backend, srv.Log, srv.Metrics = a, log, h.met
	go srv.Serve(l)
	h.cancel, h.done = runAgent(t, a)
	t.Cleanup(func() {
		h.cancel()
		<-h.done
		srv.Shutdown(context.Background())
		host.Close()
	})
	return h
}

// runAgent runs a until cancel and waits until it is ready; the agent
// stopping first fails t. done receives Run's error.
func runAgent(t testing.TB, a *agent.Agent) (cancel func(), done chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan error, 1)
	ready := make(chan struct{})
	go func() { done <- a.Run(ctx, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("agent stopped: %v", err)
	case <-time.After(30 * time.Second): // a deadline for a stuck start
		t.Fatal("agent did not become ready")
	}
	return cancel, done
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// drop writes a job into incoming/ the way orchestrators must.
func (h *harness) drop(name string, job map[string]any) {
	h.t.Helper()
	b, err := json.Marshal(job)
	if err != nil {
		h.t.Fatal(err)
	}
	h.dropRaw(name, b)
}

func (h *harness) dropRaw(name string, b []byte) {
	h.t.Helper()
	tmp := filepath.Join(h.spool.Dir(spool.Incoming), "."+name+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(h.spool.Dir(spool.Incoming), name+".json")); err != nil {
		h.t.Fatal(err)
	}
}

// result waits for the result file of id and returns it.
func (h *harness) result(id string) result.Result {
	h.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if r, ok := h.spool.Lookup(id); ok {
			if _, err := os.Stat(filepath.Join(h.spool.Dir(spool.Processing), id+".json")); err == nil {
				time.Sleep(20 * time.Millisecond)
				continue // result written, job not yet retired
			}
			return r
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.t.Fatalf("no result for %s", id)
	return result.Result{}
}

func (h *harness) domainXML(name string) string {
	h.t.Helper()
	d, err := h.host.Domain(context.Background(), name)
	if err != nil {
		h.t.Fatal(err)
	}
	return d.InactiveXML
}

func domainXML(name, machine string, extra string) string {
	return testenv.Domain{Type: "test", Name: name, MemoryMiB: 128, Machine: machine, Devices: extra}.XML()
}

func blkidLabel(t *testing.T, p string) string {
	t.Helper()
	out, err := exec.Command("blkid", "-p", "-s", "LABEL", "-o", "value", p).Output()
	if err != nil {
		t.Fatalf("blkid %s: %v", p, err)
	}
	return strings.TrimSpace(string(out))
}

func countPayloadDrives(t *testing.T, xml string) int {
	return strings.Count(xml, domxml.PayloadAlias)
}

func TestStoppedDomainAttachStartAndResubmit(t *testing.T) {
	h := startAgent(t, "", nil)
	job := map[string]any{"version": 1, "domain": "vm-a", "domain_xml": domainXML("vm-a", "pc", ""), "hostname": "vm-a", "action": "start"}
	h.drop("first", job)
	r := h.result("first")
	if r.State != result.StateDone || r.DomainState != "running" || r.Payload == nil || r.Device == nil {
		t.Fatalf("result %+v", r)
	}
	if r.Device.Bus != "ide" {
		t.Errorf("bus %q on a pc machine, want ide", r.Device.Bus)
	}
	d, err := h.host.Domain(context.Background(), "vm-a")
	if err != nil || !d.Active {
		t.Fatalf("domain not running: %+v %v", d, err)
	}
	pd, found, err := domxml.FindPayload(d.InactiveXML)
	if err != nil || !found || pd.Path != r.Payload.Path {
		t.Fatalf("payload drive %+v found=%v err=%v, want path %s", pd, found, err, r.Payload.Path)
	}
	if got := blkidLabel(t, r.Payload.Path); got != "cidata" {
		t.Errorf("label %q", got)
	}
	st, err := os.Stat(r.Payload.Path)
	if err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("image mode %v %v, want 0640", st.Mode(), err)
	}
	if r.FinishedAt == nil || r.ReceivedAt.IsZero() || r.DomainUUID != d.UUID || r.ID != "first" || r.Action != "start" {
		t.Errorf("result fields: %+v", r)
	}

	// The same content again: one drive, the same image, nothing rebuilt.
	job["id"] = "second"
	h.drop("second", job)
	r2 := h.result("second")
	if r2.State != result.StateDone || !r2.Payload.Reused || r2.Payload.Path != r.Payload.Path {
		t.Fatalf("resubmit: %+v payload %+v", r2, r2.Payload)
	}
	if n := countPayloadDrives(t, h.domainXML("vm-a")); n != 1 {
		t.Errorf("%d payload drives after resubmit", n)
	}
	// the job file is gone from processing/ and not kept in done/
	for _, sub := range []string{spool.Processing, spool.Incoming} {
		if ents, _ := os.ReadDir(h.spool.Dir(sub)); len(ents) != 0 {
			t.Errorf("%s not empty: %v", sub, ents)
		}
	}
	if _, err := os.Stat(filepath.Join(h.spool.Dir(spool.Done), "first.job.json")); err == nil {
		t.Errorf("a done job's document was kept")
	}
}

func TestNewContentReplacesImageAndDetachRemovesIt(t *testing.T) {
	h := startAgent(t, "", nil)
	base := map[string]any{"version": 1, "domain": "vm-b", "domain_xml": domainXML("vm-b", "pc-q35-7.2", ""), "action": "attach"}
	base["hostname"] = "one"
	h.drop("one", base)
	r1 := h.result("one")
	if r1.State != result.StateDone || r1.DomainState != "shut off" {
		t.Fatalf("attach: %+v %+v", r1, r1.Error)
	}
	if r1.Device.Bus != "sata" {
		t.Errorf("bus %q on q35, want sata", r1.Device.Bus)
	}
	base["hostname"] = "two"
	h.drop("two", base)
	r2 := h.result("two")
	if r2.State != result.StateDone || r2.Payload.Path == r1.Payload.Path {
		t.Fatalf("new content: %+v", r2)
	}
	if _, err := os.Stat(r1.Payload.Path); !os.IsNotExist(err) {
		t.Errorf("superseded image %s still there (%v)", r1.Payload.Path, err)
	}
	xml := h.domainXML("vm-b")
	pd, _, _ := domxml.FindPayload(xml)
	if countPayloadDrives(t, xml) != 1 || pd.Path != r2.Payload.Path || pd.Target != r1.Device.Target {
		t.Errorf("drive after switch: %+v (xml has %d payload drives)", pd, countPayloadDrives(t, xml))
	}

	h.drop("three", map[string]any{"version": 1, "domain": "vm-b", "action": "detach"})
	r3 := h.result("three")
	if r3.State != result.StateDone {
		t.Fatalf("detach: %+v %+v", r3, r3.Error)
	}
	if n := countPayloadDrives(t, h.domainXML("vm-b")); n != 0 {
		t.Errorf("%d payload drives after detach", n)
	}
	if _, err := os.Stat(r2.Payload.Path); !os.IsNotExist(err) {
		t.Errorf("detached image still there")
	}
}

func TestFailuresAreReportedAndKept(t *testing.T) {
	h := startAgent(t, "", nil)
	h.drop("nodomain", map[string]any{"version": 1, "domain": "does-not-exist", "hostname": "x"})
	h.dropRaw("broken", []byte(`{"version": 1, "domain": "vm", "nics": [{"mac": "zz"}], "bogus": true`))
	h.dropRaw("invalid", []byte(`{"version": 1, "domain": "vm", "hostname": "-bad-", "nics": [{"mac": "52:54:00:00:00:01", "ipv4": {"method": "static", "address": "192.0.2.300/24"}}], "bogus": 1}`))
	cases := []struct {
		id, code, field string
		fields          []string
	}{
		{"nodomain", result.CodeDomainNotFound, "domain", nil},
		{"broken", result.CodeInvalidJob, "", nil},
		{"invalid", result.CodeInvalidJob, "bogus", []string{"bogus", "hostname", "nics[0].ipv4.address"}},
	}
	for _, c := range cases {
		r := h.result(c.id)
		if r.State != result.StateFailed || r.Error == nil || r.Error.Code != c.code || r.Error.Field != c.field {
			t.Errorf("%s: %+v error %+v", c.id, r, r.Error)
			continue
		}
		var got []string
		for _, fe := range r.Errors {
			got = append(got, fe.Field)
		}
		if c.fields != nil && strings.Join(got, ",") != strings.Join(c.fields, ",") {
			t.Errorf("%s: error fields %v, want %v", c.id, got, c.fields)
		}
		kept := filepath.Join(h.spool.Dir(spool.Failed), c.id+".job.json")
		st, err := os.Stat(kept)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: failed job not kept with mode 0600: %v %v", c.id, st, err)
		}
	}
	if ents, _ := os.ReadDir(h.payload); len(ents) != 1 { // only the node domain's (absent) image dir entry count
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		if len(ents) != 0 {
			t.Errorf("payload dir holds %v after failed jobs", names)
		}
	}
	// The agent is still healthy and takes new work.
	h.drop("after", map[string]any{"version": 1, "domain": "vm-c", "domain_xml": domainXML("vm-c", "pc", ""), "action": "attach"})
	if r := h.result("after"); r.State != result.StateDone {
		t.Errorf("job after failures: %+v", r.Error)
	}
}

func TestOrphanCollectionAtStartup(t *testing.T) {
	var keep, orphan string
	h := startAgent(t, "", func(dir string) {
		keep = filepath.Join(dir, "6695eb01-f6a4-8304-79aa-97f2502e193f-0000000000000000.iso")
		orphan = filepath.Join(dir, "deadbeef-0000-0000-0000-000000000000-1111111111111111.iso")
		for _, p := range []string{keep, orphan, filepath.Join(dir, ".leftover.tmp")} {
			if err := os.WriteFile(p, []byte("x"), 0o640); err != nil {
				t.Fatal(err)
			}
		}
	})
	_ = h
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("image referenced by a defined domain was removed: %v", err)
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Errorf("orphan image kept (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(h.payload, ".leftover.tmp")); !os.IsNotExist(err) {
		t.Errorf("leftover temp file kept")
	}
}

func TestSocketAPI(t *testing.T) {
	h := startAgent(t, "", nil)
	c := client.New(h.sock).HTTP()
	post := func(body string) (int, map[string]any) {
		resp, err := c.Post("http://x/v1/jobs", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		b, _ := io.ReadAll(resp.Body)
		json.Unmarshal(b, &m)
		return resp.StatusCode, m
	}
	code, m := post(`{"version": 1, "domain": "vm", "hostname": "bad_name", "timezone": "Mars/Olympus"}`)
	if code != http.StatusBadRequest {
		t.Fatalf("invalid job: HTTP %d %v", code, m)
	}
	errs, _ := json.Marshal(m["errors"])
	for _, want := range []string{`"field":"hostname"`, `"field":"timezone"`, `bad_name`, `Mars/Olympus`} {
		if !bytes.Contains(errs, []byte(want)) {
			t.Errorf("400 answer lacks %s: %s", want, errs)
		}
	}
	if code, _ := post(`{"version": 1, "hostname": "no-domain"}`); code != http.StatusBadRequest {
		t.Errorf("job without domain: HTTP %d", code)
	}
	job := fmt.Sprintf(`{"version": 1, "id": "api-1", "domain": "vm-api", "action": "attach", "domain_xml": %q}`, domainXML("vm-api", "pc", ""))
	code, m = post(job)
	if code != http.StatusAccepted || m["id"] != "api-1" {
		t.Fatalf("submit: HTTP %d %v", code, m)
	}
	resp, err := c.Get("http://x/v1/jobs/api-1?wait=30s")
	if err != nil {
		t.Fatal(err)
	}
	var r result.Result
	json.NewDecoder(resp.Body).Decode(&r)
	resp.Body.Close()
	if r.State != result.StateDone || r.Source != "socket" {
		t.Fatalf("waited result: %+v %+v", r, r.Error)
	}
	// the same id again once finished is a new run; while queued it is a conflict
	for _, p := range []string{"/v1/jobs/nope", "/v1/jobs/..%2Fetc"} {
		resp, err := c.Get("http://x" + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET %s: HTTP %d", p, resp.StatusCode)
		}
	}
	resp, err = c.Get("http://x/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = c.Get("http://x/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`vmpayload_jobs_total{outcome="done"} 1`, `vmpayload_jobs_received_total{source="socket"} 1`,
		`vmpayload_build_seconds_count 1`, `vmpayload_attach_seconds_count 1`, `vmpayload_libvirt_reconnects_total 0`} {
		if !strings.Contains(string(mb), want) {
			t.Errorf("/metrics lacks %q:\n%s", want, mb)
		}
	}
	// result file also on disk, same document
	fr, ok := h.spool.Lookup("api-1")
	if !ok || fr.Payload == nil || fr.Payload.SHA256 != r.Payload.SHA256 {
		t.Errorf("spool result differs from API result")
	}
}

func TestEventsStream(t *testing.T) {
	h := startAgent(t, "", nil)
	c := client.New(h.sock).HTTP()
	resp, err := c.Get("http://x/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	h.drop("ev", map[string]any{"version": 1, "domain": "vm-ev", "domain_xml": domainXML("vm-ev", "pc", "")})
	dec := json.NewDecoder(resp.Body)
	seen := map[string]bool{}
	deadline := time.After(30 * time.Second)
	for !(seen["job/done"] && seen["domain/started"] && seen["domain/defined"]) {
		evc := make(chan agent.Event, 1)
		go func() {
			var ev agent.Event
			if dec.Decode(&ev) == nil {
				evc <- ev
			}
		}()
		select {
		case ev := <-evc:
			seen[ev.Kind+"/"+ev.Type] = true
		case <-deadline:
			t.Fatalf("events seen: %v", seen)
		}
	}
}

func TestManyDomainsInParallel(t *testing.T) {
	h := startAgent(t, "", nil)
	const n = 40
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("par-%d", i%8)
		h.drop(fmt.Sprintf("p%02d", i), map[string]any{"version": 1, "domain": name, "domain_xml": domainXML(name, "pc", ""),
			"action": "attach", "hostname": fmt.Sprintf("h%d", i)})
	}
	for i := 0; i < n; i++ {
		r := h.result(fmt.Sprintf("p%02d", i))
		if r.State != result.StateDone {
			t.Errorf("p%02d: %+v", i, r.Error)
		}
	}
	// each domain ends with exactly one drive holding its last job's image
	for d := 0; d < 8; d++ {
		xml := h.domainXML(fmt.Sprintf("par-%d", d))
		if n := countPayloadDrives(t, xml); n != 1 {
			t.Errorf("par-%d has %d payload drives", d, n)
		}
	}
	ents, _ := os.ReadDir(h.payload)
	if len(ents) != 8 {
		t.Errorf("%d images in the payload dir, want one per domain (8)", len(ents))
	}
}
