package libvirtx

import "libvirt.org/go/libvirt"

// DomainDeviceModifyFlags say which definition a device change made through
// Host.UpdateDevice, AttachDevice or DetachDevice applies to. It is
// libvirt.DomainDeviceModifyFlags, re-exported because it is part of the Host
// interface: callers of Host need not import libvirt for it.
type DomainDeviceModifyFlags = libvirt.DomainDeviceModifyFlags

// Device change flags, libvirt's values (virDomainDeviceModifyFlags).
const (
	// DOMAIN_DEVICE_MODIFY_LIVE changes the running domain.
	DOMAIN_DEVICE_MODIFY_LIVE = libvirt.DOMAIN_DEVICE_MODIFY_LIVE
	// DOMAIN_DEVICE_MODIFY_CONFIG changes the persistent definition.
	DOMAIN_DEVICE_MODIFY_CONFIG = libvirt.DOMAIN_DEVICE_MODIFY_CONFIG
	// DOMAIN_DEVICE_MODIFY_FORCE forces a media change (e.g. ejecting a
	// locked CD-ROM).
	DOMAIN_DEVICE_MODIFY_FORCE = libvirt.DOMAIN_DEVICE_MODIFY_FORCE
)

// closeReasonName names why libvirt closed a connection, for logs.
func closeReasonName(r libvirt.ConnectCloseReason) string {
	if n, ok := map[libvirt.ConnectCloseReason]string{libvirt.CONNECT_CLOSE_REASON_ERROR: "error", libvirt.CONNECT_CLOSE_REASON_EOF: "eof",
		libvirt.CONNECT_CLOSE_REASON_KEEPALIVE: "keepalive", libvirt.CONNECT_CLOSE_REASON_CLIENT: "client"}[r]; ok {
		return n
	}
	return "unknown"
}
