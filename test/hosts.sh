#!/usr/bin/env bash
# Private libvirtd "hosts" on this machine for tests that must not touch the
# shared daemon (test/libvirtd.sh): N of them for migration tests, or one
# in a sandbox for tests that kill and restart libvirtd. Every host is a
# libvirtd in its own mount namespace over its own directory DIR/hI (its
# /etc/libvirt, /run, /var/lib/libvirt, /var/cache/libvirt, /var/log/libvirt).
#
#   test/hosts.sh start  [-n N] [--shared] [--no-agents] DIR
#   test/hosts.sh env    DIR        # the KEY=VALUE lines start printed
#   test/hosts.sh stop   DIR        # destroys this set's domains, stops its daemons
#   test/hosts.sh agent  start|stop|restart I DIR
#   test/hosts.sh layout local|shared DIR
#   test/hosts.sh exec   I DIR CMD [ARG...]   # CMD inside host I's mount namespace
#   test/hosts.sh sandbox [-p PKG] [-k] [TEST-FLAGS...]
#                                   # PKG's tests (default ./agent, -test.run
#                                   # ^TestAgentLibvirtdRestart$ -test.v) in one
#                                   # private host
#   test/hosts.sh sandbox -x [-k] CMD [ARG...]  # any command, from the repository
#                                   # root (test/soak.sh: the soak with restarts)
#
# start: N hosts (default 2) side by side, each with only the qemu driver,
# the PACKAGED libvirt qemu hook (packaging/libvirt/qemu-hook.sh) and its own
# vmpayload agent with its own spool, secrets, socket and log, plus its own
# /etc/machine-id and libvirt host_uuid. They live next to the system
# libvirtd and other tests' guests without touching them.
#
# sandbox: one host, DIR/h1 under a fresh /var/tmp directory, with the
# system's /etc/libvirt copied (without its persistent domains, networks,
# storage pools and autostart links), in its own mount, network and pid
# namespaces as well (unshare --pid: pgrep and test/libvirtd.sh see only
# the private daemons; the empty network namespace is enough for TCG guests
# with no NIC). test/libvirtd.sh starts virtlogd and libvirtd there, so tests
# see a separate qemu:///system they may kill and restart (VMPAYLOAD_LIBVIRTD=1
# VMPAYLOAD_LIBVIRTD_RESTART=1; VMPAYLOAD_SANDBOX=1 tells them where they
# are). PKG's test binary and bin/vmpayload{,d} are built first (outside:
# the namespace has no network for the module proxy); with -x the caller
# built what its command needs. -k keeps DIR. Everything the private daemons
# started is gone when the namespace's processes exit; the daemons are
# killed by pid on exit.
#
# DIR (made if missing; use a fresh one under /var/tmp) holds everything:
#   DIR/hI/           host I (1..N): etc/ run/ lib/ cache/ log/ (bound over
#                     the libvirt directories inside its namespace),
#                     payload/ (its local payload storage), spool/, secrets/,
#                     agent.yaml, agent.sock, agent.log, agent.pid,
#                     machine-id, host_uuid
#   DIR/payload       the payload directory path every host's agent and hook
#                     use (payload_dir). Inside host I's namespace it is a bind
#                     mount of DIR/hI/payload (layout "local": each host has
#                     its own images under the same path) or of DIR/shared
#                     (layout "shared": one directory all hosts see, like NFS).
#   DIR/mig/          for migration sockets (--migrateuri unix://DIR/mig/…);
#                     a plain path every namespace sees.
# Root disks and serial logs of guests belong on plain paths outside DIR/hI
# (every namespace sees them: shared storage, so a live migration needs no
# disk copy; pass --unsafe to virsh migrate, as the file system is not one
# libvirt knows to be shared).
#
# start prints, per host, HOSTI_URI (a libvirt URI usable from outside the
# namespace: qemu+unix:///system?socket=…), HOSTI_LIBVIRT_SOCK, HOSTI_AGENT_SOCK,
# HOSTI_DIR, HOSTI_UUID, HOSTI_MACHINE_ID, and PAYLOAD_DIR, MIG_DIR, LAYOUT.
# The Go side of start/stop/agent/layout is test/hosts (hosts.Start).
#
# The binaries are VMPAYLOAD_BIN_DIR/vmpayload and vmpayloadd (default:
# the repository's bin/, from `make build`). Root only.
#
# Daemon set-up of start (read in libvirt's docs and sources; see REFERENCE.md):
# qemu.conf with security_driver "none", dynamic_ownership 0, remember_owner
# 0 (the source must not chown shared files back), stdio_handler "file" (no
# virtlogd), namespaces [] (QEMU runs in the daemon's mount namespace, so it
# sees the same bind mounts as the hook and the agent), cgroup_controllers []
# and /sys/fs/cgroup unmounted inside the namespace only (libvirt would
# otherwise put both daemons' QEMUs into the same machine cgroups), QEMU as
# root. Guests should be TCG (<domain type='qemu'>) with a named CPU model or
# none; `host-passthrough` does not migrate.
#
# stop only ever kills processes this set started, known by the pid files in
# DIR (agents, libvirtd) and by the pid files libvirtd keeps for its QEMUs in
# DIR/hI/run/libvirt/qemu — each checked against /proc/PID/comm (and, for
# QEMU, its -name) first, so a reused pid is never signalled. Never by name,
# never by namespace inode.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
self=$here/$(basename "$0")
bindir=${VMPAYLOAD_BIN_DIR:-$root/bin}
hookscript=$root/packaging/libvirt/qemu-hook.sh
driverdir_sys=/usr/lib/x86_64-linux-gnu/libvirt/connection-driver
wait_s=${TWOHOSTS_WAIT:-120}

