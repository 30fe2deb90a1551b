#!/usr/bin/env bash
# Packaging checks for vmpayload (run as root on Debian 12; no systemd needed):
# builds the .deb and .rpm with packaging/build.sh, checks their file lists,
# modes, metadata and scripts, the systemd unit (verify, offline security
# score), then installs the .deb on this machine, checks what it put where,
# runs the agent (vmpayloadd, through "vmpayload agent"), and removes and
# purges it.
#   test/packaging/check.sh                      # build, check, install, remove
#   VMPAYLOAD_PKG_NOBUILD=1 test/packaging/check.sh   # reuse the packages in dist/
# Prints "N passed, M failed" last; exits 1 when anything failed.
# Needs: dpkg-deb, rpm, systemd (systemd-analyze, systemd-tmpfiles), man-db,
# curl, jq, Go + gcc + libvirt-dev (build).
set -uo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PATH:/usr/local/go/bin"

# the unit's highest acceptable exposure score (systemd-analyze security)
MAX_EXPOSURE=${VMPAYLOAD_MAX_EXPOSURE:-2.0}

pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
# check DESCRIPTION COMMAND...: passes when the command succeeds
check() {
	local d=$1; shift
	if "$@"; then ok "$d"; else bad "$d"; fi
}
# eq DESCRIPTION GOT WANT
eq() {
	if [[ $2 == "$3" ]]; then ok "$1"; else bad "$1: got \"$2\", want \"$3\""; fi
}
# quiet COMMAND...: runs it without output (for check)
quiet() { "$@" >/dev/null 2>&1; }
finish() {
	echo "$pass passed, $fail failed"
	((fail == 0))
	exit $?
}

