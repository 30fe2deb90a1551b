// Package drive delivers a payload as an image in a drive of the domain:
// a CD-ROM (ISO images), a read-only disk (vfat images, and Ignition's
// raw virtio disk with serial "ignition"), or a floppy (sysprep). A stopped
// domain's definition is edited; a running domain's CD-ROM changes its
// medium live (media.go), a disk hot-plugs on virtio or SCSI.
package drive

import (
	"context"
	"fmt"

	"github.com/vmpayload/vmpayload/agent/delivery"
	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
)

// Name is the delivery's registry name.
const Name = "drive"

// Delivery is the drive delivery of an engine.
type Delivery struct{ env *delivery.Env }

// New returns the drive delivery for env.
func New(env *delivery.Env) delivery.Delivery { return &Delivery{env: env} }

// Name returns "drive".
func (*Delivery) Name() string { return Name }

// Files returns the image the payload drive of domainXML holds.
func (d *Delivery) Files(domainXML string) []string {
	cur, found, err := domxml.FindPayload(domainXML)
	if err != nil || !found || cur.Path == "" {
		return nil
	}
	return []string{cur.Path}
}

// Drop removes the payload drive from ed. A running domain keeps the
// drive live, with its medium, until it stops.
func (d *Delivery) Drop(ed *domxml.Edit, dom libvirtx.DomainInfo) error {
	_, found, err := ed.FindPayload()
	if err != nil {
		return fmt.Errorf("reading the definition of %s: %w", dom.Name, err)
	}
	if !found {
		return nil
	}
	if _, err := ed.RemovePayloadDrive(); err != nil {
		return fmt.Errorf("removing the payload drive from %s: %w", dom.Name, err)
	}
	return nil
}

// form returns the options, bus and kind of the drive p's image goes into.
func (d *Delivery) form(p *delivery.Payload) ([]domxml.Option, domxml.Bus, domxml.Kind) {
	opts, bus, kind := append([]domxml.Option(nil), d.env.Opts...), d.env.Bus, domxml.KindCDROM
	switch p.Drive {
	case delivery.DriveSerialDisk:
		// An Ignition config as a block device: a read-only raw virtio
		// disk with serial "ignition", what Ignition's qemu platform
		// reads on s390x and ppc64le (/dev/disk/by-id/virtio-ignition).
		opts, kind, bus = append(opts, domxml.AsDisk(), domxml.WithSerial(domxml.IgnitionSerial)), domxml.KindDisk, domxml.BusVirtio
	case delivery.DriveFloppy:
		// a sysprep floppy image goes into a floppy drive (fdc)
		opts, kind = append(opts, domxml.AsFloppy()), domxml.KindFloppy
	case delivery.DriveDisk:
		// vfat payloads are read-only disks (see domxml.KindDisk); the
		// configured CD-ROM bus applies only when disks can use it.
		opts, kind = append(opts, domxml.AsDisk()), domxml.KindDisk
		if bus == domxml.BusIDE || bus == domxml.BusSATA {
			bus = domxml.BusAuto
		}
	}
	return opts, bus, kind
}

// Attach puts p's image into the domain's payload drive, records p's
// recipe (and the guest report channel) in the persistent definition, and
// starts a stopped domain when p.Start is set. A stopped domain's
// definition is edited in one session (drive, other deliveries' entries,
// channel, recipe: one parse, one serialisation); a running domain's
// changes go through libvirt's device calls. The image the drive held
// before is Attached.Remove.
func (d *Delivery) Attach(ctx context.Context, dom libvirtx.DomainInfo, p *delivery.Payload, r *result.Result) (delivery.Attached, error) {
	old, dev, err := d.attach(ctx, dom, p, r)
	if err != nil {
		return delivery.Attached{}, err
	}
	r.Device = &result.Device{Bus: string(dev.Bus), Target: dev.Target, Kind: string(dev.Kind)}
	var out delivery.Attached
	if old != "" && old != p.Path {
		out.Remove = []string{old}
	}
	return out, nil
}

