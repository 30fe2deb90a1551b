package libvirtx

/*
#cgo pkg-config: libvirt
#include <stdint.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

int vxDomainEventLifecycleRegister(virConnectPtr c, virDomainPtr d, uintptr_t h);
int vxRegisterCloseCallback(virConnectPtr c, uintptr_t h);
int vxUnregisterCloseCallback(virConnectPtr c);
void vxSilenceErrors(void);
*/
import "C"

import (
	"runtime"
	"runtime/cgo"
)

// DomainEventType is the kind of a lifecycle event (virDomainEventType).
type DomainEventType int

// Lifecycle event types.
const (
	DOMAIN_EVENT_DEFINED     = DomainEventType(C.VIR_DOMAIN_EVENT_DEFINED)
	DOMAIN_EVENT_UNDEFINED   = DomainEventType(C.VIR_DOMAIN_EVENT_UNDEFINED)
	DOMAIN_EVENT_STARTED     = DomainEventType(C.VIR_DOMAIN_EVENT_STARTED)
	DOMAIN_EVENT_SUSPENDED   = DomainEventType(C.VIR_DOMAIN_EVENT_SUSPENDED)
	DOMAIN_EVENT_RESUMED     = DomainEventType(C.VIR_DOMAIN_EVENT_RESUMED)
	DOMAIN_EVENT_STOPPED     = DomainEventType(C.VIR_DOMAIN_EVENT_STOPPED)
	DOMAIN_EVENT_SHUTDOWN    = DomainEventType(C.VIR_DOMAIN_EVENT_SHUTDOWN)
	DOMAIN_EVENT_PMSUSPENDED = DomainEventType(C.VIR_DOMAIN_EVENT_PMSUSPENDED)
	DOMAIN_EVENT_CRASHED     = DomainEventType(C.VIR_DOMAIN_EVENT_CRASHED)
)

// String names the event type.
func (t DomainEventType) String() string {
	switch t {
	case DOMAIN_EVENT_DEFINED:
		return "defined"
	case DOMAIN_EVENT_UNDEFINED:
		return "undefined"
	case DOMAIN_EVENT_STARTED:
		return "started"
	case DOMAIN_EVENT_SUSPENDED:
		return "suspended"
	case DOMAIN_EVENT_RESUMED:
		return "resumed"
	case DOMAIN_EVENT_STOPPED:
		return "stopped"
	case DOMAIN_EVENT_SHUTDOWN:
		return "shutdown"
	case DOMAIN_EVENT_PMSUSPENDED:
		return "pmsuspended"
	case DOMAIN_EVENT_CRASHED:
		return "crashed"
	}
	return "unknown"
}

// DomainEventLifecycle is the payload of a lifecycle event. Detail is the
// event-type specific reason (virDomainEvent*DetailType).
type DomainEventLifecycle struct {
	Event  DomainEventType
	Detail int
}

// DomainEventLifecycleCallback receives lifecycle events. It runs on the
// event loop goroutine and must not block. c and d are borrowed from libvirt
// and valid only during the call; do not Close c or Free d.
type DomainEventLifecycleCallback func(c *Connect, d *Domain, event *DomainEventLifecycle)

// CloseCallback is told when a connection is closed by anything other than
// Close. It runs on the event loop goroutine and must not block; c is
// borrowed and valid only during the call.
type CloseCallback func(c *Connect, reason ConnectCloseReason)

func init() {
	C.vxSilenceErrors()
}

// EventRegisterDefaultImpl installs libvirt's default event loop
// (virEventRegisterDefaultImpl). Call it once, before opening connections.
func EventRegisterDefaultImpl() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if C.virEventRegisterDefaultImpl() == -1 {
		return lastError()
	}
	return nil
}

// EventRunDefaultImpl runs one iteration of the default event loop
// (virEventRunDefaultImpl). Call it in a loop from a dedicated goroutine.
func EventRunDefaultImpl() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if C.virEventRunDefaultImpl() == -1 {
		return lastError()
	}
	return nil
}

// DomainEventLifecycleRegister registers callback for lifecycle events of
// dom, or of every domain when dom is nil
// (virConnectDomainEventRegisterAny with VIR_DOMAIN_EVENT_ID_LIFECYCLE).
// It returns the callback id for DomainEventDeregister.
func (c *Connect) DomainEventLifecycleRegister(dom *Domain, callback DomainEventLifecycleCallback) (int, error) {
	h := cgo.NewHandle(callback)
	var dptr C.virDomainPtr
	if dom != nil {
		dptr = dom.ptr
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	id := C.vxDomainEventLifecycleRegister(c.ptr, dptr, C.uintptr_t(h))
	if id == -1 {
		err := lastError()
		h.Delete()
		return 0, err
	}
	return int(id), nil
}

// DomainEventDeregister removes an event callback by id
// (virConnectDomainEventDeregisterAny).
func (c *Connect) DomainEventDeregister(callbackID int) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if C.virConnectDomainEventDeregisterAny(c.ptr, C.int(callbackID)) == -1 {
		return lastError()
	}
	return nil
}

// RegisterCloseCallback sets the connection's close callback
// (virConnectRegisterCloseCallback). Only one can be registered at a time.
func (c *Connect) RegisterCloseCallback(callback CloseCallback) error {
	h := cgo.NewHandle(callback)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if C.vxRegisterCloseCallback(c.ptr, C.uintptr_t(h)) == -1 {
		err := lastError()
		h.Delete()
		return err
	}
	return nil
}

// UnregisterCloseCallback removes the close callback set by
// RegisterCloseCallback (virConnectUnregisterCloseCallback).
func (c *Connect) UnregisterCloseCallback() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if C.vxUnregisterCloseCallback(c.ptr) == -1 {
		return lastError()
	}
	return nil
}
