#!/bin/sh
# Start virtlogd and libvirtd by hand (no systemd on CI machines) and wait
# until the qemu:///system driver answers. Idempotent: running daemons are
# left alone. Exit status is non-zero when libvirtd does not answer within
# VMPAYLOAD_LIBVIRTD_WAIT seconds (default 60).
set -eu

wait_s=${VMPAYLOAD_LIBVIRTD_WAIT:-60}
uri=qemu:///system

log() { printf 'libvirtd.sh: %s\n' "$*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
	log "must run as root (qemu:///system needs a privileged libvirtd)"
	exit 1
fi

for bin in virtlogd libvirtd virsh; do
	if ! command -v "$bin" >/dev/null 2>&1; then
		log "$bin not found; install libvirt-daemon-system libvirt-clients"
		exit 1
	fi
done

# Runtime directories that a systemd unit / tmpfiles.d would normally create.
mkdir -p /run/libvirt /var/lib/libvirt/qemu /var/cache/libvirt/qemu /var/log/libvirt/qemu

# /dev/kvm as udev would leave it (root:kvm 0660). On machines without udev it
# is root:root 0600: libvirtd (root) then finds KVM when it probes QEMU but
# the QEMU user cannot open it, so libvirtd throws its capabilities cache away
# and re-probes QEMU on every define and start (40-56 s each instead of
# 0.03 s). Fix it before libvirtd starts so its first probe is the right one.
if [ -c /dev/kvm ] && getent group kvm >/dev/null 2>&1; then
	if [ "$(stat -c %G:%a /dev/kvm)" != "kvm:660" ]; then
		log "setting /dev/kvm to root:kvm 0660 (no udev here)"
		chgrp kvm /dev/kvm && chmod 0660 /dev/kvm
		# A libvirtd started before the fix has a stale capabilities cache.
		rm -rf /var/cache/libvirt/qemu/capabilities
	fi
fi

# A daemon of ours runs when its pid file (in /run, as libvirtd and virtlogd
# write it) names a live process of that name. Not pgrep: it also sees
# daemons in other pid namespaces (`test/hosts.sh sandbox`'s private libvirtd),
# which do not serve this /run.
running() {
	pid=$(cat "/run/$1.pid" 2>/dev/null) || return 1
	[ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ]
}

ensure_daemons() {
	if ! running virtlogd; then
		log "starting virtlogd"
		virtlogd -d
	fi
	if ! running libvirtd; then
		# A stale pid file from a killed daemon is harmless (libvirtd locks
		# it), but remove it so it does not mislead anyone.
		if [ -f /run/libvirtd.pid ] && ! kill -0 "$(cat /run/libvirtd.pid 2>/dev/null)" 2>/dev/null; then
			rm -f /run/libvirtd.pid
		fi
		log "starting libvirtd"
		libvirtd -d
	fi
}

i=0
while :; do
	# Also covers a libvirtd that was still shutting down when we looked.
	ensure_daemons
	if virsh -c "$uri" version >/dev/null 2>&1; then
		log "libvirtd answers on $uri"
		exit 0
	fi
	i=$((i + 1))
	if [ "$i" -ge "$((wait_s * 4))" ]; then
		log "libvirtd did not answer on $uri within ${wait_s}s"
		virsh -c "$uri" version >&2 || true
		exit 1
	fi
	sleep 0.25
done
