package libvirtx

/*
#cgo pkg-config: libvirt
#include <stdlib.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// DomainXMLFlags select what Domain.GetXMLDesc returns.
type DomainXMLFlags uint

// Flags for Domain.GetXMLDesc.
const (
	DOMAIN_XML_SECURE     = DomainXMLFlags(C.VIR_DOMAIN_XML_SECURE)
	DOMAIN_XML_INACTIVE   = DomainXMLFlags(C.VIR_DOMAIN_XML_INACTIVE)
	DOMAIN_XML_UPDATE_CPU = DomainXMLFlags(C.VIR_DOMAIN_XML_UPDATE_CPU)
	DOMAIN_XML_MIGRATABLE = DomainXMLFlags(C.VIR_DOMAIN_XML_MIGRATABLE)
)

// DomainDeviceModifyFlags say which definition a device change applies to.
type DomainDeviceModifyFlags uint

// Flags for Domain.UpdateDeviceFlags, AttachDeviceFlags and DetachDeviceFlags.
const (
	DOMAIN_DEVICE_MODIFY_CURRENT = DomainDeviceModifyFlags(C.VIR_DOMAIN_DEVICE_MODIFY_CURRENT)
	DOMAIN_DEVICE_MODIFY_LIVE    = DomainDeviceModifyFlags(C.VIR_DOMAIN_DEVICE_MODIFY_LIVE)
	DOMAIN_DEVICE_MODIFY_CONFIG  = DomainDeviceModifyFlags(C.VIR_DOMAIN_DEVICE_MODIFY_CONFIG)
	DOMAIN_DEVICE_MODIFY_FORCE   = DomainDeviceModifyFlags(C.VIR_DOMAIN_DEVICE_MODIFY_FORCE)
)

// Domain is a handle on a domain (virDomainPtr). Release it with Free.
type Domain struct {
	ptr C.virDomainPtr
}

// Free releases the handle (virDomainFree); the domain itself is untouched.
func (d *Domain) Free() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if C.virDomainFree(d.ptr) == -1 {
		return lastError()
	}
	return nil
}

// GetName returns the domain's name (virDomainGetName).
func (d *Domain) GetName() (string, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s := C.virDomainGetName(d.ptr)
	if s == nil {
		return "", lastError()
	}
	return C.GoString(s), nil
}

// GetUUIDString returns the domain's UUID in text form
// (virDomainGetUUIDString).
func (d *Domain) GetUUIDString() (string, error) {
	buf := (*C.char)(C.malloc(C.VIR_UUID_STRING_BUFLEN))
	defer C.free(unsafe.Pointer(buf))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if C.virDomainGetUUIDString(d.ptr, buf) == -1 {
		return "", lastError()
	}
	return C.GoString(buf), nil
}

// GetXMLDesc returns the domain's XML description (virDomainGetXMLDesc).
func (d *Domain) GetXMLDesc(flags DomainXMLFlags) (string, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s := C.virDomainGetXMLDesc(d.ptr, C.uint(flags))
	if s == nil {
		return "", lastError()
	}
	defer C.free(unsafe.Pointer(s))
	return C.GoString(s), nil
}

// IsActive reports whether the domain is running (virDomainIsActive).
func (d *Domain) IsActive() (bool, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ret := C.virDomainIsActive(d.ptr)
	if ret == -1 {
		return false, lastError()
	}
	return ret == 1, nil
}

// Create starts a defined domain (virDomainCreate).
func (d *Domain) Create() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if C.virDomainCreate(d.ptr) == -1 {
		return lastError()
	}
	return nil
}

// Destroy stops a running domain immediately (virDomainDestroy).
func (d *Domain) Destroy() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if C.virDomainDestroy(d.ptr) == -1 {
		return lastError()
	}
	return nil
}

// Reset resets the domain's virtual machine at once, as a hardware reset
// button would, without a guest shutdown (virDomainReset).
func (d *Domain) Reset(flags uint32) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if C.virDomainReset(d.ptr, C.uint(flags)) == -1 {
		return lastError()
	}
	return nil
}

// Undefine removes a persistent domain's configuration (virDomainUndefine).
func (d *Domain) Undefine() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if C.virDomainUndefine(d.ptr) == -1 {
		return lastError()
	}
	return nil
}

// UpdateDeviceFlags changes a device in place, e.g. the medium of a CD-ROM
// (virDomainUpdateDeviceFlags).
func (d *Domain) UpdateDeviceFlags(xml string, flags DomainDeviceModifyFlags) error {
	cxml := C.CString(xml)
	defer C.free(unsafe.Pointer(cxml))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if C.virDomainUpdateDeviceFlags(d.ptr, cxml, C.uint(flags)) == -1 {
		return lastError()
	}
	return nil
}

// AttachDeviceFlags adds a device (virDomainAttachDeviceFlags).
func (d *Domain) AttachDeviceFlags(xml string, flags DomainDeviceModifyFlags) error {
	cxml := C.CString(xml)
	defer C.free(unsafe.Pointer(cxml))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if C.virDomainAttachDeviceFlags(d.ptr, cxml, C.uint(flags)) == -1 {
		return lastError()
	}
	return nil
}

// DetachDeviceFlags removes a device (virDomainDetachDeviceFlags).
func (d *Domain) DetachDeviceFlags(xml string, flags DomainDeviceModifyFlags) error {
	cxml := C.CString(xml)
	defer C.free(unsafe.Pointer(cxml))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if C.virDomainDetachDeviceFlags(d.ptr, cxml, C.uint(flags)) == -1 {
		return lastError()
	}
	return nil
}
