// Calls on domains: lookup by name or UUID through the handle cache, and
// the thin wrappers over libvirt's domain calls that Host declares.

package libvirtx

import (
	"context"
	"errors"
	"math"

	"libvirt.org/go/libvirt"

	"github.com/vmpayload/vmpayload/libvirtx/domxml"
)

// lookup finds a domain by UUID or name on c. The caller frees it.
func lookup(c *libvirt.Connect, nameOrUUID string) (*libvirt.Domain, error) {
	if domxml.IsUUID(nameOrUUID) {
		d, err := c.LookupDomainByUUIDString(nameOrUUID)
		if err == nil || !IsNotFound(err) {
			return d, err
		}
	}
	return c.LookupDomainByName(nameOrUUID)
}

// info reads the DomainInfo of d.
func info(d *libvirt.Domain) (DomainInfo, error) {
	var di DomainInfo
	var err error
	if di.Name, err = d.GetName(); err != nil {
		return DomainInfo{}, err
	}
	if di.UUID, err = d.GetUUIDString(); err != nil {
		return DomainInfo{}, err
	}
	if di.Active, err = isActive(d); err != nil {
		return DomainInfo{}, err
	}
	if di.InactiveXML, err = d.GetXMLDesc(libvirt.DOMAIN_XML_INACTIVE); err != nil {
		return DomainInfo{}, err
	}
	return di, nil
}

// isActive reports whether d was running when libvirt gave out the handle
// (its lookup, definition or listing), without asking libvirtd: a handle
// carries the domain's id, and an inactive domain's is -1 (libvirt's
// virDomainObjIsActive is that test; virsh domid prints "-" on it). This
// saves virDomainIsActive, one round trip to libvirtd per lookup and per
// listed domain. The answer is as old as the handle, so only fresh handles
// are asked (not the cached ones of onDomain).
func isActive(d *libvirt.Domain) (bool, error) {
	id, err := d.GetID()
	if id != math.MaxUint32 {
		return true, nil
	}
	var le libvirt.Error
	if err == nil || (errors.As(err, &le) && le.Code == libvirt.ERR_OK) {
		return false, nil // (unsigned int)-1 and no error: no id, not running
	}
	return false, err
}

// onDomain runs fn on the domain nameOrUUID: on its cached handle when it
// is named by a UUID the cache holds (see cachedHandle), else on a new
// lookup, which is cached. fn must not rely on the handle's name or id
// being current. A cached handle whose domain is gone gives way to a new
// lookup (a domain may be named like another's UUID).
func (h *LibvirtHost) onDomain(ctx context.Context, op, nameOrUUID string, fn func(d *libvirt.Domain) error) error {
	return h.withConnGen(ctx, op, func(c *libvirt.Connect, gen uint64) error {
		if domxml.IsUUID(nameOrUUID) {
			if d := h.cachedHandle(gen, nameOrUUID); d != nil {
				err := fn(d)
				_ = d.Free()
				if !IsNotFound(err) {
					return err
				}
				h.forgetHandle(nameOrUUID)
			}
		}
		return h.lookupOn(c, gen, nameOrUUID, fn)
	})
}

// lookupOn looks nameOrUUID up on c (generation gen), caches the handle and
// runs fn on it.
func (h *LibvirtHost) lookupOn(c *libvirt.Connect, gen uint64, nameOrUUID string, fn func(d *libvirt.Domain) error) error {
	d, err := lookup(c, nameOrUUID)
	if err != nil {
		return err
	}
	defer d.Free()
	h.keepHandle(gen, d)
	return fn(d)
}

// Domain implements Host. It always looks the domain up (its state and
// name must be current) and caches the handle.
func (h *LibvirtHost) Domain(ctx context.Context, nameOrUUID string) (DomainInfo, error) {
	var di DomainInfo
	err := h.withConnGen(ctx, "looking up domain "+nameOrUUID, func(c *libvirt.Connect, gen uint64) error {
		return h.lookupOn(c, gen, nameOrUUID, func(d *libvirt.Domain) error {
			var err error
			di, err = info(d)
			return err
		})
	})
	return di, err
}

