package agent_test

// Integration tests of the real vmpayload binary against a real libvirtd
// (qemu:///system) and the libvirt test driver. They run only with
// VMPAYLOAD_LIBVIRTD=1, which the Makefile sets after test/libvirtd.sh has
// started the daemons. The agent is driven only from outside — job files
// dropped into its spool the writer's way and HTTP on its unix socket — and
// checked only from outside: virsh dumpxml/domstate, blkid, xorriso and the
// spool's result files. Domains are small TCG guests named vmpx-int-* that
// boot nothing; every test undefines the domains it made.

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/payload/owner"
	"github.com/vmpayload/vmpayload/payload/recipe"
	"github.com/vmpayload/vmpayload/test/agenttest"
	"github.com/vmpayload/vmpayload/test/testenv"
)

const systemURI = "qemu:///system"

// resultWait bounds every wait for an agent outcome; TCG and host noise make
// single operations slow, so it is generous. It is a deadline, not a timing
// assertion.
const resultWait = 180 * time.Second

func needLibvirtd(t testing.TB) {
	t.Helper()
	testenv.NeedLibvirtd(t)
	for _, tool := range []string{"virsh", "blkid", "xorriso", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: %v", tool, err)
		}
	}
}

// agentProc is one `vmpayload agent` process (the binary agenttest builds,
// or VMPAYLOAD_AGENT_BIN); its methods fail the test on errors.
type agentProc struct {
	*agenttest.Agent
	t testing.TB
}

// newAgent prepares (but does not start) an agent on uri with its own
// spool, payload directory, secrets directory and socket under a fresh
// work directory the QEMU user can traverse.
func newAgent(t testing.TB, uri string, extra ...string) *agentProc {
	t.Helper()
	args := append([]string{"--rescan-interval", "1s", "--log-level", "debug"}, extra...)
	return &agentProc{Agent: agenttest.Prepare(t, agenttest.Options{URI: uri, Dir: testenv.WorkDir(t, "vmpx-int-"), Args: args}), t: t}
}

// start runs the agent and waits until its socket answers /healthz.
func (a *agentProc) start() {
	a.t.Helper()
	if err := a.Start(); err != nil {
		a.t.Fatal(err)
	}
}

// stop sends SIGTERM and waits for the agent to exit (SIGKILL after 60s).
func (a *agentProc) stop() { _ = a.Stop() }

// kill sends SIGKILL to the agent and waits until it is gone.
func (a *agentProc) kill() {
	a.t.Helper()
	if err := a.Kill(); err != nil {
		a.t.Fatal(err)
	}
}

// drop writes a job into incoming/ the way writers must: a dot temp file,
// then rename.
func (a *agentProc) drop(name string, job map[string]any) {
	a.t.Helper()
	b, err := json.Marshal(job)
	if err != nil {
		a.t.Fatal(err)
	}
	if err := a.Drop(name, b); err != nil {
		a.t.Fatal(err)
	}
}

// result waits for the result of id whose claim differs from notClaim (""
// accepts any) and for the job to leave processing/.
func (a *agentProc) result(id, notClaim string) result.Result {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), resultWait)
	defer cancel()
	r, err := a.WaitResult(ctx, id, notClaim)
	if err != nil {
		a.t.Fatal(err)
	}
	return r
}

// run drops a job and waits for its result.
func (a *agentProc) run(id string, job map[string]any) result.Result {
	a.t.Helper()
	job["id"] = id
	old, _, _ := a.ReadResult(id)
	a.drop(id, job)
	return a.result(id, old.Claim)
}

// detach runs a detach job for domain name (id prefix-…) that must be done,
// leave no payload drive in the persistent definition and remove the image.
func (a *agentProc) detach(t *testing.T, prefix, name, image string) {
	t.Helper()
	mustDone(t, a.run(prefix+"-"+testenv.RandHex(t, 3), map[string]any{"version": 1, "domain": name, "action": "detach"}))
	if n := len(payloadDrives(t, name, true)); n != 0 {
		t.Fatalf("%d payload drives in the persistent config after detach", n)
	}
	if exists(image) {
		t.Fatalf("image %s kept after detach", image)
	}
}

// metric returns the value of the named sample in /metrics.
func (a *agentProc) metric(name string) float64 {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	v, err := agenttest.Metric(ctx, a.Client(), name)
	if err != nil {
		a.t.Fatal(err)
	}
	return v
}

// images lists the *.iso / *.img files in the payload directory.
func (a *agentProc) images() []string {
	a.t.Helper()
	ents, err := os.ReadDir(a.PayloadDir)
	if err != nil {
		a.t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.Name() != owner.Dir { // the images' owner markers
			out = append(out, filepath.Join(a.PayloadDir, e.Name()))
		}
	}
	sort.Strings(out)
	return out
}

// --- virsh ---

// virsh runs virsh on the system URI (testenv.VirshT) and returns stdout.
func virsh(t testing.TB, args ...string) string {
	t.Helper()
	return testenv.VirshT(t, systemURI, args...)
}

