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
// Putting a payload on a domain (with package domxml), as verified against
// libvirt 9.0 / QEMU 7.2 by the VMPAYLOAD_LIBVIRTD=1 tests:
//
//   - Stopped domain: domxml.SetPayloadCDROM on DomainInfo.InactiveXML,
//     DefineXML, Start.
//   - Running domain that has the payload drive (domxml.FindPayload): render
//     domxml.PayloadDeviceXML(newPath, found.Device) and UpdateDevice with
//     DOMAIN_DEVICE_MODIFY_LIVE|DOMAIN_DEVICE_MODIFY_CONFIG (media change;
//     works on IDE, SATA and SCSI drives present when the domain started).
//     While the guest uses the drive (e.g. SeaBIOS probing IDE drives in the
//     first seconds after start) it fails transiently with "Tray ... is not
//     open": IsTrayBusy recognises that; retry a bounded number of times.
//     A drive hot-plugged during the current run cannot change media in
//     libvirt 9.0 ("Tray ... is not open", even with FORCE): DetachDevice and
//     AttachDevice it instead.
//   - Running domain without the drive: if domxml.ChooseDevice picks a bus
//     that is Hotpluggable (SCSI, or virtio for a disk), AttachDevice with
//     LIVE|CONFIG; otherwise only the definition can change (DefineXML),
//     effective at next start.
//   - vfat payloads are read-only disks (domxml.AsDisk; "readonly sata disks
//     are not supported", so virtio or SCSI). A disk has no medium to
//     change; a live one is removed with DetachDevice (LIVE), which returns
//     before a guest without ACPI hot-unplug support has let go of it.
//
// The test driver (test:///default) supports define/start/events but no
// device changes (IsUnsupported), and its state lives as long as at least
// one connection to it is open in the process.
//
// Building requires pkg-config and the libvirt development headers
// (Debian: apt-get install libvirt-dev pkg-config).
package libvirtx
