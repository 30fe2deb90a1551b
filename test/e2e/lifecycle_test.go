package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/test/guest"
)

// lines counts the lines of a file in the report (0 when absent).
func lineCount(rep *guest.Report, path string) int {
	f, ok := rep.File(path)
	if !ok {
		return 0
	}
	b, _ := f.Content()
	return strings.Count(string(b), "\n")
}

// instanceID is /var/lib/cloud/data/instance-id in the report.
func instanceID(rep *guest.Report) string {
	b := rep.Raw["instance_id"]
	var fl struct {
		Files []guest.File `json:"files"`
	}
	if err := json.Unmarshal(b, &fl); err != nil || len(fl.Files) == 0 {
		return ""
	}
	c, _ := fl.Files[0].Content()
	return strings.TrimSpace(string(c))
}

// replaceUserData is the verbatim user-data of the replace-mode jobs: a
// per-instance runcmd and a per-boot bootcmd, each appending a line.
func replaceUserData(tag string) string {
	return "#cloud-config\n" +
		"bootcmd:\n  - [sh, -c, \"mkdir -p /var/lib/vmpayload-e2e && echo " + tag + " >> /var/lib/vmpayload-e2e/per-boot\"]\n" +
		"runcmd:\n  - [sh, -c, \"echo " + tag + " >> /var/lib/vmpayload-e2e/per-instance\"]\n"
}

// TestAgentInstanceIDE2E: a replace-mode job boots the guest; the same job
// again (same payload, same instance-id) boots it a second time and the
// per-instance runcmd does not run again; a changed job gets a new
// instance-id and the per-instance work runs again.
func TestAgentInstanceIDE2E(t *testing.T) {
	ctx, tok := parallelCase(t, "instance-id")
	mac := "52:54:00:e3:20:01"
	v, x := newVM(ctx, t, guest.Bookworm, "pc", guest.BusSCSI, []guest.NIC{{MAC: mac}},
		"vmpx.paths=/var/lib/cloud/instance/user-data.txt")
	job := func(id, host, tag string) map[string]any {
		return map[string]any{
			"id": id, "action": "start", "domain_xml": x, "hostname": host + ".example.test",
			"user_data": replaceUserData(tag), "user_data_mode": "replace",
			"nics": []any{map[string]any{"name": "lan0", "mac": mac,
				"ipv4": map[string]any{"method": "static", "address": "198.51.100.20/24", "gateway": "198.51.100.1"}}},
		}
	}
	host1 := "vmpx-iid1-" + tok[:6]
	r1 := v.run(ctx, job("iid-1-"+tok, host1, "one"))
	rep1 := v.report(ctx)
	v.checkGuestDone(ctx, r1, 1)
	ud, _ := rep1.File("/var/lib/cloud/instance/user-data.txt")
	udb, _ := ud.Content()
	lan0, _ := rep1.LinkByMAC(mac)
	runChecks(t, rep1, append(cloudInitChecks(rep1, "DataSourceNoCloud"),
		check{"device bus", r1.Device.Bus, guest.BusSCSI},
		check{"replace: user-data verbatim", string(udb), replaceUserData("one")},
		check{"replace: meta-data hostname applied", rep1.Hostname, host1},
		check{"replace: network-config applied", lan0.HasAddr("198.51.100.20", 24), true},
		check{"boot 1 instance-id", instanceID(rep1), r1.Payload.InstanceID},
		check{"boot 1 per-instance", lineCount(rep1, "/var/lib/vmpayload-e2e/per-instance"), 1},
		check{"boot 1 per-boot", lineCount(rep1, "/var/lib/vmpayload-e2e/per-boot"), 1},
	))
	v.shutdown(ctx)

	r2 := v.run(ctx, job("iid-2-"+tok, host1, "one"))
	rep2 := v.report(ctx)
	v.checkGuestDone(ctx, r2, 1)
	runChecks(t, rep2, append(cloudInitChecks(rep2, "DataSourceNoCloud"),
		check{"same payload reused", r2.Payload.Reused, true},
		check{"same instance-id", r2.Payload.InstanceID, r1.Payload.InstanceID},
		check{"boot 2 instance-id", instanceID(rep2), r1.Payload.InstanceID},
		check{"boot 2 per-instance runcmd not rerun", lineCount(rep2, "/var/lib/vmpayload-e2e/per-instance"), 1},
		check{"boot 2 per-boot ran", lineCount(rep2, "/var/lib/vmpayload-e2e/per-boot"), 2},
	))
	v.shutdown(ctx)

	host3 := "vmpx-iid3-" + tok[:6]
	r3 := v.run(ctx, job("iid-3-"+tok, host3, "three"))
	rep3 := v.report(ctx)
	v.checkGuestDone(ctx, r3, 1)
	runChecks(t, rep3, append(cloudInitChecks(rep3, "DataSourceNoCloud"),
		check{"changed job: new instance-id", r3.Payload.InstanceID != r1.Payload.InstanceID, true},
		check{"boot 3 instance-id", instanceID(rep3), r3.Payload.InstanceID},
		check{"boot 3 per-instance runcmd ran again", fileDesc(rep3, "/var/lib/vmpayload-e2e/per-instance"), fmt.Sprintf("644 root:root %q", "one\nthree\n")},
		check{"boot 3 per-boot", lineCount(rep3, "/var/lib/vmpayload-e2e/per-boot"), 3},
		check{"boot 3 new hostname", rep3.Hostname, host3},
	))
	v.shutdown(ctx)
}