// qemuXML is a small TCG domain that sits in SeaBIOS with nothing to boot.
func qemuXML(name, machine, extraDevices string) string {
	return testenv.Domain{Name: name, MemoryMiB: 64, Machine: machine, Boot: "cdrom", ACPI: true, Devices: extraDevices}.XML()
}

const virtioSCSI = "<controller type='scsi' index='0' model='virtio-scsi'/>"

// domainName returns a unique domain name vmpx-int-<test>-<rand> and
// registers its destroy+undefine at cleanup.
func domainName(t testing.TB, test string) string {
	t.Helper()
	name := "vmpx-int-" + test + "-" + testenv.RandHex(t, 3)
	t.Cleanup(func() { removeDomain(name) })
	return name
}

// removeDomain destroys and undefines name if it exists.
func removeDomain(name string) {
	_, _ = testenv.VirshTry(systemURI, "destroy", name)
	_, _ = testenv.VirshTry(systemURI, "undefine", name)
}

// defineDomain defines a stopped qemu domain through virsh.
func defineDomain(t testing.TB, dir, name, machine, extra string) string {
	t.Helper()
	p := filepath.Join(dir, name+".xml")
	if err := os.WriteFile(p, []byte(qemuXML(name, machine, extra)), 0o644); err != nil {
		t.Fatal(err)
	}
	virsh(t, "define", p)
	return strings.TrimSpace(virsh(t, "domuuid", name))
}

func domstate(t testing.TB, name string) string {
	t.Helper()
	return strings.TrimSpace(virsh(t, "domstate", name))
}

type xmlDisk struct {
	Type   string `xml:"type,attr"`
	Device string `xml:"device,attr"`
	Source *struct {
		File          string `xml:"file,attr"`
		StartupPolicy string `xml:"startupPolicy,attr"`
	} `xml:"source"`
	Target struct {
		Dev string `xml:"dev,attr"`
		Bus string `xml:"bus,attr"`
	} `xml:"target"`
	ReadOnly *struct{} `xml:"readonly"`
	Alias    struct {
		Name string `xml:"name,attr"`
	} `xml:"alias"`
}

// payloadDrives returns the disks with alias ua-vmpayload in the domain's
// live (inactive=false) or persistent definition, as virsh shows them.
func payloadDrives(t testing.TB, name string, inactive bool) []xmlDisk {
	t.Helper()
	args := []string{"dumpxml", name}
	if inactive {
		args = append(args, "--inactive")
	}
	var d struct {
		Disks []xmlDisk `xml:"devices>disk"`
	}
	if err := xml.Unmarshal([]byte(virsh(t, args...)), &d); err != nil {
		t.Fatal(err)
	}
	var out []xmlDisk
	for _, k := range d.Disks {
		if k.Alias.Name == "ua-vmpayload" {
			out = append(out, k)
		}
	}
	return out
}

// checkDrive asserts exactly one payload drive on bus holding path (an
// empty path: an ejected drive) in the live or persistent definition.
func checkDrive(t testing.TB, name string, inactive bool, bus, path string) xmlDisk {
	t.Helper()
	return checkDriveKind(t, name, inactive, "cdrom", bus, path)
}

// checkDriveKind is checkDrive for a drive of a given kind ("cdrom", or
// "disk" for vfat payloads).
func checkDriveKind(t testing.TB, name string, inactive bool, kind, bus, path string) xmlDisk {
	t.Helper()
	which := "live"
	if inactive {
		which = "persistent"
	}
	ds := payloadDrives(t, name, inactive)
	if len(ds) != 1 {
		t.Fatalf("%s definition of %s has %d payload drives, want 1: %+v", which, name, len(ds), ds)
	}
	d := ds[0]
	src := ""
	if d.Source != nil {
		src = d.Source.File
	}
	if d.Type != "file" || d.Device != kind || d.ReadOnly == nil || d.Target.Bus != bus || d.Target.Dev == "" || src != path {
		t.Fatalf("%s payload drive of %s = %+v (source %q), want file %s readonly on %s with source %q", which, name, d, src, kind, bus, path)
	}
	if path != "" && d.Source.StartupPolicy != "optional" {
		t.Fatalf("%s payload drive of %s has startupPolicy %q, want optional", which, name, d.Source.StartupPolicy)
	}
	return d
}

// checkImage asserts the image's label and that its meta-data names host.
func checkImage(t testing.TB, img, host string) {
	t.Helper()
	out, err := exec.Command("blkid", "-p", "-s", "LABEL", "-o", "value", img).Output()
	if err != nil {
		t.Fatalf("blkid -p %s: %v", img, err)
	}
	if l := strings.TrimSpace(string(out)); l != "cidata" {
		t.Fatalf("label of %s = %q, want cidata", img, l)
	}
	dir := t.TempDir()
	extract := exec.Command("xorriso", "-osirrox", "on", "-indev", img, "-extract", "/", dir)
	if strings.HasSuffix(img, ".img") { // vfat
		extract = exec.Command("mcopy", "-s", "-n", "-i", img, "::meta-data", "::user-data", dir)
	}
	if out, err := extract.CombinedOutput(); err != nil {
		t.Fatalf("extracting %s: %v\n%s", img, err, out)
	}
	md, err := os.ReadFile(filepath.Join(dir, "meta-data"))
	if err != nil {
		t.Fatalf("image %s: %v", img, err)
	}
	if !strings.Contains(string(md), "local-hostname: "+host) {
		t.Fatalf("meta-data of %s does not name host %s:\n%s", img, host, md)
	}
	if _, err := os.Stat(filepath.Join(dir, "user-data")); err != nil {
		t.Fatalf("image %s: %v", img, err)
	}
}

