#!/usr/bin/env bash
# `make bench`: benchmarks vmpayload against the tools it replaces, in one run
# (issue 7), and writes the report into docs/benchmarks.md between the
# <!-- bench:begin --> and <!-- bench:end --> markers. Installs nothing beyond
# test/deps.sh (hyperfine, cloud-image-utils, genisoimage are in its list).
#
# Sections: build (in-process vs `vmpayload build` vs cloud-localds vs
# genisoimage), proc (process start: two Go floor programs (test/bench/floor,
# with and without cgo, and the no-cgo one linking every library vmpayload
# links), `vmpayload version` (pure Go: goal ≤ 1.5× the no-cgo floor, wall
# and CPU time; its package init by GODEBUG=inittrace=1) and `build` of the
# typical (goal ≥ 8× faster than cloud-localds) and large jobs vs /bin/true,
# cloud-localds, genisoimage), burst
# (1000 jobs, libvirt test driver), startup (launch → READY=1 with an empty
# done/, with 10 000 kept results, and on 1000 defined domains that carry a
# recipe), idle (60 s), real
# (qemu:///system domain vs `virsh start`), hook (the libvirt qemu hook's paths vs
# /bin/true; goal: `prepare begin` without work ≤ 2 ms above it); the soak
# section (30 min or more) is not part of `make bench`: `make soak`. The agent
# sections run bin/vmpayloadd through `bin/vmpayload agent` (an exec: the same
# process). BENCH_SECTIONS, BENCH_ROUNDS, BENCH_PROC_ROUNDS,
# BENCH_REAL_ROUNDS, BENCH_BURST_RUNS (runs of each burst layout, default 3),
# BENCH_BURST_LAYOUTS (comma-separated: tmpfs, disk, daemon; default all three),
# BENCH_IDLE and BENCH_PROFILE (a directory for the burst's
# cpu.pprof/allocs.pprof) override the defaults; BENCH_DOC the report file
# (empty: print only).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

bash test/deps.sh
for t in cloud-localds genisoimage hyperfine virsh; do
  command -v "$t" >/dev/null || { echo "bench: $t missing (test/deps.sh installs it)" >&2; exit 1; }
done
make -s build
# The real-domain and idle sections use qemu:///system; start libvirtd when it is not running.
if ! virsh -q -c qemu:///system version >/dev/null 2>&1; then
  bash test/libvirtd.sh
fi

go build -tags libvirt_dlopen -o bin/vmpayload-bench ./test/bench
doc=${BENCH_DOC-docs/benchmarks.md}
args=(-bin bin/vmpayload -sections "${BENCH_SECTIONS:-build,proc,burst,startup,idle,real,hook}")
[[ -n ${BENCH_ROUNDS:-} ]] && args+=(-rounds "$BENCH_ROUNDS")
[[ -n ${BENCH_PROC_ROUNDS:-} ]] && args+=(-proc-rounds "$BENCH_PROC_ROUNDS")
[[ -n ${BENCH_REAL_ROUNDS:-} ]] && args+=(-real-rounds "$BENCH_REAL_ROUNDS")
[[ -n ${BENCH_BURST_RUNS:-} ]] && args+=(-burst-runs "$BENCH_BURST_RUNS")
[[ -n ${BENCH_BURST_LAYOUTS:-} ]] && args+=(-burst-layouts "$BENCH_BURST_LAYOUTS")
[[ -n ${BENCH_IDLE:-} ]] && args+=(-idle "$BENCH_IDLE")
[[ -n ${BENCH_PROFILE:-} ]] && args+=(-profile "$BENCH_PROFILE")
[[ -n $doc ]] && args+=(-doc "$doc")
echo "bench: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
bin/vmpayload-bench "${args[@]}"
