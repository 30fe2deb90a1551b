// The dlopen gate of package libvirtgate: see gate.go.

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#include "gate.h"

static int vmpx_deny;

void
vmpx_libvirt_deny(void)
{
	__atomic_store_n(&vmpx_deny, 1, __ATOMIC_SEQ_CST);
}

int
vmpx_libvirt_denied(void)
{
	return __atomic_load_n(&vmpx_deny, __ATOMIC_SEQ_CST);
}

// dlopen is defined in the executable, so the libvirt binding's call
// resolves here (the definition in libc is the next one). Every call is passed
// on unchanged, except the opening of libvirt once vmpx_libvirt_deny has been
// called: that one fails, and to give dlerror a reason naming the cause it is
// passed on as an absolute path that cannot exist (one failed open, no search
// through the library directories).
void *
dlopen(const char *file, int mode)
{
	static void *(*next)(const char *, int);
	void *(*fn)(const char *, int) = __atomic_load_n(&next, __ATOMIC_ACQUIRE);

	if (fn == NULL) {
		fn = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
		__atomic_store_n(&next, fn, __ATOMIC_RELEASE);
	}
	if (file != NULL && strncmp(file, "libvirt.so", 10) == 0 && vmpx_libvirt_denied())
		return fn("/nonexistent/vmpayload: this subcommand does not load libvirt/libvirt.so.0", mode);
	return fn(file, mode);
}
