#!/bin/sh
# vmpayload postremove (deb postrm / rpm %postun). Keeps /etc/vmpayload and
# the spool's jobs; /run/payload stays too (domains may still use images).
set -e

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
# deb: $1 = remove | purge | upgrade | ...; rpm: $1 = 0 (erase) or 1 (upgrade).
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
case "$1" in
	remove | purge | 0)
		rm -f /run/vmpayload/vmpayload.sock
		rmdir /run/vmpayload 2>/dev/null || true
		# the qemu hook is gone: libvirt must stop calling it
		reload_libvirt || true
		;;
esac
if [ "$1" = purge ]; then
	# the agent's guest-report tracking (spool/guest, made at run time) is
	# its own state, not jobs or results: it goes with the package
	rm -rf /var/spool/vmpayload/guest
	# the recipe key the agent made on its first job (docs/security.md,
	# "Recipe key") is its own state too: purging forgets it, so recipes
	# sealed with it no longer rebuild (keep a copy to reinstall later)
	rm -f /etc/vmpayload/secrets/.recipe.key
	# dpkg has removed the conffile; remove what is left only when empty
	for d in /var/spool/vmpayload/incoming /var/spool/vmpayload/processing \
		/var/spool/vmpayload/done /var/spool/vmpayload/failed /var/spool/vmpayload/rejected /var/spool/vmpayload \
		/etc/vmpayload/secrets /etc/vmpayload; do
		rmdir "$d" 2>/dev/null || true
	done
fi
exit 0
