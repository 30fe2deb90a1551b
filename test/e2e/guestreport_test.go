package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload/guestreport"
	"github.com/vmpayload/vmpayload/test/guest"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// guestResult waits until the agent has written a guest report into job
// r's result file: a final guest status (done, error, ...) with at least
// minReports reports. It fails the test after reportWait.
func (v *vm) guestResult(ctx context.Context, r result.Result, minReports int) result.Result {
	v.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, reportWait)
	defer cancel()
	p := filepath.Join(v.agent.SpoolDir, "done", r.ID+".json")
	var last result.Result
	for {
		if b, err := os.ReadFile(p); err == nil && json.Unmarshal(b, &last) == nil && last.Guest != nil &&
			result.GuestFinal(last.Guest.Status) && last.Guest.Status != result.GuestTimeout && last.Guest.Reports >= minReports {
			v.t.Logf("TIMING %s: guest report %d of job %s: status %s after %.1fs from the domain's start (guest uptime %.1fs, cloud-init %s)",
				v.g.Name, last.Guest.Reports, r.ID, last.Guest.Status, last.Guest.Seconds, last.Guest.UptimeSeconds, last.Guest.CloudInitVersion)
			return last
		}
		select {
		case <-ctx.Done():
			lb, _ := os.ReadFile(v.agent.LogPath)
			g, _ := json.Marshal(last.Guest)
			v.t.Fatalf("%s: no guest report %d in job %s's result: %v; guest section %s\n--- agent log tail ---\n%s", v.g.Name, minReports, r.ID, ctx.Err(), g, tail(string(lb), 30))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// checkGuestDone asserts what every case's boot must report over the
// channel: cloud-init done without errors, for the payload's instance-id.
func (v *vm) checkGuestDone(ctx context.Context, r result.Result, minReports int) result.Result {
	v.t.Helper()
	res := v.guestResult(ctx, r, minReports)
	g := res.Guest
	for _, c := range []check{
		{"guest report status", g.Status, result.GuestDone},
		{"guest report errors", strings.Join(g.Errors, "; "), ""},
		{"guest report instance-id is the payload's", g.InstanceID, r.Payload.InstanceID},
		{"guest report no instance-id mismatch", g.InstanceIDMismatch, false},
		{"guest report channel", g.Channel, guestreport.Channel},
		{"guest report timed from the start", g.Seconds > 0 && g.StartedAt != nil && g.ReportedAt != nil, true},
	} {
		if c.got != c.want {
			v.t.Errorf("%s: %s: got %v, want %v", v.g.Name, c.name, c.got, c.want)
		}
	}
	return res
}

// TestAgentGuestReportE2E: the guest's own outcome over the report channel,
// on both cloud-init versions, in as few boots as possible.
//
//   - trixie (cloud-init 25.1): a failing runcmd and an unknown cloud-config
//     key report error with cloud-init's message for the runcmd and the
//     schema warning as a recoverable error; a reset (same QEMU, a new boot)
//     reports again for the same instance-id.
//   - bookworm (cloud-init 22.4): the same payload reports error with 22.4's
//     message; then the domain is redefined without the channel and started
//     again: the reporter finds no port and the guest boots normally.
func TestAgentGuestReportE2E(t *testing.T) {
	gate(t)
	cases := filter([]string{"guest-report-trixie", "guest-report-bookworm"}, func(s string) string { return s })
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), caseWait)
			defer cancel()
			suite, machine, bus, cmdline := guest.Bookworm, "pc", guest.BusSCSI, ""
			if name == "guest-report-trixie" {
				suite, machine, bus, cmdline = guest.Trixie, "q35", guest.BusSATA, "vmpx.poweroff=0"
			}
			tok := testenv.RandHex(t, 6)
			v, x := newVM(ctx, t, suite, machine, bus, nil, cmdline)
			r := v.run(ctx, map[string]any{
				"id": "gr-" + suite + "-" + tok, "action": "start", "domain_xml": x, "hostname": "vmpx-gr-" + tok[:6],
				"runcmd":    []any{"echo vmpx-guest-report-fails >&2; exit 3"},
				"user_data": "#cloud-config\nvmpx_not_a_cloud_init_key: 1\n",
			})
			if r.Guest == nil || r.Guest.Status != result.GuestPending {
				t.Fatalf("job result guest section %+v, want pending", r.Guest)
			}
			v.report(ctx) // the image's own serial report: cloud-init finished
			res := v.guestResult(ctx, r, 1)
			g := res.Guest
			errs := strings.Join(g.Errors, "; ")
			checks := []check{
				{"status error", g.Status, result.GuestError},
				{"cloud-init's runcmd message", strings.Contains(errs, "scripts") && strings.Contains(errs, "runcmd"), true},
				{"instance-id is the payload's", g.InstanceID, r.Payload.InstanceID},
				{"datasource", strings.Contains(strings.ToLower(g.Datasource), "nocloud"), true},
				{"boot id", g.BootID != "", true},
			}
			if suite == guest.Trixie {
				checks = append(checks,
					check{"cloud-init 25", strings.HasPrefix(g.CloudInitVersion, "25."), true},
					check{"schema warning as a recoverable error", strings.Contains(strings.Join(g.RecoverableErrors, "; "), "schema"), true})
			} else {
				checks = append(checks, check{"cloud-init 22.4", strings.HasPrefix(g.CloudInitVersion, "22.4"), true})
			}
			for _, c := range checks {
				if c.got != c.want {
					t.Errorf("%s: got %v, want %v (guest section %+v)", c.name, c.got, c.want, g)
				}
			}
			if t.Failed() {
				return
			}
			if suite == guest.Trixie {
				// A reset is a new boot of the same QEMU process: the agent's
				// connection stays, the boothook runs again, a second report
				// comes for the same instance-id.
				v.start = time.Now()
				if _, err := guest.Virsh(ctx, v.g.URI, "reset", v.g.Name); err != nil {
					t.Fatal(err)
				}
				v.report(ctx)
				res2 := v.guestResult(ctx, r, 2)
				g2 := res2.Guest
				for _, c := range []check{
					{"reboot: reported again", g2.Reports, 2},
					{"reboot: same instance-id", g2.InstanceID, r.Payload.InstanceID},
					{"reboot: new boot id", g2.BootID != g.BootID, true},
					// runcmd is per instance: not run again, so no error
					{"reboot: no errors", strings.Join(g2.Errors, "; "), ""},
				} {
					if c.got != c.want {
						t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
					}
				}
				return
			}
			// bookworm: without the channel the reporter must do nothing
			// harmful: redefine the domain without it and boot again.
			v.shutdown(ctx)
			xml, err := guest.Virsh(ctx, v.g.URI, "dumpxml", "--inactive", v.g.Name)
			if err != nil {
				t.Fatal(err)
			}
			ed, err := domxml.NewEdit(xml)
			if err != nil {
				t.Fatal(err)
			}
			removed, err := ed.RemoveGuestChannel(guestreport.Channel)
			if err != nil || !removed {
				t.Fatalf("removing the channel: %v (present: %v)", err, removed)
			}
			noChan, err := ed.XML()
			if err != nil {
				t.Fatal(err)
			}
			if err := v.g.Define(ctx, noChan); err != nil {
				t.Fatal(err)
			}
			v.start = time.Now()
			if err := v.g.Start(ctx); err != nil {
				t.Fatal(err)
			}
			rep := v.report(ctx)
			runChecks(t, rep, append(cloudInitChecks(rep, "DataSourceNoCloud"),
				check{"no channel: same instance-id", instanceID(rep), r.Payload.InstanceID}))
			if st := v.guestResult(ctx, r, 1).Guest; st.Reports != 1 {
				t.Errorf("a boot without the channel reported: %+v", st)
			}
		})
	}
}
