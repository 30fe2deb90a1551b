package domxml

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/golden")

func readInput(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("reading input: %v", err)
	}
	return string(b)
}

// golden compares got with testdata/golden/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to create it): %v", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run with -update after checking):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// oneEdit makes edit in a session of its own on x, as the agent's one-edit
// changes do, and returns the session's XML.
func oneEdit(x string, edit func(*Edit) (bool, error)) (string, bool, error) {
	ed, err := NewEdit(x)
	if err != nil {
		return "", false, err
	}
	done, err := edit(ed)
	if err != nil {
		return "", false, err
	}
	out, err := ed.XML()
	return out, done, err
}

// normalize parses and re-serialises x: the form our output is written in,
// as an Edit that changed x writes it back (etree's writer, attributes
// single-quoted).
func normalize(t *testing.T, x string) string {
	t.Helper()
	doc, _, err := parse(x)
	if err != nil {
		t.Fatal(err)
	}
	s, err := serialize(doc)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSetPayloadDrive(t *testing.T) {
	tests := []struct {
		name, input, image string
		bus                Bus
		opts               []Option
		wantDev            Device
		wantReplaced       bool
	}{
		{name: "pc-auto", input: "pc.xml", image: "/var/lib/vmpayload/a.iso", bus: BusAuto,
			wantDev: Device{Bus: BusIDE, Target: "hda"}},
		{name: "pc-ide-busy", input: "pc-ide-busy.xml", image: "/p/b.iso", bus: BusAuto,
			wantDev: Device{Bus: BusIDE, Target: "hdc"}},
		{name: "pc-scsi-override", input: "pc.xml", image: "/p/c.iso", bus: BusSCSI,
			wantDev: Device{Bus: BusSCSI, Target: "sda", Address: &DriveAddress{}}},
		{name: "q35-auto", input: "q35.xml", image: "/p/d.iso", bus: BusAuto,
			wantDev: Device{Bus: BusSATA, Target: "sdd"}}, // sdb's implied unit 1 is taken by sdc
		{name: "q35-scsi-auto", input: "q35-scsi.xml", image: "/p/e.iso", bus: BusAuto,
			wantDev: Device{Bus: BusSCSI, Target: "sdc", Address: &DriveAddress{Controller: 1, Unit: 1}}},
		{name: "q35-scsi-sata-override", input: "q35-scsi.xml", image: "/p/f.iso", bus: BusSATA,
			wantDev: Device{Bus: BusSATA, Target: "sdc"}},
		{name: "replace", input: "replace.xml", image: "/var/lib/vmpayload/new & improved.iso", bus: BusSCSI,
			wantDev: Device{Bus: BusSATA, Target: "sdb", Address: &DriveAddress{Unit: 1}}, wantReplaced: true},
		{name: "aarch64-auto", input: "aarch64.xml", image: "/p/g.iso", bus: BusAuto,
			wantDev: Device{Bus: BusSCSI, Target: "sda", Address: &DriveAddress{}}},
		{name: "nodevices-norelabel", input: "nodevices.xml", image: "/p/h.iso", bus: "",
			opts: []Option{WithoutDACRelabel()}, wantDev: Device{Bus: BusIDE, Target: "hda"}},
		// vfat payloads: read-only disks on virtio, or SCSI when there is a
		// SCSI controller; a CD-ROM payload drive of an earlier ISO job is
		// replaced by a disk in its place.
		{name: "q35-vfat-disk", input: "q35.xml", image: "/p/i.img", bus: BusAuto, opts: []Option{AsDisk()},
			wantDev: Device{Kind: KindDisk, Bus: BusVirtio, Target: "vda"}},
		{name: "q35-scsi-vfat-disk", input: "q35-scsi.xml", image: "/p/j.img", bus: BusAuto, opts: []Option{AsDisk()},
			wantDev: Device{Kind: KindDisk, Bus: BusSCSI, Target: "sdc", Address: &DriveAddress{Controller: 1, Unit: 1}}},
		{name: "replace-cdrom-with-vfat-disk", input: "replace.xml", image: "/var/lib/vmpayload/new.img", bus: BusAuto, opts: []Option{AsDisk()},
			wantDev: Device{Kind: KindDisk, Bus: BusVirtio, Target: "vdb"}, wantReplaced: true},
		// AtDevice: the drive a running domain still has (live XML) goes
		// back into the definition at its own target and address, not the
		// one ChooseDevice would pick.
		{name: "pc-at-live-hdc", input: "pc.xml", image: "/p/k.iso", bus: BusAuto,
			opts:    []Option{AtDevice(Device{Kind: KindCDROM, Bus: BusIDE, Target: "hdc"})},
			wantDev: Device{Bus: BusIDE, Target: "hdc"}},
		{name: "q35-scsi-at-live-sdd", input: "q35-scsi.xml", image: "/p/l.iso", bus: BusAuto,
			opts:    []Option{AtDevice(Device{Bus: BusSCSI, Target: "sdd", Address: &DriveAddress{Controller: 1, Unit: 3}})},
			wantDev: Device{Bus: BusSCSI, Target: "sdd", Address: &DriveAddress{Controller: 1, Unit: 3}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.wantDev.Kind == "" {
				tt.wantDev.Kind = KindCDROM
			}
			in := readInput(t, tt.input)
			out, dev, replaced, err := SetPayloadDrive(in, tt.image, tt.bus, tt.opts...)
			if err != nil {
				t.Fatalf("SetPayloadDrive: %v", err)
			}
			if !reflect.DeepEqual(dev, tt.wantDev) {
				t.Errorf("device = %+v (addr %+v), want %+v (addr %+v)", dev, dev.Address, tt.wantDev, tt.wantDev.Address)
			}
			if replaced != tt.wantReplaced {
				t.Errorf("replaced = %v, want %v", replaced, tt.wantReplaced)
			}
			golden(t, tt.name+".xml", out)

			// The drive is found again with what we set.
			p, found, err := FindPayload(out)
			if err != nil || !found {
				t.Fatalf("FindPayload after set: found=%v err=%v", found, err)
			}
			if p.Path != tt.image || p.Bus != dev.Bus || p.Target != dev.Target || p.Kind != dev.Kind {
				t.Errorf("FindPayload = %+v, want path %q dev %+v", p, tt.image, dev)
			}
			if want := "device='" + string(dev.Kind) + "'"; !strings.Contains(out, want) {
				t.Errorf("output lacks %s:\n%s", want, out)
			}
			if strings.Contains(out, "relabel='no'") != (tt.name == "nodevices-norelabel") {
				t.Errorf("seclabel relabel='no' presence wrong:\n%s", out)
			}

			// Setting the same image again replaces in place and is stable.
			again, dev2, replaced2, err := SetPayloadDrive(out, tt.image, BusAuto, tt.opts...)
			if err != nil || !replaced2 || again != out || dev2.Target != dev.Target {
				t.Errorf("second set: replaced=%v same=%v dev=%+v err=%v", replaced2, again == out, dev2, err)
			}

			// Removing an added drive gives back the input unchanged.
			removed, ok, err := oneEdit(out, (*Edit).RemovePayloadDrive)
			if err != nil || !ok {
				t.Fatalf("RemovePayloadDrive: ok=%v err=%v", ok, err)
			}
			if !tt.wantReplaced && strings.Contains(in, "<devices") {
				wantOriginal(t, removed, in)
			}
			if _, found, _ := FindPayload(removed); found {
				t.Errorf("payload still present after remove")
			}
		})
	}
}

func TestSetPayloadDriveErrors(t *testing.T) {
	tests := []struct {
		name, xml, image string
		bus              Bus
		disk             bool
		at               *Device
		wantErr          error  // errors.Is target, or nil
		wantMsg          string // substring
	}{
		{name: "empty", xml: "", image: "/p.iso", wantErr: ErrInvalidXML},
		{name: "garbage", xml: "<domain><name>x</domain>", image: "/p.iso", wantErr: ErrInvalidXML},
		{name: "not-xml", xml: "{\"json\": true}", image: "/p.iso", wantErr: ErrInvalidXML},
		{name: "wrong-root", xml: "<network><name>x</name></network>", image: "/p.iso", wantErr: ErrInvalidXML},
		{name: "two-roots", xml: "<domain/><domain/>", image: "/p.iso", wantErr: ErrInvalidXML},
		{name: "relative-path", xml: "<domain/>", image: "p.iso", wantMsg: "not absolute"},
		{name: "empty-path", xml: "<domain/>", image: "", wantMsg: "empty"},
		{name: "ide-on-q35", xml: readInput(t, "q35.xml"), image: "/p.iso", bus: BusIDE, wantMsg: "no IDE bus"},
		{name: "sata-on-pc", xml: readInput(t, "pc.xml"), image: "/p.iso", bus: BusSATA, wantMsg: "no SATA bus"},
		{name: "ide-full", xml: readInput(t, "pc-ide-full.xml"), image: "/p.iso", wantErr: ErrNoFreeTarget},
		{name: "bad-bus", xml: "<domain/>", image: "/p.iso", bus: "usb", wantMsg: "unknown bus"},
		{name: "virtio-cdrom", xml: "<domain/>", image: "/p.iso", bus: BusVirtio, wantMsg: "no virtio CD-ROMs"},
		{name: "sata-disk", xml: readInput(t, "q35.xml"), image: "/p.img", bus: BusSATA, disk: true, wantMsg: "no read-only disks"},
		{name: "ide-disk", xml: readInput(t, "pc.xml"), image: "/p.img", bus: BusIDE, disk: true, wantMsg: "no read-only disks"},
		{name: "at-taken-target", xml: readInput(t, "pc-ide-busy.xml"), image: "/p.iso", at: &Device{Bus: BusIDE, Target: "hda"}, wantMsg: "target hda is taken"},
		{name: "at-no-target", xml: readInput(t, "pc.xml"), image: "/p.iso", at: &Device{Bus: BusIDE}, wantMsg: "no target"},
		{name: "at-virtio-cdrom", xml: readInput(t, "pc.xml"), image: "/p.iso", at: &Device{Bus: BusVirtio, Target: "vdb"}, wantMsg: "unsupported CD-ROM bus"},
		{name: "at-cdrom-for-disk", xml: readInput(t, "pc.xml"), image: "/p.img", disk: true, at: &Device{Bus: BusIDE, Target: "hdc"}, wantMsg: "is a cdrom, not a disk"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []Option
			if tt.disk {
				opts = append(opts, AsDisk())
			}
			if tt.at != nil {
				opts = append(opts, AtDevice(*tt.at))
			}
			_, _, _, err := SetPayloadDrive(tt.xml, tt.image, tt.bus, opts...)
			if err == nil {
				t.Fatal("want error, got nil")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error %v is not %v", err, tt.wantErr)
			}
			if tt.wantMsg != "" && !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tt.wantMsg)
			}
		})
	}
}

