#!/usr/bin/env bash
# Checks the monitoring files shipped in the packages (packaging/monitoring/,
# docs/monitoring.md) with Debian's promtool:
#   - promtool check rules vmpayload.rules.yml (syntax, PromQL, templates);
#   - promtool test rules vmpayload.rules.test.yml (every alert fires where it
#     should and stays quiet where it should not);
#   - every PromQL expression of the Grafana dashboard parses (promtool check
#     rules on a temporary rule file made of them, Grafana's $__ variables
#     replaced by durations).
# That every vmpayload_ metric these files name exists is checked by
# agent/metrics/monitoring_test.go (go test).
#
# promtool: the one on PATH, else Debian's prometheus package downloaded with
# `apt-get download` and unpacked with dpkg-deb into $VMPAYLOAD_TOOLS
# (default bin/tools) -- not installed, so no prometheus service is set up or
# started. Idempotent: a second run reuses the unpacked copy. Needs apt-get,
# dpkg-deb and jq (test/deps.sh). Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=packaging/monitoring
tools=${VMPAYLOAD_TOOLS:-$PWD/bin/tools}

promtool=$(command -v promtool || true)
if [[ -z $promtool ]]; then
	promtool=$tools/prometheus/usr/bin/promtool
	if [[ ! -x $promtool ]]; then
		echo "monitoring: fetching promtool from Debian's prometheus package"
		dl=$(mktemp -d)
		trap 'rm -rf "$dl"' EXIT
		chmod 755 "$dl" # apt's _apt user downloads into it
		if ! (cd "$dl" && apt-get download -qq prometheus) 2>/dev/null; then
			apt-get update -qq
			(cd "$dl" && apt-get download -qq prometheus)
		fi
		rm -rf "$tools/prometheus.new"
		mkdir -p "$tools"
		dpkg-deb -x "$dl"/prometheus_*.deb "$dl/x"
		mkdir -p "$tools/prometheus.new/usr/bin"
		mv "$dl/x/usr/bin/promtool" "$tools/prometheus.new/usr/bin/"
		rm -rf "$tools/prometheus"
		mv "$tools/prometheus.new" "$tools/prometheus"
	fi
fi
echo "monitoring: $("$promtool" --version 2>&1 | head -1)"

"$promtool" check rules "$dir/vmpayload.rules.yml"
"$promtool" test rules "$dir/vmpayload.rules.test.yml"

# The dashboard: valid JSON, and each target's expression parses as PromQL.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp" ${dl:+"$dl"}' EXIT
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
echo "monitoring: ok"
