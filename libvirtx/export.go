package libvirtx

// This file holds the Go functions called from callbacks.c. A cgo preamble
// in a file with //export may only contain declarations.

/*
#cgo pkg-config: libvirt
#include <stdint.h>
#include <libvirt/libvirt.h>
*/
import "C"

import "runtime/cgo"

//export vxGoLifecycle
func vxGoLifecycle(c C.virConnectPtr, d C.virDomainPtr, event C.int, detail C.int, h C.uintptr_t) {
	cb, ok := cgo.Handle(h).Value().(DomainEventLifecycleCallback)
	if !ok {
		return
	}
	cb(&Connect{ptr: c}, &Domain{ptr: d}, &DomainEventLifecycle{Event: DomainEventType(event), Detail: int(detail)})
}

//export vxGoClose
func vxGoClose(c C.virConnectPtr, reason C.int, h C.uintptr_t) {
	cb, ok := cgo.Handle(h).Value().(CloseCallback)
	if !ok {
		return
	}
	cb(&Connect{ptr: c}, ConnectCloseReason(reason))
}

//export vxGoFreeHandle
func vxGoFreeHandle(h C.uintptr_t) {
	cgo.Handle(h).Delete()
}
