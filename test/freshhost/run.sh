#!/usr/bin/env bash
# The README's `make demo` on a fresh Debian 12 host that has no Go (issue 43):
# a clean bookworm root from mmdebstrap (minbase plus make, git and
# ca-certificates: "a clone" and "make" are the README's prerequisites), without
# /usr/local/go, gets this working tree copied in and runs `make demo` in a
# chroot inside its own mount and pid namespaces (no systemd as PID 1 here;
# policy-rc.d keeps the packages' services from starting). test/deps.sh must
# install Debian's Go and have it fetch go.mod's toolchain through the module
# proxy. Run as root; needs the network (the Debian mirror, proxy.golang.org).
#
# Cache (like the guest images'): ${VMPAYLOAD_FRESHHOST_CACHE:-/var/cache/vmpayload/freshhost}
# holds the base root's tarball (rebuilt when older than 7 days) and the .deb
# files apt downloads (bind-mounted as the root's /var/cache/apt/archives), so
# that later runs do not download the packages again (they still install
# them), and Go's build cache (the root's /root/.cache/go-build). Go itself,
# its toolchain and the modules are not cached: every run installs Debian's Go
# and fetches the toolchain and modules through the proxy. Each line of
# make demo's output is prefixed with the seconds since it started.
#
# `run.sh go` is the quick variant (TestFreshDebianHostGoBootstrap, in make
# test): the same root, but instead of `make demo` only deps.sh's Go step
# (`test/deps.sh --go-only`: no other apt package), then `go version` and
# `CGO_ENABLED=0 go build ./cmd/vmpayload` and the binary's `version`.
#
# Prints each stage's duration; exits non-zero when `make demo` (or the quick
# variant's steps) fails or when the root had a Go before deps.sh ran.
set -euo pipefail
mode=${1:-demo}
case $mode in
demo) inner='make demo' ;;
go) inner='bash test/deps.sh --go-only && go version && CGO_ENABLED=0 go build -trimpath -o /tmp/vmpayload ./cmd/vmpayload && /tmp/vmpayload version' ;;
*) echo "usage: $0 [demo|go]" >&2; exit 2 ;;
esac
repo=$(cd "$(dirname "$0")/../.." && pwd)
cache=${VMPAYLOAD_FRESHHOST_CACHE:-/var/cache/vmpayload/freshhost}
mirror=${VMPAYLOAD_DEBIAN_MIRROR:-http://deb.debian.org/debian}
log() { echo "freshhost: $*" >&2; }
now() { date +%s; }
t0=$(now)

[ "$(id -u)" = 0 ] || { log "run as root"; exit 1; }
mkdir -p "$cache/apt-archives/partial" "$cache/go-build"
base="$cache/bookworm-minbase.tar"
exec 9>"$cache/.lock"
flock 9
if [ ! -s "$base" ] || [ -n "$(find "$base" -mtime +7)" ]; then
	log "building the base root with mmdebstrap into $base"
	mmdebstrap --quiet --format=tar --variant=minbase --include=make,git,ca-certificates bookworm "$base.tmp" \
		"deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
		"deb http://deb.debian.org/debian-security bookworm-security main"
	mv "$base.tmp" "$base"
	log "base root built in $(($(now) - t0)) s"
else
	log "base root from the cache: $base"
fi
flock -u 9

root=$(mktemp -d /var/tmp/vmpx-freshhost.XXXXXX)
trap 'rm -rf --one-file-system "$root"' EXIT
tar -C "$root" -xf "$base"
for p in usr/local/go usr/bin/go usr/lib/go; do
	[ ! -e "$root/$p" ] || { log "the fresh root has /$p"; exit 1; }
done
mkdir -p "$root/src"
# the working tree as a clone has it (tracked and untracked, not ignored files)
if git -C "$repo" rev-parse --git-dir >/dev/null 2>&1; then
	git -C "$repo" ls-files -co --exclude-standard -z | tar -C "$repo" --null -T - -c | tar -C "$root/src" -x
else
	tar -C "$repo" --exclude=./bin --exclude=./dist -c . | tar -C "$root/src" -x
fi
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 0755 "$root/usr/sbin/policy-rc.d"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
# The machine's own extra CAs (a TLS-intercepting egress proxy on CI machines)
# come along with its network: the fresh root trusts what the host trusts.
extra_ca=0
for c in /usr/local/share/ca-certificates/*.crt; do
	[ -e "$c" ] || continue
	cp "$c" "$root/usr/local/share/ca-certificates/" && extra_ca=1
done
t1=$(now)
log "root ready in $((t1 - t0)) s; running $inner in it"

# Everything the demo starts dies with the namespace's PID 1 (the chroot's shell).
status=0
unshare --mount --pid --fork --propagation private /bin/bash -c '
	set -e
	root=$1 cache=$2
	mount --rbind /dev "$root/dev"
	mount -t proc proc "$root/proc"
	mount -t sysfs sysfs "$root/sys"
	mount -t tmpfs tmpfs "$root/tmp"
	mount --bind "$cache/apt-archives" "$root/var/cache/apt/archives"
	mkdir -p "$root/root/.cache/go-build"
	mount --bind "$cache/go-build" "$root/root/.cache/go-build"
	exec chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		/bin/bash -c "cd /src && command -v go && exit 3; [ \"\$0\" = 0 ] || update-ca-certificates >/dev/null 2>&1; set -o pipefail; { $4; } 2>&1 | while IFS= read -r l; do printf \"[%4ss] %s\\n\" \"\$SECONDS\" \"\$l\"; done" "$3"
' freshhost "$root" "$cache" "$extra_ca" "$inner" || status=$?
t2=$(now)
if [ "$status" = 3 ]; then
	log "the fresh root had a go on PATH before $mode"
	exit 1
fi
log "$inner in the fresh root: exit $status in $((t2 - t1)) s (total $((t2 - t0)) s)"
exit "$status"
