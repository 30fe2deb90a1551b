package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/test/guest"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// TestAgentDurableE2E: a simulated host reboot does not lose the payload.
// Boot 1 applies a job; then the agent stops, the payload directory is
// emptied (tmpfs after a reboot) and the agent starts again, rebuilding the
// image from the recipe in the domain's definition; a plain `virsh start`
// then boots with the payload: cloud-init reads its datasource again, sees
// the same instance-id, does not redo per-instance work (runcmd, SSH host
// keys) and runs per-boot work (bootcmd) again. Bookworm with NoCloud,
// trixie with config-2.
func TestAgentDurableE2E(t *testing.T) {
	gateCase(t, "durable")
	for i, c := range []struct {
		suite, format, datasource string
	}{
		{guest.Bookworm, "nocloud", "DataSourceNoCloud"},
		{guest.Trixie, "configdrive", "DataSourceConfigDrive"},
	} {
		t.Run(c.suite, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), caseWait)
			defer cancel()
			a := startOwnAgent(t)
			tok := testenv.RandHex(t, 6)
			mac := "52:54:00:e3:30:0" + string(rune('1'+i))
			const hostKey = "/etc/ssh/ssh_host_ed25519_key.pub"
			v, x := newVM(ctx, t, c.suite, "pc", guest.BusSCSI, []guest.NIC{{MAC: mac}}, "vmpx.paths="+hostKey)
			v.agent = a
			host := "vmpx-dur-" + tok[:6]
			r1 := v.run(ctx, map[string]any{
				"id": "dur-1-" + tok, "action": "start", "domain_xml": x, "format": c.format,
				"hostname": host + ".example.test", "user_data": replaceUserData("dur"), "user_data_mode": "replace",
				"nics": []any{map[string]any{"name": "lan0", "mac": mac,
					"ipv4": map[string]any{"method": "static", "address": "198.51.100.30/24", "gateway": "198.51.100.1"}}},
			})
			rep1 := v.report(ctx)
			v.checkGuestDone(ctx, r1, 1)
			key1 := fileDesc(rep1, hostKey)
			runChecks(t, rep1, append(cloudInitChecks(rep1, c.datasource),
				check{"boot 1 instance-id", instanceID(rep1), r1.Payload.InstanceID},
				check{"boot 1 per-instance", lineCount(rep1, "/var/lib/vmpayload-e2e/per-instance"), 1},
				check{"boot 1 per-boot", lineCount(rep1, "/var/lib/vmpayload-e2e/per-boot"), 1},
				check{"boot 1 has an SSH host key", key1 != "<absent>", true},
			))
			v.shutdown(ctx)
			if t.Failed() {
				return
			}

			// The host "reboots": agent gone, payload tmpfs empty.
			hostReboot(t, a)
			if err := a.Start(); err != nil {
				t.Fatal(err)
			}
			// The agent rebuilds the image at start-up, byte for byte.
			sum := ""
			for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				if b, err := os.ReadFile(r1.Payload.Path); err == nil {
					if sum = testenv.SHA256(b); sum == r1.Payload.SHA256 {
						break
					}
				}
			}
			if sum != r1.Payload.SHA256 {
				t.Fatalf("image %s not rebuilt with sha256 %s (have %q)\n--- agent log tail ---\n%s", r1.Payload.Path, r1.Payload.SHA256, sum, a.Tail(30))
			}
			v.start = time.Now()
			if _, err := guest.Virsh(ctx, v.g.URI, "start", v.g.Name); err != nil {
				t.Fatal(err)
			}
			rep2 := v.report(ctx)
			// the restarted agent follows the channel again: the second
			// boot reports into the same job's result
			v.checkGuestDone(ctx, r1, 2)
			runChecks(t, rep2, append(cloudInitChecks(rep2, c.datasource),
				check{"boot 2 instance-id unchanged", instanceID(rep2), r1.Payload.InstanceID},
				check{"boot 2 per-instance runcmd not rerun", lineCount(rep2, "/var/lib/vmpayload-e2e/per-instance"), 1},
				check{"boot 2 per-boot bootcmd ran again", lineCount(rep2, "/var/lib/vmpayload-e2e/per-boot"), 2},
				check{"boot 2 SSH host key unchanged", fileDesc(rep2, hostKey), key1},
				check{"boot 2 hostname", rep2.Hostname, host},
			))
			v.shutdown(ctx)
		})
	}
}
