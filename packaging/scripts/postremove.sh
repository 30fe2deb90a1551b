#!/bin/sh
# vmpayload postremove (deb postrm / rpm %postun). Keeps /etc/vmpayload and
# the spool's jobs; /run/payload stays too (domains may still use images).
set -e
# deb: $1 = remove | purge | upgrade | ...; rpm: $1 = 0 (erase) or 1 (upgrade).
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
case "$1" in
	remove | purge | 0)
		rm -f /run/vmpayload/vmpayload.sock
		rmdir /run/vmpayload 2>/dev/null || true
		;;
esac
if [ "$1" = purge ]; then
	# dpkg has removed the conffile; remove what is left only when empty
	for d in /var/spool/vmpayload/incoming /var/spool/vmpayload/processing \
		/var/spool/vmpayload/done /var/spool/vmpayload/failed /var/spool/vmpayload \
		/etc/vmpayload/secrets /etc/vmpayload; do
		rmdir "$d" 2>/dev/null || true
	done
fi
exit 0
