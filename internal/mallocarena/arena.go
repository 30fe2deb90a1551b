// Package mallocarena caps the number of the C allocator's arenas in the
// vmpayload process (issue 14). Importing it is enough: a C constructor
// sets the cap when the program is loaded, before the Go runtime or
// libvirt start threads.
//
// glibc's malloc gives each thread that allocates its own arena, up to
// 8 per core, and memory freed into one arena is not reused by threads of
// another. In the agent, libvirt's library allocates on whichever thread Go
// runs the cgo call on (the workers, the event loop, the guest follower),
// and with libvirt's test driver in the process (test:///) its domains too:
// a burst of 1000 jobs left 9 arenas holding ~25 MiB. Capped at a few, the
// same burst peaks 2–4 MiB lower (docs/benchmarks.md), with no measurable
// CPU cost. The operator's own cap (MALLOC_ARENA_MAX, or
// glibc.malloc.arena_max in GLIBC_TUNABLES) is left alone.
package mallocarena

/*
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#define VMPX_ARENA_MAX 4

static int vmpx_capped;

// vmpx_cap_arenas sets the cap n unless the environment (the values of
// MALLOC_ARENA_MAX and GLIBC_TUNABLES, NULL when unset) sets one; it
// returns whether it set it.
static int vmpx_cap_arenas(const char *arena_max, const char *tunables, int n) {
#ifdef M_ARENA_MAX
	if (n < 1) return 0;
	if (arena_max != NULL && arena_max[0] != '\0') return 0;
	if (tunables != NULL && strstr(tunables, "glibc.malloc.arena_max") != NULL) return 0;
	return mallopt(M_ARENA_MAX, n) == 1;
#else
	return 0;
#endif
}

__attribute__((constructor)) static void vmpx_cap_arenas_at_load(void) {
	vmpx_capped = vmpx_cap_arenas(getenv("MALLOC_ARENA_MAX"), getenv("GLIBC_TUNABLES"), VMPX_ARENA_MAX);
}

static int vmpx_arena_max(void) { return VMPX_ARENA_MAX; }
static int vmpx_was_capped(void) { return vmpx_capped; }
*/
import "C"

import "unsafe"

// Max is the cap set at load time.
var Max = int(C.vmpx_arena_max())

// Capped reports whether the cap was set at load time (not when the
// environment set one, or the C library has no such setting).
func Capped() bool { return C.vmpx_was_capped() != 0 }

// capArenas is the constructor's decision for the given environment
// values (nil: unset), for the tests; it sets the cap when it decides to.
func capArenas(arenaMax, tunables *string, n int) bool {
	cstr := func(s *string) *C.char {
		if s == nil {
			return nil
		}
		return C.CString(*s)
	}
	a, t := cstr(arenaMax), cstr(tunables)
	defer C.free(unsafe.Pointer(a))
	defer C.free(unsafe.Pointer(t))
	return C.vmpx_cap_arenas(a, t, C.int(n)) != 0
}