tmp=$(mktemp -d /tmp/vmpayload-pkg.XXXXXX)
agent_pid=
cleanup() {
	[[ -n $agent_pid ]] && kill "$agent_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

if ((EUID != 0)); then
	bad "must run as root (installs the package)"
	finish
fi
for t in dpkg-deb dpkg rpm systemd-analyze systemd-tmpfiles man curl jq gzip; do
	command -v "$t" >/dev/null || bad "tool $t is missing (apt-get install dpkg-dev rpm systemd man-db curl jq)"
done
((fail == 0)) || finish

# ---------------------------------------------------------------- build
version=$(packaging/version.sh)
deb=dist/vmpayload_${version}_amd64.deb
rpm=dist/vmpayload-${version}.x86_64.rpm
if [[ -z ${VMPAYLOAD_PKG_NOBUILD:-} ]]; then
	if packaging/build.sh >"$tmp/build.log" 2>&1; then ok "packaging/build.sh"; else
		bad "packaging/build.sh:"; sed 's/^/    /' "$tmp/build.log"; finish
	fi
fi
check "built $deb" test -s "$deb"
check "built $rpm" test -s "$rpm"
((fail == 0)) || finish

# ---------------------------------------------------------------- contents
# Expected entries: "<mode as ls prints it> <path>". Every one must be in
# both packages with exactly this mode, owned by root:root; nothing else
# may be there but parent directories (drwxr-xr-x). Entries tagged deb: or
# rpm: are in that package only.
expected=(
	"-rwxr-xr-x /usr/bin/vmpayload"
	"-rwxr-xr-x /usr/sbin/vmpayloadd"
	"-rwxr-xr-x /etc/libvirt/hooks/qemu.d/vmpayload"
	"-rw-r--r-- /usr/lib/systemd/system/vmpayload.service"
	"-rw-r--r-- /usr/lib/tmpfiles.d/vmpayload.conf"
	"drwxr-xr-x /etc/vmpayload"
	"-rw-r--r-- /etc/vmpayload/agent.yaml"
	"drwx------ /etc/vmpayload/secrets"
	"drwx------ /var/spool/vmpayload"
	"drwx------ /var/spool/vmpayload/incoming"
	"drwx------ /var/spool/vmpayload/processing"
	"drwx------ /var/spool/vmpayload/done"
	"drwx------ /var/spool/vmpayload/failed"
	"-rw-r--r-- /usr/share/man/man1/vmpayload.1.gz"
	"-rw-r--r-- /usr/share/man/man8/vmpayloadd.8.gz"
	"-rw-r--r-- /usr/share/vmpayload/monitoring/vmpayload.rules.yml"
	"-rw-r--r-- /usr/share/vmpayload/monitoring/vmpayload.rules.test.yml"
	"-rw-r--r-- /usr/share/vmpayload/monitoring/vmpayload-dashboard.json"
)
# a page and completions for each command and both binaries
for c in agent build dial-stdio hook inspect recipe run status submit validate version; do
	expected+=("-rw-r--r-- /usr/share/man/man1/vmpayload-$c.1.gz")
done
for b in vmpayload vmpayloadd; do
	expected+=("-rw-r--r-- /usr/share/bash-completion/completions/$b"
		"deb:-rw-r--r-- /usr/share/zsh/vendor-completions/_$b"
		"rpm:-rw-r--r-- /usr/share/zsh/site-functions/_$b"
		"-rw-r--r-- /usr/share/fish/vendor_completions.d/$b.fish")
done

# compare_list PKG LISTFILE: LISTFILE has "<mode> <owner>/<group> <path>" lines
compare_list() {
	local pkg=$1 list=$2 e mode path want_mode got parents=" " p
	for e in "${expected[@]}"; do
		case "$e" in
		deb:* | rpm:*) [[ ${e%%:*} == "$pkg" ]] || continue; e=${e#*:} ;;
		esac
		mode=${e%% *} path=${e#* }
		got=$(awk -v p="$path" '$3 == p { print $1 " " $2 }' "$list")
		eq "$pkg: $path" "$got" "$mode root/root"
		p=$path
		while p=${p%/*}; [[ -n $p ]]; do parents+="$p "; done
	done
	# anything else must be a parent directory, drwxr-xr-x root/root
	while read -r mode owner path; do
		local known=no
		for e in "${expected[@]}"; do
			case "$e" in deb:* | rpm:*) [[ ${e%%:*} == "$pkg" ]] || continue; e=${e#*:} ;; esac
			[[ ${e#* } == "$path" ]] && known=yes
		done
		[[ $known == yes ]] && continue
		if [[ $parents == *" $path "* && $mode == drwxr-xr-x && $owner == root/root ]]; then continue; fi
		bad "$pkg: unexpected entry $mode $owner $path"
	done <"$list"
}

dpkg-deb -c "$deb" | awk '{ p = $6; sub(/^\./, "", p); sub(/\/$/, "", p); if (p != "") print $1, $2, p }' >"$tmp/deb.list"
compare_list deb "$tmp/deb.list"
rpm -qp --qf '[%{FILEMODES:perms} %{FILEUSERNAME}/%{FILEGROUPNAME} %{FILENAMES}\n]' "$rpm" >"$tmp/rpm.list" 2>/dev/null
compare_list rpm "$tmp/rpm.list"
# the brief's listing commands work on them too
check "rpm -qpl lists /usr/bin/vmpayload" grep -qx /usr/bin/vmpayload <(rpm -qpl "$rpm" 2>/dev/null)
check "rpm -qpl lists /usr/sbin/vmpayloadd" grep -qx /usr/sbin/vmpayloadd <(rpm -qpl "$rpm" 2>/dev/null)

# ---------------------------------------------------------------- metadata
eq "deb: Package" "$(dpkg-deb -f "$deb" Package)" vmpayload
eq "deb: Version" "$(dpkg-deb -f "$deb" Version)" "$version"
eq "deb: Architecture" "$(dpkg-deb -f "$deb" Architecture)" amd64
eq "deb: Depends" "$(dpkg-deb -f "$deb" Depends)" libvirt0
eq "deb: Recommends" "$(dpkg-deb -f "$deb" Recommends)" libvirt-daemon-system
dpkg-deb --ctrl-tarfile "$deb" | tar -xf - -C "$tmp" ./conffiles ./preinst ./postinst ./prerm ./postrm 2>/dev/null
eq "deb: conffiles" "$(cat "$tmp/conffiles" 2>/dev/null)" /etc/vmpayload/agent.yaml
for s in preinst postinst prerm postrm; do
	check "deb: $s is valid sh" sh -n "$tmp/$s"
done
check "deb: dpkg-deb -I" quiet dpkg-deb -I "$deb"

rq() { rpm -qp "$@" "$rpm" 2>/dev/null; }
eq "rpm: name" "$(rq --qf '%{NAME}')" vmpayload
eq "rpm: version" "$(rq --qf '%{VERSION}')" "$version"
eq "rpm: arch" "$(rq --qf '%{ARCH}')" x86_64
check "rpm: requires libvirt-libs" grep -qx libvirt-libs <(rq --requires)
eq "rpm: recommends" "$(rq --recommends)" libvirt-daemon
# %config(noreplace): flags "cn"
eq "rpm: agent.yaml is %config(noreplace)" \
	"$(rq --qf '[%{FILEFLAGS:fflags} %{FILENAMES}\n]' | awk '$2 == "/etc/vmpayload/agent.yaml" { print $1 }')" cn
eq "rpm: config files" "$(rq --configfiles)" /etc/vmpayload/agent.yaml
for s in preinstall postinstall preuninstall postuninstall; do
	check "rpm: has a $s scriptlet" grep -q "^$s scriptlet" <(rq --scripts)
done
check "rpm: rpm -qpi" quiet rq -i

# ---------------------------------------------------------------- payload files
x=$tmp/deb-root
mkdir -p "$x" && dpkg-deb -x "$deb" "$x"
eq "packaged binary's version" "$("$x/usr/bin/vmpayload" version)" "vmpayload $version"
check "vmpayload is pure Go (ldd: not a dynamic executable)" grep -q "not a dynamic executable" <(ldd "$x/usr/bin/vmpayload" 2>&1)
check "vmpayloadd is dynamic (cgo: it loads libvirt)" quiet ldd "$x/usr/sbin/vmpayloadd"
check "packaged agent.yaml is configs/agent.yaml" cmp -s "$x/etc/vmpayload/agent.yaml" configs/agent.yaml
hk=$x/etc/libvirt/hooks/qemu.d/vmpayload
check "packaged qemu hook is packaging/libvirt/qemu-hook.sh" cmp -s "$hk" packaging/libvirt/qemu-hook.sh
check "qemu hook is valid sh" sh -n "$hk"
# the no-op path drains stdin and succeeds without running the binary
check "qemu hook: stopped end exits 0 and drains stdin" quiet sh -c 'yes "<domain/>" | head -c 1000000 | "$1" dom stopped end -' _ "$hk"
check "qemu hook execs vmpayload hook for prepare begin" grep -q 'exec /usr/bin/vmpayload hook -- "\$@"' "$hk"
for s in postinst postrm; do
	check "deb: $s reloads libvirt (never restarts it)" sh -c 'grep -q "systemctl reload" "$1" && grep -q "kill -HUP" "$1" && ! grep -Eq "(try-reload-or-restart|restart) (\"\$d|libvirtd|virtqemud)" "$1"' _ "$tmp/$s"
done
for m in "$x"/usr/share/man/man1/*.gz "$x"/usr/share/man/man8/*.gz; do
	m=${m#"$x"/usr/share/man/}
	check "$m is gzip" gzip -t "$x/usr/share/man/$m"
	check "$m renders without warnings" test -z "$(MANWIDTH=80 man --warnings -l "$x/usr/share/man/$m" 2>&1 >/dev/null)"
done
# every command of "vmpayload help" has its page, listed in vmpayload(1)'s
# SEE ALSO; every flag of "vmpayload build -h" is in vmpayload-build(1)
for c in $("$x/usr/bin/vmpayload" help | awk '/^Available Commands:/ { on = 1; next } on && !NF { exit } on { print $1 }'); do
	[[ $c == completion || $c == help ]] && continue
	check "vmpayload-$c(1) is there" test -s "$x/usr/share/man/man1/vmpayload-$c.1.gz"
	check "vmpayload(1) refers to vmpayload-$c(1)" grep -q "vmpayload-$c(1)" <(zcat "$x/usr/share/man/man1/vmpayload.1.gz")
done
bpage=$(MANWIDTH=200 man -l "$x/usr/share/man/man1/vmpayload-build.1.gz" 2>/dev/null)
for f in $("$x/usr/bin/vmpayload" build -h | grep -o -- '--[a-z-]*' | sort -u); do
	[[ $f == --help ]] && continue
	check "vmpayload-build(1) documents $f" grep -q -- "$f" <<<"$bpage"
done
page8=$(MANWIDTH=200 man -l "$x/usr/share/man/man8/vmpayloadd.8.gz" 2>/dev/null)
check "vmpayloadd(8) names its files" grep -q "/etc/vmpayload/agent.yaml" <<<"$page8"
for f in config libvirt-uri spool-dir socket print-config; do
	check "vmpayloadd(8) documents --$f" grep -q -- "--$f" <<<"$page8"
done
bc=$x/usr/share/bash-completion/completions/vmpayload
check "bash completion is valid bash" bash -n "$bc"
check "bash completion of vmpayloadd is valid bash" bash -n "$x/usr/share/bash-completion/completions/vmpayloadd"
# complete_words WORD...: what bash completes for the last word. cobra's script
# asks the binary ("vmpayload __complete ...") and takes the words apart with
# bash-completion's _get_comp_words_by_ref (a stand-in when it is not installed).
complete_words() {
	PATH="$x/usr/bin:$PATH" bash -c '
		[[ -r /usr/share/bash-completion/bash_completion ]] && source /usr/share/bash-completion/bash_completion
		declare -F _get_comp_words_by_ref >/dev/null || _get_comp_words_by_ref() {
			cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]} words=("${COMP_WORDS[@]}") cword=$COMP_CWORD
		}
		source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
		__start_vmpayload 2>/dev/null; printf "%s\n" "${COMPREPLY[@]}"' _ "$bc" "$@"
}
eq "bash completes 'vmpayload bu'" "$(complete_words vmpayload bu)" build
eq "bash completes 'vmpayload build --sec'" "$(complete_words vmpayload build --sec)" --secrets-dir
if command -v zsh >/dev/null; then
	check "zsh completion parses" zsh -n "$x/usr/share/zsh/vendor-completions/_vmpayload"
	check "zsh completion of vmpayloadd parses" zsh -n "$x/usr/share/zsh/vendor-completions/_vmpayloadd"
fi

# ---------------------------------------------------------------- unit
unit=packaging/systemd/vmpayload.service
for d in Type=notify "ExecReload=/bin/sh -c 'kill -HUP \$MAINPID'" Restart=on-failure ProtectSystem=strict \
	"ReadWritePaths=/run/payload /var/spool/vmpayload /run/vmpayload -/run/libvirt -/etc/vmpayload/secrets" PrivateTmp=yes \
	NoNewPrivileges=yes ProtectHome=yes RestrictAddressFamilies=AF_UNIX SystemCallFilter=@system-service \
	CapabilityBoundingSet=CAP_CHOWN UMask=0077 LimitNOFILE=8192 MemoryMax=1G TasksMax=512; do
	check "unit sets $d" grep -qxF "$d" "$unit"
done
check "unit is After= libvirtd and virtqemud" grep -q '^After=.*libvirtd.service.*virtqemud.socket' "$unit"
sec=$(systemd-analyze security --offline=true --no-pager "$unit" 2>&1)
score=$(sed -n 's/.*Overall exposure level for vmpayload.service: \([0-9.]*\).*/\1/p' <<<"$sec")
if [[ -n $score ]] && awk -v s="$score" -v m="$MAX_EXPOSURE" 'BEGIN { exit !(s <= m) }'; then
	ok "exposure score $score <= $MAX_EXPOSURE (systemd-analyze security --offline=true)"
else
	bad "exposure score \"$score\" > $MAX_EXPOSURE:"; sed 's/^/    /' <<<"$sec" | grep -v '✓'
fi
# --threshold takes the score times ten (0..100); exits non-zero above it
threshold=$(awk -v m="$MAX_EXPOSURE" 'BEGIN { printf "%d", m * 10 }')
check "systemd-analyze security --threshold=$threshold" \
	quiet systemd-analyze security --offline=true --threshold="$threshold" --no-pager "$unit"

# ---------------------------------------------------------------- install the .deb
export DEBIAN_FRONTEND=noninteractive
if dpkg-query -W -f='${Status}' vmpayload 2>/dev/null | grep -q installed; then
	dpkg --purge vmpayload >/dev/null 2>&1
fi
if dpkg -i "$deb" >"$tmp/dpkg.log" 2>&1 </dev/null; then ok "dpkg -i $deb"; else
	bad "dpkg -i:"; sed 's/^/    /' "$tmp/dpkg.log"; finish
fi
eq "/usr/bin/vmpayload version" "$(/usr/bin/vmpayload version)" "vmpayload $version"
# mode owner group path, as on the installed system
installed=(
	"755 root root /usr/bin/vmpayload"
	"755 root root /usr/sbin/vmpayloadd"
	"755 root root /etc/libvirt/hooks/qemu.d/vmpayload"
	"644 root root /etc/vmpayload/agent.yaml"
	"700 root root /etc/vmpayload/secrets"
	"700 root root /var/spool/vmpayload"
	"700 root root /var/spool/vmpayload/incoming"
	"700 root root /var/spool/vmpayload/processing"
	"700 root root /var/spool/vmpayload/done"
	"700 root root /var/spool/vmpayload/failed"
	"711 root root /run/payload"
	"750 root vmpayload /run/vmpayload"
	"644 root root /usr/lib/systemd/system/vmpayload.service"
	"644 root root /usr/lib/tmpfiles.d/vmpayload.conf"
)
for e in "${installed[@]}"; do
	p=${e##* }
	eq "installed $p" "$(stat -c '%a %U %G %n' "$p" 2>&1)" "$e"
done
check "group vmpayload exists" quiet getent group vmpayload
check "man -w vmpayloadd finds the page" test "$(man -w 8 vmpayloadd 2>/dev/null)" = /usr/share/man/man8/vmpayloadd.8.gz
check "man -w vmpayload-agent finds the page" test "$(man -w vmpayload-agent 2>/dev/null)" = /usr/share/man/man1/vmpayload-agent.1.gz
# verify needs the installed binary and man pages; it must print nothing
if out=$(systemd-analyze verify /usr/lib/systemd/system/vmpayload.service 2>&1) && [[ -z $out ]]; then
	ok "systemd-analyze verify vmpayload.service"
else
	bad "systemd-analyze verify vmpayload.service:"; sed 's/^/    /' <<<"$out"
fi
check "systemd-tmpfiles --create vmpayload.conf is clean" \
	test -z "$(systemd-tmpfiles --create /usr/lib/tmpfiles.d/vmpayload.conf 2>&1)"

# ------------------------------------------------ agent (`vmpayload agent` runs /usr/sbin/vmpayloadd)
# Starts the installed agent on libvirt's embedded test driver, submits
# configs/examples/01-minimal.json through the API socket and waits for the
# job to be done. test:///default has no domain "web-01" (and its "test"
# domain is running, where the test driver cannot attach a CD-ROM), so the
# default URI is a test-driver node file with web-01 defined and shut off;
# VMPAYLOAD_AGENT_TEST_URI=test:///default overrides it.
if /usr/bin/vmpayload agent -h >/dev/null 2>&1; then
	cat >"$tmp/node.xml" <<'XML'
<node>
  <domain type='test' xmlns:test='http://libvirt.org/schemas/domain/test/1.0'>
    <name>web-01</name>
    <memory>524288</memory>
    <os><type arch='x86_64' machine='pc'>hvm</type></os>
    <test:runstate>5</test:runstate>
  </domain>
</node>
XML
	uri=${VMPAYLOAD_AGENT_TEST_URI:-test://$tmp/node.xml}
	sock=/run/vmpayload/vmpayload.sock
	/usr/bin/vmpayload agent --config /etc/vmpayload/agent.yaml --libvirt-uri "$uri" >"$tmp/agent.log" 2>&1 &
	agent_pid=$!
	for _ in $(seq 100); do [[ -S $sock ]] && break; sleep 0.2; done
	if [[ -S $sock ]]; then
		ok "agent listens on $sock"
		resp=$(curl -sS --max-time 10 --unix-socket "$sock" -X POST -H 'Content-Type: application/json' \
			--data-binary @configs/examples/01-minimal.json http://vmpayload/v1/jobs 2>&1)
		id=$(jq -r '.id // empty' <<<"$resp" 2>/dev/null)
		if [[ -n $id ]]; then
			ok "POST /v1/jobs accepted job $id"
			resp=$(curl -sS --max-time 40 --unix-socket "$sock" "http://vmpayload/v1/jobs/$id?wait=30s" 2>&1)
			eq "GET /v1/jobs/$id?wait=30s state" "$(jq -r '.state // empty' <<<"$resp" 2>/dev/null)" done
			[[ $(jq -r '.state // empty' <<<"$resp" 2>/dev/null) == done ]] || echo "    response: $resp"
		else
			bad "POST /v1/jobs: $resp"
		fi
	else
		bad "agent did not create $sock:"; sed 's/^/    /' "$tmp/agent.log"
	fi
	kill "$agent_pid" 2>/dev/null
	if wait "$agent_pid"; then ok "agent exits 0 on SIGTERM"; else
		rc=$?; bad "agent exit status $rc on SIGTERM:"; tail -20 "$tmp/agent.log" | sed 's/^/    /'
	fi
	agent_pid=
	rm -rf /var/spool/vmpayload/{incoming,processing,done,failed}/* /run/payload/* 2>/dev/null
else
	echo "SKIP: agent not built yet"
fi

# ---------------------------------------------------------------- upgrade, remove, purge
echo "# local change" >>/etc/vmpayload/agent.yaml
if dpkg -i "$deb" >"$tmp/dpkg.log" 2>&1 </dev/null; then ok "dpkg -i again (upgrade path)"; else
	bad "dpkg -i again:"; sed 's/^/    /' "$tmp/dpkg.log"
fi
check "upgrade keeps the edited agent.yaml" grep -qx "# local change" /etc/vmpayload/agent.yaml

if dpkg -r vmpayload >"$tmp/dpkg.log" 2>&1 </dev/null; then ok "dpkg -r vmpayload"; else
	bad "dpkg -r:"; sed 's/^/    /' "$tmp/dpkg.log"
fi
check "dpkg -r removes /usr/bin/vmpayload" test ! -e /usr/bin/vmpayload
check "dpkg -r removes /usr/sbin/vmpayloadd" test ! -e /usr/sbin/vmpayloadd
check "dpkg -r removes the unit" test ! -e /usr/lib/systemd/system/vmpayload.service
check "dpkg -r removes the qemu hook" test ! -e /etc/libvirt/hooks/qemu.d/vmpayload
check "dpkg -r keeps /etc/vmpayload/agent.yaml" grep -qx "# local change" /etc/vmpayload/agent.yaml
eq "dpkg -r leaves config-files state" "$(dpkg-query -W -f='${Status}' vmpayload 2>&1)" "deinstall ok config-files"

if dpkg --purge vmpayload >"$tmp/dpkg.log" 2>&1 </dev/null; then ok "dpkg --purge vmpayload"; else
	bad "dpkg --purge:"; sed 's/^/    /' "$tmp/dpkg.log"
fi
check "dpkg --purge removes /etc/vmpayload/agent.yaml" test ! -e /etc/vmpayload/agent.yaml
check "dpkg --purge removes /etc/vmpayload" test ! -e /etc/vmpayload
check "dpkg --purge removes /var/spool/vmpayload" test ! -e /var/spool/vmpayload
check "dpkg --purge forgets the package" test -z "$(dpkg-query -W -f='${Status}' vmpayload 2>/dev/null)"

finish