func mustDone(t testing.TB, r result.Result) {
	t.Helper()
	if r.State != result.StateDone || r.Error != nil {
		t.Fatalf("job %s: state %s, error %+v", r.ID, r.State, r.Error)
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// waitFor polls cond until it holds or resultWait passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(resultWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func job(domain, host, action string) map[string]any {
	return map[string]any{"version": 1, "domain": domain, "hostname": host, "action": action}
}

// TestAgentLibvirtd runs the agent binary against qemu:///system.
func TestAgentLibvirtd(t *testing.T) {
	needLibvirtd(t)
	a := newAgent(t, systemURI)
	a.start()

	t.Run("StoppedPCStart", func(t *testing.T) {
		name := domainName(t, "pc")
		defineDomain(t, a.Dir, name, "pc", "")
		r := a.run("pc-start-"+testenv.RandHex(t, 3), job(name, "pc-host", "start"))
		mustDone(t, r)
		if r.Device == nil || r.Device.Bus != "ide" || r.DomainState != "running" || r.Payload == nil || r.Payload.Reused {
			t.Fatalf("result %+v device %+v payload %+v", r, r.Device, r.Payload)
		}
		if filepath.Dir(r.Payload.Path) != a.PayloadDir {
			t.Fatalf("image %s outside the payload dir %s", r.Payload.Path, a.PayloadDir)
		}
		d := checkDrive(t, name, true, "ide", r.Payload.Path)
		if d.Target.Dev != r.Device.Target {
			t.Errorf("target %s in XML, %s in result", d.Target.Dev, r.Device.Target)
		}
		checkDrive(t, name, false, "ide", r.Payload.Path)
		if s := domstate(t, name); s != "running" {
			t.Fatalf("domstate %s = %q", name, s)
		}
		checkImage(t, r.Payload.Path, "pc-host")
	})

	t.Run("BusChoice", func(t *testing.T) {
		for _, c := range []struct{ machine, extra, bus string }{
			{"q35", "", "sata"},
			{"pc", virtioSCSI, "scsi"},
			{"q35", virtioSCSI, "scsi"},
		} {
			name := domainName(t, "bus")
			defineDomain(t, a.Dir, name, c.machine, c.extra)
			r := a.run("bus-"+testenv.RandHex(t, 3), job(name, "bus-host", "start"))
			mustDone(t, r)
			if r.Device == nil || r.Device.Bus != c.bus {
				t.Fatalf("%s %q: device %+v, want bus %s", c.machine, c.extra, r.Device, c.bus)
			}
			checkDrive(t, name, true, c.bus, r.Payload.Path)
			checkDrive(t, name, false, c.bus, r.Payload.Path)
			if s := domstate(t, name); s != "running" {
				t.Fatalf("domstate %s = %q", name, s)
			}
		}
	})

	t.Run("ResubmitAndNewContent", func(t *testing.T) {
		name := domainName(t, "resub")
		defineDomain(t, a.Dir, name, "pc", "")
		id := "resub-" + testenv.RandHex(t, 3)
		r1 := a.run(id, job(name, "first-host", "attach"))
		mustDone(t, r1)
		// The same job again (same id and content): same image, one drive.
		r2 := a.run(id, job(name, "first-host", "attach"))
		mustDone(t, r2)
		if !r2.Payload.Reused || r2.Payload.Path != r1.Payload.Path {
			t.Fatalf("re-submit: payload %+v, first %+v", r2.Payload, r1.Payload)
		}
		checkDrive(t, name, true, "ide", r1.Payload.Path)
		if got := a.images(); len(got) != 1 || got[0] != r1.Payload.Path {
			t.Fatalf("payload dir %v, want only %s", got, r1.Payload.Path)
		}
		// New content: a new image, the old one deleted, still one drive.
		r3 := a.run("resub-new-"+testenv.RandHex(t, 3), job(name, "second-host", "attach"))
		mustDone(t, r3)
		if r3.Payload.Path == r1.Payload.Path || r3.Payload.Reused {
			t.Fatalf("new content reused the image: %+v", r3.Payload)
		}
		if exists(r1.Payload.Path) {
			t.Fatalf("superseded image %s still there", r1.Payload.Path)
		}
		checkDrive(t, name, true, "ide", r3.Payload.Path)
		checkImage(t, r3.Payload.Path, "second-host")
		if s := domstate(t, name); s != "shut off" {
			t.Fatalf("attach started the domain: %q", s)
		}
	})

	t.Run("RunningMediaChange", func(t *testing.T) {
		name := domainName(t, "media")
		defineDomain(t, a.Dir, name, "pc", "")
		r1 := a.run("media-1-"+testenv.RandHex(t, 3), job(name, "media-one", "start"))
		mustDone(t, r1)
		r2 := a.run("media-2-"+testenv.RandHex(t, 3), job(name, "media-two", "start"))
		mustDone(t, r2)
		if r2.Payload.Path == r1.Payload.Path {
			t.Fatal("new content, same image")
		}
		checkDrive(t, name, false, "ide", r2.Payload.Path)
		checkDrive(t, name, true, "ide", r2.Payload.Path)
		if exists(r1.Payload.Path) {
			t.Fatalf("superseded image %s still there", r1.Payload.Path)
		}
		checkImage(t, r2.Payload.Path, "media-two")
		if s := domstate(t, name); s != "running" {
			t.Fatalf("domstate %q", s)
		}
	})

	t.Run("RunningHotplugSCSI", func(t *testing.T) {
		name := domainName(t, "hotplug")
		defineDomain(t, a.Dir, name, "pc", virtioSCSI)
		virsh(t, "start", name)
		r := a.run("hotplug-"+testenv.RandHex(t, 3), job(name, "hot-host", "attach"))
		mustDone(t, r)
		if r.Device == nil || r.Device.Bus != "scsi" {
			t.Fatalf("device %+v", r.Device)
		}
		checkDrive(t, name, false, "scsi", r.Payload.Path)
		checkDrive(t, name, true, "scsi", r.Payload.Path)
	})

	t.Run("RunningNoSCSI", func(t *testing.T) {
		name := domainName(t, "noscsi")
		defineDomain(t, a.Dir, name, "pc", "")
		virsh(t, "start", name)
		id := "noscsi-" + testenv.RandHex(t, 3)
		r := a.run(id, job(name, "no-host", "attach"))
		if r.State != result.StateFailed || r.Error == nil || r.Error.Code != result.CodeDomainRunning {
			t.Fatalf("result %+v error %+v", r, r.Error)
		}
		if !strings.Contains(r.Error.Message, "stop the domain") || !strings.Contains(r.Error.Message, "SCSI controller") {
			t.Fatalf("message %q does not tell to stop the domain or add a SCSI controller", r.Error.Message)
		}
		if !exists(filepath.Join(a.SpoolDir, "failed", id+".json")) || !exists(filepath.Join(a.SpoolDir, "failed", id+".job.json")) {
			t.Fatal("failed/ lacks the result or the kept job")
		}
		if n := len(payloadDrives(t, name, true)) + len(payloadDrives(t, name, false)); n != 0 {
			t.Fatalf("%d payload drives after a failed job", n)
		}
	})

	// vfat payloads are read-only disks (Linux does not mount a FAT
	// filesystem from a CD-ROM), on virtio or on SCSI where there is a
	// controller; a disk has no medium, so a running domain's vfat disk is
	// not switched live.
	t.Run("VFATDisk", func(t *testing.T) {
		vfat := func(name, host, action string) map[string]any {
			j := job(name, host, action)
			j["media"] = "vfat"
			return j
		}
		// Stopped q35 domain that had an ISO payload: the CD-ROM is
		// replaced by a virtio disk, the domain starts.
		name := domainName(t, "vfat")
		defineDomain(t, a.Dir, name, "q35", "")
		r0 := a.run("vfat-iso-"+testenv.RandHex(t, 3), job(name, "iso-host", "attach"))
		mustDone(t, r0)
		checkDrive(t, name, true, "sata", r0.Payload.Path)
		r1 := a.run("vfat-1-"+testenv.RandHex(t, 3), vfat(name, "vfat-one", "start"))
		mustDone(t, r1)
		if r1.Device == nil || r1.Device.Bus != "virtio" || r1.Device.Kind != "disk" || r1.Payload.Media != "vfat" || r1.DomainState != "running" {
			t.Fatalf("result %+v device %+v payload %+v", r1, r1.Device, r1.Payload)
		}
		checkDriveKind(t, name, true, "disk", "virtio", r1.Payload.Path)
		checkDriveKind(t, name, false, "disk", "virtio", r1.Payload.Path)
		checkImage(t, r1.Payload.Path, "vfat-one")
		if exists(r0.Payload.Path) {
			t.Fatalf("superseded ISO %s still there", r0.Payload.Path)
		}
		// Running: new vfat content is refused with a clear error, the
		// drive keeps the old image, the new image is not left behind.
		id := "vfat-2-" + testenv.RandHex(t, 3)
		r2 := a.run(id, vfat(name, "vfat-two", "attach"))
		if r2.State != result.StateFailed || r2.Error == nil || r2.Error.Code != result.CodeDomainRunning ||
			!strings.Contains(r2.Error.Message, "stop the domain") || !strings.Contains(r2.Error.Message, "disk") {
			t.Fatalf("running vfat change: result %+v error %+v", r2, r2.Error)
		}
		checkDriveKind(t, name, false, "disk", "virtio", r1.Payload.Path)
		if got := a.images(); len(got) != 1 || got[0] != r1.Payload.Path {
			t.Fatalf("payload dir %v, want only %s", got, r1.Payload.Path)
		}
		// Stopped again: the disk's image is switched in the definition.
		virsh(t, "destroy", name)
		r3 := a.run("vfat-3-"+testenv.RandHex(t, 3), vfat(name, "vfat-three", "attach"))
		mustDone(t, r3)
		checkDriveKind(t, name, true, "disk", "virtio", r3.Payload.Path)
		checkImage(t, r3.Payload.Path, "vfat-three")

		// Running domain without a payload drive: the disk is hot-plugged
		// on virtio, and detached live again.
		hot := domainName(t, "vfathot")
		defineDomain(t, a.Dir, hot, "pc", "")
		virsh(t, "start", hot)
		r4 := a.run("vfat-hot-"+testenv.RandHex(t, 3), vfat(hot, "vfat-hot", "attach"))
		mustDone(t, r4)
		checkDriveKind(t, hot, false, "disk", "virtio", r4.Payload.Path)
		checkDriveKind(t, hot, true, "disk", "virtio", r4.Payload.Path)
		a.detach(t, "vfat-det", hot, r4.Payload.Path)

		// With a SCSI controller the disk goes on SCSI.
		scsi := domainName(t, "vfatscsi")
		defineDomain(t, a.Dir, scsi, "q35", virtioSCSI)
		r6 := a.run("vfat-scsi-"+testenv.RandHex(t, 3), vfat(scsi, "vfat-scsi", "start"))
		mustDone(t, r6)
		checkDriveKind(t, scsi, false, "disk", "scsi", r6.Payload.Path)
	})

	t.Run("DetachStopped", func(t *testing.T) {
		name := domainName(t, "detstop")
		defineDomain(t, a.Dir, name, "q35", "")
		r1 := a.run("detstop-a-"+testenv.RandHex(t, 3), job(name, "det-host", "attach"))
		mustDone(t, r1)
		checkDrive(t, name, true, "sata", r1.Payload.Path)
		a.detach(t, "detstop-d", name, r1.Payload.Path)
	})

	t.Run("DetachRunning", func(t *testing.T) {
		name := domainName(t, "detrun")
		defineDomain(t, a.Dir, name, "pc", "")
		r1 := a.run("detrun-a-"+testenv.RandHex(t, 3), job(name, "det-host", "start"))
		mustDone(t, r1)
		a.detach(t, "detrun-d", name, r1.Payload.Path)
		// Live: the IDE drive cannot be unplugged; its medium is ejected.
		for _, d := range payloadDrives(t, name, false) {
			if d.Source != nil && d.Source.File != "" {
				t.Fatalf("live payload drive still holds %s", d.Source.File)
			}
		}
		if s := domstate(t, name); s != "running" {
			t.Fatalf("domstate %q", s)
		}
	})

	t.Run("DomainXMLDefines", func(t *testing.T) {
		name := domainName(t, "define")
		j := job(name, "defined-host", "start")
		j["domain_xml"] = qemuXML(name, "pc", "")
		r := a.run("define-"+testenv.RandHex(t, 3), j)
		mustDone(t, r)
		if s := domstate(t, name); s != "running" {
			t.Fatalf("domstate %q", s)
		}
		if uuid := strings.TrimSpace(virsh(t, "domuuid", name)); uuid != r.DomainUUID {
			t.Fatalf("uuid %s, result %s", uuid, r.DomainUUID)
		}
		checkDrive(t, name, true, "ide", r.Payload.Path)
		checkDrive(t, name, false, "ide", r.Payload.Path)
	})

	t.Run("UnknownDomain", func(t *testing.T) {
		name := "vmpx-int-missing-" + testenv.RandHex(t, 3)
		id := "missing-" + testenv.RandHex(t, 3)
		r := a.run(id, job(name, "nobody", "start"))
		_, dir, _ := a.ReadResult(id)
		if dir != "failed" || r.State != result.StateFailed || r.Error == nil || r.Error.Code != result.CodeDomainNotFound ||
			r.Error.Field != "domain" || !strings.Contains(r.Error.Message, name) {
			t.Fatalf("result in %s: %+v error %+v", dir, r, r.Error)
		}
		if exists(filepath.Join(a.SpoolDir, "done", id+".json")) {
			t.Fatal("result in done/ too")
		}
	})

	t.Run("UndefineRemovesImage", func(t *testing.T) {
		name := domainName(t, "undef")
		defineDomain(t, a.Dir, name, "pc", "")
		r := a.run("undef-"+testenv.RandHex(t, 3), job(name, "undef-host", "start"))
		mustDone(t, r)
		if !exists(r.Payload.Path) {
			t.Fatal("no image")
		}
		virsh(t, "destroy", name)
		if !exists(r.Payload.Path) {
			t.Fatal("image removed when the domain stopped")
		}
		virsh(t, "undefine", name)
		waitFor(t, "the agent to remove "+r.Payload.Path, func() bool { return !exists(r.Payload.Path) })
	})

	// A host reboot, as far as vmpayload can tell: the agent is down, the
	// domain stopped, the payload directory (a tmpfs) empty. The agent's
	// start-up rebuilds the image from the recipe in the domain's
	// persistent XML, byte-identical, and a plain virsh start boots with it.
	t.Run("RecipeRebuildAfterReboot", func(t *testing.T) {
		const password = "Plaintext-Reboot-Pw-7"
		b := newAgent(t, systemURI)
		b.start()
		name := domainName(t, "recipe")
		defineDomain(t, b.Dir, name, "pc", "")
		j := job(name, "recipe-host", "start")
		j["users"] = []map[string]any{{"name": "ops", "password": password}}
		r := b.run("recipe-start-"+testenv.RandHex(t, 3), j)
		mustDone(t, r)
		inactive := virsh(t, "dumpxml", "--inactive", name)
		rc, ok, err := recipe.FromDomainXML(inactive)
		if err != nil || !ok {
			t.Fatalf("recipe in the persistent XML: %v %v\n%s", ok, err, inactive)
		}
		if rc.Path != r.Payload.Path || rc.SHA256 != r.Payload.SHA256 || rc.InstanceID != r.Payload.InstanceID {
			t.Fatalf("recipe %s sha256 %s instance-id %s; result %+v", rc.Path, rc.SHA256, rc.InstanceID, r.Payload)
		}
		for _, x := range []string{inactive, virsh(t, "dumpxml", name)} {
			if strings.Contains(x, password) {
				t.Fatalf("the plaintext password is in the domain XML:\n%s", x)
			}
		}

		b.stop()
		virsh(t, "destroy", name)
		testenv.EmptyDir(t, b.PayloadDir)
		b.start()
		waitFor(t, "the agent to rebuild "+r.Payload.Path, func() bool { return exists(r.Payload.Path) })
		data, err := os.ReadFile(r.Payload.Path)
		if err != nil {
			t.Fatal(err)
		}
		if sum := testenv.SHA256(data); sum != r.Payload.SHA256 {
			t.Fatalf("rebuilt image sha256 %s, want %s", sum, r.Payload.SHA256)
		}
		checkImage(t, r.Payload.Path, "recipe-host")

		virsh(t, "start", name)
		if s := domstate(t, name); s != "running" {
			t.Fatalf("domstate %s = %q", name, s)
		}
		checkDrive(t, name, false, "ide", r.Payload.Path)

		// A media change on the running domain records the new recipe in
		// the persistent definition; detach removes it.
		r2 := b.run("recipe-change-"+testenv.RandHex(t, 3), job(name, "recipe-host-2", "attach"))
		mustDone(t, r2)
		rc2, ok, err := recipe.FromDomainXML(virsh(t, "dumpxml", "--inactive", name))
		if err != nil || !ok || rc2.Path != r2.Payload.Path || rc2.SHA256 != r2.Payload.SHA256 {
			t.Fatalf("recipe after the running media change: %+v %v %v; result %+v", rc2, ok, err, r2.Payload)
		}
		mustDone(t, b.run("recipe-detach-"+testenv.RandHex(t, 3), map[string]any{"version": 1, "domain": name, "action": "detach"}))
		if x := virsh(t, "dumpxml", "--inactive", name); strings.Contains(x, recipe.Namespace) {
			t.Fatalf("recipe left after detach:\n%s", x)
		}
	})
}

// TestAgentOrphanGC checks that images no defined domain references are
// removed at start-up and referenced ones kept.
func TestAgentOrphanGC(t *testing.T) {
	needLibvirtd(t)
	a := newAgent(t, systemURI)
	if err := os.MkdirAll(a.PayloadDir, 0o711); err != nil {
		t.Fatal(err)
	}
	name := domainName(t, "gc")
	uuid := "9d0d3a8e-1111-4222-8333-" + testenv.RandHex(t, 6)
	keep := filepath.Join(a.PayloadDir, uuid+"-00000000deadbeef.iso")
	stray := filepath.Join(a.PayloadDir, "5a5a5a5a-0000-4000-8000-000000000000-0123456789abcdef.iso")
	for _, p := range []string{keep, stray} {
		if err := os.WriteFile(p, []byte("not really an iso"), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	x := qemuXML(name, "pc", fmt.Sprintf(`<disk type='file' device='cdrom'><driver name='qemu' type='raw'/><source file='%s' startupPolicy='optional'/><target dev='hdc' bus='ide'/><readonly/><alias name='ua-vmpayload'/></disk>`, keep))
	x = strings.Replace(x, "<name>", "<uuid>"+uuid+"</uuid><name>", 1)
	p := filepath.Join(a.Dir, "gc.xml")
	if err := os.WriteFile(p, []byte(x), 0o644); err != nil {
		t.Fatal(err)
	}
	virsh(t, "define", p)

	a.start()
	// Collection runs before the first job: once a job has a result, it is over.
	r := a.run("gc-probe", job("vmpx-int-gc-nonexistent", "x", "start"))
	if r.State != result.StateFailed {
		t.Fatalf("probe %+v", r)
	}
	if exists(stray) {
		t.Errorf("orphan %s not removed", stray)
	}
	if !exists(keep) {
		t.Errorf("image %s of defined domain %s removed", keep, name)
	}
}

// outcome counts the result files of ids and checks the spool is drained:
// every id has exactly one result (done/ or failed/, never both) and
// nothing is left in incoming/ or processing/.
func outcome(t testing.TB, a *agentProc, ids []string) (done, failed int) {
	t.Helper()
	for _, id := range ids {
		d := exists(filepath.Join(a.SpoolDir, "done", id+".json"))
		f := exists(filepath.Join(a.SpoolDir, "failed", id+".json"))
		switch {
		case d && f:
			t.Errorf("job %s has results in done/ and failed/", id)
		case d:
			done++
		case f:
			failed++
			r, _, _ := a.ReadResult(id)
			t.Logf("job %s failed: %+v", id, r.Error)
		default:
			t.Errorf("job %s has no result", id)
		}
	}
	for _, sub := range []string{"incoming", "processing"} {
		ents, err := os.ReadDir(filepath.Join(a.SpoolDir, sub))
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != 0 {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Errorf("%s/ not empty: %v", sub, names)
		}
	}
	return done, failed
}

// waitAll waits until every id has a result file and has left processing/.
func waitAll(t testing.TB, a *agentProc, ids []string) {
	t.Helper()
	for _, id := range ids {
		a.result(id, "")
	}
}

// countResults returns how many of ids have a result file.
func countResults(a *agentProc, ids []string) int {
	n := 0
	for _, id := range ids {
		if _, _, ok := a.ReadResult(id); ok {
			n++
		}
	}
	return n
}

// TestAgentLibvirtdRestart kills libvirtd (SIGKILL, by its pid) while a
// burst of jobs is being processed and starts it again at once: every job
// must finish done with exactly one result, vmpayload_libvirt_connected must
// be 0 while libvirtd is dead and 1 again after, and the agent must count
// the reconnection. libvirtd is shared with other tests, so this runs only with
// VMPAYLOAD_LIBVIRTD_RESTART=1 (test/hosts.sh sandbox runs it against a
// private libvirtd).
func TestAgentLibvirtdRestart(t *testing.T) {
	testenv.NeedLibvirtdRestart(t, "kills and restarts")
	a := newAgent(t, systemURI)
	a.start()
	const domains, perDomain = 5, 4
	var names []string
	for i := 0; i < domains; i++ {
		name := domainName(t, "restart")
		// virtio-scsi CD-ROMs: the burst changes media within milliseconds
		// of each boot, while SeaBIOS still probes the drive. On IDE/SATA
		// that known QEMU/libvirt race can leave libvirt believing the
		// tray is open while QEMU's is shut, and every later media change
		// of that run fails (media_locked; see docs/reliability.md). On
		// SCSI the agent recovers by replacing the drive. This test is
		// about libvirtd going away, not that race.
		defineDomain(t, a.Dir, name, "pc", virtioSCSI)
		names = append(names, name)
	}
	var ids []string
	for k := 0; k < perDomain; k++ {
		for i, name := range names {
			id := fmt.Sprintf("restart-%d-%d", i, k)
			j := job(name, fmt.Sprintf("restart-%d-%d", i, k), "start")
			j["id"] = id
			a.drop(id, j)
			ids = append(ids, id)
		}
	}
	// Kill libvirtd once the burst is under way (some results, not all).
	waitFor(t, "the first results", func() bool { return countResults(a, ids) >= 2 })
	pid := agenttest.LibvirtdPID(t)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "libvirtd to die", func() bool { return syscall.Kill(pid, 0) != nil })
	// The agent sees the connection go: the gauge behind the
	// VmpayloadLibvirtDisconnected alert says so until libvirtd is back.
	connected := func(want float64) func() bool {
		return func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			v, err := agenttest.Metric(ctx, a.Client(), "vmpayload_libvirt_connected")
			return err == nil && v == want
		}
	}
	waitFor(t, "vmpayload_libvirt_connected 0", connected(0))
	killedAt := countResults(a, ids)
	restartLibvirtd(t)
	t.Logf("libvirtd killed after %d of %d results; restarted", killedAt, len(ids))
	waitFor(t, "vmpayload_libvirt_connected 1 again", connected(1))

	waitAll(t, a, ids)
	done, failed := outcome(t, a, ids)
	if done != len(ids) || failed != 0 {
		t.Errorf("%d done, %d failed of %d", done, failed, len(ids))
		for _, name := range names {
			// What libvirt believes about the tray against what QEMU says.
			live, _ := exec.Command("virsh", "dumpxml", name).CombinedOutput()
			blk, _ := exec.Command("virsh", "qemu-monitor-command", name, "--hmp", "info block").CombinedOutput()
			var tgt []string
			for _, l := range strings.Split(string(live), "\n") {
				if strings.Contains(l, "<target dev=") {
					tgt = append(tgt, strings.TrimSpace(l))
				}
			}
			t.Logf("%s: libvirt %v; qemu: %s", name, tgt, strings.Join(strings.Fields(string(blk)), " "))
		}
	}
	waitFor(t, "reconnects metric", func() bool { return a.metric("vmpayload_libvirt_reconnects_total") >= 1 })
	for i, name := range names {
		r, _, _ := a.ReadResult(fmt.Sprintf("restart-%d-%d", i, perDomain-1))
		checkDrive(t, name, true, "scsi", r.Payload.Path)
		checkDrive(t, name, false, "scsi", r.Payload.Path)
		if s := domstate(t, name); s != "running" {
			t.Errorf("domstate %s = %q", name, s)
		}
	}
}

// restartLibvirtd starts libvirtd again with test/libvirtd.sh (which
// removes a stale pid file and waits until qemu:///system answers).
func restartLibvirtd(t testing.TB) {
	t.Helper()
	out, err := exec.Command("sh", "../test/libvirtd.sh").CombinedOutput()
	if err != nil {
		t.Fatalf("restarting libvirtd: %v\n%s", err, out)
	}
}

// testNode writes a test-driver node file with one stopped domain.
func testNode(t testing.TB, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "node.xml")
	x := `<node><domain type='test'><name>vmpx-int-node</name><memory>65536</memory><vcpu>1</vcpu><os><type arch='x86_64' machine='pc'>hvm</type></os></domain></node>`
	if err := os.WriteFile(p, []byte(x), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func testDomainXML(name string) string {
	return testenv.Domain{Type: "test", Name: name, MemoryMiB: 64}.XML()
}

// TestAgentKilledMidBurst kills the agent with SIGKILL while ~50 jobs are
// in flight on the test driver and starts it again: every job ends with
// exactly one result file and the spool is drained.
func TestAgentKilledMidBurst(t *testing.T) {
	needLibvirtd(t)
	a := newAgent(t, "test:///default")
	a.URI = "test://" + testNode(t, a.Dir)
	a.start()
	const n = 50
	var ids []string
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("burst-%02d", i)
		name := fmt.Sprintf("vmpx-int-burst-%02d", i)
		j := job(name, name, "start")
		j["id"] = id
		j["domain_xml"] = testDomainXML(name)
		a.drop(id, j)
		ids = append(ids, id)
	}
	waitFor(t, "the first results", func() bool { return countResults(a, ids) >= 5 })
	a.kill()
	killedAt := countResults(a, ids)
	inProc, _ := os.ReadDir(filepath.Join(a.SpoolDir, "processing"))
	t.Logf("agent killed after %d of %d results, %d files in processing/", killedAt, n, len(inProc))
	a.start()
	waitAll(t, a, ids)
	done, failed := outcome(t, a, ids)
	if done+failed != n {
		t.Errorf("%d done + %d failed, want %d results", done, failed, n)
	}
	if done != n {
		t.Errorf("%d of %d jobs done", done, n)
	}
}

// BenchmarkSpoolToRunning measures the latency from dropping a job file
// (with domain_xml and action start) to its done result, i.e. the domain
// running, on the test driver and on qemu:///system. It reports p50/p95.
// Run: VMPAYLOAD_LIBVIRTD=1 go test ./agent -run '^$' -bench SpoolToRunning -benchtime 50x
func BenchmarkSpoolToRunning(b *testing.B) {
	needLibvirtd(b)
	for _, c := range []struct {
		name, uri string
		xml       func(string) string
	}{
		{"test-default", "test:///default", testDomainXML},
		{"qemu-system", systemURI, func(n string) string { return qemuXML(n, "pc", "") }},
	} {
		b.Run(c.name, func(b *testing.B) {
			a := newAgent(b, c.uri)
			a.start()
			var lat []time.Duration
			for i := 0; i < b.N; i++ {
				name := fmt.Sprintf("vmpx-int-bench-%s-%d", testenv.RandHex(b, 3), i)
				if c.uri == systemURI {
					b.Cleanup(func() { removeDomain(name) })
				}
				id := fmt.Sprintf("bench-%d", i)
				j := job(name, name, "start")
				j["id"] = id
				j["domain_xml"] = c.xml(name)
				t0 := time.Now()
				a.drop(id, j)
				for {
					if _, err := os.Stat(filepath.Join(a.SpoolDir, "done", id+".json")); err == nil {
						break
					}
					if _, err := os.Stat(filepath.Join(a.SpoolDir, "failed", id+".json")); err == nil {
						r, _, _ := a.ReadResult(id)
						b.Fatalf("job failed: %+v", r.Error)
					}
					time.Sleep(200 * time.Microsecond)
				}
				lat = append(lat, time.Since(t0))
				if c.uri == systemURI {
					b.StopTimer()
					removeDomain(name)
					b.StartTimer()
				}
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			pct := func(p float64) float64 {
				return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
			}
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.95), "p95-ms")
		})
	}
}

// TestMain removes the agent binary built for these tests.
func TestMain(m *testing.M) {
	code := m.Run()
	agenttest.RemoveBinary()
	os.Exit(code)
}
