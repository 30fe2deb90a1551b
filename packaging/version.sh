#!/bin/sh
# Prints the package version for the current git checkout, valid for both
# dpkg and rpm (no "-", starts with a digit), from `git describe --tags --always`:
#   v1.2.3            -> 1.2.3
#   v1.2.3-rc1        -> 1.2.3~rc1            (sorts before 1.2.3)
#   v1.2.3-4-gabc1234 -> 1.2.3+git4.abc1234   (sorts after 1.2.3)
#   abc1234 (no tag)  -> 0.0.0~git20260102.abc1234 (commit date, UTC)
# The working tree's dirty state is deliberately ignored: the version names
# the commit. Set VMPAYLOAD_VERSION to override.
set -eu
if [ -n "${VMPAYLOAD_VERSION:-}" ]; then
	v=$VMPAYLOAD_VERSION
else
	cd "$(dirname "$0")/.."
	d=$(git describe --tags --always 2>/dev/null || echo unknown)
	# with no tag, --always gives a bare (possibly all-digit) hash
	git describe --tags >/dev/null 2>&1 || d=untagged
	case "$d" in
	v[0-9]* | [0-9]*)
		d=${d#v}
		# "<tag>-<n>-g<sha>" from commits after the tag
		post=$(printf '%s\n' "$d" | sed -n 's/^\(.*\)-\([0-9][0-9]*\)-g\([0-9a-f]*\)$/\2.\3/p')
		tag=$(printf '%s\n' "$d" | sed 's/-[0-9][0-9]*-g[0-9a-f]*$//')
		tag=$(printf '%s\n' "$tag" | sed 's/-/~/; s/-/./g')
		v=$tag
		if [ -n "$post" ]; then v="$tag+git$post"; fi
		;;
	*)
		sha=$(git rev-parse --short=7 HEAD 2>/dev/null || echo 0000000)
		date=$(TZ=UTC git log -1 --date=format-local:%Y%m%d --format=%cd 2>/dev/null || date -u +%Y%m%d)
		v="0.0.0~git$date.$sha"
		;;
	esac
fi
if ! printf '%s\n' "$v" | grep -Eq '^[0-9][A-Za-z0-9.+~]*$'; then
	echo "version.sh: \"$v\" is not a valid deb/rpm version" >&2
	exit 1
fi
printf '%s\n' "$v"