func TestPayloadDeviceXML(t *testing.T) {
	tests := []struct {
		name  string
		image string
		dev   Device
		opts  []Option
	}{
		{name: "device-sata", image: "/var/lib/vmpayload/x.iso", dev: Device{Bus: BusSATA, Target: "sdb"}},
		{name: "device-scsi-addr", image: "/var/lib/vmpayload/x.iso", dev: Device{Bus: BusSCSI, Target: "sdc", Address: &DriveAddress{Controller: 1, Unit: 3}}},
		{name: "device-ide-norelabel", image: "/x'y\".iso", dev: Device{Bus: BusIDE, Target: "hdc"}, opts: []Option{WithoutDACRelabel()}},
		{name: "device-virtio-disk", image: "/var/lib/vmpayload/x.img", dev: Device{Kind: KindDisk, Bus: BusVirtio, Target: "vdb"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PayloadDeviceXML(tt.image, tt.dev, tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tt.name+".xml", got)
			// It is a single <disk> element that FindPayload-style parsing reads back.
			p, found, err := FindPayload("<domain><devices>" + got + "</devices></domain>")
			if tt.dev.Kind == "" {
				tt.dev.Kind = KindCDROM
			}
			if err != nil || !found || p.Path != tt.image || !reflect.DeepEqual(p.Device, tt.dev) {
				t.Errorf("read back %+v found=%v err=%v, want %q %+v", p, found, err, tt.image, tt.dev)
			}
		})
	}
	for _, bad := range []struct {
		image string
		dev   Device
	}{
		{"/x.iso", Device{Bus: "virtio", Target: "vdb"}},
		{"/x.img", Device{Kind: KindDisk, Bus: BusSATA, Target: "sdb"}},
		{"/x.img", Device{Kind: "floppy", Bus: BusIDE, Target: "fda"}},
		{"/x.iso", Device{Bus: BusIDE}},
		{"x.iso", Device{Bus: BusIDE, Target: "hdc"}},
	} {
		if _, err := PayloadDeviceXML(bad.image, bad.dev); err == nil {
			t.Errorf("PayloadDeviceXML(%q, %+v): want error", bad.image, bad.dev)
		}
	}
}

