#!/bin/sh
# vmpayload preinstall (deb preinst / rpm %pre): the socket group.
set -e
if ! getent group vmpayload >/dev/null 2>&1; then
	if command -v groupadd >/dev/null 2>&1; then
		groupadd --system vmpayload
	elif command -v addgroup >/dev/null 2>&1; then
		addgroup --system vmpayload >/dev/null
	else
		echo "vmpayload: cannot create group vmpayload (no groupadd/addgroup)" >&2
	fi
fi
exit 0
