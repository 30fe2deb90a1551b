package domxml

import (
	"encoding/xml"
	"errors"
	"fmt"
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"
)

// TestPayloadDeviceXMLTyped reads the rendered drive back with libvirtxml
// and checks what libvirt relies on.
func TestPayloadDeviceXMLTyped(t *testing.T) {
	u := func(n uint) *uint { return &n }
	tests := []struct {
		name        string
		dev         Device
		opts        []Option
		wantDevice  string
		wantRelabel bool
		wantAddr    *libvirtxml.DomainAddressDrive
	}{
		{name: "sata cdrom", dev: Device{Bus: BusSATA, Target: "sdb"}, wantDevice: "cdrom"},
		{name: "scsi cdrom with address", dev: Device{Bus: BusSCSI, Target: "sdc", Address: &DriveAddress{Controller: 1, Unit: 3}},
			wantDevice: "cdrom", wantAddr: &libvirtxml.DomainAddressDrive{Controller: u(1), Bus: u(0), Target: u(0), Unit: u(3)}},
		{name: "ide without relabel", dev: Device{Bus: BusIDE, Target: "hdc"}, opts: []Option{WithoutDACRelabel()},
			wantDevice: "cdrom", wantRelabel: true},
		{name: "virtio disk", dev: Device{Bus: BusVirtio, Target: "vdb"}, opts: []Option{AsDisk()}, wantDevice: "disk"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := PayloadDeviceXML("/p/x.iso", tt.dev, tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			var d libvirtxml.DomainDisk
			if err := xml.Unmarshal([]byte(out), &d); err != nil {
				t.Fatalf("unmarshalling %s: %v", out, err)
			}
			switch {
			case d.Device != tt.wantDevice:
				t.Errorf("device = %q, want %q", d.Device, tt.wantDevice)
			case d.Source == nil || d.Source.File == nil || d.Source.File.File != "/p/x.iso" || d.Source.StartupPolicy != "optional":
				t.Errorf("source = %+v, want file /p/x.iso with startupPolicy optional", d.Source)
			case d.Target == nil || d.Target.Dev != tt.dev.Target || d.Target.Bus != string(tt.dev.Bus):
				t.Errorf("target = %+v, want %s on %s", d.Target, tt.dev.Target, tt.dev.Bus)
			case d.ReadOnly == nil:
				t.Errorf("not read-only")
			case d.Alias == nil || d.Alias.Name != PayloadAlias:
				t.Errorf("alias = %+v, want %s", d.Alias, PayloadAlias)
			case (len(d.Source.File.SecLabel) == 1 && d.Source.File.SecLabel[0].Relabel == "no") != tt.wantRelabel:
				t.Errorf("seclabels = %+v, want relabel='no': %v", d.Source.File.SecLabel, tt.wantRelabel)
			}
			var gotAddr *libvirtxml.DomainAddressDrive
			if d.Address != nil {
				gotAddr = d.Address.Drive
			}
			if (gotAddr == nil) != (tt.wantAddr == nil) || gotAddr != nil && *gotAddr.Controller != *tt.wantAddr.Controller || gotAddr != nil && *gotAddr.Unit != *tt.wantAddr.Unit {
				t.Errorf("address = %+v, want %+v", gotAddr, tt.wantAddr)
			}
			if strings.Contains(out, `"`) {
				t.Errorf("attributes not single-quoted like libvirt's:\n%s", out)
			}
		})
	}
}

