#!/usr/bin/env bash
# test/linecount.sh [-v] [REV]: prints the number of lines of shipped Go code in
# the tree at REV (default HEAD; "-" for the work tree, untracked files
# included), as docs/benchmarks.md reports it.
#
# Counted: every line (blank lines and comments included, as `wc -l` counts
# them) of every .go file, except
#   - *_test.go files,
#   - everything under test/ (benchmarks, guest, e2e and packaging tests,
#     and the test harness once it lives there),
#   - the test helper packages: every file below a directory named golden or
#     testenv, or whose name ends in "test" (internal/agenttest,
#     internal/golden, internal/testenv, payload/payloadtest,
#     libvirtx/libvirtxtest at b426220), wherever they move.
# Files are taken from git: REV's tree, or with "-" the work tree's tracked
# and untracked, not ignored files; build output and the module cache never
# count. With -v it also prints the count per top-level directory.
set -euo pipefail
cd "$(dirname "$0")/.."

verbose=
if [[ ${1:-} == -v ]]; then verbose=1; shift; fi
rev=${1:-HEAD}

if [[ $rev == - ]]; then
  list() { git ls-files --cached --others --exclude-standard -- '*.go' | while IFS= read -r f; do [[ -f $f ]] && echo "$f"; done; }
  show() { cat -- "$1"; }
else
  git rev-parse --verify -q "$rev^{commit}" >/dev/null || { echo "linecount: no commit $rev" >&2; exit 2; }
  list() { git ls-tree -r --name-only "$rev" -- | grep '\.go$' || true; }
  show() { git show "$rev:$1"; }
fi

shipped() {
  list | grep -v '_test\.go$' | grep -v '^test/' |
    grep -Ev '(^|/)(golden|testenv|[^/]*test)/' || true
}

total=0
declare -A per
while IFS= read -r f; do
  n=$(show "$f" | wc -l)
  total=$((total + n))
  per[${f%%/*}]=$(( ${per[${f%%/*}]:-0} + n ))
done < <(shipped)

if [[ -n $verbose ]]; then
  for d in "${!per[@]}"; do printf '%7d  %s\n' "${per[$d]}" "$d"; done | sort -k2
fi
echo "$total"
