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

// ConnectListAllDomainsFlags filters Connect.ListAllDomains.
type ConnectListAllDomainsFlags uint

// Flags for Connect.ListAllDomains. Zero lists every domain.
const (
	CONNECT_LIST_DOMAINS_ACTIVE     = ConnectListAllDomainsFlags(C.VIR_CONNECT_LIST_DOMAINS_ACTIVE)
	CONNECT_LIST_DOMAINS_INACTIVE   = ConnectListAllDomainsFlags(C.VIR_CONNECT_LIST_DOMAINS_INACTIVE)
	CONNECT_LIST_DOMAINS_PERSISTENT = ConnectListAllDomainsFlags(C.VIR_CONNECT_LIST_DOMAINS_PERSISTENT)
	CONNECT_LIST_DOMAINS_TRANSIENT  = ConnectListAllDomainsFlags(C.VIR_CONNECT_LIST_DOMAINS_TRANSIENT)
	CONNECT_LIST_DOMAINS_RUNNING    = ConnectListAllDomainsFlags(C.VIR_CONNECT_LIST_DOMAINS_RUNNING)
	CONNECT_LIST_DOMAINS_SHUTOFF    = ConnectListAllDomainsFlags(C.VIR_CONNECT_LIST_DOMAINS_SHUTOFF)
)

// ConnectCloseReason says why a connection was closed (close callback).
type ConnectCloseReason int

// Close reasons passed to a CloseCallback.
const (
	CONNECT_CLOSE_REASON_ERROR     = ConnectCloseReason(C.VIR_CONNECT_CLOSE_REASON_ERROR)
	CONNECT_CLOSE_REASON_EOF       = ConnectCloseReason(C.VIR_CONNECT_CLOSE_REASON_EOF)
	CONNECT_CLOSE_REASON_KEEPALIVE = ConnectCloseReason(C.VIR_CONNECT_CLOSE_REASON_KEEPALIVE)
	CONNECT_CLOSE_REASON_CLIENT    = ConnectCloseReason(C.VIR_CONNECT_CLOSE_REASON_CLIENT)
)

// String names the close reason.
func (r ConnectCloseReason) String() string {
	switch r {
	case CONNECT_CLOSE_REASON_ERROR:
		return "error"
	case CONNECT_CLOSE_REASON_EOF:
		return "eof"
	case CONNECT_CLOSE_REASON_KEEPALIVE:
		return "keepalive"
	case CONNECT_CLOSE_REASON_CLIENT:
		return "client"
	}
	return "unknown"
}

// Connect is a connection to a hypervisor driver (virConnectPtr). It is safe
// for concurrent use, as libvirt connections are.
type Connect struct {
	ptr C.virConnectPtr
}

// NewConnect opens a read-write connection to uri (virConnectOpen), e.g.
// "qemu:///system" or "test:///default". Call EventRegisterDefaultImpl
// before it if you want events, keepalive or close callbacks.
func NewConnect(uri string) (*Connect, error) {
	var curi *C.char
	if uri != "" {
		curi = C.CString(uri)
		defer C.free(unsafe.Pointer(curi))
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ptr := C.virConnectOpen(curi)
	if ptr == nil {
		return nil, lastError()
	}
	return &Connect{ptr: ptr}, nil
}

// Close drops this reference to the connection (virConnectClose). It returns
// the number of references left; 0 means the connection is closed.
func (c *Connect) Close() (int, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ret := C.virConnectClose(c.ptr)
	if ret == -1 {
		return 0, lastError()
	}
	return int(ret), nil
}

// IsAlive reports whether the connection is still usable
// (virConnectIsAlive).
func (c *Connect) IsAlive() (bool, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ret := C.virConnectIsAlive(c.ptr)
	if ret == -1 {
		return false, lastError()
	}
	return ret == 1, nil
}

// GetURI returns the canonical URI of the connection (virConnectGetURI).
func (c *Connect) GetURI() (string, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s := C.virConnectGetURI(c.ptr)
	if s == nil {
		return "", lastError()
	}
	defer C.free(unsafe.Pointer(s))
	return C.GoString(s), nil
}

// SetKeepAlive starts sending keepalive messages every interval seconds and
// closes the connection after count unanswered ones
// (virConnectSetKeepAlive). Needs a running event loop. Drivers without a
// daemon (test://, ...) return an ERR_NO_SUPPORT-like Error; a remote party
// without keepalive support is not an error.
func (c *Connect) SetKeepAlive(interval int, count uint) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ret := C.virConnectSetKeepAlive(c.ptr, C.int(interval), C.uint(count))
	if ret == -1 {
		return lastError()
	}
	return nil
}

// LookupDomainByName finds a domain by name (virDomainLookupByName).
func (c *Connect) LookupDomainByName(name string) (*Domain, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ptr := C.virDomainLookupByName(c.ptr, cname)
	if ptr == nil {
		return nil, lastError()
	}
	return &Domain{ptr: ptr}, nil
}

// LookupDomainByUUIDString finds a domain by its textual UUID
// (virDomainLookupByUUIDString).
func (c *Connect) LookupDomainByUUIDString(uuid string) (*Domain, error) {
	cuuid := C.CString(uuid)
	defer C.free(unsafe.Pointer(cuuid))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ptr := C.virDomainLookupByUUIDString(c.ptr, cuuid)
	if ptr == nil {
		return nil, lastError()
	}
	return &Domain{ptr: ptr}, nil
}

// DomainDefineXML defines (or redefines) a persistent domain from XML
// (virDomainDefineXML).
func (c *Connect) DomainDefineXML(xml string) (*Domain, error) {
	cxml := C.CString(xml)
	defer C.free(unsafe.Pointer(cxml))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ptr := C.virDomainDefineXML(c.ptr, cxml)
	if ptr == nil {
		return nil, lastError()
	}
	return &Domain{ptr: ptr}, nil
}

// ListAllDomains lists domains matching flags (virConnectListAllDomains).
// The caller must Free every returned Domain.
func (c *Connect) ListAllDomains(flags ConnectListAllDomainsFlags) ([]Domain, error) {
	var list *C.virDomainPtr
	runtime.LockOSThread()
	n := C.virConnectListAllDomains(c.ptr, &list, C.uint(flags))
	if n == -1 {
		err := lastError()
		runtime.UnlockOSThread()
		return nil, err
	}
	runtime.UnlockOSThread()
	defer C.free(unsafe.Pointer(list))
	ptrs := unsafe.Slice(list, int(n))
	doms := make([]Domain, int(n))
	for i, p := range ptrs {
		doms[i] = Domain{ptr: p}
	}
	return doms, nil
}
