#!/usr/bin/env bash
# Builds dist/vmpayload_<ver>_amd64.deb and dist/vmpayload-<ver>.x86_64.rpm:
# the binary (with -X main.version=<ver>), its man pages and completions
# (packaging/gendocs, from the binary's help), then nfpm (pinned in
# packaging/tools/go.mod, outside the product's go.mod).
#   packaging/build.sh            # both packages
#   packaging/build.sh deb        # one of them
# Needs Go and gcc (cgo; -tags libvirt_dlopen: no libvirt-dev); prints the package paths.
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

go build -tags libvirt_dlopen -trimpath -buildvcs=false -ldflags "-s -w -X main.version=$VMPAYLOAD_VERSION" \
	-o "$VMPAYLOAD_BUILD/vmpayload" ./cmd/vmpayload
got=$("$VMPAYLOAD_BUILD/vmpayload" version)
if [[ $got != "vmpayload $VMPAYLOAD_VERSION" ]]; then
	echo "packaging: the binary says \"$got\", want \"vmpayload $VMPAYLOAD_VERSION\"" >&2
	exit 1
fi

go run -tags libvirt_dlopen ./packaging/gendocs -bin "$VMPAYLOAD_BUILD/vmpayload" -out "$VMPAYLOAD_BUILD/docs" \
	-version "$VMPAYLOAD_VERSION" -date "$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)"

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
