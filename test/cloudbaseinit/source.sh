#!/usr/bin/env bash
# Prints the directory of cloudbase-init's source that the Windows judge
# (payload TestWindowsExamplesJudgedByCloudbaseInit, read_payload.py) imports,
# or fails saying how to provide it. make test runs it first, so .ci/run
# stops before anything else when the judge could not run (docs/windows.md).
#
# 1. VMPAYLOAD_CLOUDBASE_INIT, when set, names a checkout: it is checked and
#    printed.
# 2. Otherwise the pinned source tarball, cloudbase-init-c48d759.tar.gz
#    (`git archive` of commit c48d759, Apache-2.0), in ../shared/third_party
#    beside the project's root (for a git worktree, also beside the main
#    worktree's root), or in VMPAYLOAD_THIRD_PARTY when that is set (then
#    only there), is unpacked once into a cache outside the tree,
#    ${XDG_CACHE_HOME:-$HOME/.cache}/vmpayload/cloudbase-init-c48d759, and that
#    directory is printed. A later run whose tarball has the same SHA-256
#    reuses it; nothing is fetched from the network.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
commit=c48d759
name=cloudbase-init-$commit
probe=cloudbaseinit/metadata/services/configdrive.py

fail() {
  echo "test/cloudbaseinit/source.sh: $*" >&2
  echo "  the cloudbase-init judge of Windows payloads cannot run: set VMPAYLOAD_CLOUDBASE_INIT to a cloudbase-init checkout, or provide ../shared/third_party/$name.tar.gz beside the project (docs/windows.md)" >&2
  exit 1
}

if [ -n "${VMPAYLOAD_CLOUDBASE_INIT:-}" ]; then
  [ -f "$VMPAYLOAD_CLOUDBASE_INIT/$probe" ] ||
    fail "VMPAYLOAD_CLOUDBASE_INIT=\"$VMPAYLOAD_CLOUDBASE_INIT\" is not a cloudbase-init checkout (no $probe)"
  (cd "$VMPAYLOAD_CLOUDBASE_INIT" && pwd)
  exit 0
fi

dirs=()
if [ -n "${VMPAYLOAD_THIRD_PARTY:-}" ]; then
  dirs=("$VMPAYLOAD_THIRD_PARTY")
else
  dirs=("$root/../shared/third_party")
  if common=$(git -C "$root" rev-parse --path-format=absolute --git-common-dir 2>/dev/null) &&
    [ "$(basename "$common")" = .git ]; then
    dirs+=("$(dirname "$(dirname "$common")")/shared/third_party")
  fi
fi
tarball=
for d in "${dirs[@]}"; do
  if [ -f "$d/$name.tar.gz" ]; then
    tarball=$(cd "$d" && pwd)/$name.tar.gz
    break
  fi
done
[ -n "$tarball" ] || fail "VMPAYLOAD_CLOUDBASE_INIT is not set and $name.tar.gz is in none of: ${dirs[*]}"

sum=$(sha256sum "$tarball" | cut -d' ' -f1)
cache=${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/vmpayload
dest=$cache/$name
stamp=$dest/.vmpayload-source
if [ "$(cat "$stamp" 2>/dev/null)" = "$sum" ] && [ -f "$dest/$probe" ]; then
  echo "$dest"
  exit 0
fi

# The tarball must be commit c48d759's tree (git archive records the commit).
# (git reads the first block only: gzip then dies of SIGPIPE, which is fine)
got=$({ gzip -dc "$tarball" 2>/dev/null || true; } | git get-tar-commit-id 2>/dev/null) || got=
case $got in
  "$commit"*) ;;
  *) fail "$tarball is not git archive of cloudbase-init commit $commit (its commit: \"${got:-none}\")" ;;
esac

mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.$name.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$tarball" -C "$tmp" --no-same-owner
[ -f "$tmp/$name/$probe" ] || fail "$tarball has no $name/$probe"
echo "$sum" >"$tmp/$name/.vmpayload-source"
rm -rf "$dest"
# another run may have put it in place meanwhile: keep whichever is there
mv -T "$tmp/$name" "$dest" 2>/dev/null || [ "$(cat "$stamp" 2>/dev/null)" = "$sum" ] ||
  fail "could not move the unpacked source to $dest"
echo "$dest"