func TestFindPayload(t *testing.T) {
	tests := []struct {
		input     string
		wantFound bool
		want      PayloadDisk
	}{
		{"pc.xml", false, PayloadDisk{}},
		{"replace.xml", true, PayloadDisk{Path: "/var/lib/vmpayload/old.iso",
			Device: Device{Kind: KindCDROM, Bus: BusSATA, Target: "sdb", Address: &DriveAddress{Unit: 1}}}},
	}
	for _, tt := range tests {
		t.Run(tt.input, func(t *testing.T) {
			got, found, err := FindPayload(readInput(t, tt.input))
			if err != nil {
				t.Fatal(err)
			}
			if found != tt.wantFound || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("FindPayload = %+v, %v; want %+v, %v", got, found, tt.want, tt.wantFound)
			}
		})
	}
	if _, _, err := FindPayload("<domain"); !errors.Is(err, ErrInvalidXML) {
		t.Errorf("malformed: err = %v, want ErrInvalidXML", err)
	}
}

func TestRemovePayloadDriveAbsent(t *testing.T) {
	in := readInput(t, "pc.xml")
	out, removed, err := oneEdit(in, (*Edit).RemovePayloadDrive)
	if err != nil || removed || out != in {
		t.Errorf("RemovePayloadDrive on domain without payload: removed=%v same=%v err=%v", removed, out == in, err)
	}
}

