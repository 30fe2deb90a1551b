#!/usr/bin/env bash
# test/testdups.sh [-x DIR]... [REV]: counts the test-vs-test pairs the `duplicates` tool finds, as
# docs/benchmarks.md reports them. Test code is every *_test.go file and everything under test/; the
# files of REV (default HEAD; "-" for the work tree, untracked files included) are copied to a scratch
# directory alone and `duplicates --seconds 240 --most 200` runs there, so its first line counts only the
# pairs whose both sides are test code (--most caps the rows, not that count). -x DIR leaves out the
# files below DIR (e.g. -x payload). Prints the count line, how many listed pairs lie wholly inside Go
# import blocks, and the rows.
set -euo pipefail
excl=()
while [ "${1:-}" = -x ]; do excl+=("${2%/}/"); shift 2; done
rev=${1:-HEAD}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ "$rev" = - ]; then
	git ls-files -co --exclude-standard
else
	git ls-tree -r --name-only "$rev"
fi | grep -E '(_test\.go$|^test/)' | while IFS= read -r f; do
	for x in "${excl[@]}"; do case $f in "$x"*) continue 2 ;; esac; done
	mkdir -p "$tmp/$(dirname "$f")"
	if [ "$rev" = - ]; then [ -f "$f" ] && cp "$f" "$tmp/$f"; else git show "$rev:$f" >"$tmp/$f"; fi
done
(cd "$tmp" && duplicates --seconds 240 --most 200) >"$tmp/.rows"
python3 - "$tmp" <<'PY'
import os, re, sys
root = sys.argv[1]
rows = open(os.path.join(root, ".rows")).read().splitlines()
def imports(p):
    s, inside = set(), False
    for i, l in enumerate(open(os.path.join(root, p), errors="replace").read().split("\n"), 1):
        if l.startswith("import ("):
            inside = True
        if inside:
            s.add(i)
            if l.startswith(")"):
                inside = False
    return s
n = imp = 0
for l in rows:
    m = re.match(r"D\d+ (\S+?):(\d+)-(\d+) ~ (\S+?):(\d+)-(\d+)", l)
    if not m:
        continue
    n += 1
    a, a1, a2, b, b1, b2 = m.groups()
    if set(range(int(a1), int(a2) + 1)) <= imports(a) and set(range(int(b1), int(b2) + 1)) <= imports(b):
        imp += 1
print(rows[0] if rows else "no output")
print(f"listed {n}: {imp} wholly inside import blocks, {n - imp} other")
print("\n".join(rows[1:]))
PY
