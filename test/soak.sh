#!/usr/bin/env bash
# `make soak` (issue 36): the long soak, a benchmark rather than a test. Jobs
# at a steady rate, alternately through the spool and the socket, for
# SOAK_DURATION (default 30m), while domains are undefined under the agent;
# it reports the agent's RSS, open files, goroutines and payload-directory
# entries over time with their slopes, and the jobs lost and reported twice
# (test/bench/soak.go). The report goes into docs/reliability.md between
# <!-- soak-VARIANT:begin --> and <!-- soak-VARIANT:end --> (SOAK_DOC= empty:
# print only).
#
#   SOAK_VARIANT=test  the test driver (test+unix:///default) in a private
#                      libvirtd: 70 jobs/s (SOAK_RATE), no restarts
#   SOAK_VARIANT=real  qemu:///system of a private libvirtd, `attach` jobs on
#                      stopped TCG domains, libvirtd restarted every
#                      SOAK_RESTART (default 3m); 20 jobs/s
#
# Both run inside `test/hosts.sh sandbox`'s mount, network and pid namespaces:
# the private libvirtd there is the only one the soak sees and the only one
# it restarts (by its pid file); the host's libvirtd and its guests are never
# touched. Runs `nice`; other SOAK_* variables: SOAK_DOMAINS, SOAK_CHURN,
# SOAK_SAMPLE, SOAK_CSV (a file for every sample), SOAK_EXTRA (more flags).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

variant=${SOAK_VARIANT:-test}
make -s build
go build -tags libvirt_dlopen -o bin/vmpayload-bench ./test/bench
args=(-bin "$PWD/bin/vmpayload" -sections soak -soak-duration "${SOAK_DURATION:-30m}"
	-soak-sample "${SOAK_SAMPLE:-10s}" -soak-churn "${SOAK_CHURN:-2s}" -soak-domains "${SOAK_DOMAINS:-200}"
	# the installed layout: images on the tmpfs at /run (the sandbox's own)
	-soak-payload-dir /run/vmpayload-soak/payload)
case $variant in
test)
	args+=(-soak-uri test+unix:///default -soak-rate "${SOAK_RATE:-70}" -soak-name "test driver in a private libvirtd (test+unix:///default)")
	;;
real)
	args+=(-soak-uri qemu:///system -soak-rate "${SOAK_RATE:-20}" -soak-restart "${SOAK_RESTART:-3m}"
		-soak-name "qemu:///system of a private libvirtd, restarted every ${SOAK_RESTART:-3m}")
	;;
*)
	echo "soak.sh: SOAK_VARIANT must be test or real, not $variant" >&2
	exit 1
	;;
esac
doc=${SOAK_DOC-docs/reliability.md}
[[ -n $doc ]] && args+=(-doc "$PWD/$doc" -doc-marker "soak-$variant")
[[ -n ${SOAK_CSV:-} ]] && args+=(-soak-csv "$SOAK_CSV")
# shellcheck disable=SC2206 # SOAK_EXTRA is split on purpose
[[ -n ${SOAK_EXTRA:-} ]] && args+=($SOAK_EXTRA)
echo "soak: $variant, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
exec nice -n 10 bash test/hosts.sh sandbox -x bin/vmpayload-bench "${args[@]}"