func TestReferencedFiles(t *testing.T) {
	tests := []struct {
		input string
		want  []string
	}{
		{"pc.xml", []string{"/var/lib/libvirt/images/pc.qcow2", "/var/lib/libvirt/images/base.raw"}},
		{"replace.xml", []string{"/img/root.raw", "/var/lib/vmpayload/old.iso"}},
		{"aarch64.xml", nil},
		// fw_cfg entries with a file (not those with a text value)
		{"sysinfo.xml", []string{"/var/lib/old/config.ign", "/srv/blob.bin"}},
	}
	for _, tt := range tests {
		t.Run(tt.input, func(t *testing.T) {
			d, err := Read(readInput(t, tt.input))
			if err != nil {
				t.Fatal(err)
			}
			if got := d.ReferencedFiles(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ReferencedFiles = %q, want %q", got, tt.want)
			}
		})
	}
	if _, err := Read("not xml"); err == nil {
		t.Error("malformed: want error")
	}
}

func TestDomainFacts(t *testing.T) {
	tests := []struct {
		input, uuid string
		machine     machineInfo
		q35, i440fx bool
	}{
		{"pc.xml", "0a1b2c3d-0000-4000-8000-000000000001", machineInfo{"qemu", "x86_64", "pc-i440fx-7.2"}, false, true},
		{"q35.xml", "0a1b2c3d-0000-4000-8000-000000000002", machineInfo{"kvm", "x86_64", "pc-q35-7.2"}, true, false},
		{"aarch64.xml", "", machineInfo{"qemu", "aarch64", "virt-7.2"}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.input, func(t *testing.T) {
			x := readInput(t, tt.input)
			uuid, err := DomainUUID(x)
			if err != nil || uuid != tt.uuid {
				t.Errorf("DomainUUID = %q, %v; want %q", uuid, err, tt.uuid)
			}
			d, err := Read(x)
			if err != nil {
				t.Fatal(err)
			}
			mi := d.machine()
			if mi != tt.machine {
				t.Errorf("machine = %+v; want %+v", mi, tt.machine)
			}
			if IsQ35(mi.Machine) != tt.q35 || IsI440FX(mi.Machine) != tt.i440fx {
				t.Errorf("IsQ35/IsI440FX(%q) = %v/%v", mi.Machine, IsQ35(mi.Machine), IsI440FX(mi.Machine))
			}
		})
	}
}