// DefineXML implements Host. The new domain's handle is cached.
func (h *LibvirtHost) DefineXML(ctx context.Context, xml string) (DomainInfo, error) {
	var di DomainInfo
	err := h.withConnGen(ctx, "defining domain", func(c *libvirt.Connect, gen uint64) error {
		d, err := c.DomainDefineXML(xml)
		if err != nil {
			return err
		}
		defer d.Free()
		h.keepHandle(gen, d)
		di, err = info(d)
		return err
	})
	return di, err
}

// Redefine implements Redefiner: DefineXML without reading the domain
// back. The domain's handle is cached.
func (h *LibvirtHost) Redefine(ctx context.Context, xml string) error {
	return h.withConnGen(ctx, "defining domain", func(c *libvirt.Connect, gen uint64) error {
		d, err := c.DomainDefineXML(xml)
		if err != nil {
			return err
		}
		h.keepHandle(gen, d)
		_ = d.Free() // defined; a failed release changes nothing for the caller
		return nil
	})
}

// Redefiner is implemented by hosts that can define a domain without
// reading it back (DefineXML returns its DomainInfo: name, UUID, state and
// the whole inactive XML, four more calls that the redefinitions of a job
// do not use).
type Redefiner interface {
	Redefine(ctx context.Context, xml string) error
}

// Redefine defines (or redefines) a domain from xml on h, through
// Redefiner when h has it, else through DefineXML.
func Redefine(ctx context.Context, h Host, xml string) error {
	if r, ok := h.(Redefiner); ok {
		return r.Redefine(ctx, xml)
	}
	_, err := h.DefineXML(ctx, xml)
	return err
}

// LiveMetadataSetter is implemented by hosts that can change one
// <metadata> element of a running domain's live definition
// (virDomainSetMetadata with VIR_DOMAIN_AFFECT_LIVE). Redefining a running
// domain changes only its next-boot definition; a live migration, a save
// and a restore carry the live one, recipe included.
type LiveMetadataSetter interface {
	// SetLiveMetadata replaces the element of namespace uri (prefix key)
	// in the live definition of running domain uuid with element, or
	// removes it when element is "".
	SetLiveMetadata(ctx context.Context, uuid, element, key, uri string) error
}

// SetLiveMetadata implements LiveMetadataSetter.
func (h *LibvirtHost) SetLiveMetadata(ctx context.Context, uuid, element, key, uri string) error {
	return h.onDomain(ctx, "setting live metadata of domain "+uuid, uuid, func(d *libvirt.Domain) error {
		return d.SetMetadata(libvirt.DOMAIN_METADATA_ELEMENT, element, key, uri, libvirt.DOMAIN_AFFECT_LIVE)
	})
}

// Start implements Host. It calls virDomainCreateWithFlags, not
// virDomainCreate: over a remote connection the latter costs a second round
// trip (the client looks the domain up again for its new id), the former
// returns the id with the answer.
func (h *LibvirtHost) Start(ctx context.Context, uuid string) error {
	return h.onDomain(ctx, "starting domain "+uuid, uuid, func(d *libvirt.Domain) error {
		return d.CreateWithFlags(libvirt.DOMAIN_NONE)
	})
}

// Destroy stops a running domain at once. It is not part of Host; tests and
// tools use it.
func (h *LibvirtHost) Destroy(ctx context.Context, uuid string) error {
	return h.onDomain(ctx, "destroying domain "+uuid, uuid, func(d *libvirt.Domain) error { return d.Destroy() })
}

// Undefine removes a domain's persistent definition. It is not part of Host;
// tests and tools use it.
func (h *LibvirtHost) Undefine(ctx context.Context, uuid string) error {
	return h.onDomain(ctx, "undefining domain "+uuid, uuid, func(d *libvirt.Domain) error { return d.Undefine() })
}

