#!/usr/bin/env bash
# make demo: the agent on libvirt's embedded test:///default driver with a
# temporary spool; a sample job (which defines the domain demo-vm) is dropped
# into the spool the way orchestrators do it, and its result is printed. Then
# a second job goes through the socket API with `vmpayload submit --wait`.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=bin/vmpayload
work=$(mktemp -d /tmp/vmpayload-demo.XXXXXX)
agent_pid=
cleanup() {
	[ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

echo "== starting: vmpayload agent --libvirt-uri test:///default (it runs bin/vmpayloadd; spool $work/spool)"
"$bin" agent --config "" --libvirt-uri test:///default \
	--spool-dir "$work/spool" --payload-dir "$work/payload" --socket "$work/vmpayload.sock" \
	--secrets-dir "$work/secrets" --log-level info 2>"$work/agent.log" &
agent_pid=$!
for _ in $(seq 100); do [ -S "$work/vmpayload.sock" ] && break; sleep 0.1; done
[ -S "$work/vmpayload.sock" ] || { cat "$work/agent.log"; echo "agent did not start" >&2; exit 1; }

echo "== dropping configs/demo/demo-job.json into $work/spool/incoming (write a dot file, then rename)"
cp configs/demo/demo-job.json "$work/spool/incoming/.demo-1.json.tmp"
mv "$work/spool/incoming/.demo-1.json.tmp" "$work/spool/incoming/demo-1.json"
for _ in $(seq 100); do [ -e "$work/spool/done/demo-1.json" ] || [ -e "$work/spool/failed/demo-1.json" ] && break; sleep 0.1; done
echo "== result document ($(ls "$work"/spool/done/ "$work"/spool/failed/ | grep json | head -1))"
cat "$work"/spool/done/demo-1.json 2>/dev/null || { cat "$work"/spool/failed/demo-1.json; exit 1; }

echo "== the image the agent built"
img=$(ls "$work"/payload/*.iso)
"$bin" inspect "$img"

echo "== the same content again through the socket API: vmpayload submit --wait (the image is reused)"
sed 's/"demo-1"/"demo-2"/' configs/demo/demo-job.json > "$work/demo-2.json"
"$bin" submit --socket "$work/vmpayload.sock" --wait "$work/demo-2.json"

echo "== curl --unix-socket $work/vmpayload.sock http://localhost/healthz"
curl -s --unix-socket "$work/vmpayload.sock" http://localhost/healthz
echo "== agent log"
cat "$work/agent.log"
