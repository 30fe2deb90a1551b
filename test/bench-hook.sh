#!/usr/bin/env bash
# Benchmarks the libvirt qemu hook (docs/durability.md, "Cost of the hook")
# with hyperfine: the packaged script's no-op path, a start of a domain
# without a recipe, an intact image, and the rebuild of a missing image,
# against /bin/true as the floor. Needs bin/vmpayload (make build) and
# hyperfine; touches nothing outside a temporary directory under /var/tmp.
#   test/bench-hook.sh [hyperfine options, e.g. --runs 200]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/bin/vmpayload
[[ -x $bin ]] || { echo "bench-hook: $bin missing (make build)" >&2; exit 1; }
w=$(mktemp -d /var/tmp/vmpayload-bench-hook.XXXXXX)
trap 'rm -rf "$w"' EXIT
mkdir -p "$w/payload" "$w/secrets"
printf 's3cret\n' >"$w/secrets/pw"
printf 'payload_dir: %s\nsecrets_dir: %s\n' "$w/payload" "$w/secrets" >"$w/agent.yaml"
# a typical job: the full NoCloud example (users, keys, two NICs)
cp configs/examples/02-full-nocloud.json "$w/job.json"
cp test/bench/hook-domain.xml "$w/dom.xml"
"$bin" recipe --payload-dir "$w/payload" --secrets-dir "$w/secrets" --domain-xml "$w/dom.xml" "$w/job.json" >"$w/full.xml"
img=$(ls "$w"/payload/*.iso)
# the packaged script, pointed at bin/vmpayload and the bench configuration
sed "s|exec /usr/bin/vmpayload hook|exec /usr/bin/env VMPAYLOAD_CONFIG=$w/agent.yaml $bin hook|" \
	packaging/libvirt/qemu-hook.sh >"$w/hook"
chmod 755 "$w/hook"
echo "image: $(stat -c %s "$img") bytes; $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
hyperfine -N --warmup 5 "$@" --export-json "$w/r1.json" \
	-n 'floor: /bin/true' '/bin/true' \
	-n 'script, no-op (stopped end, no shell around it, empty stdin)' "$w/hook bench stopped end -" \
	-n 'binary, no-op (stopped end, direct)' "$bin hook --config $w/agent.yaml bench stopped end -" >/dev/null
hyperfine --warmup 5 "$@" --export-json "$w/r2.json" \
	-n 'script, no-op (stopped end, the domain XML on stdin)' "$w/hook bench stopped end - <$w/full.xml" \
	-n 'script, prepare, no recipe' "$w/hook bench prepare begin - <$w/dom.xml" \
	-n 'script, prepare, intact image' "$w/hook bench prepare begin - <$w/full.xml" \
	-n 'script, prepare, missing image (rebuild)' --prepare "rm -f $img" "$w/hook bench prepare begin - <$w/full.xml" >/dev/null
# one Markdown table: median, mean, min (ms); hyperfine subtracts the spawn
# of the sh that performs the stdin redirection for the script rows
python3 - "$w/r1.json" "$w/r2.json" <<'PY'
import json, statistics, sys
print("| case | median ms | mean ms | min ms |")
print("|---|---:|---:|---:|")
for f in sys.argv[1:]:
    for r in json.load(open(f))["results"]:
        t = [x * 1000 for x in r["times"]]
        print(f"| {r['command']} | {statistics.median(t):.1f} | {statistics.mean(t):.1f} | {min(t):.1f} |")
PY