// TestSetPayloadDriveKeepsDrive checks that replacing a payload drive keeps
// its position, address (of any type) and boot order, and that nothing else
// in the definition changes.
func TestSetPayloadDriveKeepsDrive(t *testing.T) {
	const before = "<domain type='kvm'>\n  <name>x</name>\n  <devices>\n    <disk type='file' device='disk'>\n      <source file='/a.img'/>\n      <target dev='vda' bus='virtio'/>\n      <vendor-extension foo='bar'/>\n    </disk>\n    "
	const after = "\n    <future-device/>\n  </devices>\n</domain>"
	tests := []struct {
		name, drive, want string
	}{
		{name: "virtio disk with pci address and boot order",
			drive: "<disk type='file' device='disk'>\n      <source file='/old.img'/>\n      <target dev='vdb' bus='virtio'/>\n      <readonly/>\n      <boot order='1'/>\n      <alias name='ua-vmpayload'/>\n      <address type='pci' domain='0x0000' bus='0x00' slot='0x07' function='0x0'/>\n    </disk>",
			want:  "<disk type='file' device='disk'>\n      <driver name='qemu' type='raw'/>\n      <source file='/p/new.img' startupPolicy='optional'/>\n      <target dev='vdb' bus='virtio'/>\n      <readonly/>\n      <boot order='1'/>\n      <alias name='ua-vmpayload'/>\n      <address type='pci' domain='0x0000' bus='0x00' slot='0x07' function='0x0'/>\n    </disk>"},
		{name: "cdrom on scsi keeps drive address",
			drive: "<disk type='file' device='cdrom'>\n      <target dev='sdb' bus='scsi'/>\n      <alias name='ua-vmpayload'/>\n      <address type='drive' controller='0' bus='0' target='0' unit='5'/>\n    </disk>",
			want:  "<disk type='file' device='cdrom'>\n      <driver name='qemu' type='raw'/>\n      <source file='/p/new.img' startupPolicy='optional'/>\n      <target dev='sdb' bus='scsi'/>\n      <readonly/>\n      <alias name='ua-vmpayload'/>\n      <address type='drive' controller='0' bus='0' target='0' unit='5'/>\n    </disk>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []Option
			if strings.Contains(tt.drive, "device='disk'") {
				opts = append(opts, AsDisk())
			}
			out, _, replaced, err := SetPayloadDrive(before+tt.drive+after, "/p/new.img", BusAuto, opts...)
			if err != nil || !replaced {
				t.Fatalf("replaced=%v err=%v", replaced, err)
			}
			if want := before + tt.want + after; out != want {
				t.Errorf("got\n%s\nwant\n%s", out, want)
			}
		})
	}
}

// TestParseAccepts checks what parse accepts and refuses: well-formed XML
// (by encoding/xml's strict rules, an attribute given twice refused as
// libvirt's libxml2 refuses it) with exactly one root element, an
// unprefixed <domain>.
func TestParseAccepts(t *testing.T) {
	tests := []struct {
		name, in string
		ok       bool
	}{
		{"plain", "<domain><name>a</name></domain>", true},
		{"prolog and comments", "<?xml version='1.0'?>\n<!-- c --><domain/>\n", true},
		{"default namespace", "<domain xmlns='urn:x'/>", true},
		{"prefixed child", `<domain><metadata><v:r xmlns:v="urn:x"><v:a/></v:r></metadata></domain>`, true},
		{"undeclared prefix", `<domain><v:r></v:r></domain>`, true},
		{"cdata", "<domain><description><![CDATA[<x>]]></description></domain>", true},
		{"prefixed root", "<x:domain xmlns:x='urn:x'/>", false},
		{"other root", "<network/>", false},
		{"two roots", "<domain/><domain/>", false},
		{"no root", "<!-- c -->", false},
		{"text after root", "<domain/>x", false},
		{"unclosed", "<domain><name>", false},
		{"truncated tag", "<domain", false},
		{"mismatched", "<domain></name>", false},
		{"prefix mismatch", `<domain><a:x xmlns:a="u" xmlns:b="u"></b:x></domain>`, false},
		{"empty", "", false},
		{"attribute twice", "<domain type='a' type='b'/>", false},
		{"attribute twice, deep", "<domain><devices><disk device='cdrom' x='1' device='disk'/></devices></domain>", false},
		{"same name, other prefixes", "<domain xmlns:a='urn:a' xmlns:b='urn:b'><x a:k='1' b:k='2'/></domain>", true},
		{"text before root", "x<domain/>", false},
		{"whitespace around root", " \n\t<domain/>\r\n ", true},
		{"declared encoding", "<?xml version='1.0' encoding='ISO-8859-1'?><domain/>", false},
		{"declared UTF-8", "<?xml version='1.0' encoding='UTF-8'?><domain/>", true},
		{"doctype", "<!DOCTYPE domain><domain/>", true},
		{"end tag outside", "<domain/></domain>", false},
		{"unknown entity", "<domain>&x;</domain>", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := parse(tt.in)
			if (err == nil) != tt.ok {
				t.Errorf("parse: %v; want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidXML) {
				t.Errorf("parse error %v does not wrap ErrInvalidXML", err)
			}
		})
	}
}

