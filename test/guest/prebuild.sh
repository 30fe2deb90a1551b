#!/bin/bash
# test/guest/prebuild.sh: start building (or finding) both guest base images in
# the background and return at once.
#
# On a fresh machine `make test` needs both images only when it reaches
# test/e2e, after about a quarter of an hour of other packages; the two
# mmdebstrap builds take 4-5 minutes each. Started first, at low CPU priority
# and one after the other, they are done by then instead of holding up the
# first real-guest tests. Nothing depends on this script having run: a test
# that asks for an image while its build runs waits on build-base.sh's
# per-suite lock and takes the finished image; when a background build
# failed, the test's own call builds again and reports what went wrong.
#
# Progress goes to ${VMPAYLOAD_GUEST_CACHE:-/var/cache/vmpayload/guests}/prebuild.log.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${VMPAYLOAD_GUEST_CACHE:-/var/cache/vmpayload/guests}
mkdir -p "$cache"
log=$cache/prebuild.log

# setsid: the builds outlive this script and are not in make's process
# group; their output never reaches make's terminal.
setsid nice -n 10 bash -c '
	for suite in bookworm trixie; do
		printf "prebuild: %s: %s\n" "$(date -u +%T)" "$suite"
		bash "$1/build-base.sh" "$suite" || printf "prebuild: %s failed (the test will build it again)\n" "$suite"
	done
	printf "prebuild: %s: done\n" "$(date -u +%T)"
' prebuild "$here" </dev/null >"$log" 2>&1 &
echo "prebuild.sh: building the guest images in the background (log: $log)" >&2
