// C trampolines that forward libvirt callbacks to Go. The opaque pointer
// libvirt hands back is a runtime/cgo.Handle value, carried as uintptr_t so
// Go never converts an integer into an unsafe.Pointer.
#include <stdint.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include "_cgo_export.h"

static void vxLifecycleCB(virConnectPtr c, virDomainPtr d, int event, int detail, void *opaque)
{
	vxGoLifecycle(c, d, event, detail, (uintptr_t)opaque);
}

static void vxCloseCB(virConnectPtr c, int reason, void *opaque)
{
	vxGoClose(c, reason, (uintptr_t)opaque);
}

static void vxFreeCB(void *opaque)
{
	vxGoFreeHandle((uintptr_t)opaque);
}

int vxDomainEventLifecycleRegister(virConnectPtr c, virDomainPtr d, uintptr_t h)
{
	return virConnectDomainEventRegisterAny(c, d, VIR_DOMAIN_EVENT_ID_LIFECYCLE,
		VIR_DOMAIN_EVENT_CALLBACK(vxLifecycleCB), (void *)h, vxFreeCB);
}

int vxRegisterCloseCallback(virConnectPtr c, uintptr_t h)
{
	return virConnectRegisterCloseCallback(c, vxCloseCB, (void *)h, vxFreeCB);
}

int vxUnregisterCloseCallback(virConnectPtr c)
{
	return virConnectUnregisterCloseCallback(c, vxCloseCB);
}

static void vxIgnoreError(void *userData, virErrorPtr err)
{
	(void)userData;
	(void)err;
}

// vxSilenceErrors stops libvirt from printing every error to stderr; errors
// are returned to Go callers instead.
void vxSilenceErrors(void)
{
	virSetErrorFunc(NULL, vxIgnoreError);
}
