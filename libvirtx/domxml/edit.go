package domxml

import (
	"fmt"

	"github.com/beevik/etree"
	"libvirt.org/go/libvirtxml"
)

// FindPayload reports the payload drive as FindPayload does.
func (e *Edit) FindPayload() (PayloadDisk, bool, error) {
	v, err := e.domain()
	if err != nil {
		return PayloadDisk{}, false, err
	}
	idx := payloadIndexes(v.Disks)
	if len(idx) == 0 {
		return PayloadDisk{}, false, nil
	}
	return payloadOf(&v.Disks[idx[0]]), true, nil
}

// SetPayloadDrive puts the payload drive holding imagePath (a CD-ROM, or
// a read-only disk with AsDisk) into the document and returns its device
// and whether an existing payload drive was replaced.
//
// An existing payload drive (alias PayloadAlias) keeps its position, bus,
// target, address and <boot> order; only its medium and flags are rewritten,
// and bus is ignored (remove the drive first to move it). Otherwise a new
// drive is added after the last <disk> on the bus ChooseDevice picks.
// Everything else in the document is left as it was.
func (e *Edit) SetPayloadDrive(imagePath string, bus Bus, opts ...Option) (Device, bool, error) {
	if err := checkImagePath(imagePath); err != nil {
		return Device{}, false, fmt.Errorf("setting payload CD-ROM: %w", err)
	}
	v, err := e.domain()
	if err != nil {
		return Device{}, false, err
	}
	o := newOptions(opts)
	root := e.root

	if idx := payloadIndexes(v.Disks); len(idx) > 0 {
		cur := &v.Disks[idx[0]]
		old := cur.el
		dev := payloadOf(cur).Device
		keep := dev.Target != "" && dev.Kind == o.kind && checkBus(dev) == nil && (o.serial == "" || dev.Bus == BusVirtio || bus != BusVirtio)
		var addr *libvirtxml.DomainAddress
		boot, err := typedChild[libvirtxml.DomainDeviceBoot](old, "boot")
		if err != nil {
			return Device{}, false, err
		}
		if keep {
			if addr, err = typedChild[libvirtxml.DomainAddress](old, "address"); err != nil {
				return Device{}, false, err
			}
		} else {
			// A broken drive under our alias, or one of the other kind (a
			// vfat disk replacing a CD-ROM or back): choose afresh in its
			// place.
			if dev, err = chooseDevice(v, bus, o.kind, idx[0]); err != nil {
				return Device{}, false, fmt.Errorf("setting payload drive: %w", err)
			}
		}
		disk, err := diskElement(payloadDisk(imagePath, dev, o, addr, boot))
		if err != nil {
			return Device{}, false, fmt.Errorf("setting payload drive: %w", err)
		}
		indent(disk, leadingIndent(old), indentStep(root))
		parent := old.Parent()
		parent.InsertChildAt(old.Index(), disk)
		parent.RemoveChild(old)
		mergeText(parent)
		e.disksChanged()
		return dev, true, nil
	}

	var dev Device
	if o.at != nil {
		dev, err = atDevice(v, *o.at, o.kind)
	} else {
		dev, err = chooseDevice(v, bus, o.kind, -1)
	}
	if err != nil {
		return Device{}, false, fmt.Errorf("setting payload drive: %w", err)
	}
	disk, err := diskElement(payloadDisk(imagePath, dev, o, nil, nil))
	if err != nil {
		return Device{}, false, fmt.Errorf("setting payload drive: %w", err)
	}
	insertDevice(e.ensureDevices(), disk, indentStep(root))
	e.disksChanged()
	return dev, false, nil
}

// ensureDevices returns the root's <devices>, created when there is none.
func (e *Edit) ensureDevices() *etree.Element {
	devices := e.root.SelectElement("devices")
	if devices == nil {
		devices = e.root.CreateElement("devices")
		e.changed = true
	}
	return devices
}

// disksChanged records an edit of the <disk> elements: the device view no
// longer matches the tree.
func (e *Edit) disksChanged() {
	e.changed = true
	e.view = nil
}

