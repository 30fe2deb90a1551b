package libvirtx

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/test/testenv"
	"libvirt.org/go/libvirt"
)

// Integration tests against the real libvirtd (qemu:///system). They run only
// with VMPAYLOAD_LIBVIRTD=1, which the Makefile sets after test/libvirtd.sh
// has started the daemons. They define small TCG domains named vmpx-test-*
// that boot nothing (no bootable device, no network) and remove them again.

const systemURI = "qemu:///system"

func uniqueName(t *testing.T) string {
	t.Helper()
	return "vmpx-test-" + testenv.RandHex(t, 4)
}

// mediaDir makes a directory the QEMU user can traverse holding small media
// files, removed at the end of the test.
func mediaDir(t *testing.T, names ...string) map[string]string {
	t.Helper()
	dir := testenv.TempDir(t, "", "vmpx-test-", 0o755)
	paths := map[string]string{}
	for _, n := range names {
		p := filepath.Join(dir, n)
		// Any file is a valid raw CD-ROM medium; 32 sectors of a marker.
		if err := os.WriteFile(p, []byte(strings.Repeat(n, 64*1024/len(n))), 0o644); err != nil {
			t.Fatal(err)
		}
		paths[n] = p
	}
	return paths
}

// qemuDomainXML is a tiny TCG domain that stays running at the firmware's
// "no bootable device" loop. It has no network device.
func qemuDomainXML(name, machine string, virtioSCSI bool) string {
	ctrl := ""
	if virtioSCSI {
		ctrl = "<controller type='scsi' index='0' model='virtio-scsi'/>"
	}
	return testenv.Domain{Name: name, Machine: machine, Boot: "hd", ACPI: true, Devices: ctrl}.XML()
}

// cleanupDomain destroys and undefines the named domain through its own
// connection, whatever state the host under test is in.
func cleanupDomain(t *testing.T, name string) {
	t.Cleanup(func() {
		c, err := libvirt.NewConnect(systemURI)
		if err != nil {
			t.Errorf("cleanup of %s: %v", name, err)
			return
		}
		defer c.Close()
		d, err := c.LookupDomainByName(name)
		if err != nil {
			if !IsNotFound(err) {
				t.Errorf("cleanup of %s: %v", name, err)
			}
			return
		}
		defer d.Free()
		if active, _ := d.IsActive(); active {
			if err := d.Destroy(); err != nil {
				t.Errorf("cleanup: destroying %s: %v", name, err)
			}
		}
		if err := d.Undefine(); err != nil {
			t.Errorf("cleanup: undefining %s: %v", name, err)
		}
	})
}

