package domxml

import (
	"encoding/xml"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/beevik/etree"
	"libvirt.org/go/libvirtxml"
)

// domainView is what domxml reads of a definition's devices, read from
// the Document's tree: the domain type and <os><type>, and the <disk>
// and <controller> devices of every <devices> element in document order,
// with the values libvirt's typed model (libvirtxml) gives them. Only
// those values are read, so a definition with elements or values that
// libvirtxml does not know (newer libvirt, vendor extensions) is still
// read; a value read that is not what libvirtxml takes (a drive address
// or controller index that is not a number) is an error.
type domainView struct {
	machineInfo
	Disks       []diskView
	Controllers []controllerView
}

// diskView is one <disk> as libvirtxml.DomainDisk reads it, as far as
// domxml looks at it.
type diskView struct {
	el *etree.Element
	// Device is the device attribute ("" when absent).
	Device string
	// File is the source file of a file disk (type 'file' or none).
	File string
	// HasTarget reports a <target>; Dev, Bus and Tray are its attributes.
	HasTarget      bool
	Dev, Bus, Tray string
	Alias          string
	Address        *DriveAddress // from <address type='drive'>, nil for none, another type or out of range
}

// controllerView is one <controller>: type, index (ok false when it does
// not fit an int32) and model.
type controllerView struct {
	Type, Model string
	Index       int
	IndexOK     bool
}

// domain returns the view of the document as it is now: read on first
// need, and again after an edit of the disks.
func (d *Document) domain() (*domainView, error) {
	if d.view != nil {
		return d.view, nil
	}
	v := &domainView{machineInfo: d.machine()}
	for _, devs := range d.root.ChildElements() {
		if devs.Tag != "devices" {
			continue
		}
		for _, el := range devs.ChildElements() {
			switch el.Tag {
			case "disk":
				dv, err := readDisk(el)
				if err != nil {
					return nil, fmt.Errorf("reading domain devices: %w: %w", ErrInvalidXML, err)
				}
				v.Disks = append(v.Disks, dv)
			case "controller":
				cv, err := readController(el)
				if err != nil {
					return nil, fmt.Errorf("reading domain devices: %w: %w", ErrInvalidXML, err)
				}
				v.Controllers = append(v.Controllers, cv)
			}
		}
	}
	d.view = v
	return v, nil
}

// readDisk reads a <disk> as libvirtxml does: the source file only of a
// disk of type 'file' (the default), each attribute from the last element
// that has it.
func readDisk(el *etree.Element) (diskView, error) {
	dv := diskView{el: el, Device: attrValue(el, "device")}
	typ, ok := firstAttr(el, "type")
	file := !ok || typ == "file"
	for _, c := range el.ChildElements() {
		switch c.Tag {
		case "source":
			if file {
				dv.File = attrOr(c, "file", dv.File)
			}
		case "target":
			dv.HasTarget = true
			dv.Dev = attrOr(c, "dev", dv.Dev)
			dv.Bus = attrOr(c, "bus", dv.Bus)
			dv.Tray = attrOr(c, "tray", dv.Tray)
		case "alias":
			dv.Alias = attrOr(c, "name", dv.Alias)
		case "address":
			if t, _ := firstAttr(c, "type"); t != "drive" {
				continue
			}
			var a [4]int
			ok := true
			for i, k := range []string{"controller", "bus", "target", "unit"} {
				s, present := lookupAttr(c, k)
				if !present {
					continue
				}
				n, err := strconv.ParseUint(s, 10, 64)
				if err != nil {
					return diskView{}, err
				}
				if n > math.MaxInt32 {
					ok = false
				}
				a[i] = int(n)
			}
			dv.Address = nil
			if ok {
				dv.Address = &DriveAddress{Controller: a[0], Bus: a[1], Target: a[2], Unit: a[3]}
			}
		case "boot":
			if s, ok := lookupAttr(c, "order"); ok && strings.TrimSpace(s) != "" {
				if _, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64); err != nil {
					return diskView{}, err
				}
			}
		}
	}
	return dv, nil
}

// readController reads a <controller> as libvirtxml does: one without a
// type is refused, an empty index is 0.
func readController(el *etree.Element) (controllerView, error) {
	typ, ok := firstAttr(el, "type")
	if !ok {
		return controllerView{}, fmt.Errorf("Missing 'type' attribute on domain controller")
	}
	cv := controllerView{Type: typ, Model: attrValue(el, "model")}
	if s, ok := lookupAttr(el, "index"); ok {
		var n uint64
		if s = strings.TrimSpace(s); s != "" {
			var err error
			if n, err = strconv.ParseUint(s, 10, strconv.IntSize); err != nil {
				return controllerView{}, err
			}
		}
		cv.Index, cv.IndexOK = int(n), n <= math.MaxInt32
	}
	return cv, nil
}

// firstAttr returns the value of el's first attribute named key (any
// prefix), as libvirtxml reads a type attribute.
func firstAttr(el *etree.Element, key string) (string, bool) {
	for _, a := range el.Attr {
		if a.Key == key {
			return a.Value, true
		}
	}
	return "", false
}

// payloadIndexes returns the positions in disks of the drives with alias
// PayloadAlias, in order.
func payloadIndexes(disks []diskView) []int {
	var idx []int
	for i, d := range disks {
		if d.Alias == PayloadAlias {
			idx = append(idx, i)
		}
	}
	return idx
}

// payloadOf reads the payload drive's path, device and tray state.
func payloadOf(d *diskView) PayloadDisk {
	p := PayloadDisk{Path: d.File}
	if d.HasTarget {
		p.Target = d.Dev
		p.Bus = Bus(d.Bus)
		p.TrayOpen = d.Tray == "open"
	}
	p.Kind = Kind(d.Device)
	if p.Kind == "" {
		p.Kind = KindDisk // libvirt's default device
	}
	p.Address = d.Address
	return p
}

// typedChild reads the <tag> children of a disk in libvirt's typed model
// (its <address> and <boot>, which a payload drive rewritten in place
// keeps): each is decoded by encoding/xml, in document order into one
// value, as a decoder of the whole disk does; nil when there is none.
func typedChild[T any](disk *etree.Element, tag string) (*T, error) {
	var v *T
	for _, c := range disk.ChildElements() {
		if c.Tag != tag {
			continue
		}
		if v == nil {
			v = new(T)
		}
		if err := decodeElement(c, v); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// decodeElement decodes the one element el into v with encoding/xml.
func decodeElement(el *etree.Element, v any) error {
	doc := etree.NewDocument()
	doc.SetRoot(el.Copy())
	s, err := doc.WriteToString()
	if err != nil {
		return err
	}
	if err := xml.Unmarshal([]byte(s), v); err != nil {
		return fmt.Errorf("reading domain devices: %w: %w", ErrInvalidXML, err)
	}
	return nil
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
