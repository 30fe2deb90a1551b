// Package libvirtx is the agent's reconnecting shim over libvirt, built on
// libvirt's upstream Go binding libvirt.org/go/libvirt (pinned at
// v1.10000.0; the module proxy serves exact versions only).
//
// What is ours is the Host interface and its implementation LibvirtHost
// (see host.go): one long-lived connection, libvirt's default event loop
// running in a goroutine, lifecycle events for all domains delivered on a
// channel, keepalive and a close callback, and automatic reconnection with
// backoff when the daemon goes away. Errors from the shim wrap the binding's
// libvirt.Error and can be classified with IsNotFound, IsDisconnected,
// IsUnsupported and IsTrayBusy.
//
// Names: Host's methods take DomainDeviceModifyFlags, so libvirtx re-exports
// that type (an alias of libvirt.DomainDeviceModifyFlags) and its constants
// DOMAIN_DEVICE_MODIFY_*; callers of Host need not import libvirt. Nothing
// else of the binding is re-exported: code that needs an error code the
// classifiers do not cover uses libvirt.Error and libvirt.ERR_* directly (as
// agent/engine does for ERR_OPERATION_INVALID), and code that talks to
// libvirt outside Host (tests, tools) uses the binding itself.
//
// Build tag libvirt_dlopen: every build and test of the project (Makefile,
// test/*.sh, packaging/build.sh, the tests that build the binary) passes
// -tags libvirt_dlopen. The binding then carries its own copy of libvirt's
// headers, needs neither pkg-config nor libvirt-dev, and does not link
// libvirt.so.0: the binary's only dynamic dependency is libc, so it starts
// (and its offline subcommands work) where libvirt is not installed.
// OpenHost probes libvirt.so.0 first and fails with ErrNotInstalled and the
// loader's reason ("libvirt is not installed: libvirt.so.0: cannot open
// shared object file: ..."); the agent exits with that error instead of
// retrying. Go has no way to make a build tag the default, so a plain
// "go build ./..." without the tag still compiles and links libvirt
// normally (pkg-config and libvirt-dev needed); that is fine for tools.
//
// Caveat of libvirt_dlopen in v1.10000.0: the binding's package init
// (error.go) calls virSetErrorFunc through its dlopen wrapper, so
// libvirt.so.0 is opened when the process starts, whenever it is installed,
// even for subcommands that never use libvirt. Where it is missing that
// first attempt fails silently and later calls report only "Failed to open
// libvirt.so.0", hence the probe in OpenHost.
//
// Round trips: over a remote connection (qemu:///system is one) every
// libvirt call is a message to libvirtd and back, and wakes libvirt's event
// loop in both processes. LibvirtHost keeps them few, and TestHostRoundTrips
// counts them in libvirt's own client log: a start job of a stopped domain
// makes five (lookup by name, inactive XML, define, create, live XML; it was
// nine). The means: handles are cached by UUID per connection, so calls
// naming a domain by UUID right after its lookup or definition skip the
// lookup; a handle's id (-1 for an inactive domain) answers whether it runs,
// instead of virDomainIsActive; Start uses virDomainCreateWithFlags, whose
// answer carries the new id (virDomainCreate's remote client looks the
// domain up again for it).
//
// Putting a payload on a domain (package domxml edits the definition;
// agent/delivery/drive drives it; docs/media-change.md has the libvirt 9.0
// / QEMU 7.2 behaviour the VMPAYLOAD_LIBVIRTD=1 tests verify): a stopped
// domain is redefined with the drive (DefineXML, Start); a running domain's
// payload drive changes its medium with UpdateDevice
// (LIVE|CONFIG|FORCE; IsTrayBusy while the guest resets the drive), except
// a drive hot-plugged in the current run, which is detached and attached
// again; a new drive is attached LIVE|CONFIG when Document.ChooseDevice picks
// a Hotpluggable bus, else only defined (effective at the next start).
// vfat payloads are read-only disks (virtio or SCSI), removed live with
// DetachDevice.
//
// The test driver (test:///default) supports define/start/events but no
// device changes (IsUnsupported), and its state lives as long as at least
// one connection to it is open in the process. docs/install.md has what a
// build needs.
package libvirtx
