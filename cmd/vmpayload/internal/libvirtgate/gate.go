// Package libvirtgate keeps libvirt's shared libraries out of the vmpayload
// subcommands that never call libvirt (issue 14).
//
// The libvirt.org/go/libvirt binding (built with the libvirt_dlopen tag) opens
// libvirt.so.0 and its ~57 dependencies in its package init, whether or not
// the process ever calls libvirt: 13–15 ms at every start of the binary,
// before main. Only the agent needs libvirt. This package defines dlopen in the
// executable (its C part), so the binding's dlopen call comes here first, and
// its init — which Go runs before the binding's, see below — marks the process
// as one that must not load libvirt when os.Args names an offline subcommand.
// The binding's init then finds libvirt unavailable (it ignores that error:
// it only installs an error callback) and every later call into the binding
// would fail with an error naming the cause; offline subcommands make none.
// Any other subcommand, unknown names and test binaries load libvirt as
// before.
//
// Order: the Go specification (Go >= 1.21) initialises packages one at a time,
// each time the first one in import-path order whose imports are all
// initialised. This package's path sorts before "libvirt.org/go/libvirt" and
// it imports only os (and runtime/cgo), which the binding imports too, so it is
// always initialised first. It must stay that way: do not add imports here.
// TestOfflineCommandsDoNotLoadLibvirt (cmd/vmpayload) runs the built binary
// with LD_DEBUG=files and fails if an offline subcommand maps libvirt.
//
// The main package imports this package (blank import) before anything else
// needs it; libvirtx is unaware of it.
package libvirtgate

// #cgo LDFLAGS: -ldl
// #include "gate.h"
import "C"

import "os"

// Offline lists the subcommands that never call libvirt: they build, check
// and inspect images, run the libvirt hook (which must never call libvirt),
// or talk to the agent over its socket. A new subcommand is not offline until
// it is added here (and to the test's list).
var Offline = map[string]bool{
	"":         true, // no arguments: usage
	"help":     true,
	"-h":       true,
	"--help":   true,
	"version":  true,
	"build":    true,
	"validate": true,
	"inspect":  true,
	"hook":     true,
	"recipe":   true,
	"submit":   true,
	"run":      true,
	"status":   true,
}

func init() {
	sub := ""
	if len(os.Args) > 1 {
		sub = os.Args[1]
	}
	if Offline[sub] {
		C.vmpx_libvirt_deny()
	}
}

// Denied reports whether this process refuses to load libvirt.
func Denied() bool { return C.vmpx_libvirt_denied() != 0 }
