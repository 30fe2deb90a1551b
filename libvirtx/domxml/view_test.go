package domxml

import (
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"
)

// libvirtxmlView is the part of a definition domxml read with
// encoding/xml into libvirt's typed model before the Document: the
// oracle TestViewMatchesLibvirtxml compares the tree's reading with.
type libvirtxmlView struct {
	XMLName xml.Name `xml:"domain"`
	Type    string   `xml:"type,attr"`
	Name    *string  `xml:"name"`
	UUID    *string  `xml:"uuid"`
	OS      struct {
		Type *libvirtxml.DomainOSType `xml:"type"`
	} `xml:"os"`
	Features *struct {
		ACPI *struct{} `xml:"acpi"`
	} `xml:"features"`
	Devices struct {
		Disks       []libvirtxml.DomainDisk       `xml:"disk"`
		Controllers []libvirtxml.DomainController `xml:"controller"`
	} `xml:"devices"`
}

// summary writes what domxml reads of a definition in one line per part.
func (v *libvirtxmlView) summary() string {
	var b strings.Builder
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	mi := machineInfo{Type: v.Type}
	if t := v.OS.Type; t != nil {
		mi.Arch, mi.Machine = t.Arch, t.Machine
	}
	fmt.Fprintf(&b, "id %q %q %q acpi %v machine %v\n", v.Type, str(v.Name), str(v.UUID), v.Features != nil && v.Features.ACPI != nil, mi)
	for _, d := range v.Devices.Disks {
		dv := diskView{Device: d.Device}
		if d.Source != nil && d.Source.File != nil {
			dv.File = d.Source.File.File
		}
		if t := d.Target; t != nil {
			dv.HasTarget, dv.Dev, dv.Bus, dv.Tray = true, t.Dev, t.Bus, t.Tray
		}
		if d.Alias != nil {
			dv.Alias = d.Alias.Name
		}
		if a := d.Address; a != nil && a.Drive != nil {
			var da DriveAddress
			ok := true
			for _, f := range []struct {
				src *uint
				dst *int
			}{{a.Drive.Controller, &da.Controller}, {a.Drive.Bus, &da.Bus}, {a.Drive.Target, &da.Target}, {a.Drive.Unit, &da.Unit}} {
				if f.src != nil {
					ok = ok && *f.src <= 1<<31-1
					*f.dst = int(*f.src)
				}
			}
			if ok {
				dv.Address = &da
			}
		}
		b.WriteString(diskLine(dv))
	}
	for _, c := range v.Devices.Controllers {
		cv := controllerView{Type: c.Type, Model: c.Model}
		if c.Index != nil {
			cv.Index, cv.IndexOK = int(*c.Index), *c.Index <= 1<<31-1
		}
		fmt.Fprintf(&b, "controller %+v\n", cv)
	}
	return b.String()
}

func diskLine(d diskView) string {
	d.el = nil
	a := "none"
	if d.Address != nil {
		a = fmt.Sprintf("%+v", *d.Address)
	}
	d.Address = nil
	return fmt.Sprintf("disk %+v addr %s\n", d, a)
}

// treeSummary is summary for the Document's reading.
func treeSummary(d *Document) (string, error) {
	v, err := d.domain()
	if err != nil {
		return "", err
	}
	id := d.Identity()
	var b strings.Builder
	fmt.Fprintf(&b, "id %q %q %q acpi %v machine %v\n", id.Type, id.Name, id.UUID, d.Platform().ACPI, v.machineInfo)
	for _, dv := range v.Disks {
		b.WriteString(diskLine(dv))
	}
	for _, c := range v.Controllers {
		fmt.Fprintf(&b, "controller %+v\n", c)
	}
	return b.String(), nil
}

