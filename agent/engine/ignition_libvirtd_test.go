package engine

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	ignconfig "github.com/coreos/ignition/v2/config"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// systemHost opens the shared system libvirtd (VMPAYLOAD_LIBVIRTD=1), closed
// when t ends.
func systemHost(t *testing.T, log *slog.Logger) *libvirtx.LibvirtHost {
	t.Helper()
	testenv.NeedLibvirtd(t)
	h, err := libvirtx.OpenHost(testenv.SystemURI, libvirtx.HostOptions{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// ignHost opens the shared system libvirtd and a payload directory QEMU's
// user can reach, for the Ignition tests on the real libvirtd.
func ignHost(t *testing.T, prefix string) (*libvirtx.LibvirtHost, string) {
	t.Helper()
	h := systemHost(t, quietLog())
	dir := testenv.TempDir(t, "/var/tmp", prefix, 0o755) // libvirt-qemu must reach the files
	return h, dir
}

// realEngine is an Engine on the real libvirtd h writing world-readable
// images (0644) to dir, which QEMU's user must reach; it picks the bus
// itself and tracks starts and cleanups.
func realEngine(h libvirtx.Host, dir string) *Engine {
	return &Engine{Host: h, PayloadDir: dir, ImageMode: 0o644, ImageGID: -1, Bus: domxml.BusAuto, Log: quietLog(), Starts: &Starts{}, Cleanups: &Cleanups{}}
}

// defineReal defines domain XML x on h and removes the domain at cleanup.
func defineReal(t *testing.T, h *libvirtx.LibvirtHost, x string) libvirtx.DomainInfo {
	t.Helper()
	d, err := h.DefineXML(context.Background(), x)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.Destroy(context.Background(), d.UUID)
		if err := h.Undefine(context.Background(), d.UUID); err != nil {
			t.Errorf("undefining %s: %v", d.Name, err)
		}
	})
	return d
}

func virshOut(t *testing.T, args ...string) string {
	t.Helper()
	return testenv.VirshT(t, testenv.SystemURI, args...)
}

// TestLibvirtdIgnitionBlockdev: on s390x and ppc64 (TCG domains with no OS,
// Debian's qemu-system-misc and qemu-system-ppc), an Ignition job that
// names no delivery gets "blockdev": the domain starts with a read-only raw
// virtio disk whose serial is "ignition", its source the config file the
// agent wrote, and QEMU reads the config's bytes through that device
// (HMP qemu-io on the device whose qtree serial is "ignition"). A job
// asking for "fwcfg" there is refused naming ignition_delivery, and leaves
// the definition as it was.
func TestLibvirtdIgnitionBlockdev(t *testing.T) {
	h, dir := ignHost(t, "vmpx-ignbd-")
	for _, c := range []struct{ arch, machine, emulator string }{
		{"s390x", "s390-ccw-virtio", "/usr/bin/qemu-system-s390x"},
		{"ppc64", "pseries", "/usr/bin/qemu-system-ppc64"},
	} {
		t.Run(c.arch, func(t *testing.T) {
			if _, err := os.Stat(c.emulator); err != nil {
				t.Fatalf("%s: %v (test/deps.sh installs qemu-system-misc and qemu-system-ppc)", c.emulator, err)
			}
			ctx := context.Background()
			name := fmt.Sprintf("ign-bd-%s-%d", c.arch, os.Getpid())
			d := defineReal(t, h, fmt.Sprintf(`<domain type='qemu'><name>%s</name><memory unit='MiB'>256</memory><vcpu>1</vcpu>
<os><type arch='%s' machine='%s'>hvm</type></os><on_crash>preserve</on_crash>
<devices><emulator>%s</emulator><memballoon model='none'/></devices></domain>`, name, c.arch, c.machine, c.emulator))
			e := realEngine(h, dir)
			before := virshOut(t, "dumpxml", "--inactive", name)

			// fw_cfg asked for: refused by name, nothing changed
			r := runDoc(t, e, fmt.Sprintf(`{"version":1,"domain":%q,"format":"ignition","ignition_delivery":"fwcfg","hostname":"bd","action":"start"}`, name), "fwcfg")
			if r.Error == nil || r.Error.Code != result.CodeInvalidJob || r.Error.Field != "ignition_delivery" || !strings.Contains(r.Error.Message, "no fw_cfg device") {
				t.Fatalf("fwcfg on %s: %s %+v", c.arch, r.State, r.Error)
			}
			if after := virshOut(t, "dumpxml", "--inactive", name); after != before {
				t.Errorf("the refused job changed the definition:\n%s\n---\n%s", before, after)
			}

			// no delivery named: blockdev, started
			r = runDoc(t, e, fmt.Sprintf(`{"version":1,"domain":%q,"format":"ignition","hostname":"bd-%s.example.com","action":"start"}`, name, c.arch), "blockdev")
			if r.State != result.StateDone {
				t.Fatalf("blockdev job: %s %+v", r.State, r.Error)
			}
			if r.Device == nil || r.Device.Bus != "virtio" || r.Device.Kind != "disk" || len(r.FwCfg) != 0 {
				t.Fatalf("device %+v, fw_cfg %v", r.Device, r.FwCfg)
			}
			cfg, err := os.ReadFile(r.Payload.Path)
			if err != nil {
				t.Fatal(err)
			}
			if _, rpt, err := ignconfig.Parse(cfg); err != nil || len(rpt.Entries) != 0 || !strings.Contains(string(cfg), `"path":"/etc/hostname"`) {
				t.Fatalf("config %s: %v %s", cfg, err, rpt.String())
			}
			if r.Payload.SHA256 != testenv.SHA256(cfg) || !strings.HasPrefix(filepath.Base(r.Payload.Path), d.UUID+"-") || !strings.HasSuffix(r.Payload.Path, ".ign") {
				t.Errorf("payload %+v", r.Payload)
			}
			// the live definition: the disk with serial ignition naming the file
			live := virshOut(t, "dumpxml", name)
			disk := regexp.MustCompile(`(?s)<disk type='file' device='disk'>.*?</disk>`).FindString(live)
			for _, want := range []string{"<driver name='qemu' type='raw'/>", "<source file='" + r.Payload.Path + "'", "bus='virtio'", "<readonly/>", "<serial>ignition</serial>"} {
				if !strings.Contains(disk, want) {
					t.Errorf("live disk lacks %s:\n%s", want, live)
				}
			}
			if bl := virshOut(t, "domblklist", name); !strings.Contains(bl, r.Payload.Path) {
				t.Errorf("domblklist:\n%s", bl)
			}
			// QEMU: the block device opened read-only on the file, the
			// virtio-blk device with serial "ignition", and the bytes read
			// through it
			info := virshOut(t, "qemu-monitor-command", "--hmp", name, "info block")
			if !strings.Contains(info, r.Payload.Path+" (raw, read-only)") || !strings.Contains(info, "/machine/peripheral/"+domxml.PayloadAlias+"/") {
				t.Errorf("info block:\n%s", info)
			}
			qtree := virshOut(t, "qemu-monitor-command", "--hmp", name, "info qtree")
			dev := regexp.MustCompile(`dev: virtio-blk-[a-z]+, id "([^"]+)"[^\n]*\n(?:[ \t]+[^\n]*\n)*?[ \t]+serial = "ignition"`).FindStringSubmatch(qtree)
			if dev == nil || dev[1] != domxml.PayloadAlias {
				t.Fatalf("no virtio-blk device with serial \"ignition\" in info qtree:\n%s", qtree)
			}
			// HMP's qemu-io writes its dump to QEMU's log, which libvirt
			// keeps as /var/log/libvirt/qemu/<name>.log
			logPath := "/var/log/libvirt/qemu/" + name + ".log"
			st, err := os.Stat(logPath)
			if err != nil {
				t.Fatal(err)
			}
			virshOut(t, "qemu-monitor-command", "--hmp", name, fmt.Sprintf(`qemu-io -d /machine/peripheral/%s/virtio-backend "read -v 0 %d"`, dev[1], len(cfg)))
			// virtlogd copies QEMU's output into the log: wait for the
			// dump's last line
			var logged []byte
			for range 100 {
				if logged, err = os.ReadFile(logPath); err != nil || int64(len(logged)) < st.Size() {
					t.Fatalf("reading %s: %v", logPath, err)
				}
				if strings.Contains(string(logged[st.Size():]), fmt.Sprintf("read %d/%d bytes", len(cfg), len(cfg))) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if got := hexDumpBytes(string(logged[st.Size():])); string(got) != string(cfg) {
				t.Errorf("the device with serial ignition reads %q, the config is %q\n%s", got, cfg, logged[st.Size():])
			}
			// the recipe records the delivery: the hook and the start-up
			// rebuild make the same file again
			rc, ok := openedRecipe(t, virshOut(t, "dumpxml", "--inactive", name))
			if !ok || rc.Path != r.Payload.Path || rc.Job.IgnitionDelivery != "blockdev" {
				t.Errorf("recipe %+v %v", rc, ok)
			}
			if err := h.Destroy(ctx, d.UUID); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// hexDumpBytes reads back the bytes of qemu-io's "read -v" dump
// ("00000000:  7b 22 69 ...  {\"i...").
func hexDumpBytes(dump string) []byte {
	var out []byte
	re := regexp.MustCompile(`^[0-9a-f]{8}:\s+((?:[0-9a-f]{2}\s)+)`)
	for _, line := range strings.Split(dump, "\n") {
		m := re.FindStringSubmatch(strings.TrimRight(line, "\r"))
		if m == nil {
			continue
		}
		for _, b := range strings.Fields(m[1]) {
			v, err := hex.DecodeString(b)
			if err == nil {
				out = append(out, v...)
			}
		}
	}
	return out
}

// TestLibvirtdIgnitionFwCfgNoACPI: an x86 domain without <features><acpi/>
// gets no fw_cfg Ignition config on the real libvirtd: the job is refused
// naming ignition_delivery, and the definition stays as it was.
func TestLibvirtdIgnitionFwCfgNoACPI(t *testing.T) {
	h, dir := ignHost(t, "vmpx-ignacpi-")
	name := fmt.Sprintf("ign-noacpi-%d", os.Getpid())
	defineReal(t, h, fmt.Sprintf(`<domain type='qemu'><name>%s</name><memory unit='MiB'>48</memory><vcpu>1</vcpu>
<os><type arch='x86_64' machine='pc'>hvm</type></os><devices><emulator>/usr/bin/qemu-system-x86_64</emulator><memballoon model='none'/></devices></domain>`, name))
	e := realEngine(h, dir)
	before := virshOut(t, "dumpxml", "--inactive", name)
	r := runDoc(t, e, fmt.Sprintf(`{"version":1,"domain":%q,"format":"ignition","hostname":"noacpi"}`, name), "noacpi")
	if r.Error == nil || r.Error.Code != result.CodeInvalidJob || r.Error.Field != "ignition_delivery" || !strings.Contains(r.Error.Message, "qemu_fw_cfg driver binds through ACPI") {
		t.Fatalf("result %s %+v", r.State, r.Error)
	}
	if after := virshOut(t, "dumpxml", "--inactive", name); after != before {
		t.Errorf("the refused job changed the definition:\n%s\n---\n%s", before, after)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("payload directory holds %v", ents)
	}
}

// TestLibvirtdStartFailureKeepsDefinition: a job whose start QEMU refuses
// (the domain has a second disk whose file does not exist, so libvirt
// fails the start) leaves the domain's persistent definition byte for byte
// as it was before the job (virsh dumpxml --inactive), and no payload file
// behind, for every kind and delivery; the domain stays shut off.
func TestLibvirtdStartFailureKeepsDefinition(t *testing.T) {
	h, dir := ignHost(t, "vmpx-ignstart-")
	for i, c := range []struct{ name, doc string }{
		{"nocloud-iso", `{"version":1,"domain":%q,"hostname":"sf","action":"start"}`},
		{"nocloud-vfat", `{"version":1,"domain":%q,"hostname":"sf","media":"vfat","action":"start"}`},
		{"configdrive", `{"version":1,"domain":%q,"hostname":"sf","format":"configdrive","action":"start"}`},
		{"ignition-fwcfg", `{"version":1,"domain":%q,"hostname":"sf","format":"ignition","action":"start"}`},
		{"ignition-blockdev", `{"version":1,"domain":%q,"hostname":"sf","format":"ignition","ignition_delivery":"blockdev","action":"start"}`},
		{"ignition-configdrive", `{"version":1,"domain":%q,"hostname":"sf","format":"ignition","ignition_delivery":"configdrive","action":"start"}`},
		{"sysprep-floppy", "sysprep-floppy"},
		{"sysprep-cdrom", "sysprep-cdrom"},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("ign-sf-%d-%d", i, os.Getpid())
			missing := filepath.Join(dir, "no-such-disk.qcow2")
			defineReal(t, h, fmt.Sprintf(`<domain type='qemu'><name>%s</name><memory unit='MiB'>48</memory><vcpu>1</vcpu>
<os><type arch='x86_64' machine='pc'>hvm</type></os><features><acpi/></features>
<devices><emulator>/usr/bin/qemu-system-x86_64</emulator>
<disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='%s'/><target dev='vdb' bus='virtio'/></disk>
<memballoon model='none'/></devices></domain>`, name, missing))
			e := realEngine(h, dir)
			e.SecretsDir = exampleSecrets
			doc := fmt.Sprintf(c.doc, name)
			if strings.HasPrefix(c.doc, "sysprep") {
				doc = sysprepDoc(t, c.doc, name, "start", "")
			}
			before := virshOut(t, "dumpxml", "--inactive", name)
			r := runDoc(t, e, doc, c.name)
			if r.State != result.StateFailed || r.Error == nil || !strings.Contains(r.Error.Message, "starting "+name) || !strings.Contains(r.Error.Message, "the definition is back as it was before the job") {
				t.Fatalf("result %s %+v", r.State, r.Error)
			}
			if after := virshOut(t, "dumpxml", "--inactive", name); after != before {
				t.Errorf("the failed job changed the definition:\n%s\n---\n%s", before, after)
			}
			if st := strings.TrimSpace(virshOut(t, "domstate", name)); st != "shut off" {
				t.Errorf("domain state %q", st)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				var n []string
				for _, x := range ents {
					n = append(n, x.Name())
				}
				t.Errorf("payload directory holds %v", n)
			}
			t.Logf("%s: %s", c.name, r.Error.Message)
		})
	}
}