// RemovePayloadDrive removes every drive with alias PayloadAlias and
// reports whether there was one.
func (e *Edit) RemovePayloadDrive() (bool, error) {
	v, err := e.domain()
	if err != nil {
		return false, err
	}
	removed := false
	for _, i := range payloadIndexes(v.Disks) {
		disk := v.Disks[i].el
		parent := disk.Parent()
		i := disk.Index()
		// Drop the indentation that preceded the element too.
		if i > 0 {
			if cd, ok := parent.Child[i-1].(*etree.CharData); ok && cd.IsWhitespace() {
				parent.RemoveChildAt(i - 1)
			}
		}
		parent.RemoveChild(disk)
		mergeText(parent)
		removed = true
	}
	if removed {
		e.disksChanged()
	}
	return removed, nil
}

// SetGuestChannel adds a unix virtio channel named name (see channel.go)
// to the document; added is false, and the document unchanged, when it has
// a channel of that name already.
func (e *Edit) SetGuestChannel(name string) (bool, error) {
	if name == "" {
		return false, fmt.Errorf("adding the guest channel: no channel name")
	}
	if len(findChannels(e.root, name)) > 0 {
		return false, nil
	}
	devices := e.ensureDevices()
	insertDevice(devices, guestChannel(name), indentStep(e.root))
	e.changed = true
	return true, nil
}

// RemoveGuestChannel removes the virtio channels named name and reports
// whether there were any.
func (e *Edit) RemoveGuestChannel(name string) (bool, error) {
	chs := findChannels(e.root, name)
	if len(chs) == 0 {
		return false, nil
	}
	for _, ch := range chs {
		removeWithIndent(ch.Parent(), ch)
	}
	e.changed = true
	return true, nil
}

// SetMetadata puts elementXML (one element in namespace namespaceURI, e.g. a
// vmpayload recipe) into the domain's <metadata>, replacing every element
// of that namespace already there and creating <metadata> when the domain
// has none. libvirt keeps one element per namespace. Everything else in the
// document is left as it was.
func (e *Edit) SetMetadata(namespaceURI, elementXML string) error {
	edoc := etree.NewDocument()
	if err := edoc.ReadFromString(elementXML); err != nil {
		return fmt.Errorf("setting domain metadata: parsing the element: %w", err)
	}
	el := edoc.Root()
	if el == nil || el.NamespaceURI() != namespaceURI {
		return fmt.Errorf("setting domain metadata: the element is not in namespace %q", namespaceURI)
	}
	md := e.root.SelectElement("metadata")
	if md == nil {
		md = etree.NewElement("metadata")
		insertMetadata(e.root, md)
	}
	removeNamespace(md, namespaceURI)
	indentChild(md, el)
	e.changed = true
	return nil
}

// RemoveMetadata removes the elements in namespace namespaceURI from the
// domain's <metadata> (and <metadata> itself when nothing else is left in
// it) and reports whether anything was removed.
func (e *Edit) RemoveMetadata(namespaceURI string) (bool, error) {
	md := e.root.SelectElement("metadata")
	if md == nil || !removeNamespace(md, namespaceURI) {
		return false, nil
	}
	if len(md.ChildElements()) == 0 {
		removeWithIndent(e.root, md)
	}
	e.changed = true
	return true, nil
}

// newText is a text node flagged as whitespace when it is, as the parser
// flags the text it reads (etree.NewText does not): the indentation an
// edit inserts must look to the next edit of the same tree as it would
// after a serialisation and a new parse (CharData.IsWhitespace).
func newText(s string) *etree.CharData {
	t := etree.NewText("")
	t.SetData(s)
	return t
}

// mergeText joins el's adjacent text children (not CDATA sections) into
// one, as they are after a serialisation and a new parse: an insertion or
// removal next to text must leave the tree the next edit of the session
// sees as the chained string calls would see it.
func mergeText(el *etree.Element) {
	for i := 1; i < len(el.Child); {
		prev, ok1 := el.Child[i-1].(*etree.CharData)
		cur, ok2 := el.Child[i].(*etree.CharData)
		if ok1 && ok2 && !prev.IsCData() && !cur.IsCData() {
			prev.SetData(prev.Data + cur.Data)
			el.RemoveChildAt(i)
			continue
		}
		i++
	}
}
