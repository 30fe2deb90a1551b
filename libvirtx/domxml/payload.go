package domxml

import (
	"fmt"
	"strings"

	"github.com/beevik/etree"
	"libvirt.org/go/libvirtxml"
)

// Bus is the bus the payload drive is attached to.
type Bus string

// Buses for the payload drive. BusAuto lets ChooseDevice decide. BusVirtio
// is only used for KindDisk drives.
const (
	BusAuto   Bus = "auto"
	BusSATA   Bus = "sata"
	BusIDE    Bus = "ide"
	BusSCSI   Bus = "scsi"
	BusVirtio Bus = "virtio"
	// BusFDC is the floppy controller, the only bus of KindFloppy drives.
	BusFDC Bus = "fdc"
)

// Kind is what the payload drive presents to the guest: libvirt's <disk
// device=...>.
type Kind string

const (
	// KindCDROM is a CD-ROM drive, for ISO9660 payloads: its medium can be
	// changed while the domain runs. The zero Kind means KindCDROM.
	KindCDROM Kind = "cdrom"
	// KindDisk is a read-only disk, for vfat payloads: Linux does not mount
	// a FAT filesystem with 512-byte sectors from a CD-ROM (2048-byte
	// blocks: "FAT-fs (sr0): logical sector size too small for device"),
	// so, like Nova's vfat config drive, it is a disk. QEMU has no
	// read-only IDE or SATA disks, so its bus is SCSI (when the domain has
	// a SCSI controller) or virtio. A disk has no medium to change.
	KindDisk Kind = "disk"
	// KindFloppy is a floppy drive on the floppy controller (bus fdc,
	// target fda or fdb), for sysprep answer files on a 1.44 MB floppy
	// image, as oVirt gives them to Windows. libvirt 9.0 accepts it on
	// i440FX ("pc", whose chipset has the controller) and on Q35, for
	// which it adds an isa-fdc device; the drive is read-only
	// (write-protected medium). A floppy is never hot-plugged: it is set
	// in the definition of a stopped domain.
	KindFloppy Kind = "floppy"
)

func (k Kind) orCDROM() Kind {
	if k == "" {
		return KindCDROM
	}
	return k
}

// ParseBus parses a bus override from configuration or a job: "auto" (or
// ""), "sata", "ide" or "scsi", case-insensitively.
func ParseBus(s string) (Bus, error) {
	switch b := Bus(strings.ToLower(strings.TrimSpace(s))); b {
	case "", BusAuto:
		return BusAuto, nil
	case BusSATA, BusIDE, BusSCSI:
		return b, nil
	}
	return "", fmt.Errorf("parsing CD-ROM bus %q: want auto, sata, ide or scsi", s)
}

// Hotpluggable reports whether QEMU can add a drive on this bus to a
// running domain: SCSI (on a virtio-scsi or other SCSI controller) and
// virtio can; on IDE and SATA libvirt fails with "Bus ... does not support
// hotplugging" (an internal error, not ERR_NO_SUPPORT), so check before
// trying.
func (b Bus) Hotpluggable() bool { return b == BusSCSI || b == BusVirtio }

// DriveAddress is a libvirt <address type='drive'> of a disk.
type DriveAddress struct {
	Controller, Bus, Target, Unit int
}

// Device says what the payload drive is and where it sits: its kind, its
// bus, its target device name ("hdc", "sda", "vdb") and, when chosen
// explicitly (SCSI on a chosen controller) or kept from an existing drive,
// its drive address.
type Device struct {
	Kind    Kind
	Bus     Bus
	Target  string
	Address *DriveAddress
}

// PayloadDisk is the payload drive found in a domain: a CD-ROM (ISO
// payloads) or a read-only disk (vfat payloads, see Kind).
type PayloadDisk struct {
	// Path is the source file, "" when the drive is empty (ejected, or the
	// file was missing at start with startupPolicy='optional').
	Path string
	Device
	// TrayOpen is the live definition's tray='open' on the target: libvirt
	// believes the drive's tray is open (only live XML carries it).
	TrayOpen bool
}

// Option changes how the payload drive is written.
type Option func(*options)

type options struct {
	noRelabel bool
	kind      Kind
	at        *Device
	serial    string
}

