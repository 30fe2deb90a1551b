#!/bin/sh
# vmpayload postinstall (deb postinst / rpm %post). Works without a running
# systemd (containers, CI, image builds): only the tmpfiles step then.
set -e
# deb: $1 = configure [old-version]; rpm: $1 = 1 (install) or 2 (upgrade).
case "$1" in
	abort-*) exit 0 ;;
esac
upgrade=no
if [ "$1" = configure ] && [ -n "$2" ]; then upgrade=yes; fi
if [ "$1" = 2 ]; then upgrade=yes; fi

# libvirt discovers hooks (/etc/libvirt/hooks/qemu.d/vmpayload) only when the
# daemon starts or reloads. Reload libvirtd/virtqemud so it sees the change;
# never restart it (reload keeps running guests untouched). Under systemd:
# "systemctl reload" of an active unit only; otherwise SIGHUP to the running
# daemon (its pidfile, else pgrep). A daemon that is not running reads the
# hooks when it starts.
reload_libvirt() {
	for d in virtqemud libvirtd; do
		if [ -d /run/systemd/system ]; then
			if systemctl is-active --quiet "$d.service" 2>/dev/null; then
				systemctl reload "$d.service" >/dev/null 2>&1 ||
					echo "vmpayload: systemctl reload $d failed; reload it to (de)activate the hook" >&2
			fi
			continue
		fi
		pid=
		if [ -r "/run/$d.pid" ]; then
			pid=$(cat "/run/$d.pid" 2>/dev/null) || pid=
			if [ -z "$pid" ] || [ "$(cat "/proc/$pid/comm" 2>/dev/null)" != "$d" ]; then pid=; fi
		fi
		if [ -z "$pid" ] && command -v pgrep >/dev/null 2>&1; then
			pid=$(pgrep -x "$d" 2>/dev/null) || pid=
		fi
		for p in $pid; do
			kill -HUP "$p" 2>/dev/null || true
		done
	done
}

# Without /proc (a chroot, rpm --root) systemd-tmpfiles cannot run; the
# directories are then made at boot by systemd-tmpfiles-setup.service.
if command -v systemd-tmpfiles >/dev/null 2>&1 && [ -e /proc/self ]; then
	systemd-tmpfiles --create /usr/lib/tmpfiles.d/vmpayload.conf || true
fi
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
	if [ "$upgrade" = yes ]; then
		# restart only when it was running; never start it on install
		systemctl try-restart vmpayload.service >/dev/null 2>&1 || true
	fi
fi
# the qemu hook (install and upgrade)
reload_libvirt || true
exit 0
