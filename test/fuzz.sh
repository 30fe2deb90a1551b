#!/bin/bash
# Run every fuzz target for a bounded time (FUZZTIME, default 30s each; make test passes 10s) and
# fail when one finds a crasher. New crashers are written by go test to the
# package's testdata/fuzz/<Target>/ directory: commit them as regression
# seeds once fixed.
#
# Go's fuzzer quirks handled here:
#   - -fuzzminimizetime 0: minimising large inputs (FuzzInspect's seeds are
#     30-100 KiB images) under the default 60s budget stalls the run;
#   - a duration-bounded run can end with a bare "context deadline exceeded"
#     and exit status 1 without any crasher (golang/go#75804): that is
#     counted as a pass when go test reported no failing input.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin
fuzztime=${FUZZTIME:-30s}

targets=(
	"./payload/job FuzzParse"
	"./payload/job FuzzSplitMIME"
	"./payload/internal/butane FuzzTranslate"
	"./payload/internal/cloudinit FuzzRender"
	"./payload FuzzRenderJob"
	"./payload/image FuzzInspect"
	"./payload/image FuzzLayoutISO"
	"./libvirtx/domxml FuzzSetPayloadDrive"
	"./libvirtx/domxml FuzzEditSession"
	"./libvirtx/domxml FuzzViewMatchesLibvirtxml"
	"./payload/image FuzzReadISO"
	"./payload/internal/sysprep FuzzFill"
)

# Every fuzz target in the tree runs: a renamed or new target not listed
# above fails the run instead of being skipped silently.
while read -r file name; do
	want="./$(dirname "$file") $name"
	found=0
	for t in "${targets[@]}"; do [[ "$t" == "$want" ]] && found=1; done
	if [[ $found == 0 ]]; then
		echo "fuzz: $name in $file is not listed in test/fuzz.sh" >&2
		exit 1
	fi
done < <(grep -rHoE --include='*_test.go' '^func (Fuzz[A-Za-z0-9_]+)' payload libvirtx agent cmd internal | sed -E 's/:func / /')

failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for t in "${targets[@]}"; do
	read -r pkg name <<<"$t"
	go test -tags libvirt_dlopen -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime 0 "$pkg" >"$log" 2>&1
	rc=$?
	execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
	if [ $rc -eq 0 ]; then
		echo "fuzz.sh: $pkg $name: ok, ${execs:-?} execs in $fuzztime"
	elif grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"; then
		echo "fuzz.sh: $pkg $name: ok (ended by golang/go#75804 'context deadline exceeded'), ${execs:-?} execs"
	else
		echo "fuzz.sh: $pkg $name: FAILED" >&2
		tail -40 "$log" >&2
		failed=1
	fi
done
exit $failed