// AtDevice makes SetPayloadDrive put a new payload drive (the definition
// has none) at dev, its kind, bus, target and drive address, instead of
// choosing one: for writing back into the persistent definition a drive the
// running domain still has (an ejected IDE or SATA CD-ROM, which cannot be
// unplugged). dev's target must be free in the definition.
func AtDevice(dev Device) Option {
	return func(o *options) { o.at = &dev }
}

// AsDisk makes the payload drive a read-only disk (KindDisk) instead of a
// CD-ROM, for vfat payloads.
func AsDisk() Option {
	return func(o *options) { o.kind = KindDisk }
}

// AsFloppy makes the payload drive a floppy drive (KindFloppy) instead of a
// CD-ROM, for floppy images.
func AsFloppy() Option {
	return func(o *options) { o.kind = KindFloppy }
}

// WithSerial gives the payload drive a <serial> (a disk's serial number,
// which the guest sees as /dev/disk/by-id/virtio-<serial> on virtio). An
// Ignition config delivered as a block device is a raw virtio disk whose
// serial is "ignition" (IgnitionSerial). A payload drive already there is
// kept in place only when it is on bus virtio.
func WithSerial(serial string) Option {
	return func(o *options) { o.serial = serial }
}

// IgnitionSerial is the serial of the disk Ignition's qemu platform reads
// on s390x and ppc64le (/dev/disk/by-id/virtio-ignition).
const IgnitionSerial = "ignition"

