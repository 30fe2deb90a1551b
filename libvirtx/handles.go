// The domain handle cache: one libvirt.Domain per UUID and connection
// generation, so that a job's calls do not look the domain up each time.

package libvirtx

import (
	"libvirt.org/go/libvirt"
)

// maxHandles bounds the handle cache; when it is full an arbitrary entry
// makes room.
const maxHandles = 4096

// cachedHandle returns a new reference to the cached handle of the domain
// with uuid on connection generation gen, or nil. The caller frees it.
//
// The handle cache spares libvirtd a lookup (virDomainLookupByUUIDString) in
// every call that names a domain by UUID right after the job looked it up,
// defined it or redefined it: start, live definition, device changes. A
// handle stands for its UUID (libvirt's drivers find the domain by UUID in
// every call), so a cached one reaches what a new lookup would, and a call
// on a domain that has gone fails with ERR_NO_DOMAIN just the same. Handles
// belong to a connection: all are released when it is torn down, and a
// domain's when libvirt reports it undefined.
func (h *LibvirtHost) cachedHandle(gen uint64, uuid string) *libvirt.Domain {
	h.hmu.Lock()
	defer h.hmu.Unlock()
	if gen != h.handlesGen {
		return nil
	}
	d := h.handles[uuid]
	if d == nil || d.Ref() != nil {
		return nil
	}
	c := *d
	return &c
}

// keepHandle caches d, a handle of connection generation gen, under its
// UUID with a reference of its own. The caller keeps (and frees) its
// reference.
func (h *LibvirtHost) keepHandle(gen uint64, d *libvirt.Domain) {
	uuid, err := d.GetUUIDString()
	if err != nil || d.Ref() != nil {
		return
	}
	kept := *d
	var free []*libvirt.Domain
	h.hmu.Lock()
	switch {
	case gen <= h.deadGen || gen < h.handlesGen:
		free = append(free, &kept) // an old connection's handle
	default:
		if gen > h.handlesGen {
			for _, o := range h.handles {
				free = append(free, o)
			}
			h.handles, h.handlesGen = map[string]*libvirt.Domain{}, gen
		}
		if o := h.handles[uuid]; o != nil {
			free = append(free, o)
		} else if len(h.handles) >= maxHandles {
			for k, o := range h.handles {
				free = append(free, o)
				delete(h.handles, k)
				break
			}
		}
		h.handles[uuid] = &kept
	}
	h.hmu.Unlock()
	freeHandles(free)
}

// forgetHandle releases the cached handle of uuid, if any.
func (h *LibvirtHost) forgetHandle(uuid string) {
	h.hmu.Lock()
	d := h.handles[uuid]
	delete(h.handles, uuid)
	h.hmu.Unlock()
	if d != nil {
		freeHandles([]*libvirt.Domain{d})
	}
}

// dropHandles releases every cached handle of connection generations up to
// gen, which are being torn down, and keeps them from being cached again.
func (h *LibvirtHost) dropHandles(gen uint64) {
	var free []*libvirt.Domain
	h.hmu.Lock()
	h.deadGen = max(h.deadGen, gen)
	if h.handlesGen <= gen {
		for _, o := range h.handles {
			free = append(free, o)
		}
		h.handles = nil
	}
	h.hmu.Unlock()
	freeHandles(free)
}

func freeHandles(ds []*libvirt.Domain) {
	for _, d := range ds {
		_ = d.Free() // a local unreference; it fails only on a bad handle
	}
}
