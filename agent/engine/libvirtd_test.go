package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/metrics"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload/recipe"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// TestLibvirtdMediaChangeStress changes the payload medium of a real QEMU
// domain (TCG, no OS: SeaBIOS probes the drives) immediately after each
// start, on IDE, SATA and SCSI: every change must succeed and the live drive
// must hold the new image with its tray shut (on SCSI, by QEMU's own state
// where libvirt's record of the tray went stale). VMPAYLOAD_MEDIA_STRESS sets the changes per bus
// (default 6, the form make test runs; 50 for the full stress run).
func TestLibvirtdMediaChangeStress(t *testing.T) {
	testenv.NeedLibvirtd(t)
	n := 6
	if v := os.Getenv("VMPAYLOAD_MEDIA_STRESS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("VMPAYLOAD_MEDIA_STRESS=%q: want a positive count", v)
		}
	}
	quiet := quietLog()
	h, err := libvirtx.OpenHost("qemu:///system", libvirtx.HostOptions{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	for _, c := range []struct {
		bus, machine, controller string
	}{
		{"ide", "pc", ""},
		{"sata", "q35", ""},
		{"scsi", "pc", "<controller type='scsi' index='0' model='virtio-scsi'/>"},
	} {
		t.Run(c.bus, func(t *testing.T) {
			ctx := context.Background()
			dir := testenv.TempDir(t, "/var/tmp", "vmpx-stress-", 0o755) // libvirt-qemu must reach the images
			name := fmt.Sprintf("vmpx-stress-%s-%d", c.bus, os.Getpid())
			dom := defineReal(t, h, testenv.Domain{Name: name, Machine: c.machine, Boot: "cdrom", ACPI: true, Devices: c.controller}.XML())
			met := metrics.New()
			e := &Engine{Host: h, PayloadDir: dir, ImageMode: 0o644, ImageGID: -1, Log: quiet, Metrics: met, Starts: &Starts{}}
			run := func(host, action string) result.Result { return runJob(t, e, name, host, action) }
			if r := run("boot", "start"); r.State != result.StateDone || r.Device == nil || r.Device.Bus != c.bus {
				t.Fatalf("start job: %+v device %+v error %+v", r.State, r.Device, r.Error)
			}
			failures, staleRecords := 0, 0
			for i := range n {
				if i > 0 {
					if err := h.Destroy(ctx, dom.UUID); err != nil {
						t.Fatal(err)
					}
					if err := h.Start(ctx, dom.UUID); err != nil {
						t.Fatal(err)
					}
					e.Starts.Note(dom.UUID, time.Now())
				}
				r := run(fmt.Sprintf("change-%d", i), "attach")
				if r.State != result.StateDone {
					failures++
					t.Errorf("change %d: %s: %+v", i, r.State, r.Error)
					continue
				}
				p, found, err := settledPayload(ctx, t, h, dom.UUID)
				if err == nil && found && p.TrayOpen && c.bus == "scsi" {
					// A SCSI change whose closing step raced the firmware's
					// reset of the drive leaves libvirt recording the tray as
					// open while QEMU's is shut with the new medium in (the
					// engine replaces such a drive at the next change, see
					// changeMedia). The record never corrects itself, so
					// the drive is judged by QEMU's own state.
					if q := qemuTray(t, name); !q.open && q.file == p.Path {
						staleRecords++
						p.TrayOpen = false
					}
				}
				if err != nil || !found || p.Path != r.Payload.Path || p.TrayOpen {
					t.Errorf("change %d: live drive %+v (found %v, %v), want %s with its tray shut", i, p, found, err, r.Payload.Path)
					// What QEMU itself says (libvirt's XML is only its record of
					// QEMU's tray events).
					t.Logf("QEMU's drives (HMP info block):\n%s", virshOut(t, "qemu-monitor-command", "--hmp", name, "info block"))
					failures++
				}
			}
			t.Logf("%s: %d immediate media changes after start, %d failures, %s resets, %s drive replacements, %d tray records libvirt left open (QEMU's shut)",
				c.bus, n, failures,
				sample(t, met, `vmpayload_media_recoveries_total{action="reset"}`),
				sample(t, met, `vmpayload_media_recoveries_total{action="replace"}`), staleRecords)
		})
	}
}

// settledPayload reads the payload drive of the running domain uuid from
// its live definition once libvirt has recorded its tray as shut, or after
// trayEventWait. libvirt closes the tray as the last step of a media change
// but records the closed state only when QEMU's DEVICE_TRAY_MOVED event
// reaches it, which can come just after the change returned: reading the
// live XML at once may still say tray='open' (seen under load). A tray that
// stays open past the wait is what the caller reports.
func settledPayload(ctx context.Context, t *testing.T, h *libvirtx.LibvirtHost, uuid string) (domxml.PayloadDisk, bool, error) {
	t.Helper()
	deadline := time.Now().Add(trayEventWait)
	for {
		live, err := h.LiveXML(ctx, uuid)
		if err != nil {
			t.Fatal(err)
		}
		p, found, err := domxml.FindPayload(live)
		if err != nil || !found || !p.TrayOpen || time.Now().After(deadline) {
			return p, found, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// qemuState is QEMU's own view of the payload drive (query-block).
type qemuState struct {
	open bool   // tray_open
	file string // the inserted medium's file, "" for none
}

// qemuTray asks QEMU (QMP query-block through libvirt) for the state of the
// payload drive (qdev domxml.PayloadAlias) of the running domain name.
func qemuTray(t *testing.T, name string) qemuState {
	t.Helper()
	out := virshOut(t, "qemu-monitor-command", name, `{"execute":"query-block"}`)
	var v struct {
		Return []struct {
			Qdev     string `json:"qdev"`
			TrayOpen bool   `json:"tray_open"`
			Inserted *struct {
				File string `json:"file"`
			} `json:"inserted"`
		} `json:"return"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("query-block of %s: %v\n%s", name, err, out)
	}
	for _, b := range v.Return {
		if b.Qdev == domxml.PayloadAlias {
			q := qemuState{open: b.TrayOpen}
			if b.Inserted != nil {
				q.file = b.Inserted.File
			}
			return q
		}
	}
	t.Fatalf("query-block of %s: no payload drive\n%s", name, out)
	return qemuState{}
}

// trayEventWait bounds settledPayload's wait for libvirt to record a
// closed tray.
const trayEventWait = 10 * time.Second

// TestLibvirtdReattachRunning runs attach, detach, attach, detach, attach
// on a running real QEMU domain (TCG, no OS) whose payload drive is an IDE,
// SATA or SCSI CD-ROM (defined before the start, or hot-plugged). A detach
// takes the drive out of the persistent definition and ejects the live
// IDE/SATA drive (unplugs a SCSI one); the next attach reuses the live
// drive (no "non unique alias", no "only hot-plugged on SCSI") and puts it
// back into the definition at the same target with the recipe and, as the
// job asks, the guest report channel. Last, a detach of a drive only the
// live definition has (holding a medium) takes it out too.
var reattachSeq atomic.Int64 // unique domain names across -count runs

func TestLibvirtdReattachRunning(t *testing.T) {
	quiet := quietLog()
	h := systemHost(t, quiet)
	for _, c := range []struct {
		name, bus, machine, controller string
		hotplug                        bool // the first attach hot-plugs the drive into the running domain
	}{
		{"ide", "ide", "pc", "", false},
		{"sata", "sata", "q35", "", false},
		{"scsi", "scsi", "pc", "<controller type='scsi' index='0' model='virtio-scsi'/>", false},
		{"scsi-hotplugged", "scsi", "pc", "<controller type='scsi' index='0' model='virtio-scsi'/>", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			dir := testenv.TempDir(t, "/var/tmp", "vmpx-reattach-", 0o755) // libvirt-qemu must reach the images
			name := fmt.Sprintf("vmpx-reattach-%s-%d-%d", c.name, os.Getpid(), reattachSeq.Add(1))
			dom := defineReal(t, h, testenv.Domain{Name: name, Machine: c.machine, Boot: "cdrom", ACPI: true, Devices: c.controller}.XML())
			e := &Engine{Host: h, PayloadDir: dir, Bus: domxml.BusAuto, ImageMode: 0o644, ImageGID: -1, Log: quiet, Starts: &Starts{}}
			job := func(host, action string, guest bool) result.Result {
				return runDoc(t, e, fmt.Sprintf(`{"version":1,"domain":%q,"hostname":%q,"action":%q,"guest_report":%v}`, name, host, action, guest), host)
			}
			payloads := func() (live, saved domxml.PayloadDisk, liveFound, savedFound bool, inactive string) {
				t.Helper()
				lx, err := h.LiveXML(ctx, dom.UUID)
				if err != nil {
					t.Fatal(err)
				}
				d, err := h.Domain(ctx, dom.UUID)
				if err != nil {
					t.Fatal(err)
				}
				if !d.Active {
					t.Fatalf("%s is no longer running", name)
				}
				if live, liveFound, err = domxml.FindPayload(lx); err != nil {
					t.Fatal(err)
				}
				if saved, savedFound, err = domxml.FindPayload(d.InactiveXML); err != nil {
					t.Fatal(err)
				}
				return live, saved, liveFound, savedFound, d.InactiveXML
			}
			first := "start"
			if c.hotplug {
				if err := h.Start(ctx, dom.UUID); err != nil {
					t.Fatal(err)
				}
				e.Starts.Note(dom.UUID, time.Now())
				first = "attach"
			}
			r := job("boot", first, false)
			if r.State != result.StateDone || r.Device == nil || r.Device.Bus != c.bus {
				t.Fatalf("start job: %s device %+v error %+v", r.State, r.Device, r.Error)
			}
			target := r.Device.Target
			for i := range 2 {
				guest := i == 1
				d := job(fmt.Sprintf("detach-%d", i), "detach", false)
				if d.State != result.StateDone {
					t.Fatalf("detach %d: %s %+v", i, d.State, d.Error)
				}
				live, saved, liveFound, savedFound, inactive := payloads()
				if savedFound {
					t.Errorf("detach %d: the persistent definition still has the payload drive %+v", i, saved)
				}
				if _, ok, _ := recipe.FromDomainXML(inactive); ok {
					t.Errorf("detach %d: the persistent definition still has the recipe", i)
				}
				// What detach leaves live: an IDE/SATA drive, ejected (it
				// cannot be unplugged); a SCSI drive is unplugged.
				if c.bus == "scsi" && liveFound {
					t.Errorf("detach %d: live SCSI drive %+v left, want it unplugged", i, live)
				}
				if c.bus != "scsi" && (!liveFound || live.Path != "" || live.Target != target) {
					t.Errorf("detach %d: live drive %+v (found %v), want %s ejected", i, live, liveFound, target)
				}

				a := job(fmt.Sprintf("again-%d", i), "attach", guest)
				if a.State != result.StateDone {
					t.Fatalf("attach %d after detach on the running domain: %s %+v", i, a.State, a.Error)
				}
				if a.Device == nil || a.Device.Target != target || a.Device.Bus != c.bus {
					t.Errorf("attach %d: device %+v, want the live drive %s on %s", i, a.Device, target, c.bus)
				}
				settledPayload(ctx, t, h, dom.UUID) // the tray's close event may still be on its way
				live, saved, liveFound, savedFound, inactive = payloads()
				if !liveFound || live.Path != a.Payload.Path || live.TrayOpen {
					t.Errorf("attach %d: live drive %+v (found %v), want %s with its tray shut", i, live, liveFound, a.Payload.Path)
				}
				if !savedFound || saved.Path != a.Payload.Path || saved.Target != target || saved.Bus != live.Bus {
					t.Errorf("attach %d: persistent drive %+v (found %v), want %s at %s", i, saved, savedFound, a.Payload.Path, target)
				}
				if rc, ok, err := recipe.FromDomainXML(inactive); err != nil || !ok || rc.Path != a.Payload.Path {
					t.Errorf("attach %d: recipe %+v (found %v, %v), want one for %s", i, rc, ok, err, a.Payload.Path)
				}
				if has, err := hasGuestChannel(inactive); err != nil || has != guest {
					t.Errorf("attach %d: guest report channel in the definition %v (%v), want %v", i, has, err, guest)
				}
				if _, err := os.Stat(a.Payload.Path); err != nil {
					t.Errorf("attach %d: image: %v", i, err)
				}
			}
			// A drive only the live definition has, holding a medium (an
			// attach whose redefine failed): detach still takes it out.
			_, saved, _, _, inactive := payloads()
			stripped, err := withoutPayload(inactive)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.DefineXML(ctx, stripped); err != nil {
				t.Fatal(err)
			}
			if d := job("detach-live-only", "detach", false); d.State != result.StateDone || d.Device == nil || d.Device.Target != target {
				t.Fatalf("detach of a live-only drive: %s device %+v error %+v", d.State, d.Device, d.Error)
			}
			live, _, liveFound, _, _ := payloads()
			if liveFound && (c.bus == "scsi" || live.Path != "") {
				t.Errorf("detach of a live-only drive left %+v live", live)
			}
			if _, err := os.Stat(saved.Path); !os.IsNotExist(err) {
				t.Errorf("detach of a live-only drive kept its image %s (%v)", saved.Path, err)
			}
		})
	}
}
