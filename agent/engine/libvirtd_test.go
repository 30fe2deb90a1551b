package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
)

// recoveries counts the engine's media-change recoveries.
type recoveries struct {
	nopObserver
	replace, reset atomic.Int64
}

func (r *recoveries) MediaRecovery(action string) {
	if action == "reset" {
		r.reset.Add(1)
	} else {
		r.replace.Add(1)
	}
}

// TestLibvirtdMediaChangeStress changes the payload medium of a real QEMU
// domain (TCG, no OS: SeaBIOS probes the drives) immediately after each
// start, on IDE, SATA and SCSI: every change must succeed and the live drive
// must hold the new image. VMPAYLOAD_MEDIA_STRESS sets the changes per bus
// (default 6, the form make test runs; 50 for the full stress run).
func TestLibvirtdMediaChangeStress(t *testing.T) {
	if os.Getenv("VMPAYLOAD_LIBVIRTD") != "1" {
		t.Skip("real-libvirtd test: set VMPAYLOAD_LIBVIRTD=1 after running test/libvirtd.sh (make test does both)")
	}
	n := 6
	if v := os.Getenv("VMPAYLOAD_MEDIA_STRESS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("VMPAYLOAD_MEDIA_STRESS=%q: want a positive count", v)
		}
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
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
			dir, err := os.MkdirTemp("/var/tmp", "vmpx-stress-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			if err := os.Chmod(dir, 0o755); err != nil { // libvirt-qemu must reach the images
				t.Fatal(err)
			}
			name := fmt.Sprintf("vmpx-stress-%s-%d", c.bus, os.Getpid())
			dom, err := h.DefineXML(ctx, fmt.Sprintf(`<domain type='qemu'><name>%s</name><memory unit='MiB'>48</memory><vcpu>1</vcpu>
<os><type arch='x86_64' machine='%s'>hvm</type><boot dev='cdrom'/></os><features><acpi/></features><on_poweroff>destroy</on_poweroff>
<devices><emulator>/usr/bin/qemu-system-x86_64</emulator>%s<memballoon model='none'/></devices></domain>`, name, c.machine, c.controller))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = h.Destroy(context.Background(), dom.UUID)
				if err := h.Undefine(context.Background(), dom.UUID); err != nil {
					t.Errorf("undefining %s: %v", name, err)
				}
			})
			obs := &recoveries{}
			e := &Engine{Host: h, PayloadDir: dir, ImageMode: 0o644, ImageGID: -1, Log: quiet, Observer: obs, Starts: &Starts{}}
			run := func(host, action string) result.Result { return runJob(t, e, name, host, action) }
			if r := run("boot", "start"); r.State != result.StateDone || r.Device == nil || r.Device.Bus != c.bus {
				t.Fatalf("start job: %+v device %+v error %+v", r.State, r.Device, r.Error)
			}
			failures := 0
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
				live, err := h.LiveXML(ctx, dom.UUID)
				if err != nil {
					t.Fatal(err)
				}
				p, found, err := domxml.FindPayload(live)
				if err != nil || !found || p.Path != r.Payload.Path || p.TrayOpen {
					t.Errorf("change %d: live drive %+v (found %v, %v), want %s with its tray shut", i, p, found, err, r.Payload.Path)
					failures++
				}
			}
			t.Logf("%s: %d immediate media changes after start, %d failures, %d resets, %d drive replacements",
				c.bus, n, failures, obs.reset.Load(), obs.replace.Load())
		})
	}
}