log() { printf 'hosts.sh: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//' >&2
	exit 2
}

[ "$(id -u)" -eq 0 ] || die "must run as root"

# alive PIDFILE COMM: the pid in PIDFILE names a live process whose comm is COMM.
alive() {
	local pid
	pid=$(cat "$1" 2>/dev/null) || return 1
	[ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ]
}

# stop_pid PIDFILE COMM: SIGTERM, then SIGKILL after 30 s, the process the
# pid file names, if it is still the one we started (comm matches).
stop_pid() {
	local f=$1 comm=$2 pid i
	alive "$f" "$comm" || {
		rm -f "$f"
		return 0
	}
	pid=$(cat "$f")
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 300; i++)); do
		alive "$f" "$comm" || break
		sleep 0.1
	done
	if alive "$f" "$comm"; then
		log "$comm (pid $pid) did not stop within 30 s of SIGTERM; SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
		sleep 0.2
	fi
	rm -f "$f"
}

hosts() { # the host numbers of DIR, in order
	local d
	for d in "$1"/h[0-9]*; do
		[ -d "$d" ] && basename "$d" | sed 's/^h//'
	done | sort -n
}

libvirtd_pid() { # I DIR: the pid of host I's libvirtd, or fail
	local f=$2/h$1/run/libvirtd.pid
	alive "$f" libvirtd || return 1
	cat "$f"
}

uri_of() { echo "qemu+unix:///system?socket=$2/h$1/run/libvirt/libvirt-sock"; }

# in_ns I DIR CMD...: run CMD in host I's mount namespace (entered through
# its libvirtd's pid, read from our pid file and checked).
in_ns() {
	local i=$1 dir=$2 pid
	shift 2
	pid=$(libvirtd_pid "$i" "$dir") || die "host $i: libvirtd is not running"
	nsenter --mount="/proc/$pid/ns/mnt" -- "$@"
}

print_env() {
	local dir=$1 i h
	for i in $(hosts "$dir"); do
		h=$dir/h$i
		echo "HOST${i}_DIR=$h"
		echo "HOST${i}_URI=$(uri_of "$i" "$dir")"
		echo "HOST${i}_LIBVIRT_SOCK=$h/run/libvirt/libvirt-sock"
		echo "HOST${i}_AGENT_SOCK=$h/agent.sock"
		echo "HOST${i}_UUID=$(cat "$h/host_uuid")"
		echo "HOST${i}_MACHINE_ID=$(cat "$h/machine-id")"
	done
	echo "PAYLOAD_DIR=$dir/payload"
	echo "MIG_DIR=$dir/mig"
	echo "LAYOUT=$(cat "$dir/layout")"
}

