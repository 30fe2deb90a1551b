package drive

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/agent/delivery"
	"github.com/vmpayload/vmpayload/agent/delivery/deliverytest"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/libvirtx/libvirtxtest"
)

const dir = deliverytest.Dir

func setup(t *testing.T, devices string, bus domxml.Bus) (*libvirtxtest.Fake, *Delivery, libvirtx.DomainInfo) {
	t.Helper()
	f, env, dom := deliverytest.Setup(t, "<domain type='kvm'><name>dlv-drive</name><memory unit='MiB'>64</memory><os><type arch='x86_64' machine='pc'>hvm</type></os><devices>"+devices+"</devices></domain>", false)
	env.Bus = bus
	return f, New(env).(*Delivery), dom
}

// TestAttachStopped: each kind of drive goes into a stopped domain's
// definition as its kind and bus; the image the drive held before is the
// caller's to remove, the other deliveries' payloads are dropped in the
// same edit, and Start starts the domain.
func TestAttachStopped(t *testing.T) {
	old := dir + "/u-old.iso"
	oldDrive := "<disk type='file' device='cdrom'><driver name='qemu' type='raw'/><source file='" + old + "'/><target dev='hdc' bus='ide'/><readonly/><alias name='" + domxml.PayloadAlias + "'/></disk>"
	tests := []struct {
		name       string
		devices    string
		bus        domxml.Bus
		drive      delivery.Drive
		start      bool
		wantKind   domxml.Kind
		wantBus    domxml.Bus
		wantRemove []string
		wantSerial bool
	}{
		{"cdrom on the configured bus", "", domxml.BusIDE, delivery.DriveCDROM, false, domxml.KindCDROM, domxml.BusIDE, nil, false},
		{"cdrom replaces the old image", oldDrive, domxml.BusIDE, delivery.DriveCDROM, true, domxml.KindCDROM, domxml.BusIDE, []string{old}, false},
		{"vfat disk leaves IDE for libvirt's bus", "", domxml.BusIDE, delivery.DriveDisk, false, domxml.KindDisk, "", nil, false},
		{"floppy", "", domxml.BusAuto, delivery.DriveFloppy, false, domxml.KindFloppy, domxml.BusFDC, nil, false},
		{"ignition serial disk", "", domxml.BusSATA, delivery.DriveSerialDisk, false, domxml.KindDisk, domxml.BusVirtio, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, d, dom := setup(t, tt.devices, tt.bus)
			img := dir + "/u-new.img"
			dropped := 0
			p := &delivery.Payload{Path: img, Drive: tt.drive, Start: tt.start, DropOthers: func(*domxml.Edit) error { dropped++; return nil }}
			var r result.Result
			out, err := d.Attach(context.Background(), dom, p, &r)
			if err != nil {
				t.Fatal(err)
			}
			if dropped != 1 {
				t.Errorf("DropOthers called %d times, want 1", dropped)
			}
			if !slices.Equal(out.Remove, tt.wantRemove) {
				t.Errorf("Remove %v, want %v", out.Remove, tt.wantRemove)
			}
			cur, found, err := domxml.FindPayload(f.XML(dom.UUID))
			if err != nil || !found || cur.Path != img || cur.Kind != tt.wantKind {
				t.Fatalf("payload drive %+v found %v err %v, want a %s holding %s", cur, found, err, tt.wantKind, img)
			}
			if tt.wantBus != "" && cur.Bus != tt.wantBus {
				t.Errorf("bus %s, want %s", cur.Bus, tt.wantBus)
			}
			if got := strings.Contains(f.XML(dom.UUID), "<serial>"+domxml.IgnitionSerial+"</serial>"); got != tt.wantSerial {
				t.Errorf("serial %q: %v, want %v", domxml.IgnitionSerial, got, tt.wantSerial)
			}
			wantState := "shut off"
			if tt.start {
				wantState = "running"
			}
			if r.DomainState != wantState || r.Device == nil || r.Device.Kind != string(tt.wantKind) {
				t.Errorf("result state %q device %+v", r.DomainState, r.Device)
			}
			if got := d.Files(f.XML(dom.UUID)); !slices.Equal(got, []string{img}) {
				t.Errorf("Files %v", got)
			}
		})
	}
}

// TestDropAndDetach: Drop takes the drive out of an edit (another
// delivery's payload replaces it); Detach of a stopped domain does too
// and leaves its image to be removed.
func TestDropAndDetach(t *testing.T) {
	img := dir + "/u-1.iso"
	drive := "<disk type='file' device='cdrom'><driver name='qemu' type='raw'/><source file='" + img + "'/><target dev='hdc' bus='ide'/><readonly/><alias name='" + domxml.PayloadAlias + "'/></disk>"
	for _, devices := range []string{"", drive} {
		f, d, dom := setup(t, devices, domxml.BusIDE)
		for _, op := range []string{"drop", "detach"} {
			ed, err := domxml.NewEdit(f.XML(dom.UUID))
			if err != nil {
				t.Fatal(err)
			}
			var dt delivery.Detached
			if op == "drop" {
				err = d.Drop(ed, dom)
			} else {
				dt, err = d.Detach(context.Background(), dom, ed, &result.Result{})
			}
			if err != nil {
				t.Fatal(err)
			}
			x, _ := ed.XML()
			if _, found, _ := domxml.FindPayload(x); found {
				t.Errorf("%s left the drive:\n%s", op, x)
			}
			if op == "detach" && (dt.Changed != (devices != "") || dt.Drive != (devices != "") || (devices != "" && !slices.Equal(dt.Remove, []string{img}))) {
				t.Errorf("detach with devices %q: %+v", devices, dt)
			}
		}
	}
}

// TestRunningFloppyRefused: a floppy cannot be hot-plugged nor unplugged.
func TestRunningFloppyRefused(t *testing.T) {
	f, d, dom := setup(t, "", domxml.BusAuto)
	f.SetActive(dom.UUID, true)
	dom.Active = true
	_, err := d.Attach(context.Background(), dom, &delivery.Payload{Path: dir + "/u.img", Drive: delivery.DriveFloppy}, &result.Result{})
	var fl *delivery.Failure
	if !errorsAs(err, &fl) || fl.Code != result.CodeDomainRunning {
		t.Fatalf("attach of a floppy to a running domain: %v, want a %s failure", err, result.CodeDomainRunning)
	}
}
