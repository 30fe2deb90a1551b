#cloud-boothook
#!/bin/sh
# vmpayload guest reporter (docs/guest-report.md). cloud-init runs this
# boothook on every boot. It copies itself to /run/vmpayload (tmpfs) and
# starts itself as a transient systemd unit ordered after
# cloud-final.service, which waits for cloud-init's outcome and writes one
# JSON line to the virtio-serial port below. The unit is also ordered
# before shutdown.target, so a power-off right after cloud-init (its
# power_state) waits for the report. Without the port it does nothing. It
# never fails the boot: every path exits 0.
port=/dev/virtio-ports/org.vmpayload.guest.0
run=/run/vmpayload
unit=vmpayload-guest-report

json_str() {
	# a JSON string literal of $1 (backslash, quote and control characters)
	printf '%s' "$1" | tr -d '\000-\010\013-\037' |
		sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/	/\\t/g' | tr '\n' '\036' |
		sed -e 's/\o036/\\n/g' -e 's/^/"/' -e 's/$/"/'
}

json_doc() {
	# a JSON document from cloud-init ($1: a file) on one line, or null
	if [ -s "$1" ]; then tr '\n\r\t' '   ' <"$1"; else printf null; fi
}

report() {
	[ -c "$port" ] || exit 0
	# Wait for cloud-init to finish this boot (bounded: 1 hour) and take
	# its status; one python start only (seconds each on a slow guest).
	# While waiting, status --wait prints dots before the document.
	mkdir -p "$run" && chmod 0700 "$run"
	timeout 3600 cloud-init status --wait --format json >"$run/status.raw" 2>/dev/null
	code=$?
	sed '1s/^[.]*//' "$run/status.raw" >"$run/status.json"
	iid=$(cat /var/lib/cloud/data/instance-id 2>/dev/null)
	boot=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)
	up=$(cut -d' ' -f1 /proc/uptime 2>/dev/null)
	# the version without starting python again
	ver=$(sed -n 's/^__VERSION__ = "\(.*\)"$/\1/p' /usr/lib/python3*/dist-packages/cloudinit/version.py 2>/dev/null | head -n 1)
	[ -n "$ver" ] || ver=$(cloud-init --version 2>&1 | sed -n '1s/.* //p')
	line=$(printf '{"vmpayload_guest_report":1,"instance_id":%s,"boot_id":%s,"uptime_seconds":%s,"cloud_init_version":%s,"status_exit":%d,"status":%s,"result":%s}' \
		"$(json_str "$iid")" "$(json_str "$boot")" "${up:-0}" "$(json_str "$ver")" "$code" \
		"$(json_doc "$run/status.json")" "$(json_doc /run/cloud-init/result.json)")
	# Send until the host acknowledges ("ok"), for up to an hour: the host
	# end may be closed for a while (agent restarting). While the guest
	# shuts down, a few tries only.
	i=0
	while [ "$i" -lt 720 ]; do
		ack=$(timeout 5 sh -c 'exec 3<>"$1" && printf "%s\n" "$2" >&3 && head -c 2 <&3' vmpayload-send "$port" "$line" 2>/dev/null)
		[ "$ack" = ok ] && exit 0
		i=$((i + 1))
		if [ "$i" -ge 3 ] && [ "$(systemctl is-system-running 2>/dev/null)" = stopping ]; then
			exit 0
		fi
		sleep 5
	done
	exit 0
}

if [ "$1" = report ]; then
	report
fi
[ -c "$port" ] || exit 0
mkdir -p "$run" && chmod 0700 "$run" && cp "$0" "$run/guest-report" 2>/dev/null && chmod 0700 "$run/guest-report" || exit 0
if command -v systemd-run >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
	systemd-run --no-block --quiet --unit="$unit-$(cut -c1-8 /proc/sys/kernel/random/boot_id)" \
		--property=Type=oneshot --property=DefaultDependencies=no \
		--property=After=cloud-final.service --property=Before=shutdown.target \
		--property=TimeoutStartSec=4000 \
		/bin/sh "$run/guest-report" report >/dev/null 2>&1 || true
else
	nohup /bin/sh "$run/guest-report" report >/dev/null 2>&1 &
fi
exit 0
