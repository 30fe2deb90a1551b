package domxml

import (
	"strings"
	"testing"
)

// TestPlatformOf: the architecture and ACPI a definition names, and what
// they mean for Ignition's delivery (issue 41).
func TestPlatformOf(t *testing.T) {
	for _, c := range []struct {
		name, xml          string
		arch               string
		acpi, x86, noFwCfg bool
	}{
		{"x86 with acpi", `<domain type='kvm'><name>a</name><os><type arch='x86_64' machine='pc'>hvm</type></os><features><acpi/><apic/></features></domain>`, "x86_64", true, true, false},
		{"x86 without features", `<domain type='kvm'><name>a</name><os><type arch='x86_64'>hvm</type></os></domain>`, "x86_64", false, true, false},
		{"no arch", `<domain type='kvm'><name>a</name><os><type>hvm</type></os><features><pae/></features></domain>`, "", false, true, false},
		{"s390x", `<domain type='kvm'><name>a</name><os><type arch='s390x' machine='s390-ccw-virtio'>hvm</type></os></domain>`, "s390x", false, false, true},
		{"ppc64le", `<domain type='kvm'><name>a</name><os><type arch='ppc64le' machine='pseries'>hvm</type></os></domain>`, "ppc64le", false, false, true},
		{"ppc64", `<domain type='kvm'><name>a</name><os><type arch='ppc64' machine='pseries'>hvm</type></os></domain>`, "ppc64", false, false, true},
		{"aarch64", `<domain type='kvm'><name>a</name><os><type arch='aarch64' machine='virt'>hvm</type></os><features><acpi/></features></domain>`, "aarch64", true, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := Read(c.xml)
			if err != nil {
				t.Fatal(err)
			}
			p := d.Platform()
			if p.Arch != c.arch || p.ACPI != c.acpi || p.X86() != c.x86 || p.NoFwCfg() != c.noFwCfg {
				t.Errorf("platform %+v x86 %v noFwCfg %v", p, p.X86(), p.NoFwCfg())
			}
		})
	}
	if _, err := Read("<domain"); err == nil {
		t.Error("malformed XML read")
	}
}

// TestWithSerial: the blockdev drive is a read-only raw virtio disk with
// the serial, and a payload disk on another bus moves to virtio.
func TestWithSerial(t *testing.T) {
	dom := `<domain type='kvm'><name>a</name><os><type arch='s390x'>hvm</type></os><devices><controller type='scsi' index='0' model='virtio-scsi'/></devices></domain>`
	x, dev, _, err := SetPayloadDrive(dom, "/run/p/a-1.img", BusAuto, AsDisk())
	if err != nil || dev.Bus != BusSCSI {
		t.Fatalf("vfat disk %+v %v", dev, err)
	}
	x, dev, replaced, err := SetPayloadDrive(x, "/run/p/a-2.ign", BusVirtio, AsDisk(), WithSerial(IgnitionSerial))
	if err != nil || !replaced || dev.Bus != BusVirtio || dev.Target != "vda" {
		t.Fatalf("blockdev disk %+v %v %v", dev, replaced, err)
	}
	for _, want := range []string{"<disk type='file' device='disk'>", "<driver name='qemu' type='raw'/>", "<source file='/run/p/a-2.ign'", "<target dev='vda' bus='virtio'/>", "<readonly/>", "<serial>ignition</serial>"} {
		if !strings.Contains(x, want) {
			t.Errorf("definition lacks %s:\n%s", want, x)
		}
	}
	if strings.Count(x, "<disk") != 1 {
		t.Errorf("two disks:\n%s", x)
	}
}
