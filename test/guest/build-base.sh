#!/bin/bash
# Build (or reuse) a Debian guest base image for the vmpayload end-to-end suite.
#
#   test/guest/build-base.sh SUITE        SUITE = bookworm | trixie
#
# Prints the image directory on stdout (the only stdout line); progress goes
# to stderr. The directory holds:
#   base.raw      ext4 root filesystem (whole disk, no partition table)
#   vmlinuz       kernel for direct boot
#   initrd.img    initramfs with virtio/ATA/AHCI/SCSI CD-ROM, isofs, vfat, ext4
#   packages.txt  dpkg name=version list of the image
#   meta.env      SUITE, KERNEL, KEY, BUILD_SECONDS, RELEASE_DATE, ...
#
# Images are cached in ${VMPAYLOAD_GUEST_CACHE:-/var/cache/vmpayload/guests}/
# <suite>-<key>/, key = sha256(this script + test/guest/image/* + suite +
# mirror + Date: of the suite's InRelease). A run with an existing complete
# directory only prints it. Builds happen in a temporary directory in the
# cache and are renamed into place when complete; a per-suite flock makes
# concurrent callers wait for one build.
#
# Needs root, mmdebstrap, e2fsprogs (mkfs.ext4 -d), curl; no loop devices and
# no mounts of the image (mmdebstrap's own chroot mounts aside).
#
# Environment:
#   VMPAYLOAD_GUEST_CACHE   cache root (default /var/cache/vmpayload/guests)
#   VMPAYLOAD_GUEST_MIRROR  Debian mirror (default: the first URIs: of the
#                           host's deb.debian.org-style sources, else
#                           http://deb.debian.org/debian)
#   VMPAYLOAD_GUEST_SIZE    size of base.raw (default 3G, sparse)
#   VMPAYLOAD_GUEST_OFFLINE=1  do not ask the mirror for the Release date;
#                           reuse the newest cached image of the same script
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
suite=${1:-}
cache=${VMPAYLOAD_GUEST_CACHE:-/var/cache/vmpayload/guests}
size=${VMPAYLOAD_GUEST_SIZE:-3G}

log() { printf 'build-base: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

case "$suite" in
bookworm | trixie) ;;
*) die "usage: $0 bookworm|trixie" ;;
esac
[ "$(id -u)" -eq 0 ] || die "must run as root (mmdebstrap root mode, mkfs.ext4 -d with root-owned files)"
for bin in mmdebstrap mkfs.ext4 curl sha256sum flock; do
	command -v "$bin" >/dev/null || die "$bin not found"
done

mirror=${VMPAYLOAD_GUEST_MIRROR:-}
if [ -z "$mirror" ]; then
	mirror=$(sed -n 's/^URIs:[[:space:]]*\(http[^[:space:]]*\/debian\)[[:space:]]*$/\1/p' \
		/etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1 || true)
	mirror=${mirror:-http://deb.debian.org/debian}
fi

# Packages per suite. Network renderer: bookworm's cloud-init 22.4 picks ENI
# (ifupdown) first on Debian, as Debian 12 cloud images do; trixie's Debian
# cloud images use netplan + systemd-networkd (+ systemd-resolved), so the
# trixie image does too and cloud-init 25.1 renders netplan.
common=cloud-init,systemd-sysv,udev,util-linux,iproute2,openssh-server,openssh-client,sudo,linux-image-amd64,initramfs-tools,kmod,procps,dbus,e2fsprogs,netbase,python3,ca-certificates,less,tzdata
case "$suite" in
bookworm) extra=ifupdown,isc-dhcp-client ;;
trixie) extra=netplan.io,systemd-resolved ;;
esac

# Cache key.
script_hash=$( (cat "$0"; cd "$here/image" && for f in $(LC_ALL=C ls); do printf '%s\n' "$f"; cat "$f"; done) | sha256sum | cut -c1-64)
mkdir -p "$cache"
chmod 0755 "$cache"
release_date=
if [ "${VMPAYLOAD_GUEST_OFFLINE:-0}" != 1 ]; then
	release_date=$(curl -fsS --max-time 30 "$mirror/dists/$suite/InRelease" | sed -n 's/^Date: //p' | head -n1 || true)
fi
if [ -z "$release_date" ]; then
	# Offline: newest complete image built by this same script.
	for d in $(ls -1td "$cache/$suite"-*/ 2>/dev/null); do
		d=${d%/}
		if [ -f "$d/complete" ] && grep -qx "SCRIPT_HASH=$script_hash" "$d/meta.env"; then
			log "offline: reusing $d"
			echo "$d"
			exit 0
		fi
	done
	die "cannot read the Release date of $suite from $mirror and no cached image matches"
fi
key=$(printf '%s\n%s\n%s\n%s\n' "$script_hash" "$suite" "$mirror" "$release_date" | sha256sum | cut -c1-16)
out="$cache/$suite-$key"

if [ -f "$out/complete" ]; then
	echo "$out"
	exit 0
fi

exec 9>"$cache/.$suite.lock"
log "waiting for the $suite build lock"
flock 9
if [ -f "$out/complete" ]; then
	echo "$out"
	exit 0
fi

tmp=$(mktemp -d "$cache/.build-$suite-$key.XXXXXX")
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT
rootfs="$tmp/rootfs"
start=$(date +%s)
log "building $suite ($release_date) from $mirror into $tmp"

case "$suite" in
bookworm)
	sources="deb $mirror bookworm main
deb $mirror bookworm-updates main"
	;;