func TestParseBus(t *testing.T) {
	tests := []struct {
		in   string
		want Bus
		ok   bool
	}{
		{"", BusAuto, true}, {"auto", BusAuto, true}, {"SATA", BusSATA, true}, {" ide ", BusIDE, true},
		{"scsi", BusSCSI, true}, {"virtio", "", false}, {"usb", "", false},
	}
	for _, tt := range tests {
		got, err := ParseBus(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseBus(%q) = %q, %v; want %q ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestHotpluggable(t *testing.T) {
	for _, tt := range []struct {
		b    Bus
		want bool
	}{{BusSCSI, true}, {BusSATA, false}, {BusIDE, false}, {BusAuto, false}} {
		if got := tt.b.Hotpluggable(); got != tt.want {
			t.Errorf("%s.Hotpluggable() = %v", tt.b, got)
		}
	}
}

func BenchmarkSetPayloadDrive(b *testing.B) {
	in, err := os.ReadFile(filepath.Join("testdata", "q35-scsi.xml"))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, _, _, err := SetPayloadDrive(string(in), "/var/lib/vmpayload/x.iso", BusAuto); err != nil {
			b.Fatal(err)
		}
	}
}

func TestTargetNames(t *testing.T) {
	for _, tt := range []struct {
		name string
		idx  int
	}{{"sda", 0}, {"sdz", 25}, {"sdaa", 26}, {"sdab", 27}, {"sdzz", 701}, {"sdaaa", 702}} {
		if got := targetName("sd", tt.idx); got != tt.name {
			t.Errorf("targetName(%d) = %q, want %q", tt.idx, got, tt.name)
		}
		if got, ok := targetIndex(tt.name, "sd"); !ok || got != tt.idx {
			t.Errorf("targetIndex(%q) = %d, %v; want %d", tt.name, got, ok, tt.idx)
		}
	}
	for _, bad := range []string{"sd", "sdA", "hda", "sd1"} {
		if _, ok := targetIndex(bad, "sd"); ok {
			t.Errorf("targetIndex(%q) accepted", bad)
		}
	}
}

// FuzzSetPayloadDrive checks that no input makes the editor panic and that
// whatever it accepts it can read back.
func FuzzSetPayloadDrive(f *testing.F) {
	for _, n := range []string{"pc.xml", "q35-scsi.xml", "replace.xml", "nodevices.xml"} {
		b, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("<domain><devices><disk><alias name='ua-vmpayload'/><target dev='hdz' bus='ide'/></disk></devices></domain>")
	f.Fuzz(func(t *testing.T, x string) {
		out, _, _, err := SetPayloadDrive(x, "/p/x.iso", BusAuto)
		if err != nil {
			return
		}
		if p, found, err := FindPayload(out); err != nil || !found || p.Path != "/p/x.iso" {
			t.Fatalf("set then find: %+v %v %v", p, found, err)
		}
	})
}