// viewInputs are unusual forms for TestViewMatchesLibvirtxml and the
// seeds of FuzzViewMatchesLibvirtxml.
var viewInputs = map[string]string{
	"prefixed":       "<domain xmlns:q='urn:q'><q:name>n</q:name><devices><q:disk device='cdrom'><q:target dev='hdc' bus='ide'/></q:disk></devices></domain>",
	"two devices":    "<domain><devices><disk device='cdrom'><target dev='sdb' bus='sata'/></disk></devices><devices><disk device='disk'><target dev='vda' bus='virtio'/></disk></devices></domain>",
	"block source":   "<domain><devices><disk type='block' device='disk'><source dev='/dev/sdz' file='/x'/><target dev='sda'/></disk></devices></domain>",
	"no type":        "<domain><devices><disk device='cdrom'><source file='/p.iso'/><target dev='hdc'/><alias name='ua-vmpayload'/></disk></devices></domain>",
	"two targets":    "<domain><devices><disk><target dev='sda'/><target bus='scsi'/></disk></devices></domain>",
	"big address":    "<domain><devices><disk><address type='drive' controller='4294967296' unit='1'/></disk></devices></domain>",
	"pci address":    "<domain><devices><disk><address type='pci' domain='0x0000' bus='0x00' slot='0x05' function='0x0'/></disk></devices></domain>",
	"index spaces":   "<domain><devices><controller type='scsi' index=' 2 ' model='virtio-scsi'/><controller type='sata' index=''/><controller type='ide'/></devices></domain>",
	"two features":   "<domain><features><acpi/></features><features><apic/></features></domain>",
	"two os types":   "<domain><os><type arch='s390x'>hvm</type></os><os><type machine='m'>hvm</type></os></domain>",
	"text in name":   "<domain><name>a<!-- c -->b<x>skipped</x>&amp;<![CDATA[<c>]]>&#x41;</name><uuid> 6f1c1a8e-55b0-4a4e-9d1e-3c1f0b8a9e01 </uuid></domain>",
	"two names":      "<domain><name>a</name><name>b</name></domain>",
	"ns attribute":   "<domain xmlns:q='urn:q' q:type='kvm'><devices><disk q:device='cdrom'><target q:dev='hdc'/></disk></devices></domain>",
	"xmlns attrs":    "<domain xmlns:type='urn:t'><devices><disk xmlns:type='urn:d' xmlns:device='urn:c'><target dev='sda' xmlns:bus='urn:b'/></disk><controller xmlns:type='urn:x' xmlns:index='7'/></devices></domain>",
	"boot and addrs": "<domain><devices><disk type='file' device='cdrom'><boot order='2'/><address type='drive' controller='0' bus='1' target='0' unit='1'/></disk></devices></domain>",
}

// compareView reports where the Document's reading of x differs from
// libvirtxml's; skip is true when libvirtxml refuses x.
func compareView(x string) (diff string, skip bool, err error) {
	var v libvirtxmlView
	if xml.Unmarshal([]byte(x), &v) != nil {
		return "", true, nil
	}
	d, err := Read(x)
	if err != nil {
		return "", false, err
	}
	got, err := treeSummary(d)
	if err != nil {
		return "", false, err
	}
	if want := v.summary(); got != want {
		return fmt.Sprintf("the tree reads\n%s\nlibvirtxml read\n%s", got, want), false, nil
	}
	return "", false, nil
}

// FuzzViewMatchesLibvirtxml: for any definition libvirtxml's decoder and
// Read both accept, the tree reads what the decoder read.
func FuzzViewMatchesLibvirtxml(f *testing.F) {
	for _, x := range viewInputs {
		f.Add(x)
	}
	f.Fuzz(func(t *testing.T, x string) {
		diff, skip, err := compareView(x)
		if skip || err != nil {
			return // refused by libvirtxml, or by the stricter parse
		}
		if diff != "" {
			t.Errorf("%q: %s", x, diff)
		}
	})
}

// TestViewMatchesLibvirtxml: what the Document reads of every definition
// in testdata (inputs, goldens, live XML) and of unusual forms is what
// libvirtxml's decoder read of them before the Document.
func TestViewMatchesLibvirtxml(t *testing.T) {
	inputs := map[string]string{}
	for k, v := range viewInputs {
		inputs[k] = v
	}
	files, _ := filepath.Glob("testdata/*.xml")
	golden, _ := filepath.Glob("testdata/golden/*.xml")
	for _, f := range append(files, golden...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inputs[f] = string(b)
	}
	for name, x := range inputs {
		if !strings.Contains(x, "<domain") {
			continue // a golden device element, not a domain
		}
		diff, skip, err := compareView(x)
		switch {
		case skip:
			t.Fatalf("%s: libvirtxml refuses it", name)
		case err != nil:
			t.Fatalf("%s: %v", name, err)
		case diff != "":
			t.Errorf("%s: %s", name, diff)
		}
	}
}

// TestKeptDriveKeepsAddressAndBoot: a payload drive rewritten in place
// keeps its <address> of any type and its <boot>, written as libvirt
// writes them (decoded from the drive's own elements).
func TestKeptDriveKeepsAddressAndBoot(t *testing.T) {
	x := "<domain><devices><disk type='file' device='disk'><target dev='vdb' bus='virtio'/><boot order='2' loadparm='X'/><alias name='ua-vmpayload'/>" +
		"<address type='pci' domain='0x0000' bus='0x00' slot='0x07' function='0x0' multifunction='on'/></disk></devices></domain>"
	out, _, replaced, err := SetPayloadDrive(x, "/new.img", BusAuto, AsDisk())
	if err != nil || !replaced {
		t.Fatalf("replaced %v, %v", replaced, err)
	}
	for _, want := range []string{"<boot order='2' loadparm='X'/>", "<address type='pci' domain='0x0000' bus='0x00' slot='0x07' function='0x0' multifunction='on'/>", "<source file='/new.img' startupPolicy='optional'/>"} {
		if !strings.Contains(out, want) {
			t.Errorf("%s not in\n%s", want, out)
		}
	}
	bad := strings.Replace(x, "slot='0x07'", "slot='seven'", 1)
	if _, _, _, err := SetPayloadDrive(bad, "/new.img", BusAuto, AsDisk()); !errors.Is(err, ErrInvalidXML) {
		t.Errorf("a bad kept address: %v, want ErrInvalidXML", err)
	}
}
