#!/usr/bin/env bash
# Installs what vmpayload's build, tests and demo need on Debian 12: apt
# packages (only the missing ones) and the Go modules. Idempotent; run as root.
#
# --go-only (or DEPS_GO_ONLY=1): only the Go step below (find Go, else install
# Debian's from bookworm-backports, let it fetch go.mod's toolchain); no other
# apt package and no go mod download. test/freshhost's quick check uses it.
set -euo pipefail
cd "$(dirname "$0")/.."
go_only=${DEPS_GO_ONLY:-0}
[ "${1:-}" != --go-only ] || go_only=1

PKGS=(
  # build
  gcc pkg-config libvirt-dev git ca-certificates
  # --connect ssh:// (test/remote: a real sshd on 127.0.0.1, and the client's ssh)
  openssh-server openssh-client
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
  # cloudbase-init's reader (its source: the pinned tarball or a checkout, test/cloudbaseinit/source.sh;
  # these bring every module it imports, none from PyPI: docs/windows.md)
  python3 python3-oslo.config python3-oslo.log python3-netaddr python3-yaml python3-jinja2 python3-requests python3-six
  # guest images
  mmdebstrap e2fsprogs
  # packaging checks and benchmarks
  rpm dpkg-dev hyperfine systemd man-db curl jq passwd
  # the packaged service under a real systemd (test/packaging/systemd_test.go)
  systemd-container
)
missing=()
((go_only)) || for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Go: the one on PATH or in /usr/local/go; else, on Debian 12, Debian's own
# from bookworm-backports (Go 1.23: bookworm's golang-go is 1.19, which predates
# toolchain switching), which then fetches the toolchain go.mod names through
# the module proxy (GOTOOLCHAIN=auto; Debian's go.env says local).
export PATH="$PATH:/usr/local/go/bin"
if command -v go >/dev/null; then
  ((!go_only)) || echo "deps: go on PATH: $(command -v go) (installing nothing)"
else
  . /etc/os-release
  if [ "${VERSION_CODENAME:-}" != bookworm ]; then
    echo "deps: Go is not installed (expected /usr/local/go, or Debian 12 to install it from bookworm-backports)" >&2
    exit 1
  fi
  src=/etc/apt/sources.list.d/vmpayload-bookworm-backports.sources
  if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
    echo "deps: adding bookworm-backports ($src) for Debian's Go 1.23"
    printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' >"$src"
  fi
  echo "deps: installing golang-go from bookworm-backports (Go 1.23; no go on PATH nor in /usr/local/go)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends -t bookworm-backports golang-go >/dev/null
fi
want=$(sed -n 's/^toolchain go//p' go.mod)
[ -n "$want" ] || want=$(sed -n 's/^go //p' go.mod)
# (asked outside the module: inside it, go would already try to switch)
have=$(cd / && go env GOVERSION | sed 's/^go//')
if [ "$(cd / && go env GOTOOLCHAIN)" = local ] && [ "$(printf '%s\n' "$want" "$have" | sort -V | head -1)" != "$want" ]; then
  # go.mod asks for a newer Go than this one: let it fetch that toolchain
  # (golang.org/toolchain, through GOPROXY) for every later go command too
  echo "deps: go $have is older than go.mod's go $want: go env -w GOTOOLCHAIN=auto (go fetches go$want through $(cd / && go env GOPROXY))"
  (cd / && go env -w GOTOOLCHAIN=auto)
fi
[ "$have" = "$(go env GOVERSION | sed 's/^go//')" ] || echo "deps: go $have runs go.mod's toolchain $(go env GOVERSION) (GOTOOLCHAIN)"
((go_only)) || go mod download
echo "deps: ok ($(go version))"
