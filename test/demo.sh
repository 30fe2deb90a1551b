#!/usr/bin/env bash
# make demo: build a payload image from an example job and inspect it.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "== vmpayload validate configs/examples/02-full-nocloud.json"
bin/vmpayload validate configs/examples/02-full-nocloud.json
echo "== vmpayload build"
bin/vmpayload build -o "$work/seed.iso" configs/examples/02-full-nocloud.json
echo "== vmpayload inspect"
bin/vmpayload inspect "$work/seed.iso"
echo "== user-data"
bin/vmpayload inspect --cat user-data "$work/seed.iso"
