//go:build libvirt_dlopen

package libvirtx

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

// vxProbeLibvirt tries to load libvirt the way libvirt.org/go/libvirt does
// under libvirt_dlopen. It returns NULL when it can, else dlerror's message
// (a static buffer owned by libc; copy it before the next dl* call).
static const char *vxProbeLibvirt(void)
{
	void *h = dlopen("libvirt.so.0", RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *msg = dlerror();
		return msg != NULL ? msg : "dlopen failed without a message";
	}
	dlclose(h);
	return NULL;
}
*/
import "C"

import (
	"errors"
	"runtime"
)

// libvirtLoadable reports why libvirt.so.0 cannot be loaded, or nil. Built
// with libvirt_dlopen, the binding opens the library on first use and only
// tells "Failed to open libvirt.so.0" afterwards; this gives the loader's
// own reason (e.g. "libvirt.so.0: cannot open shared object file: No such
// file or directory").
func libvirtLoadable() error {
	runtime.LockOSThread() // dlerror is per thread
	defer runtime.UnlockOSThread()
	if msg := C.vxProbeLibvirt(); msg != nil {
		return errors.New(C.GoString(msg))
	}
	return nil
}
