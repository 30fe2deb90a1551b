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

if command -v systemd-tmpfiles >/dev/null 2>&1; then
	systemd-tmpfiles --create /usr/lib/tmpfiles.d/vmpayload.conf || true
fi
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
	if [ "$upgrade" = yes ]; then
		# restart only when it was running; never start it on install
		systemctl try-restart vmpayload.service >/dev/null 2>&1 || true
	fi
fi
exit 0
