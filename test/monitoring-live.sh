#!/usr/bin/env bash
# The packaged alert rules against a real agent and a real Prometheus (run by
# test/monitoring.sh in make test, or by hand, ~30 s): the agent on
# libvirt's embedded test:///default driver with a temporary spool, its
# /metrics behind a GET-/metrics-only proxy on 127.0.0.1 (python3; the role
# nginx has in docs/monitoring.md), and Debian's prometheus 2.42 server
# ($PROMETHEUS, else unpacked from the package into a temporary directory,
# never installed) scraping it every second with packaging/monitoring/vmpayload.rules.yml
# evaluated every second. Then, timed from each step:
#   1. the healthy idle agent: up 1, vmpayload_libvirt_connected 1 and no
#      area degraded, then no alert pending or firing;
#   2. 5 jobs for a domain that does not exist (domain_not_found):
#      VmpayloadJobsFailing and VmpayloadJobsAllFailing pending;
#   3. 3 good jobs on 3 new domains: VmpayloadJobsAllFailing gone;
#   4. the payload directory removed: VmpayloadDirectoryRecreated firing;
#   5. spool/done replaced by a file, a good job: VmpayloadResultsPending
#      and VmpayloadDegraded (area results) pending, VmpayloadResultWritesRetried
#      firing; done/ back: the result is written, VmpayloadResultsPending and
#      VmpayloadDegraded gone;
#   6. the agent stopped: VmpayloadAgentDown pending.
# (The test driver has no guests and no libvirtd to lose: the guest and
# libvirt alerts are covered by the promtool unit tests only.)
# The alerts' for: durations are not waited for (promtool test rules covers
# them); "pending" shows the expression true on the agent's real series.
# Stops only the processes it started (by pid). Needs bin/vmpayload (make
# build), libvirt, python3, curl, jq, and apt-get and dpkg-deb without
# $PROMETHEUS.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${VMPAYLOAD_BIN:-bin/vmpayload}
[[ -x $bin ]] || { echo "monitoring-live: $bin missing (make build)" >&2; exit 1; }

work=$(mktemp -d /tmp/vmpayload-monitoring.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
	local p
	set +e
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "monitoring-live: FAIL: $*" >&2; exit 1; }

prometheus=${PROMETHEUS:-}
if [[ -z $prometheus ]]; then
	(cd "$work" && apt-get download -qq prometheus 2>/dev/null) || fail "apt-get download prometheus"
	dpkg-deb -x "$work"/prometheus_*.deb "$work/deb"
	prometheus=$work/deb/usr/bin/prometheus
fi

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
proxy_port=$(freeport)
prom_port=$(freeport)

start_agent() {
	"$bin" agent --config "" --libvirt-uri test:///default \
		--spool-dir "$work/spool" --payload-dir "$work/payload" --socket "$work/vmpayload.sock" \
		--secrets-dir "$work/secrets" --rescan-interval 1s --log-level info 2>>"$work/agent.log" &
	agent_pid=$!
	pids+=("$agent_pid")
	for _ in $(seq 100); do [[ -S $work/vmpayload.sock ]] && return; sleep 0.1; done
	cat "$work/agent.log"
	fail "the agent did not start"
}
start_agent

