#!/usr/bin/env bash
# Run the agent's libvirtd-restart integration test (and, with arguments,
# any other go test selection of ./agent) against a PRIVATE libvirtd, so that
# killing libvirtd never touches the host's shared daemon or its guests.
#
#   test/agent/sandbox.sh                       # TestAgentLibvirtdRestart
#   test/agent/sandbox.sh -test.run 'TestAgent' -test.v   # any test-binary flags
#   SANDBOX_PKG=./agent/engine test/agent/sandbox.sh -test.run TestLibvirtdMediaChangeStress -test.v
#   SANDBOX_EXEC=1 test/agent/sandbox.sh CMD ARGS...   # any command, from the repository root
#                                                     # (test/soak.sh: the soak with libvirtd restarts)
#
# How: unshare(1) gives the script its own mount, network and pid namespaces
# (pgrep and test/libvirtd.sh see only the private daemons);
# tmpfs over /run (sockets, pid files, live domain state), /var/lib/libvirt
# and /var/cache/libvirt, and a copy of /etc/libvirt without the host's
# persistent domains, networks and autostart links make virtlogd+libvirtd
# started here a separate qemu:///system. Domains it starts are TCG guests
# with no NIC, so the empty network namespace is enough. Everything the
# private daemons started is gone when the namespace's processes exit; the
# script kills them by pid on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

if [ "$(id -u)" -ne 0 ]; then
	echo "sandbox.sh: must run as root" >&2
	exit 1
fi

if [ "${VMPAYLOAD_SANDBOX:-}" != "1" ]; then
	work=$(mktemp -d /var/tmp/vmpx-int-sandbox.XXXXXX)
	trap '[ -n "${SANDBOX_KEEP:-}" ] || rm -rf "$work"' EXIT
	# Build outside the namespace (it has no network for the module proxy).
	# SANDBOX_EXEC: the caller built what its command needs.
	if [ "${SANDBOX_EXEC:-}" != "1" ]; then
		go test -tags libvirt_dlopen -c -o "$work/pkg.test" "${SANDBOX_PKG:-./agent}"
		# vmpayload runs the agent by exec'ing the vmpayloadd next to it
		CGO_ENABLED=0 go build -o "$work/vmpayload" ./cmd/vmpayload
		go build -tags libvirt_dlopen -o "$work/vmpayloadd" ./cmd/vmpayloadd
	fi
	VMPAYLOAD_SANDBOX=1 SANDBOX_WORK=$work unshare --mount --net --pid --fork --mount-proc --propagation private "$0" "$@"
	exit $?
fi

work=$SANDBOX_WORK
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p "$work/var-lib-libvirt" "$work/var-cache-libvirt"
mount --bind "$work/var-lib-libvirt" /var/lib/libvirt
mount --bind "$work/var-cache-libvirt" /var/cache/libvirt
cp -a /etc/libvirt "$work/etc-libvirt"
rm -rf "$work/etc-libvirt/qemu"/*.xml "$work/etc-libvirt/qemu/autostart" \
	"$work/etc-libvirt/qemu/networks" "$work/etc-libvirt/storage" "$work/etc-libvirt/nwfilter"
mount --bind "$work/etc-libvirt" /etc/libvirt
ip link set lo up 2>/dev/null || true

pids=()
cleanup() {
	# Our private daemons, by pid (their pid files live on our tmpfs /run).
	for f in /run/libvirtd.pid /run/virtlogd.pid; do
		[ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
	done
}
trap cleanup EXIT

sh "$root/test/libvirtd.sh"
echo "sandbox.sh: private libvirtd pid $(cat /run/libvirtd.pid)" >&2

if [ "${SANDBOX_EXEC:-}" = "1" ]; then
	cd "$root"
	"$@"
	exit $?
fi

args=("$@")
if [ ${#args[@]} -eq 0 ]; then
	args=(-test.run '^TestAgentLibvirtdRestart$' -test.v)
fi
cd "$root/${SANDBOX_PKG:-./agent}"
VMPAYLOAD_LIBVIRTD=1 VMPAYLOAD_LIBVIRTD_RESTART=1 VMPAYLOAD_AGENT_BIN="$work/vmpayload" \
	"$work/pkg.test" -test.count=1 -test.timeout 30m "${args[@]}"
