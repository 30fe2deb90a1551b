// Package libvirtx is a small cgo binding over libvirt's C API (libvirt 9.0
// from Debian's libvirt-dev) plus a reconnecting host shim used by the agent.
//
// The low-level part (Connect, Domain, Error and the constants) is named and
// shaped like libvirt.org/go/libvirt so that module can replace it later
// without touching callers. It carries no business logic: every method maps
// to exactly one libvirt call, and every failure is returned as an Error that
// carries libvirt's code, domain and message.
//
// The high-level part is the Host interface and its implementation
// LibvirtHost (see host.go): one long-lived connection, a default event loop
// running in a goroutine, lifecycle events for all domains delivered on a
// channel, keepalive and a close callback, and automatic reconnection with
// backoff when the daemon goes away. Errors from the shim can be classified
// with IsNotFound, IsDisconnected and IsUnsupported.
//
// Building requires pkg-config and the libvirt development headers
// (Debian: apt-get install libvirt-dev pkg-config).
package libvirtx