# GET /metrics only, forwarded to the agent's socket
cat >"$work/proxy.py" <<'EOF'
import http.client, http.server, socket, sys
sock, port = sys.argv[1], int(sys.argv[2])
class Unix(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(sock)
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path != "/metrics":
            self.send_error(404)
            return
        try:
            c = Unix("localhost", timeout=10)
            c.request("GET", "/metrics")
            r = c.getresponse()
            body = r.read()
        except OSError:
            self.send_error(502)
            return
        self.send_response(r.status)
        self.send_header("Content-Type", r.getheader("Content-Type", "text/plain"))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
EOF
python3 "$work/proxy.py" "$work/vmpayload.sock" "$proxy_port" &
pids+=($!)

cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $PWD/packaging/monitoring/vmpayload.rules.yml
scrape_configs:
  - job_name: vmpayload
    static_configs:
      - targets: ['127.0.0.1:$proxy_port']
EOF
"$prometheus" --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
	--web.listen-address="127.0.0.1:$prom_port" --log.level=warn 2>"$work/prometheus.log" &
pids+=($!)

api="http://127.0.0.1:$prom_port/api/v1"
query() { curl -sf --get "$api/query" --data-urlencode "query=$1"; }
# has_result QUERY: the query answers with at least one series
has_result() { local r; r=$(query "$1") && [[ -n $r ]] && jq -e '.data.result | length > 0' <<<"$r"; }
# alerts: "name/state" lines of the pending and firing alerts
alerts() { curl -sf "$api/alerts" | jq -r '.data.alerts[] | "\(.labels.alertname)/\(.state)"' | sort -u; }
t0=0
mark() { t0=$EPOCHREALTIME; }
since() { awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
# wait_for DESCRIPTION SECONDS COMMAND...: until the command succeeds
wait_for() {
	local d=$1 n=$2; shift 2
	local end=$((SECONDS + n))
	until "$@" >/dev/null 2>&1; do
		((SECONDS < end)) || { alerts >&2 || true; tail -5 "$work/prometheus.log" >&2; fail "$d: not within $n s"; }
		sleep 0.2
	done
	echo "ok   $d ($(since) s)"
}
has_alert() { alerts | grep -qx "$1"; }
no_alerts() { local a; a=$(alerts) && [[ -z $a ]]; }
no_alert() { ! alerts | grep -q "^$1/"; }

mark
wait_for "up{job=\"vmpayload\"} == 1" 60 has_result 'up{job="vmpayload"} == 1'
wait_for "vmpayload_libvirt_connected 1, no area degraded" 30 has_result 'vmpayload_libvirt_connected == 1 and on (job, instance) max by (job, instance) (vmpayload_health_degraded) == 0'
# Before the first scrape absent(up) is true: VmpayloadAgentAbsent is
# pending for an evaluation or two (its for: 15m keeps it from firing).
wait_for "no alert pending or firing on the idle agent" 30 no_alerts
sleep 5 # a few more evaluations of every rule
a=$(alerts)
[[ -z $a ]] || { curl -sf "$api/alerts" | jq -c '.data.alerts[]' >&2; fail "alerts on the healthy idle agent: $a"; }
echo "ok   idle agent: no alert pending or firing after 5 s of evaluations"

# good_job N: the demo job for a new test domain mon-vm-N
good_job() {
	jq -c --arg i "$1" '.id = "good-\($i)" | .domain = "mon-vm-\($i)" |
		.domain_xml |= gsub("demo-vm"; "mon-vm-\($i)") | .nics[0].mac = "52:54:00:de:01:0\($i)"' configs/demo/demo-job.json
}
spool_drop() { # spool_drop ID JSON
	printf '%s' "$2" >"$work/spool/incoming/.$1.tmp"
	mv "$work/spool/incoming/.$1.tmp" "$work/spool/incoming/$1.json"
}
mark
for i in 1 2 3 4 5; do
	spool_drop "bad-$i" "{\"version\":1,\"id\":\"bad-$i\",\"domain\":\"no-such-domain-$i\",\"action\":\"start\",\"hostname\":\"h$i\"}"
done
wait_for "5 jobs failed (failed/)" 30 sh -c "[ \$(ls '$work/spool/failed' | grep -c '^bad-.\.json\$') -eq 5 ]"
wait_for "VmpayloadJobsAllFailing pending" 30 has_alert VmpayloadJobsAllFailing/pending
wait_for "VmpayloadJobsFailing pending" 30 has_alert VmpayloadJobsFailing/pending

mark
for i in 1 2 3; do
	spool_drop "good-$i" "$(good_job "$i")"
done
wait_for "3 good jobs done (done/)" 30 sh -c "[ \$(ls '$work/spool/done' | grep -c '^good-.\.json\$') -eq 3 ]"
wait_for "VmpayloadJobsAllFailing gone" 30 no_alert VmpayloadJobsAllFailing

mark
rm -rf "$work/payload"
wait_for "payload directory recreated" 30 test -d "$work/payload"
wait_for "VmpayloadDirectoryRecreated firing" 30 has_alert VmpayloadDirectoryRecreated/firing

mark
mv "$work/spool/done" "$work/done.saved"
echo "not a directory" >"$work/spool/done" # results cannot be written
spool_drop good-4 "$(good_job 4)"
wait_for "vmpayload_results_pending 1" 30 has_result 'vmpayload_results_pending == 1'
wait_for "VmpayloadResultsPending pending" 30 has_alert VmpayloadResultsPending/pending
wait_for "vmpayload_health_degraded{area=\"results\"} 1" 30 has_result 'vmpayload_health_degraded{area="results"} == 1'
wait_for "VmpayloadDegraded pending" 30 has_alert VmpayloadDegraded/pending
wait_for "VmpayloadResultWritesRetried firing" 30 has_alert VmpayloadResultWritesRetried/firing
mark
rm "$work/spool/done"
mv -T "$work/done.saved" "$work/spool/done" # (onto an empty done/ the agent may have recreated)
wait_for "the result written once done/ is back" 30 test -e "$work/spool/done/good-4.json"
wait_for "VmpayloadResultsPending gone" 30 no_alert VmpayloadResultsPending
wait_for "VmpayloadDegraded gone" 30 no_alert VmpayloadDegraded

mark
kill "$agent_pid"
wait "$agent_pid" 2>/dev/null || true
wait_for "VmpayloadAgentDown pending" 30 has_alert VmpayloadAgentDown/pending
echo "monitoring-live: ok; alerts at the end: $(alerts | tr '\n' ' ')"