func (d *Delivery) attach(ctx context.Context, dom libvirtx.DomainInfo, p *delivery.Payload, r *result.Result) (string, domxml.Device, error) {
	imgPath := p.Path
	// read once: a stopped domain's edit, a running one's drive choice
	ed, err := domxml.NewEdit(dom.InactiveXML)
	var cur domxml.PayloadDisk
	var found bool
	if err == nil {
		cur, found, err = ed.FindPayload()
	}
	if err != nil {
		return "", domxml.Device{}, fmt.Errorf("reading the definition of %s: %w", dom.Name, err)
	}
	old := ""
	if found {
		old = cur.Path
	}
	opts, bus, kind := d.form(p)
	if !dom.Active {
		dev, _, err := ed.SetPayloadDrive(imgPath, bus, opts...)
		if err != nil {
			return "", dev, fmt.Errorf("adding the payload drive to %s: %w", dom.Name, err)
		}
		if err := p.DropOthersFrom(ed); err != nil {
			return "", dev, err
		}
		if err = delivery.WithRecipe(ed, dom.InactiveXML, p.Recipe, p.Guest); err != nil {
			return "", dev, fmt.Errorf("recording the payload recipe in %s: %w", dom.Name, err)
		}
		xml, err := ed.XML()
		if err != nil {
			return "", dev, fmt.Errorf("adding the payload drive to %s: %w", dom.Name, err)
		}
		if xml != dom.InactiveXML {
			if err := libvirtx.Redefine(ctx, d.env.Host, xml); err != nil {
				return "", dev, fmt.Errorf("redefining %s with the payload drive: %w", dom.Name, err)
			}
		}
		r.DomainState = "shut off"
		if p.Start {
			if err := d.env.Start(ctx, dom, xml != dom.InactiveXML); err != nil {
				return "", dev, err
			}
			r.DomainState = "running"
		}
		return old, dev, nil
	}
	r.DomainState = "running"
	if found && cur.Path == imgPath {
		// Same content already in the drive (a re-submitted job): nothing
		// to change but a recipe an older version did not write.
		return old, cur.Device, d.recordRecipe(ctx, dom, p)
	}
	if kind == domxml.KindFloppy {
		// sysprep reads the answer file while Windows starts: a floppy is
		// set in the definition of a stopped domain only (libvirt cannot
		// hot-plug a floppy drive)
		return "", cur.Device, delivery.Fail(result.CodeDomainRunning, "domain %s is running; a sysprep floppy is only attached to a stopped domain (a floppy drive cannot be hot-plugged): stop the domain, or use sysprep_medium \"cdrom\"", dom.Name)
	}
	if found && (cur.Kind != domxml.KindCDROM || kind != domxml.KindCDROM) {
		return "", cur.Device, delivery.Fail(result.CodeDomainRunning, "domain %s is running and its payload drive %s is a %s while the job needs a %s (vfat payloads are disks, ISO payloads CD-ROMs); only a CD-ROM's medium can change while the domain runs: stop the domain, or use media iso", dom.Name, cur.Target, cur.Kind, kind)
	}
	if found {
		dev := cur.Device
		x, err := domxml.PayloadDeviceXML(imgPath, dev, opts...)
		if err != nil {
			return "", dev, fmt.Errorf("rendering the payload drive of %s: %w", dom.Name, err)
		}
		if err := d.changeMedia(ctx, dom, cur, x, libvirtx.DOMAIN_DEVICE_MODIFY_CONFIG, false); err != nil {
			return "", dev, fmt.Errorf("changing the payload medium of running domain %s: %w", dom.Name, err)
		}
		return old, dev, d.recordRecipe(ctx, dom, p)
	}
	live, liveFound, err := d.livePayload(ctx, dom)
	if err != nil {
		return "", domxml.Device{}, err
	}
	if liveFound {
		dev, err := d.reattach(ctx, dom, live, p, kind, opts)
		return live.Path, dev, err
	}
	var dev domxml.Device
	if kind == domxml.KindDisk {
		// A read-only disk hot-plugs on virtio or SCSI.
		if dev, err = ed.ChooseDevice(bus, opts...); err != nil {
			return "", dev, fmt.Errorf("choosing the payload disk of running domain %s: %w", dom.Name, err)
		}
	} else {
		dev, err = ed.ChooseDevice(domxml.BusSCSI)
		if err != nil || (bus != domxml.BusAuto && bus != domxml.BusSCSI) || !hasSCSI(ed) {
			return "", dev, delivery.Fail(result.CodeDomainRunning, "domain %s is running and has no payload drive, and a CD-ROM can only be hot-plugged on a SCSI controller: stop the domain or give it a SCSI controller (virtio-scsi)", dom.Name)
		}
	}
	x, err := domxml.PayloadDeviceXML(imgPath, dev, opts...)
	if err != nil {
		return "", dev, fmt.Errorf("rendering the payload drive of %s: %w", dom.Name, err)
	}
	if err := d.env.Host.AttachDevice(ctx, dom.UUID, x, libvirtx.DOMAIN_DEVICE_MODIFY_LIVE|libvirtx.DOMAIN_DEVICE_MODIFY_CONFIG); err != nil {
		return "", dev, fmt.Errorf("hot-plugging the payload drive into running domain %s: %w", dom.Name, err)
	}
	return "", dev, d.recordRecipe(ctx, dom, p)
}

