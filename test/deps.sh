#!/usr/bin/env bash
# Installs what vmpayload's build, tests and demo need on Debian 12: apt
# packages (only the missing ones) and the Go modules. Idempotent; run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(
  # build
  gcc pkg-config libvirt-dev git ca-certificates
  # Ignition's own binary, built by test/e2e's TestAgentIgnitionFwCfgE2E (cgo, libblkid)
  libblkid-dev
  # judges and peers of payload images
  cloud-init xorriso mtools dosfstools genisoimage cloud-image-utils util-linux openssl whois
  # a third Joliet reader for payload/image's TestJolietTree (issue 35)
  p7zip-full
  # judges of sysprep answer files: xmllint, and the CLDR Windows zone table
  libxml2-utils unicode-cldr-core
  # libvirt and qemu for integration and guest tests
  libvirt-daemon libvirt-daemon-driver-qemu libvirt-daemon-system libvirt-clients qemu-system-x86 qemu-utils
  # s390x and ppc64 domains for the Ignition blockdev delivery (issue 41): qemu-system-s390x, qemu-system-ppc64;
  # ppc64 pseries is also the machine without a floppy controller for the sysprep medium choice
  qemu-system-misc qemu-system-ppc
  # cloudbase-init's reader (its source comes from a checkout, VMPAYLOAD_CLOUDBASE_INIT: docs/windows.md)
  python3 python3-oslo.config python3-oslo.log python3-netaddr python3-yaml python3-jinja2 python3-requests python3-six
  # guest images
  mmdebstrap e2fsprogs
  # packaging checks and benchmarks
  rpm dpkg-dev hyperfine systemd man-db curl jq passwd
  # the packaged service under a real systemd (test/packaging/systemd_test.go)
  systemd-container
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "deps: Go is not installed (expected /usr/local/go)" >&2; exit 1; }
go mod download
echo "deps: ok"