func newOptions(opts []Option) options {
	o := options{kind: KindCDROM}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithoutDACRelabel adds <seclabel model='dac' relabel='no'/> to the drive's
// source, as oVirt does for its payload, so libvirt leaves the image's owner
// alone. The caller must then make the image readable by the QEMU user
// itself (e.g. mode 0640, group kvm).
//
// It is not the default: with relabelling, libvirt's DAC driver chowns the
// image to the QEMU user while the domain runs and restores the owner
// afterwards (also on a live media change), so images can stay 0600 root at
// rest and no group setup is needed on the host. The directories on the path
// must be traversable by the QEMU user either way.
func WithoutDACRelabel() Option {
	return func(o *options) { o.noRelabel = true }
}

// FindPayload reports the payload drive of a domain (the disk with alias
// PayloadAlias).
func FindPayload(domainXML string) (PayloadDisk, bool, error) {
	d, err := Read(domainXML)
	if err != nil {
		return PayloadDisk{}, false, err
	}
	return d.FindPayload()
}

// ChooseDevice picks bus and target for a new payload drive: a CD-ROM, or a
// disk with the AsDisk option (other options are ignored).
//
// A disk goes on SCSI when bus is BusSCSI, or BusAuto and the domain has a
// SCSI controller, and on virtio otherwise; ide and sata are refused (QEMU
// has no read-only disks there). Its target is the first free "sdX" or
// "vdX". What follows is about CD-ROMs.
//
// With BusAuto the bus is "scsi" when the domain has a <controller
// type='scsi'> (hot-pluggable), else "sata" on Q35 machines (which have no
// IDE), else "ide" on i440FX ("pc") machines or x86 domains without a machine
// type. Other machines use sata or ide if the domain has such a controller
// and scsi otherwise (libvirt adds a SCSI controller), like Nova.
//
// An explicit bus is honoured, except that ide on Q35 and sata on i440FX are
// refused because QEMU has no such bus there.
//
// The target is the first name ("hdX" for ide, "sdX" for sata and scsi) not
// used by any other disk and whose implied drive address is free. On SCSI the
// drive gets an explicit address on the virtio-scsi controller (the
// lowest-indexed one; any SCSI controller if none is virtio-scsi).
func (d *Document) ChooseDevice(bus Bus, opts ...Option) (Device, error) {
	v, err := d.domain()
	if err != nil {
		return Device{}, err
	}
	return chooseDevice(v, bus, newOptions(opts).kind, -1)
}

// controllers returns the indexes of controllers of a type, in order, and the
// index of the first one whose model is preferred ("" model means any).
func controllers(v *domainView, typ, preferModel string) (idx []int, preferred int) {
	preferred = -1
	for _, c := range v.Controllers {
		if c.Type != typ || !c.IndexOK {
			continue
		}
		i := c.Index
		idx = append(idx, i)
		if preferModel != "" && c.Model == preferModel && (preferred < 0 || i < preferred) {
			preferred = i
		}
	}
	return idx, preferred
}

func chooseBus(v *domainView, bus Bus, kind Kind) (Bus, error) {
	if kind == KindFloppy {
		// the one bus a floppy drive has; the configured CD-ROM bus does
		// not apply
		return BusFDC, nil
	}
	if kind == KindDisk {
		switch bus {
		case BusSCSI, BusVirtio:
			return bus, nil
		case BusAuto, "":
			if scsi, _ := controllers(v, "scsi", ""); len(scsi) > 0 {
				return BusSCSI, nil
			}
			return BusVirtio, nil
		}
		return "", fmt.Errorf("choosing payload disk bus: %q has no read-only disks in QEMU; use scsi, virtio or auto", bus)
	}
	mi := v.machineInfo
	switch bus {
	case BusIDE:
		if IsQ35(mi.Machine) {
			return "", fmt.Errorf("choosing CD-ROM bus: machine %q has no IDE bus", mi.Machine)
		}
		return bus, nil
	case BusSATA:
		if IsI440FX(mi.Machine) {
			return "", fmt.Errorf("choosing CD-ROM bus: machine %q has no SATA bus", mi.Machine)
		}
		return bus, nil
	case BusSCSI:
		return bus, nil
	case BusAuto, "":
	case BusVirtio:
		return "", fmt.Errorf("choosing CD-ROM bus: QEMU has no virtio CD-ROMs; use auto, sata, ide or scsi")
	default:
		return "", fmt.Errorf("choosing CD-ROM bus: unknown bus %q", bus)
	}
	if scsi, _ := controllers(v, "scsi", ""); len(scsi) > 0 {
		return BusSCSI, nil
	}
	switch {
	case IsQ35(mi.Machine):
		return BusSATA, nil
	case IsI440FX(mi.Machine), mi.Machine == "" && isX86(mi.Arch):
		return BusIDE, nil
	}
	if sata, _ := controllers(v, "sata", ""); len(sata) > 0 {
		return BusSATA, nil
	}
	if ide, _ := controllers(v, "ide", ""); len(ide) > 0 {
		return BusIDE, nil
	}
	return BusSCSI, nil
}

// chooseDevice picks the device; skip is the index in v.Devices.Disks of a
// disk to ignore (being replaced), or -1.
func chooseDevice(v *domainView, bus Bus, kind Kind, skip int) (Device, error) {
	kind = kind.orCDROM()
	dev, err := chooseTarget(v, bus, kind, skip)
	dev.Kind = kind
	return dev, err
}

func chooseTarget(v *domainView, bus Bus, kind Kind, skip int) (Device, error) {
	b, err := chooseBus(v, bus, kind)
	if err != nil {
		return Device{}, err
	}
	usedTargets := map[string]bool{}
	usedAddr := map[DriveAddress]bool{}
	for i, disk := range v.Disks {
		if i == skip || !disk.HasTarget {
			continue
		}
		dev := disk.Dev
		usedTargets[dev] = true
		dbus := Bus(disk.Bus)
		if dbus == "" {
			// libvirt derives the bus from the name when it is absent.
			dbus = map[string]Bus{"hd": BusIDE, "sd": BusSCSI, "vd": BusVirtio, "fd": BusFDC}[dev[:min(2, len(dev))]]
		}
		if dbus != b {
			continue
		}
		if a := disk.Address; a != nil {
			usedAddr[*a] = true
		} else if a, ok := impliedAddress(b, dev); ok {
			usedAddr[a] = true
		}
	}

	switch b {
	case BusVirtio:
		// Each virtio disk is its own PCI device: only the name must be free.
		for i := 0; ; i++ {
			if name := targetName("vd", i); !usedTargets[name] {
				return Device{Bus: b, Target: name}, nil
			}
		}
	case BusFDC, BusIDE, BusSATA:
		// One floppy controller with two drives (units 0 and 1); i440FX
		// has one IDE controller with two buses of two units; a SATA
		// controller has six ports.
		sata, _ := controllers(v, "sata", "")
		prefix := map[Bus]string{BusFDC: "fd", BusIDE: "hd", BusSATA: "sd"}[b]
		n := map[Bus]int{BusFDC: 2, BusIDE: 4, BusSATA: 6 * max(len(sata), 1)}[b]
		for i := 0; i < n; i++ {
			name := targetName(prefix, i)
			if a, _ := impliedAddress(b, name); !usedTargets[name] && !usedAddr[a] {
				return Device{Bus: b, Target: name}, nil
			}
		}
		switch b {
		case BusFDC:
			return Device{}, fmt.Errorf("choosing floppy target: %w: fda and fdb are taken", ErrNoFreeTarget)
		case BusIDE:
			return Device{}, fmt.Errorf("choosing IDE target: %w: hda-hdd are taken", ErrNoFreeTarget)
		}
		return Device{}, fmt.Errorf("choosing SATA target: %w: all %d ports are taken", ErrNoFreeTarget, n)
	}

	// SCSI: explicit address on the preferred controller.
	scsi, virtio := controllers(v, "scsi", "virtio-scsi")
	ctrl, maxUnit := 0, 7
	switch {
	case virtio >= 0:
		ctrl, maxUnit = virtio, 256
	case len(scsi) > 0:
		ctrl = scsi[0]
		for _, i := range scsi[1:] {
			ctrl = min(ctrl, i)
		}
	}
	var dev Device
	for u := 0; u < maxUnit; u++ {
		if !usedAddr[DriveAddress{Controller: ctrl, Unit: u}] {
			dev.Address = &DriveAddress{Controller: ctrl, Unit: u}
			break
		}
	}
	if dev.Address == nil {
		return Device{}, fmt.Errorf("choosing SCSI unit on controller %d: %w", ctrl, ErrNoFreeTarget)
	}
	for i := 0; ; i++ {
		name := targetName("sd", i)
		if !usedTargets[name] {
			dev.Bus, dev.Target = b, name
			return dev, nil
		}
	}
}

// impliedAddress is the drive address libvirt assigns to a disk without an
// explicit <address>, derived from its target name.
func impliedAddress(b Bus, dev string) (DriveAddress, bool) {
	prefix := map[Bus]string{BusIDE: "hd", BusSATA: "sd", BusSCSI: "sd", BusFDC: "fd"}[b]
	i, ok := targetIndex(dev, prefix)
	switch {
	case prefix == "" || !ok:
		return DriveAddress{}, false
	case b == BusIDE:
		return DriveAddress{Controller: i / 4, Bus: (i % 4) / 2, Unit: i % 2}, true
	case b == BusSATA:
		return DriveAddress{Controller: i / 6, Unit: i % 6}, true
	case b == BusSCSI:
		return DriveAddress{Controller: i / 7, Unit: i % 7}, true
	}
	return DriveAddress{Unit: i}, true
}

// checkBus reports whether a drive of dev's kind can sit on dev's bus.
func checkBus(dev Device) error {
	switch dev.Kind.orCDROM() {
	case KindCDROM:
		switch dev.Bus {
		case BusIDE, BusSATA, BusSCSI:
			return nil
		}
		return fmt.Errorf("unsupported CD-ROM bus %q", dev.Bus)
	case KindDisk:
		switch dev.Bus {
		case BusSCSI, BusVirtio:
			return nil
		}
		return fmt.Errorf("unsupported payload disk bus %q (QEMU has read-only disks on scsi and virtio only)", dev.Bus)
	case KindFloppy:
		if dev.Bus == BusFDC {
			return nil
		}
		return fmt.Errorf("unsupported floppy bus %q (a floppy drive sits on fdc)", dev.Bus)
	}
	return fmt.Errorf("unsupported payload drive kind %q", dev.Kind)
}

// indent lays out el's descendants with one more step of step than base.
func indent(el *etree.Element, base, step string) {
	kids := el.ChildElements()
	if len(kids) == 0 {
		return
	}
	for _, k := range kids {
		el.InsertChildAt(k.Index(), newText("\n"+base+step))
		indent(k, base+step, step)
	}
	el.AddChild(newText("\n" + base))
}

// PayloadDeviceXML renders the payload drive as a single <disk> element for
// Domain.UpdateDeviceFlags (media change) or AttachDeviceFlags (hotplug).
func PayloadDeviceXML(imagePath string, dev Device, opts ...Option) (string, error) {
	if err := checkImagePath(imagePath); err != nil {
		return "", fmt.Errorf("rendering payload disk: %w", err)
	}
	if dev.Target == "" {
		return "", fmt.Errorf("rendering payload disk: no target device")
	}
	o := newOptions(opts)
	if dev.Kind == "" {
		dev.Kind = o.kind
	}
	if err := checkBus(dev); err != nil {
		return "", fmt.Errorf("rendering payload disk: %w", err)
	}
	disk, err := diskElement(payloadDisk(imagePath, dev, o, nil, nil))
	if err != nil {
		return "", fmt.Errorf("rendering payload disk: %w", err)
	}
	indent(disk, "", "  ")
	doc := etree.NewDocumentWithRoot(disk)
	return serialize(doc)
}

// EjectedDeviceXML renders the payload CD-ROM dev without a <source> (a
// file source with no file, which libvirtxml leaves out), for
// Domain.UpdateDeviceFlags: libvirt reads a CD-ROM without a source as
// "eject the medium". Only CD-ROMs have a medium to eject.
func EjectedDeviceXML(dev Device) (string, error) {
	if dev.Target == "" {
		return "", fmt.Errorf("rendering ejected payload drive: no target device")
	}
	if k := dev.Kind.orCDROM(); k != KindCDROM {
		return "", fmt.Errorf("rendering ejected payload drive: a %s has no medium to eject", k)
	}
	if err := checkBus(dev); err != nil {
		return "", fmt.Errorf("rendering ejected payload drive: %w", err)
	}
	d := payloadDisk("", dev, options{}, nil, nil)
	d.Source = &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{}}
	disk, err := diskElement(d)
	if err != nil {
		return "", fmt.Errorf("rendering ejected payload drive: %w", err)
	}
	indent(disk, "", "  ")
	return serialize(etree.NewDocumentWithRoot(disk))
}