// recordRecipe writes p's recipe into the persistent definition of a
// running domain after its drive changed (or removes the recipe when it is
// ""): it reads the persistent XML again (the live change updated it),
// sets the element and redefines the domain, which libvirt allows while it
// runs; then the live definition's recipe (delivery.RecordLiveRecipe).
func (d *Delivery) recordRecipe(ctx context.Context, dom libvirtx.DomainInfo, p *delivery.Payload) error {
	cur, err := d.env.Host.Domain(ctx, dom.UUID)
	if err != nil {
		return fmt.Errorf("reading the definition of %s to record the payload recipe: %w", dom.Name, err)
	}
	ed, err := domxml.NewEdit(cur.InactiveXML)
	if err == nil {
		if err = p.DropOthersFrom(ed); err != nil {
			return err
		}
		err = delivery.WithRecipe(ed, cur.InactiveXML, p.Recipe, p.Guest)
	}
	var x string
	if err == nil {
		x, err = ed.XML()
	}
	if err != nil {
		return fmt.Errorf("recording the payload recipe in %s: %w", dom.Name, err)
	}
	if x != cur.InactiveXML {
		if err := libvirtx.Redefine(ctx, d.env.Host, x); err != nil {
			return fmt.Errorf("redefining %s with the payload recipe: %w", dom.Name, err)
		}
	}
	return delivery.RecordLiveRecipe(ctx, d.env.Host, dom, p.Recipe)
}

// Detach takes the payload drive out of ed, after taking its medium out of
// a running domain: a disk, or a CD-ROM on a hot-pluggable bus (SCSI), is
// unplugged; an IDE/SATA CD-ROM's medium is ejected and the empty drive
// stays live until the domain stops (the next attach reuses it:
// reattach). A drive only the live definition has, still holding a
// medium (an attach that changed the live drive but could not redefine
// the domain), is detached like a defined one. Its image goes after the
// redefine.
func (d *Delivery) Detach(ctx context.Context, dom libvirtx.DomainInfo, ed *domxml.Edit, r *result.Result) (delivery.Detached, error) {
	cur, found, err := ed.FindPayload()
	if err != nil {
		return delivery.Detached{}, fmt.Errorf("reading the definition of %s: %w", dom.Name, err)
	}
	if !found && dom.Active {
		live, liveFound, err := d.livePayload(ctx, dom)
		if err != nil {
			return delivery.Detached{}, err
		}
		if liveFound && live.Path != "" {
			cur, found = live, true
		}
	}
	if !found {
		return delivery.Detached{}, nil
	}
	r.Device = &result.Device{Bus: string(cur.Bus), Target: cur.Target, Kind: string(cur.Kind)}
	if dom.Active && cur.Kind == domxml.KindFloppy {
		return delivery.Detached{}, delivery.Fail(result.CodeDomainRunning, "domain %s is running and its payload drive %s is a floppy, which cannot be unplugged while the domain runs: stop the domain first", dom.Name, cur.Target)
	}
	if dom.Active && (cur.Kind != domxml.KindCDROM || cur.Bus.Hotpluggable()) {
		// A disk (vfat payload) has no medium to eject, and a CD-ROM on
		// SCSI can go as it came: unplug it. (Ejecting fails on a SCSI
		// CD-ROM hot-plugged in this QEMU run: libvirt never learnt it has
		// a tray; see docs/media-change.md.)
		x, err := domxml.PayloadDeviceXML(cur.Path, cur.Device, d.env.Opts...)
		if err != nil {
			return delivery.Detached{}, fmt.Errorf("rendering the payload drive of %s: %w", dom.Name, err)
		}
		if err := d.env.Host.DetachDevice(ctx, dom.UUID, x, libvirtx.DOMAIN_DEVICE_MODIFY_LIVE); err != nil {
			return delivery.Detached{}, fmt.Errorf("unplugging the payload drive of running domain %s: %w", dom.Name, err)
		}
	} else if dom.Active {
		// Eject the medium from the live drive (IDE/SATA drives cannot be
		// unplugged while running); the drive leaves the definition below
		// and stays live, empty, until the domain stops. An eject is a
		// media change to none, with the same recovery of a tray libvirt
		// records out of step (changeMedia).
		x, err := domxml.EjectedDeviceXML(cur.Device)
		if err != nil {
			return delivery.Detached{}, fmt.Errorf("rendering the payload drive of %s: %w", dom.Name, err)
		}
		if err := d.changeMedia(ctx, dom, cur, x, 0, true); err != nil {
			return delivery.Detached{}, fmt.Errorf("ejecting the payload of running domain %s: %w", dom.Name, err)
		}
	}
	if _, err := ed.RemovePayloadDrive(); err != nil {
		return delivery.Detached{}, fmt.Errorf("removing the payload drive from %s: %w", dom.Name, err)
	}
	out := delivery.Detached{Changed: true, Drive: true}
	if cur.Path != "" {
		out.Remove = []string{cur.Path}
	}
	return out, nil
}