// TestAgentMediaChangeE2E: the guest keeps running after its report; a job
// for the running domain changes the payload medium live; after a reset
// (same QEMU process, so only the live change can bring the new data) a new
// cloud-init instance sees the new payload.
func TestAgentMediaChangeE2E(t *testing.T) {
	ctx, tok := parallelCase(t, "media-change")
	mac := "52:54:00:e3:21:01"
	v, x := newVM(ctx, t, guest.Trixie, "q35", guest.BusSATA, []guest.NIC{{MAC: mac}}, "vmpx.poweroff=0")
	job := func(id, action, host string) map[string]any {
		return map[string]any{
			"id": id, "action": action, "domain_xml": x, "hostname": host + ".example.test",
			"files":  []any{map[string]any{"path": "/etc/vmpayload-e2e/which", "content": host + "\n"}},
			"runcmd": []any{"mkdir -p /var/lib/vmpayload-e2e && echo " + host + " >> /var/lib/vmpayload-e2e/runs"},
			// A static NIC: without one cloud-init's fallback DHCP makes
			// systemd-networkd-wait-online wait out its timeout.
			"nics": []any{map[string]any{"name": "lan0", "mac": mac,
				"ipv4": map[string]any{"method": "static", "address": "198.51.100.21/24", "gateway": "198.51.100.1"}}},
		}
	}
	host1, host2 := "vmpx-mc1-"+tok[:6], "vmpx-mc2-"+tok[:6]
	r1 := v.run(ctx, job("mc-1-"+tok, "start", host1))
	rep1 := v.report(ctx)
	v.checkGuestDone(ctx, r1, 1)
	runChecks(t, rep1, append(cloudInitChecks(rep1, "DataSourceNoCloud"),
		check{"device bus", r1.Device.Bus, guest.BusSATA},
		check{"boot 1 hostname", rep1.Hostname, host1},
		check{"boot 1 file", fileDesc(rep1, "/etc/vmpayload-e2e/which"), fmt.Sprintf("644 root:root %q", host1+"\n")},
	))
	if t.Failed() {
		return
	}
	r2 := v.run(ctx, job("mc-2-"+tok, "attach", host2))
	runChecks(t, rep1, []check{
		{"live change: domain still running", r2.DomainState, "running"},
		{"live change: new image", r2.Payload.Path != r1.Payload.Path, true},
		{"live change: same bus", r2.Device.Bus, guest.BusSATA},
	})
	if _, err := guest.Virsh(ctx, v.g.URI, "reset", v.g.Name); err != nil {
		t.Fatal(err)
	}
	rep2 := v.report(ctx)
	// the live change's job gets the report of the boot after the reset
	v.checkGuestDone(ctx, r2, 1)
	runChecks(t, rep2, append(cloudInitChecks(rep2, "DataSourceNoCloud"),
		check{"after reset: instance-id of the new payload", instanceID(rep2), r2.Payload.InstanceID},
		check{"after reset: new hostname", rep2.Hostname, host2},
		check{"after reset: new file content", fileDesc(rep2, "/etc/vmpayload-e2e/which"), fmt.Sprintf("644 root:root %q", host2+"\n")},
		check{"after reset: runcmd ran for each instance", fileDesc(rep2, "/var/lib/vmpayload-e2e/runs"), fmt.Sprintf("644 root:root %q", host1+"\n"+host2+"\n")},
	))
}
