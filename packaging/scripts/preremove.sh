#!/bin/sh
# vmpayload preremove (deb prerm / rpm %preun).
set -e
# deb: $1 = remove | upgrade | deconfigure | failed-upgrade; rpm: $1 = 0 (erase) or 1 (upgrade).
case "$1" in
	remove | deconfigure | 0) ;;
	*) exit 0 ;;
esac
if [ -d /run/systemd/system ]; then
	systemctl stop vmpayload.service >/dev/null 2>&1 || true
fi
# drop the enablement symlinks; --no-reload works without a running systemd
if command -v systemctl >/dev/null 2>&1; then
	systemctl --no-reload disable vmpayload.service >/dev/null 2>&1 || true
fi
exit 0