# seed_caps H: the system daemon's QEMU capability cache (test/libvirtd.sh
# made it) copied into host H's cache. A libvirtd probes every installed
# qemu-system-* binary when it starts (about 35 s for a host in CI) unless
# its cache holds a valid entry; libvirt checks each entry against the
# binary's and its own ctime, version, kernel and CPU and probes again when
# one differs, so a stale copy costs only the probe it would have cost.
seed_caps() {
	local c=/var/cache/libvirt/qemu/capabilities
	[ -d "$c" ] || return 0
	mkdir -p "$1/cache/qemu/capabilities"
	cp -p "$c"/*.xml "$1/cache/qemu/capabilities/" 2>/dev/null || true
}

# setup_host I DIR: the directories and files of host I.
setup_host() {
	local i=$1 dir=$2 h=$2/h$1 uuid
	mkdir -p "$h"/{etc,run/libvirt,lib/qemu,cache/qemu,log/qemu,payload,spool,secrets,drivers}
	seed_caps "$h"
	chmod 0711 "$h" "$h/payload"
	chmod 0700 "$h/secrets"
	uuid=$(cat /proc/sys/kernel/random/uuid)
	echo "$uuid" >"$h/host_uuid"
	echo "${uuid//-/}" >"$h/machine-id"
	# Only the qemu driver (no network, storage, nodedev … daemons to start).
	ln -sf "$driverdir_sys/libvirt_driver_qemu.so" "$h/drivers/"
	# Configuration: the packaged files' defaults plus what a second daemon
	# on this machine needs. No domains, networks or autostart links of the
	# system daemon are copied.
	local f
	for f in libvirt.conf libvirt-admin.conf; do
		[ -f "/etc/libvirt/$f" ] && cp "/etc/libvirt/$f" "$h/etc/"
	done
	mkdir -p "$h/etc/qemu" "$h/etc/hooks/qemu.d"
	cat >"$h/etc/libvirtd.conf" <<EOF
host_uuid = "$uuid"
listen_tls = 0
listen_tcp = 0
log_outputs = "3:file:/var/log/libvirt/libvirtd.log"
EOF
	cat >"$h/etc/qemu.conf" <<EOF
security_driver = "none"
dynamic_ownership = 0
remember_owner = 0
user = "root"
group = "root"
stdio_handler = "file"
namespaces = [ ]
cgroup_controllers = [ ]
EOF
	# The packaged hook, pointed at the binary under test and this host's
	# agent configuration (the only change: the exec line).
	[ -x "$bindir/vmpayload" ] || die "no $bindir/vmpayload (make build, or set VMPAYLOAD_BIN_DIR)"
	local s
	s=$(sed "s|exec /usr/bin/vmpayload hook|exec $bindir/vmpayload hook --config $h/agent.yaml|" "$hookscript")
	grep -q "exec $bindir/vmpayload hook" <<<"$s" || die "$hookscript no longer execs /usr/bin/vmpayload hook"
	printf '%s\n' "$s" >"$h/etc/hooks/qemu.d/vmpayload"
	chmod 0755 "$h/etc/hooks/qemu.d/vmpayload"
	cat >"$h/agent.yaml" <<EOF
# vmpayload agent of test/hosts.sh host $i (also read by its libvirt hook)
libvirt_uri: qemu:///system
spool_dir: $h/spool
payload_dir: $dir/payload
socket: $h/agent.sock
secrets_dir: $h/secrets
rescan_interval: 1s
log_level: debug
cdrom_bus: auto
EOF
}

# start_daemon I DIR LAYOUT: host I's libvirtd in a new mount namespace.
start_daemon() {
	local i=$1 dir=$2 layout=$3 h=$2/h$1 src
	src=$h/payload
	[ "$layout" = shared ] && src=$dir/shared
	# The namespace's first process sets up the mounts and execs libvirtd,
	# which daemonises (its pid file lands in $h/run) and keeps the
	# namespace alive.
	LIBVIRT_DRIVER_DIR=$h/drivers unshare --mount --propagation private -- "$self" _host "$h" "$dir" "$src"
}

# bind_host H: inside a new mount namespace, H's directories over the
# libvirt ones (a host's whole private state; start and sandbox).
bind_host() {
	local h=$1
	mount --bind "$h/etc" /etc/libvirt
	mount --bind "$h/run" /run
	mount --bind "$h/lib" /var/lib/libvirt
	mount --bind "$h/cache" /var/cache/libvirt
	mount --bind "$h/log" /var/log/libvirt
}

# _host H DIR SRC: the first process of a started host's namespace (see
# start_daemon): mounts, then libvirtd, which daemonises (its pid file lands
# in H/run) and keeps the namespace alive.
cmd_host() {
	local h=$1 dir=$2 src=$3
	bind_host "$h"
	mount --bind "$h/machine-id" /etc/machine-id
	mount --bind "$src" "$dir/payload"
	umount -l /sys/fs/cgroup 2>/dev/null || true
	exec libvirtd -d -f /etc/libvirt/libvirtd.conf
}

# sandbox [-p PKG] [-x] [-k] ARGS...: see the head of this file.
cmd_sandbox() {
	local pkg=./agent exec=0 keep=0
	while [ $# -gt 0 ]; do
		case "$1" in
		-p) pkg=$2; shift 2 ;;
		-x) exec=1; shift ;;
		-k) keep=1; shift ;;
		*) break ;;
		esac
	done
	work=$(mktemp -d /var/tmp/vmpx-sandbox.XXXXXX) # global: the trap runs after return
	[ "$keep" = 1 ] || trap 'rm -rf "$work"' EXIT
	if [ "$exec" = 0 ]; then
		(cd "$root" && go test -tags libvirt_dlopen -c -o "$work/pkg.test" "$pkg")
		# vmpayload runs the agent by exec'ing the vmpayloadd next to it
		(cd "$root" && CGO_ENABLED=0 go build -o "$work/vmpayload" ./cmd/vmpayload)
		(cd "$root" && go build -tags libvirt_dlopen -o "$work/vmpayloadd" ./cmd/vmpayloadd)
	fi
	local h=$work/h1
	mkdir -p "$h"/{run,lib,cache,log}
	seed_caps "$h"
	cp -a /etc/libvirt "$h/etc"
	rm -rf "$h/etc/qemu"/*.xml "$h/etc/qemu/autostart" \
		"$h/etc/qemu/networks" "$h/etc/storage" "$h/etc/nwfilter"
	local rc=0
	VMPAYLOAD_SANDBOX=1 unshare --mount --net --pid --fork --mount-proc --propagation private \
		"$self" _sandbox "$work" "$exec" "$pkg" "$@" || rc=$?
	[ "$keep" = 0 ] || log "kept $work"
	return "$rc"
}

# _sandbox WORK EXEC PKG ARGS...: inside the sandbox's namespaces.
cmd_sandbox_inner() {
	local work=$1 exec=$2 pkg=$3
	shift 3
	bind_host "$work/h1"
	# /run a tmpfs, as a host's is (test/soak.sh keeps its images there).
	mount -t tmpfs -o mode=0755 tmpfs /run
	ip link set lo up 2>/dev/null || true
	# Our private daemons, by pid (their pid files live in our /run).
	trap 'for f in /run/libvirtd.pid /run/virtlogd.pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true; done' EXIT
	sh "$root/test/libvirtd.sh"
	log "sandbox: private libvirtd pid $(cat /run/libvirtd.pid)"
	if [ "$exec" = 1 ]; then
		cd "$root"
		"$@"
		return $?
	fi
	local args=("$@")
	if [ ${#args[@]} -eq 0 ]; then
		args=(-test.run '^TestAgentLibvirtdRestart$' -test.v)
	fi
	cd "$root/$pkg"
	VMPAYLOAD_LIBVIRTD=1 VMPAYLOAD_LIBVIRTD_RESTART=1 VMPAYLOAD_AGENT_BIN="$work/vmpayload" \
		"$work/pkg.test" -test.count=1 -test.timeout 30m "${args[@]}"
}

wait_daemon() { # I DIR
	local i=$1 dir=$2 n=0 uri
	uri=$(uri_of "$i" "$dir")
	until virsh -q -c "$uri" version >/dev/null 2>&1; do
		n=$((n + 1))
		if [ "$n" -ge $((wait_s * 4)) ]; then
			virsh -q -c "$uri" version >&2 || true
			tail -n 30 "$dir/h$i/log/libvirtd.log" >&2 || true
			die "host $i: libvirtd did not answer on $uri within ${wait_s}s"
		fi
		sleep 0.25
	done
}

agent_start() { # I DIR
	local i=$1 dir=$2 h=$2/h$1 n=0 lpid
	if alive "$h/agent.pid" vmpayloadd; then
		log "host $i: agent already running (pid $(cat "$h/agent.pid"))"
		return 0
	fi
	[ -x "$bindir/vmpayloadd" ] || die "no $bindir/vmpayloadd (make build, or set VMPAYLOAD_BIN_DIR)"
	rm -f "$h/agent.sock"
	echo "=== hosts.sh: agent start $(date -u +%FT%TZ)" >>"$h/agent.log"
	lpid=$(libvirtd_pid "$i" "$dir") || die "host $i: libvirtd is not running"
	# nsenter execs the agent: $! is the agent's pid.
	nsenter --mount="/proc/$lpid/ns/mnt" -- "$bindir/vmpayloadd" --config "$h/agent.yaml" </dev/null >>"$h/agent.log" 2>&1 &
	echo $! >"$h/agent.pid"
	# Ready: the process we started is alive and its socket answers.
	until alive "$h/agent.pid" vmpayloadd && curl -fsS --unix-socket "$h/agent.sock" http://agent/healthz >/dev/null 2>&1; do
		alive "$h/agent.pid" vmpayloadd || {
			tail -n 30 "$h/agent.log" >&2
			die "host $i: the agent exited"
		}
		n=$((n + 1))
		[ "$n" -lt $((wait_s * 10)) ] || die "host $i: the agent did not answer /healthz within ${wait_s}s"
		sleep 0.1
	done
}

agent_stop() { stop_pid "$2/h$1/agent.pid" vmpayloadd; }

# kill_qemus I DIR: QEMU processes host I's libvirtd started and still runs
# (after the daemon is gone: libvirtd leaves its QEMUs running), by the pid
# files it wrote in our private /run.
kill_qemus() {
	local i=$1 dir=$2 f pid name
	for f in "$dir/h$i/run/libvirt/qemu"/*.pid; do
		[ -f "$f" ] || continue
		pid=$(cat "$f" 2>/dev/null) || continue
		name=$(basename "$f" .pid)
		case "$(cat "/proc/$pid/comm" 2>/dev/null)" in
		qemu-system-*) ;;
		*) continue ;;
		esac
		tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qx "guest=$name,debug-threads=on" || continue
		log "host $i: killing QEMU of $name (pid $pid)"
		kill -KILL "$pid" 2>/dev/null || true
	done
}

cmd_start() {
	local n=2 layout=local agents=1 dir
	while [ $# -gt 0 ]; do
		case "$1" in
		-n) n=$2; shift 2 ;;
		--shared) layout=shared; shift ;;
		--no-agents) agents=0; shift ;;
		-*) usage ;;
		*) break ;;
		esac
	done
	[ $# -eq 1 ] || usage
	dir=$1
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	for ((i = 1; i <= n; i++)); do
		if libvirtd_pid "$i" "$dir" >/dev/null 2>&1; then
			die "host $i of $dir is running; stop it first"
		fi
	done
	chmod 0711 "$dir"
	mkdir -p "$dir/payload" "$dir/shared" "$dir/mig"
	chmod 0711 "$dir/payload" "$dir/shared" "$dir/mig"
	echo "$layout" >"$dir/layout"
	# /dev/kvm as udev leaves it, or every define re-probes QEMU (REFERENCE).
	if [ -c /dev/kvm ] && getent group kvm >/dev/null 2>&1 && [ "$(stat -c %G:%a /dev/kvm)" != "kvm:660" ]; then
		chgrp kvm /dev/kvm && chmod 0660 /dev/kvm
	fi
	for ((i = 1; i <= n; i++)); do
		setup_host "$i" "$dir"
		start_daemon "$i" "$dir" "$layout"
	done
	for ((i = 1; i <= n; i++)); do
		wait_daemon "$i" "$dir"
		log "host $i: libvirtd pid $(libvirtd_pid "$i" "$dir") on $(uri_of "$i" "$dir")"
	done
	if [ "$agents" = 1 ]; then
		for ((i = 1; i <= n; i++)); do
			agent_start "$i" "$dir"
			log "host $i: agent pid $(cat "$dir/h$i/agent.pid") on $dir/h$i/agent.sock"
		done
	fi
	print_env "$dir"
}

cmd_stop() {
	[ $# -eq 1 ] || usage
	local dir=$1 i uri d
	[ -d "$dir" ] || return 0
	dir=$(cd "$dir" && pwd)
	for i in $(hosts "$dir"); do
		agent_stop "$i" "$dir"
		if libvirtd_pid "$i" "$dir" >/dev/null 2>&1; then
			# This daemon's domains only: it knows no others.
			uri=$(uri_of "$i" "$dir")
			for d in $(virsh -q -c "$uri" list --name 2>/dev/null); do
				virsh -q -c "$uri" destroy "$d" >/dev/null 2>&1 || true
			done
			for d in $(virsh -q -c "$uri" list --all --name 2>/dev/null); do
				virsh -q -c "$uri" undefine "$d" >/dev/null 2>&1 || true
			done
		fi
		stop_pid "$dir/h$i/run/libvirtd.pid" libvirtd
		kill_qemus "$i" "$dir"
		log "host $i stopped"
	done
}

cmd_agent() {
	[ $# -eq 3 ] || usage
	local what=$1 i=$2 dir
	dir=$(cd "$3" && pwd)
	case "$what" in
	start) agent_start "$i" "$dir" ;;
	stop) agent_stop "$i" "$dir" ;;
	restart)
		agent_stop "$i" "$dir"
		agent_start "$i" "$dir"
		;;
	*) usage ;;
	esac
}

# layout local|shared DIR: bind the payload storage of that layout over
# DIR/payload in every running host's namespace (stacked on the old mount,
# so files QEMU holds open stay valid). Restart the agents afterwards: their
# start-up rebuild and orphan collection then see the new directory.
cmd_layout() {
	[ $# -eq 2 ] || usage
	local layout=$1 dir i src
	dir=$(cd "$2" && pwd)
	case "$layout" in local | shared) ;; *) usage ;; esac
	for i in $(hosts "$dir"); do
		src=$dir/h$i/payload
		[ "$layout" = shared ] && src=$dir/shared
		in_ns "$i" "$dir" mount --bind "$src" "$dir/payload"
	done
	echo "$layout" >"$dir/layout"
}

[ $# -ge 1 ] || usage
cmd=$1
shift
case "$cmd" in
start) cmd_start "$@" ;;
stop) cmd_stop "$@" ;;
env)
	[ $# -eq 1 ] || usage
	print_env "$(cd "$1" && pwd)"
	;;
agent) cmd_agent "$@" ;;
layout) cmd_layout "$@" ;;
sandbox) cmd_sandbox "$@" ;;
_sandbox) cmd_sandbox_inner "$@" ;;
_host) cmd_host "$@" ;;
exec)
	[ $# -ge 3 ] || usage
	i=$1 dir=$(cd "$2" && pwd)
	shift 2
	in_ns "$i" "$dir" "$@"
	;;
-h | --help | help) usage ;;
*) usage ;;
esac
