#!/usr/bin/env bash
# Builds dist/vmpayload_<ver>_amd64.deb and dist/vmpayload-<ver>.x86_64.rpm:
# the two binaries (vmpayload, pure Go, with -X main.version=<ver>; vmpayloadd,
# the agent), their man pages and bash/zsh/fish completions (cobra's
# generators: "vmpayload gendocs", built with -tags gendocs), then nfpm (pinned
# in packaging/tools/go.mod, outside the product's go.mod).
#   packaging/build.sh            # both packages
#   packaging/build.sh deb        # one of them
# Needs Go and gcc (the daemon's cgo; -tags libvirt_dlopen: no libvirt-dev); prints the package paths.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

formats=("$@")
((${#formats[@]})) || formats=(deb rpm)

VMPAYLOAD_VERSION=$(packaging/version.sh)
VMPAYLOAD_BUILD=dist/pkgbuild
export VMPAYLOAD_VERSION VMPAYLOAD_BUILD
# file times and man page dates from the commit: same commit, same packages
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH

rm -rf "$VMPAYLOAD_BUILD"
mkdir -p "$VMPAYLOAD_BUILD/docs"
echo "packaging: vmpayload $VMPAYLOAD_VERSION"

ldflags="-s -w -X main.version=$VMPAYLOAD_VERSION"
CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$VMPAYLOAD_BUILD/vmpayload" ./cmd/vmpayload
go build -tags libvirt_dlopen -trimpath -buildvcs=false -ldflags "-s -w" -o "$VMPAYLOAD_BUILD/vmpayloadd" ./cmd/vmpayloadd
got=$("$VMPAYLOAD_BUILD/vmpayload" version)
if [[ $got != "vmpayload $VMPAYLOAD_VERSION" ]]; then
	echo "packaging: the binary says \"$got\", want \"vmpayload $VMPAYLOAD_VERSION\"" >&2
	exit 1
fi

# man pages (the date from SOURCE_DATE_EPOCH) and completions, gzipped pages
go run -tags gendocs -trimpath -buildvcs=false -ldflags "$ldflags" ./cmd/vmpayload gendocs "$VMPAYLOAD_BUILD/docs"
gzip -9n "$VMPAYLOAD_BUILD"/docs/man?/*

# nfpm v2.44.0: the "tool" of packaging/tools/go.mod
(cd packaging/tools && go build -o "../../$VMPAYLOAD_BUILD/nfpm" github.com/goreleaser/nfpm/v2/cmd/nfpm)

for f in "${formats[@]}"; do
	case "$f" in
	deb) out="dist/vmpayload_${VMPAYLOAD_VERSION}_amd64.deb" ;;
	rpm) out="dist/vmpayload-${VMPAYLOAD_VERSION}.x86_64.rpm" ;;
	*) echo "packaging: unknown format $f (deb, rpm)" >&2; exit 2 ;;
	esac
	rm -f "$out"
	"$VMPAYLOAD_BUILD/nfpm" package --config packaging/nfpm.yaml --packager "$f" --target "$out" | grep -v "^using \|packager\.\.\.$" || true
	[[ -s $out ]] || { echo "packaging: nfpm made no $out" >&2; exit 1; }
	echo "$out"
done