// atDevice checks that dev (AtDevice) can hold a new payload drive of kind
// in v: a supported bus for its kind and a target no other disk uses.
func atDevice(v *domainView, dev Device, kind Kind) (Device, error) {
	dev.Kind = dev.Kind.orCDROM()
	if dev.Kind != kind.orCDROM() {
		return Device{}, fmt.Errorf("the drive at %s is a %s, not a %s", dev.Target, dev.Kind, kind.orCDROM())
	}
	if dev.Target == "" {
		return Device{}, fmt.Errorf("no target device given")
	}
	if err := checkBus(dev); err != nil {
		return Device{}, err
	}
	for _, d := range v.Disks {
		if d.HasTarget && d.Dev == dev.Target {
			return Device{}, fmt.Errorf("target %s is taken by another disk", dev.Target)
		}
	}
	return dev, nil
}

// leadingIndent returns the whitespace after the last newline before el, or
// "" when el is not preceded by indentation.
func leadingIndent(el *etree.Element) string {
	p, i := el.Parent(), el.Index()
	if p == nil || i == 0 {
		return ""
	}
	cd, ok := p.Child[i-1].(*etree.CharData)
	if !ok || !cd.IsWhitespace() {
		return ""
	}
	s := cd.Data
	if j := strings.LastIndexByte(s, '\n'); j >= 0 {
		return s[j+1:]
	}
	return ""
}