// liveXML reads the running definition through a separate connection.
func liveXML(t *testing.T, uuid string) string {
	t.Helper()
	c, err := libvirt.NewConnect(systemURI)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d, err := c.LookupDomainByUUIDString(uuid)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free()
	x, err := d.GetXMLDesc(0)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func payloadPath(t *testing.T, x string) string {
	t.Helper()
	p, found, err := domxml.FindPayload(x)
	if err != nil {
		t.Fatal(err)
	}
	if !found {
		return ""
	}
	return p.Path
}

// changeMedia changes the payload medium live and in the config the way the
// agent does (agent/engine changeMedia, docs/media-change.md): forced, and
// when the firmware's probing right after the start left libvirt's tray
// record stale (live XML tray='open' on a drive whose QEMU tray is shut),
// the domain is reset so that libvirt re-reads the drive, and the change is
// retried.
func changeMedia(t *testing.T, h *LibvirtHost, uuid, diskXML string) error {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(eventBound)
	resets := 0
	for attempt := 1; ; attempt++ {
		err := h.UpdateDevice(ctx, uuid, diskXML, DOMAIN_DEVICE_MODIFY_LIVE|DOMAIN_DEVICE_MODIFY_CONFIG|DOMAIN_DEVICE_MODIFY_FORCE)
		if err == nil || !IsTrayBusy(err) || time.Now().After(deadline) {
			if attempt > 1 {
				t.Logf("media change took %d attempts, %d resets (tray busy)", attempt, resets)
			}
			return err
		}
		if p, found, perr := domxml.FindPayload(liveXML(t, uuid)); perr == nil && found && p.TrayOpen && resets < 3 {
			resets++
			if rerr := h.Reset(ctx, uuid); rerr != nil {
				return fmt.Errorf("%w (and resetting the domain: %v)", err, rerr)
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// defineAndStart defines xml through h, starts it and waits for "started".
func defineAndStart(t *testing.T, h *LibvirtHost, name, xml string) DomainInfo {
	t.Helper()
	ctx := context.Background()
	cleanupDomain(t, name)
	di, err := h.DefineXML(ctx, xml)
	if err != nil {
		t.Fatalf("DefineXML: %v", err)
	}
	waitEvent(t, h, isEvent(EventDefined, di.UUID), "defined")
	if err := h.Start(ctx, di.UUID); err != nil {
		t.Fatalf("Start: %v", err)
	}
	waitEvent(t, h, isEvent(EventStarted, di.UUID), "started")
	return di
}

// stopAndUndefine destroys and undefines through h and checks the events.
func stopAndUndefine(t *testing.T, h *LibvirtHost, uuid string) {
	t.Helper()
	ctx := context.Background()
	if err := h.Destroy(ctx, uuid); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	waitEvent(t, h, isEvent(EventStopped, uuid), "stopped")
	if err := h.Undefine(ctx, uuid); err != nil {
		t.Fatalf("Undefine: %v", err)
	}
	waitEvent(t, h, isEvent(EventUndefined, uuid), "undefined")
	if _, err := h.Domain(ctx, uuid); !IsNotFound(err) {
		t.Errorf("Domain after undefine: %v, want not found", err)
	}
}

// TestLibvirtdMediaChange: a domain gets the payload in its definition on
// the machine's default bus, boots, refuses a second hot-plugged drive on
// that bus and has its medium changed live and in the config.
func TestLibvirtdMediaChange(t *testing.T) {
	testenv.NeedLibvirtd(t)
	for _, tt := range []struct {
		machine string
		bus     domxml.Bus
	}{
		{"q35", domxml.BusSATA},
		{"pc", domxml.BusIDE},
	} {
		t.Run(tt.machine, func(t *testing.T) { testMediaChange(t, tt.machine, tt.bus) })
	}
}

func testMediaChange(t *testing.T, machine string, wantBus domxml.Bus) {
	media := mediaDir(t, "one.iso", "two.iso")
	h := openTestHost(t, systemURI)
	ctx := context.Background()
	name := uniqueName(t)

	ed, err := domxml.NewEdit(qemuDomainXML(name, machine, false))
	if err != nil {
		t.Fatal(err)
	}
	dev, replaced, err := ed.SetPayloadDrive(media["one.iso"], domxml.BusAuto)
	x := ""
	if err == nil {
		x, err = ed.XML()
	}
	if err != nil || replaced || dev.Bus != wantBus {
		t.Fatalf("SetPayloadDrive: dev=%+v replaced=%v err=%v, want bus %s", dev, replaced, err, wantBus)
	}
	di := defineAndStart(t, h, name, x)
	if got := payloadPath(t, liveXML(t, di.UUID)); got != media["one.iso"] {
		t.Fatalf("live payload = %q, want %q", got, media["one.iso"])
	}

	// SATA and IDE CD-ROMs cannot be hot-plugged: a second drive on the next
	// free port is refused live (this is why the agent changes media).
	cur, err := h.Domain(ctx, di.UUID)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := domxml.Read(cur.InactiveXML)
	if err != nil {
		t.Fatal(err)
	}
	next, err := doc.ChooseDevice(domxml.BusAuto)
	if err != nil || next.Bus != wantBus || next.Bus.Hotpluggable() || next.Target == dev.Target {
		t.Fatalf("ChooseDevice for a second drive = %+v, %v", next, err)
	}
	other, err := domxml.PayloadDeviceXML(media["two.iso"], next)
	if err != nil {
		t.Fatal(err)
	}
	other = strings.Replace(other, domxml.PayloadAlias, "ua-vmpx-other", 1)
	if err := h.AttachDevice(ctx, di.UUID, other, DOMAIN_DEVICE_MODIFY_LIVE); err == nil || IsDisconnected(err) {
		t.Errorf("live %s CD-ROM hotplug: err = %v, want a libvirt refusal", wantBus, err)
	} else {
		t.Logf("live %s hotplug refused as expected: %v", wantBus, err)
	}

	// Media change on the existing drive, live and persistent.
	p, found, err := domxml.FindPayload(cur.InactiveXML)
	if err != nil || !found {
		t.Fatalf("payload in inactive XML: %v %v", found, err)
	}
	upd, err := domxml.PayloadDeviceXML(media["two.iso"], p.Device)
	if err != nil {
		t.Fatal(err)
	}
	if err := changeMedia(t, h, di.UUID, upd); err != nil {
		t.Fatalf("UpdateDevice: %v", err)
	}
	if got := payloadPath(t, liveXML(t, di.UUID)); got != media["two.iso"] {
		t.Errorf("live payload after change = %q, want %q", got, media["two.iso"])
	}
	cur, err = h.Domain(ctx, di.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if got := payloadPath(t, cur.InactiveXML); got != media["two.iso"] {
		t.Errorf("config payload after change = %q, want %q", got, media["two.iso"])
	}
	stopAndUndefine(t, h, di.UUID)
}

// TestLibvirtdSCSIHotplug: a running domain with a virtio-scsi controller
// gets the payload CD-ROM hot-plugged, replaced and unplugged.
//
// libvirt 9.0 cannot change the medium of a CD-ROM hot-plugged in the current
// run ("blockdev-remove-medium: Tray ... is not open", with or without
// FORCE); a drive present at boot changes fine. So a hot-plugged payload is
// replaced by detach + attach, and after a restart by a media change.
func TestLibvirtdSCSIHotplug(t *testing.T) {
	testenv.NeedLibvirtd(t)
	media := mediaDir(t, "a.iso", "b.iso")
	h := openTestHost(t, systemURI)
	ctx := context.Background()
	name := uniqueName(t)
	di := defineAndStart(t, h, name, qemuDomainXML(name, "pc", true))

	doc, err := domxml.Read(di.InactiveXML)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := doc.ChooseDevice(domxml.BusAuto)
	if err != nil || dev.Bus != domxml.BusSCSI {
		t.Fatalf("ChooseDevice = %+v, %v; want scsi", dev, err)
	}
	diskA, err := domxml.PayloadDeviceXML(media["a.iso"], dev)
	if err != nil {
		t.Fatal(err)
	}
	diskB, err := domxml.PayloadDeviceXML(media["b.iso"], dev)
	if err != nil {
		t.Fatal(err)
	}
	const both = DOMAIN_DEVICE_MODIFY_LIVE | DOMAIN_DEVICE_MODIFY_CONFIG
	check := func(step, wantLive, wantConfig string) {
		t.Helper()
		if got := payloadPath(t, liveXML(t, di.UUID)); got != wantLive {
			t.Fatalf("%s: live payload = %q, want %q", step, got, wantLive)
		}
		cur, err := h.Domain(ctx, di.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if got := payloadPath(t, cur.InactiveXML); got != wantConfig {
			t.Fatalf("%s: config payload = %q, want %q", step, got, wantConfig)
		}
	}

	if err := h.AttachDevice(ctx, di.UUID, diskA, both); err != nil {
		t.Fatalf("AttachDevice (SCSI hotplug): %v", err)
	}
	check("hotplug", media["a.iso"], media["a.iso"])

	if err := h.DetachDevice(ctx, di.UUID, diskA, both); err != nil {
		t.Fatalf("DetachDevice: %v", err)
	}
	if err := h.AttachDevice(ctx, di.UUID, diskB, both); err != nil {
		t.Fatalf("AttachDevice after detach: %v", err)
	}
	check("replug", media["b.iso"], media["b.iso"])

	// After a restart the drive is present at boot: media change works.
	if err := h.Destroy(ctx, di.UUID); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, h, isEvent(EventStopped, di.UUID), "stopped")
	if err := h.Start(ctx, di.UUID); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, h, isEvent(EventStarted, di.UUID), "started again")
	if err := changeMedia(t, h, di.UUID, diskA); err != nil {
		t.Fatalf("UpdateDevice on a boot-time SCSI drive: %v", err)
	}
	check("media change", media["a.iso"], media["a.iso"])

	if err := h.DetachDevice(ctx, di.UUID, diskA, both); err != nil {
		t.Fatalf("DetachDevice: %v", err)
	}
	check("unplug", "", "")
	stopAndUndefine(t, h, di.UUID)
}

// TestLibvirtdReconnect stops libvirtd while a domain runs and starts it
// again: calls in between fail as disconnected, the host reconnects by
// itself and the guest survives. It restarts libvirtd promptly (other
// tests on the machine share it), so it runs only with
// VMPAYLOAD_LIBVIRTD_RESTART=1 (make test runs packages one at a time).
func TestLibvirtdReconnect(t *testing.T) {
	testenv.NeedLibvirtdRestart(t, "restarts")
	script, err := filepath.Abs(filepath.Join("..", "test", "libvirtd.sh"))
	if err != nil {
		t.Fatal(err)
	}
	restart := func() {
		out, err := exec.Command(script).CombinedOutput()
		if err != nil {
			t.Fatalf("restarting libvirtd with %s: %v\n%s", script, err, out)
		}
	}
	t.Cleanup(restart) // whatever happens, leave libvirtd running

	h, err := OpenHost(systemURI, HostOptions{MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	ctx := context.Background()
	name := uniqueName(t)
	di := defineAndStart(t, h, name, qemuDomainXML(name, "pc", false))

	pidText, err := os.ReadFile("/run/libvirtd.pid")
	if err != nil {
		t.Fatalf("reading libvirtd pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if err != nil || pid <= 1 {
		t.Fatalf("bad libvirtd pid %q", pidText)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatalf("stopping libvirtd (pid %d): %v", pid, err)
	}
	waitEvent(t, h, isEvent(EventDisconnected, ""), "disconnected")
	deadline := time.Now().Add(eventBound)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("libvirtd (pid %d) did not exit within %v", pid, eventBound)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := h.Domain(ctx, di.UUID); !IsDisconnected(err) {
		t.Errorf("Domain while libvirtd is down: %v, want ErrDisconnected", err)
	}
	if err := h.Start(ctx, di.UUID); !IsDisconnected(err) {
		t.Errorf("Start while libvirtd is down: %v, want ErrDisconnected", err)
	}
	if got := h.Reconnects(); got != 0 {
		t.Errorf("Reconnects before restart = %d", got)
	}

	restart()
	waitEvent(t, h, isEvent(EventReconnected, ""), "reconnected")
	if got := h.Reconnects(); got != 1 {
		t.Errorf("Reconnects = %d, want 1", got)
	}
	cur, err := h.Domain(ctx, di.UUID)
	if err != nil {
		t.Fatalf("Domain after reconnect: %v", err)
	}
	if !cur.Active {
		t.Errorf("guest did not survive the libvirtd restart")
	}
	// Events flow on the new connection.
	stopAndUndefine(t, h, di.UUID)
}