// LiveXML implements Host.
func (h *LibvirtHost) LiveXML(ctx context.Context, uuid string) (string, error) {
	var x string
	err := h.onDomain(ctx, "reading the live definition of domain "+uuid, uuid, func(d *libvirt.Domain) error {
		var err error
		x, err = d.GetXMLDesc(0)
		return err
	})
	return x, err
}

// SavedXML implements Host.
func (h *LibvirtHost) SavedXML(ctx context.Context, uuid string) (string, error) {
	var x string
	err := h.onDomain(ctx, "reading the managed save image of domain "+uuid, uuid, func(d *libvirt.Domain) error {
		has, err := d.HasManagedSaveImage(0)
		if err != nil || !has {
			return err
		}
		x, err = d.ManagedSaveGetXMLDesc(0)
		return err
	})
	return x, err
}

// Reset implements Host.
func (h *LibvirtHost) Reset(ctx context.Context, uuid string) error {
	return h.onDomain(ctx, "resetting domain "+uuid, uuid, func(d *libvirt.Domain) error { return d.Reset(0) })
}

// UpdateDevice implements Host.
func (h *LibvirtHost) UpdateDevice(ctx context.Context, uuid, deviceXML string, flags DomainDeviceModifyFlags) error {
	return h.onDomain(ctx, "updating device of domain "+uuid, uuid, func(d *libvirt.Domain) error {
		return d.UpdateDeviceFlags(deviceXML, flags)
	})
}

// AttachDevice implements Host.
func (h *LibvirtHost) AttachDevice(ctx context.Context, uuid, deviceXML string, flags DomainDeviceModifyFlags) error {
	return h.onDomain(ctx, "attaching device to domain "+uuid, uuid, func(d *libvirt.Domain) error {
		return d.AttachDeviceFlags(deviceXML, flags)
	})
}

// DetachDevice implements Host.
func (h *LibvirtHost) DetachDevice(ctx context.Context, uuid, deviceXML string, flags DomainDeviceModifyFlags) error {
	return h.onDomain(ctx, "detaching device from domain "+uuid, uuid, func(d *libvirt.Domain) error {
		return d.DetachDeviceFlags(deviceXML, flags)
	})
}

// ListDomains implements Host. Domains that vanish while being listed are
// left out.
func (h *LibvirtHost) ListDomains(ctx context.Context) ([]DomainInfo, error) {
	var out []DomainInfo
	err := h.withConn(ctx, "listing domains", func(c *libvirt.Connect) error {
		doms, err := c.ListAllDomains(0)
		if err != nil {
			return err
		}
		var firstErr error
		for i := range doms {
			if firstErr == nil {
				di, err := info(&doms[i])
				switch {
				case err == nil:
					out = append(out, di)
				case IsNotFound(err):
				default:
					firstErr = err
				}
			}
			doms[i].Free()
		}
		return firstErr
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DomainCapabilitiesReader is implemented by hosts that can read libvirt's
// domain capabilities (virConnectGetDomainCapabilities): what a domain of
// an emulator, architecture, machine type and virtualisation type can
// have, e.g. the disk buses its machine takes (a floppy controller lists
// the bus "fdc").
type DomainCapabilitiesReader interface {
	// DomainCapabilities returns the <domainCapabilities> document; an
	// argument left "" is libvirt's default for it.
	DomainCapabilities(ctx context.Context, emulator, arch, machine, virtType string) (string, error)
}

// DomainCapabilities implements DomainCapabilitiesReader.
func (h *LibvirtHost) DomainCapabilities(ctx context.Context, emulator, arch, machine, virtType string) (string, error) {
	var caps string
	err := h.withConn(ctx, "reading the domain capabilities of machine "+machine, func(c *libvirt.Connect) error {
		var err error
		caps, err = c.GetDomainCapabilities(emulator, arch, machine, virtType, 0)
		return err
	})
	return caps, err
}