// TestReadDomainView checks the typed view: the parts it reads, from
// whatever element or namespace they sit among, and that values
// libvirtxml refuses are refused only where the view reads them.
func TestReadDomainView(t *testing.T) {
	disk := "<disk type='file' device='cdrom'><source file='/p/a.iso'/><target dev='sdb' bus='sata'/><alias name='ua-vmpayload'/></disk>"
	tests := []struct {
		name, in  string
		want      string // name machine disks/controllers
		wantError bool
	}{
		{"skipped parts", "<domain type='kvm'><metadata><r:recipe xmlns:r='urn:r'>{&quot;a&quot;:1}</r:recipe></metadata><memory>1</memory><name>a</name><os><loader>x</loader><type arch='x86_64' machine='pc'>hvm</type></os><devices><interface type='user'/>" + disk + "<controller type='scsi' index='0' model='virtio-scsi'/></devices></domain>",
			"a {kvm x86_64 pc} 1/1", false},
		{"two devices", "<domain><devices>" + disk + "</devices><devices><disk device='disk'><target dev='vda' bus='virtio'/></disk></devices></domain>", " {  } 2/0", false},
		{"text in name", "<domain><name>a<!-- c -->b<x>skipped</x>&amp;<![CDATA[<c>]]>&#x41;</name></domain>", "ab&<c>A {  } 0/0", false},
		{"prefixed children", "<domain xmlns:q='urn:q'><q:name>n</q:name><devices><q:disk device='cdrom'><q:target dev='hdc' bus='ide'/></q:disk></devices></domain>", "n {  } 1/0", false},
		{"bad number", "<domain><devices><disk device='cdrom'><address type='drive' controller='x'/></disk></devices></domain>", "", true},
		{"bad controller", "<domain><devices><controller type='scsi' index='minus one'/></devices></domain>", "", true},
		{"bad skipped value", "<domain><devices><interface type='user'><mtu size='x'/></interface></devices><memory unit='x'>y</memory></domain>", " {  } 0/0", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Read(tt.in)
			var v *domainView
			if err == nil {
				v, err = d.domain()
			}
			if tt.wantError {
				if !errors.Is(err, ErrInvalidXML) || !strings.HasPrefix(err.Error(), "reading domain devices: ") {
					t.Fatalf("err = %v, want a devices error wrapping ErrInvalidXML", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			name := d.Identity().Name
			if got := fmt.Sprintf("%s %v %d/%d", name, v.machineInfo, len(v.Disks), len(v.Controllers)); got != tt.want {
				t.Errorf("view = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEjectedDeviceXML(t *testing.T) {
	tests := []struct {
		name    string
		dev     Device
		want    string
		wantErr bool
	}{
		{name: "sata", dev: Device{Kind: KindCDROM, Bus: BusSATA, Target: "sdb"},
			want: "<disk type='file' device='cdrom'>\n  <driver name='qemu' type='raw'/>\n  <target dev='sdb' bus='sata'/>\n  <readonly/>\n  <alias name='ua-vmpayload'/>\n</disk>"},
		{name: "scsi with address", dev: Device{Bus: BusSCSI, Target: "sda", Address: &DriveAddress{Unit: 2}},
			want: "<disk type='file' device='cdrom'>\n  <driver name='qemu' type='raw'/>\n  <target dev='sda' bus='scsi'/>\n  <readonly/>\n  <alias name='ua-vmpayload'/>\n  <address type='drive' controller='0' bus='0' target='0' unit='2'/>\n</disk>"},
		{name: "disk has no medium", dev: Device{Kind: KindDisk, Bus: BusVirtio, Target: "vdb"}, wantErr: true},
		{name: "no target", dev: Device{Bus: BusIDE}, wantErr: true},
		{name: "virtio cdrom", dev: Device{Bus: BusVirtio, Target: "vdb"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := EjectedDeviceXML(tt.dev)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
			if err == nil {
				p, found, err := FindPayload("<domain><devices>" + got + "</devices></domain>")
				if err != nil || !found || p.Path != "" || p.Target != tt.dev.Target {
					t.Errorf("read back %+v found=%v err=%v", p, found, err)
				}
			}
		})
	}
}

// TestParseNamesTheFault checks that input refused by parse's checks on
// the tree is reported with the strict scan's error, which names the fault.
func TestParseNamesTheFault(t *testing.T) {
	tests := []struct{ in, want string }{
		{"<domain type='a' type='b'/>", "attribute type given twice in <domain>"},
		{"<domain><x a:k='1' a:k='2'/></domain>", "attribute a:k given twice in <x>"},
		{"<domain><devices><disk><address type='drive' bus='0' type='1'/></disk></devices></domain>", "attribute type given twice in <address>"},
		{"<domain><metadata><v:r xmlns:v='urn:x' v:a='1' v:a='2'/></metadata></domain>", "attribute v:a given twice in <v:r>"},
		{"<domain/>x", "text outside the root element"},
		{"<domain></name>", "element <domain> closed by </name>"},
		{"<?xml version='1.0' encoding='ISO-8859-1'?><domain/>", `encoding "ISO-8859-1"`},
	}
	for _, tt := range tests {
		_, _, err := parse(tt.in)
		if err == nil || !errors.Is(err, ErrInvalidXML) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parse(%q) = %v, want an ErrInvalidXML naming %q", tt.in, err, tt.want)
		}
	}
}
