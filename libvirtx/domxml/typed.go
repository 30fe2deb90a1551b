package domxml

import (
	"encoding/xml"
	"fmt"
	"math"

	"github.com/beevik/etree"
	"libvirt.org/go/libvirtxml"
)

// domainView is the part of a domain definition that domxml reads, in
// libvirt's typed model (libvirtxml): the domain type, name, UUID and
// <os><type>, and the <disk> and <controller> devices. Everything else is
// skipped while decoding, so a definition with elements or values that
// libvirtxml does not know (newer libvirt, vendor extensions) is still read.
type domainView struct {
	XMLName xml.Name `xml:"domain"`
	Type    string   `xml:"type,attr"`
	Name    *string  `xml:"name"`
	UUID    *string  `xml:"uuid"`
	OS      struct {
		Type *libvirtxml.DomainOSType `xml:"type"`
	} `xml:"os"`
	// Features holds what Platform reads of <features>: whether <acpi/>
	// is there.
	Features *struct {
		ACPI *struct{} `xml:"acpi"`
	} `xml:"features"`
	// Devices gathers the disks and controllers of every <devices> element,
	// in document order: Disks[i] is the i-th element diskElements returns.
	Devices struct {
		Disks       []libvirtxml.DomainDisk       `xml:"disk"`
		Controllers []libvirtxml.DomainController `xml:"controller"`
	} `xml:"devices"`
}

// readDomain checks domainXML like parse and decodes its domainView.
func readDomain(domainXML string) (*domainView, error) {
	if _, _, err := parse(domainXML); err != nil {
		return nil, err
	}
	return decodeView(domainXML)
}

// decodeView decodes the domainView of a document parse accepted.
func decodeView(domainXML string) (*domainView, error) {
	var v domainView
	if err := xml.Unmarshal([]byte(domainXML), &v); err != nil {
		return nil, fmt.Errorf("reading domain devices: %w: %w", ErrInvalidXML, err)
	}
	return &v, nil
}

// diskElements returns the <disk> elements of the tree in the order of
// domainView.Devices.Disks, or an error when the two do not agree.
func diskElements(root *etree.Element, v *domainView) ([]*etree.Element, error) {
	els := root.FindElements("./devices/disk")
	if len(els) != len(v.Devices.Disks) {
		return nil, fmt.Errorf("matching disks: %w: %d <disk> elements in the tree, %d decoded", ErrInvalidXML, len(els), len(v.Devices.Disks))
	}
	return els, nil
}

// payloadIndexes returns the positions in disks of the drives with alias
// PayloadAlias, in order.
func payloadIndexes(disks []libvirtxml.DomainDisk) []int {
	var idx []int
	for i, d := range disks {
		if d.Alias != nil && d.Alias.Name == PayloadAlias {
			idx = append(idx, i)
		}
	}
	return idx
}

// payloadOf reads the payload drive's path, device and tray state.
func payloadOf(d *libvirtxml.DomainDisk) PayloadDisk {
	var p PayloadDisk
	if d.Source != nil && d.Source.File != nil {
		p.Path = d.Source.File.File
	}
	if t := d.Target; t != nil {
		p.Target = t.Dev
		p.Bus = Bus(t.Bus)
		p.TrayOpen = t.Tray == "open"
	}
	p.Kind = Kind(d.Device)
	if p.Kind == "" {
		p.Kind = KindDisk // libvirt's default device
	}
	p.Address = driveAddress(d.Address)
	return p
}

// driveAddress converts a disk's <address type='drive'>; nil for no address
// or another type. Missing attributes are 0, as in libvirt.
func driveAddress(a *libvirtxml.DomainAddress) *DriveAddress {
	if a == nil || a.Drive == nil {
		return nil
	}
	var da DriveAddress
	for _, f := range []struct {
		src *uint
		dst *int
	}{{a.Drive.Controller, &da.Controller}, {a.Drive.Bus, &da.Bus}, {a.Drive.Target, &da.Target}, {a.Drive.Unit, &da.Unit}} {
		var ok bool
		if *f.dst, ok = uintAttr(f.src); !ok {
			return nil
		}
	}
	return &da
}

// uintAttr converts an optional unsigned attribute libvirtxml decoded: 0
// when absent, false when it does not fit an int32 (libvirt's limit).
func uintAttr(p *uint) (int, bool) {
	if p == nil {
		return 0, true
	}
	if *p > math.MaxInt32 {
		return 0, false
	}
	return int(*p), true
}

// payloadDisk is the typed payload drive: a raw file with
// startupPolicy='optional' (a missing image leaves the drive empty instead
// of failing the start), read-only, with alias PayloadAlias, the device's
// address when it has one, and boot when not nil.
func payloadDisk(imagePath string, dev Device, o options, addr *libvirtxml.DomainAddress, boot *libvirtxml.DomainDeviceBoot) *libvirtxml.DomainDisk {
	src := &libvirtxml.DomainDiskSourceFile{File: imagePath}
	if o.noRelabel {
		src.SecLabel = []libvirtxml.DomainDeviceSecLabel{{Model: "dac", Relabel: "no"}}
	}
	if addr == nil && dev.Address != nil {
		a := dev.Address
		c, b, t, u := uint(a.Controller), uint(a.Bus), uint(a.Target), uint(a.Unit)
		addr = &libvirtxml.DomainAddress{Drive: &libvirtxml.DomainAddressDrive{Controller: &c, Bus: &b, Target: &t, Unit: &u}}
	}
	return &libvirtxml.DomainDisk{
		Device:   string(dev.Kind.orCDROM()),
		Driver:   &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
		Source:   &libvirtxml.DomainDiskSource{File: src, StartupPolicy: "optional"},
		Target:   &libvirtxml.DomainDiskTarget{Dev: dev.Target, Bus: string(dev.Bus)},
		ReadOnly: &libvirtxml.DomainDiskReadOnly{},
		Boot:     boot,
		Serial:   o.serial,
		Alias:    &libvirtxml.DomainAlias{Name: PayloadAlias},
		Address:  addr,
	}
}

// diskElement marshals a typed disk and parses it into an unindented etree
// element, for inserting into a domain's tree.
func diskElement(d *libvirtxml.DomainDisk) (*etree.Element, error) {
	b, err := xml.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("marshalling payload disk: %w", err)
	}
	doc := etree.NewDocument()
	if err := doc.ReadFromBytes(b); err != nil {
		return nil, fmt.Errorf("parsing marshalled payload disk: %w", err)
	}
	el := doc.Root()
	if el == nil {
		return nil, fmt.Errorf("parsing marshalled payload disk: no element")
	}
	doc.RemoveChild(el)
	return el, nil
}
