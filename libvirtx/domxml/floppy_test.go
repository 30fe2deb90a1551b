package domxml

import (
	"encoding/xml"
	"errors"
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"
)

const floppyDomain = `<domain type='qemu'>
  <name>w</name>
  <os><type arch='x86_64' machine='%s'>hvm</type></os>
  <devices>
    <disk type='file' device='disk'><source file='/d/root.qcow2'/><target dev='sda' bus='sata'/></disk>%s
  </devices>
</domain>`

func floppyDom(machine, extra string) string {
	return strings.Replace(strings.Replace(floppyDomain, "%s", machine, 1), "%s", extra, 1)
}

// TestFloppyDrive: a floppy payload drive sits on fdc at the first free
// fda/fdb on every machine (the configured CD-ROM bus does not apply),
// read-only with startupPolicy optional; it replaces a CD-ROM payload
// drive, and a third floppy has no place.
func TestFloppyDrive(t *testing.T) {
	for _, c := range []struct {
		name, machine, extra, want string
		bus                        Bus
	}{
		{"pc", "pc-i440fx-7.2", "", "fda", BusAuto},
		{"q35 with a configured sata bus", "q35", "", "fda", BusSATA},
		{"fda taken", "q35", "\n    <disk type='file' device='floppy'><source file='/d/other.img'/><target dev='fda' bus='fdc'/></disk>", "fdb", BusAuto},
		{"replaces a cdrom payload", "q35", "\n    <disk type='file' device='cdrom'><source file='/p/old.iso'/><target dev='sdb' bus='sata'/><readonly/><alias name='" + PayloadAlias + "'/></disk>", "fda", BusAuto},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, dev, _, err := SetPayloadDrive(floppyDom(c.machine, c.extra), "/p/answer.img", c.bus, AsFloppy())
			if err != nil {
				t.Fatal(err)
			}
			if dev.Kind != KindFloppy || dev.Bus != BusFDC || dev.Target != c.want {
				t.Errorf("device %+v, want floppy on fdc at %s", dev, c.want)
			}
			var d libvirtxml.Domain
			if err := xml.Unmarshal([]byte(out), &d); err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, disk := range d.Devices.Disks {
				if disk.Alias == nil || disk.Alias.Name != PayloadAlias {
					continue
				}
				n++
				if disk.Device != "floppy" || disk.ReadOnly == nil || disk.Source.File.File != "/p/answer.img" || disk.Source.StartupPolicy != "optional" || disk.Target.Bus != "fdc" {
					t.Errorf("payload drive %+v", disk)
				}
			}
			if n != 1 {
				t.Errorf("%d payload drives:\n%s", n, out)
			}
			p, found, err := FindPayload(out)
			if err != nil || !found || p.Kind != KindFloppy || p.Path != "/p/answer.img" {
				t.Errorf("FindPayload = %+v %v %v", p, found, err)
			}
		})
	}
	both := floppyDom("pc", "\n    <disk type='file' device='floppy'><target dev='fda' bus='fdc'/></disk><disk type='file' device='floppy'><target dev='fdb' bus='fdc'/></disk>")
	if _, _, _, err := SetPayloadDrive(both, "/p/a.img", BusAuto, AsFloppy()); !errors.Is(err, ErrNoFreeTarget) {
		t.Errorf("two floppies taken: %v, want ErrNoFreeTarget", err)
	}
	if _, err := PayloadDeviceXML("/p/a.img", Device{Kind: KindFloppy, Bus: BusSATA, Target: "sdb"}); err == nil {
		t.Errorf("a floppy on sata rendered")
	}
}
