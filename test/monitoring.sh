#!/usr/bin/env bash
# Checks the monitoring files shipped in the packages (packaging/monitoring/,
# docs/monitoring.md) with Debian's promtool:
#   - promtool check rules vmpayload.rules.yml (syntax, PromQL, templates);
#   - promtool test rules vmpayload.rules.test.yml (every alert fires where it
#     should and stays quiet where it should not);
#   - every PromQL expression of the Grafana dashboard parses (promtool check
#     rules on a temporary rule file made of them, Grafana's $__ variables
#     replaced by durations).
#   - test/monitoring-live.sh: the rules on a real agent (test:///default)
#     scraped by a real Prometheus, when bin/vmpayload exists (make build)
#     and VMPAYLOAD_MONITORING_LIVE is not 0.
# That every vmpayload_ metric these files name exists is checked by
# agent/metrics/monitoring_test.go (go test).
#
# promtool and prometheus: the ones on PATH, else Debian's prometheus package
# downloaded with `apt-get download` and unpacked with dpkg-deb into
# $VMPAYLOAD_TOOLS (default bin/tools) -- not installed, so no prometheus
# service is set up or started. Idempotent: a second run reuses the unpacked
# copy. Needs apt-get, dpkg-deb, jq, curl, python3 (test/deps.sh; python3
# comes with cloud-init). Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=packaging/monitoring
tools=${VMPAYLOAD_TOOLS:-$PWD/bin/tools}

# fetch_prometheus: Debian's prometheus package, its two binaries unpacked
# into $tools/prometheus/usr/bin (not installed: no service, no user).
fetch_prometheus() {
	echo "monitoring: fetching promtool and prometheus from Debian's prometheus package"
	dl=$(mktemp -d)
	chmod 755 "$dl" # apt's _apt user downloads into it
	if ! (cd "$dl" && apt-get download -qq prometheus) 2>/dev/null; then
		apt-get update -qq
		(cd "$dl" && apt-get download -qq prometheus)
	fi
	dpkg-deb -x "$dl"/prometheus_*.deb "$dl/x"
	rm -rf "$tools/prometheus.new"
	mkdir -p "$tools/prometheus.new/usr/bin"
	mv "$dl/x/usr/bin/promtool" "$dl/x/usr/bin/prometheus" "$tools/prometheus.new/usr/bin/"
	rm -rf "$tools/prometheus" "$dl"
	mv "$tools/prometheus.new" "$tools/prometheus"
}
promtool=$(command -v promtool || true)
prometheus=$(command -v prometheus || true)
if [[ -z $promtool || -z $prometheus ]]; then
	promtool=$tools/prometheus/usr/bin/promtool
	prometheus=$tools/prometheus/usr/bin/prometheus
	[[ -x $promtool && -x $prometheus ]] || fetch_prometheus
fi
echo "monitoring: $("$promtool" --version 2>&1 | head -1)"

"$promtool" check rules "$dir/vmpayload.rules.yml"
"$promtool" test rules "$dir/vmpayload.rules.test.yml"

# The dashboard: valid JSON, and each target's expression parses as PromQL.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
jq -e '.schemaVersion and (.panels | length > 0)' "$dir/vmpayload-dashboard.json" >/dev/null
{
	echo "groups:"
	echo "  - name: dashboard"
	echo "    rules:"
	jq -r '[.panels[] | .targets[]?.expr] | to_entries[] |
		"      - record: dashboard:expr\(.key)\n        expr: \(.value | gsub("\\$__rate_interval|\\$__range|\\$__interval"; "5m") | gsub("\\$instance"; ".*") | tojson)"' \
		"$dir/vmpayload-dashboard.json"
} >"$tmp/dashboard.rules.yml"
n=$(grep -c 'record:' "$tmp/dashboard.rules.yml")
((n > 0)) || { echo "monitoring: no expressions in the dashboard" >&2; exit 1; }
if ! out=$("$promtool" check rules "$tmp/dashboard.rules.yml" 2>&1); then
	echo "$out" >&2
	echo "monitoring: a dashboard expression does not parse" >&2
	exit 1
fi
echo "monitoring: $n dashboard expressions parse"

# The rules against the real agent and a real Prometheus (test/monitoring-live.sh,
# ~1 min); skipped without the binary (make build) or with VMPAYLOAD_MONITORING_LIVE=0.
if [[ ${VMPAYLOAD_MONITORING_LIVE:-1} != 0 && -x ${VMPAYLOAD_BIN:-bin/vmpayload} ]]; then
	PROMETHEUS=$prometheus bash test/monitoring-live.sh
else
	echo "monitoring: live check skipped (no ${VMPAYLOAD_BIN:-bin/vmpayload}, or VMPAYLOAD_MONITORING_LIVE=0)"
fi
echo "monitoring: ok"