trixie)
	# Own sources entry: the host's apt only knows bookworm.
	sources="deb $mirror trixie main
deb $mirror trixie-updates main"
	;;
esac

img="$here/image"
mmdebstrap --variant=apt --mode=root --format=directory \
	--include="$common,$extra" \
	--essential-hook='mkdir -p "$1/etc/initramfs-tools/conf.d" "$1/usr/share/initramfs-tools/modules.d"' \
	--essential-hook='printf "MODULES=list\n" > "$1/etc/initramfs-tools/conf.d/vmpayload-e2e.conf"' \
	--essential-hook="install -m 0644 '$img/modules' \"\$1/usr/share/initramfs-tools/modules.d/vmpayload-e2e\"" \
	--aptopt='Acquire::Retries "3"' \
	--dpkgopt='path-exclude=/usr/share/doc/*' \
	--dpkgopt='path-include=/usr/share/doc/*/copyright' \
	--dpkgopt='path-exclude=/usr/share/man/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' \
	--customize-hook="install -m 0644 '$img/90-vmpayload-e2e.cfg' \"\$1/etc/cloud/cloud.cfg.d/90-vmpayload-e2e.cfg\"" \
	--customize-hook="install -D -m 0755 '$img/report' \"\$1/usr/local/lib/vmpayload-e2e/report\"" \
	--customize-hook="install -m 0644 '$img/vmpx-report.service' '$img/vmpx-report-nocloud.service' \"\$1/etc/systemd/system/\"" \
	--customize-hook='chroot "$1" systemctl enable vmpx-report.service vmpx-report-nocloud.service' \
	--customize-hook='for u in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer man-db.timer; do ln -sf /dev/null "$1/etc/systemd/system/$u"; done' \
	--customize-hook='printf "/dev/vda / ext4 rw,errors=remount-ro 0 1\n" > "$1/etc/fstab"' \
	--customize-hook='printf "LANG=C.UTF-8\n" > "$1/etc/default/locale"' \
	--customize-hook='printf "debian\n" > "$1/etc/hostname"' \
	--customize-hook='printf "127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n" > "$1/etc/hosts"' \
	--customize-hook='if [ -x "$1/sbin/ifup" ] || [ -x "$1/usr/sbin/ifup" ]; then printf "auto lo\niface lo inet loopback\n\nsource /etc/network/interfaces.d/*\n" > "$1/etc/network/interfaces"; fi' \
	--customize-hook='rm -f "$1"/etc/ssh/ssh_host_*' \
	--customize-hook='if [ ! -L "$1/etc/resolv.conf" ]; then : > "$1/etc/resolv.conf"; fi' \
	--customize-hook="install -m 0644 '$img/modules' \"\$1/etc/initramfs-tools/modules\"" \
	--customize-hook='cmp -s "$1/etc/initramfs-tools/modules" "$1/usr/share/initramfs-tools/modules.d/vmpayload-e2e" || chroot "$1" update-initramfs -u -k all >/dev/null' \
	--customize-hook='chroot "$1" sh -c "lsinitramfs /boot/initrd.img-*" > "$1/root/.vmpx-initrd-list"' \
	--customize-hook='chroot "$1" dpkg-query -W -f "\${Package}=\${Version}\n" > "$1/root/.vmpx-packages"' \
	--customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin; : > "$1/etc/machine-id"; rm -f "$1/var/lib/dbus/machine-id"' \
	"$suite" "$rootfs" - <<<"$sources" >&2

[ -x "$rootfs/usr/lib/systemd/systemd-networkd" ] || [ -x "$rootfs/lib/systemd/systemd-networkd" ] || [ "$suite" = bookworm ] ||
	die "trixie image has no systemd-networkd"

mv "$rootfs/root/.vmpx-packages" "$tmp/packages.txt"
mv "$rootfs/root/.vmpx-initrd-list" "$tmp/initrd-list.txt"
kernel=$(cd "$rootfs/boot" && ls -1 vmlinuz-* | sed 's/^vmlinuz-//' | sort -V | tail -n1)
[ -n "$kernel" ] || die "no kernel in $rootfs/boot"
cp "$rootfs/boot/vmlinuz-$kernel" "$tmp/vmlinuz"
cp "$rootfs/boot/initrd.img-$kernel" "$tmp/initrd.img"
initrd_list=$(cat "$tmp/initrd-list.txt")
for m in isofs sr_mod ahci ata_piix virtio_scsi virtio_blk ext4 vfat; do
	grep -q "/$m\.ko" <<<"$initrd_list" || die "initramfs lacks $m"
done
debootstrap_s=$(($(date +%s) - start))

truncate -s "$size" "$tmp/base.raw"
mkfs.ext4 -q -F -L vmpx-root -E root_owner=0:0 -d "$rootfs" "$tmp/base.raw" >&2
rm -rf "$rootfs"
end=$(date +%s)

cat >"$tmp/meta.env" <<EOF
SUITE=$suite
KEY=$key
SCRIPT_HASH=$script_hash
MIRROR=$mirror
RELEASE_DATE="$release_date"
KERNEL=$kernel
CLOUD_INIT=$(sed -n 's/^cloud-init=//p' "$tmp/packages.txt")
BUILT_AT=$(date -u +%Y-%m-%dT%H:%M:%SZ)
ROOTFS_SECONDS=$debootstrap_s
BUILD_SECONDS=$((end - start))
EOF
chmod 0755 "$tmp"
chmod 0644 "$tmp"/*
touch "$tmp/complete"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
log "built $out in $((end - start)) s (rootfs $debootstrap_s s)"
echo "$out"