// indentStep guesses the document's indentation unit from the first child
// of the root; libvirt uses two spaces.
func indentStep(root *etree.Element) string {
	for _, k := range root.ChildElements() {
		if s := leadingIndent(k); s != "" {
			return s
		}
	}
	return "  "
}

// insertDevice adds disk to <devices> after the last <disk> (or after
// <emulator>, or first), indented like its siblings.
func insertDevice(devices, disk *etree.Element, step string) {
	var after *etree.Element
	for _, k := range devices.ChildElements() {
		if k.Tag == "disk" || (after == nil && k.Tag == "emulator") {
			after = k
		}
	}
	base := ""
	if after != nil {
		base = leadingIndent(after)
	} else if kids := devices.ChildElements(); len(kids) > 0 {
		base = leadingIndent(kids[0])
	} else {
		base = leadingIndent(devices) + step
	}
	indent(disk, base, step)
	switch {
	case after != nil:
		i := after.Index() + 1
		devices.InsertChildAt(i, disk)
		devices.InsertChildAt(i, newText("\n"+base))
	case len(devices.ChildElements()) > 0:
		first := devices.ChildElements()[0]
		i := first.Index()
		devices.InsertChildAt(i, newText("\n"+base))
		devices.InsertChildAt(i, disk)
	default:
		for _, t := range append([]etree.Token(nil), devices.Child...) {
			if cd, ok := t.(*etree.CharData); ok && cd.IsWhitespace() {
				devices.RemoveChild(cd)
			}
		}
		devices.AddChild(newText("\n" + base))
		devices.AddChild(disk)
		devices.AddChild(newText("\n" + leadingIndent(devices)))
	}
	mergeText(devices)
}
