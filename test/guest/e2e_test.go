package guest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/test/testenv"
)

// e2e gates tests that build images and boot real guests.
func e2e(t *testing.T) {
	t.Helper()
	testenv.NeedE2E(t, "build guest images and boot real guests")
	ensureLibvirtd(t)
}

var libvirtdOnce sync.Once

func ensureLibvirtd(t *testing.T) {
	t.Helper()
	libvirtdOnce.Do(func() {
		if _, err := FixKVMDevice(); err != nil {
			t.Logf("%v", err)
		}
		script := testenv.RepoPath("test", "libvirtd.sh")
		var cmd *exec.Cmd
		if _, err := os.Stat(script); err == nil {
			cmd = exec.Command("/bin/sh", script)
		} else {
			cmd = exec.Command("/bin/sh", "-c", "pgrep -x virtlogd >/dev/null || virtlogd -d; pgrep -x libvirtd >/dev/null || libvirtd -d")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Logf("starting libvirtd: %v: %s", err, out)
		}
	})
	if _, err := Virsh(context.Background(), DefaultURI, "uri"); err != nil {
		t.Fatalf("libvirtd not answering: %v", err)
	}
}

var images sync.Map // suite -> func() (*Image, error)

// image builds or reuses suite's image once per test process.
func image(t *testing.T, suite string) *Image {
	t.Helper()
	f, _ := images.LoadOrStore(suite, sync.OnceValues(func() (*Image, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		start := time.Now()
		var progress bytes.Buffer
		img, err := EnsureImage(ctx, suite, &progress)
		if err == nil {
			t.Logf("image %s: %s (ensure took %s; recorded build %s s)", suite, img.Dir, time.Since(start).Round(time.Second), img.Meta["BUILD_SECONDS"])
		}
		return img, err
	}))
	img, err := f.(func() (*Image, error))()
	if err != nil {
		t.Fatalf("image %s: %v", suite, err)
	}
	return img
}

// secrets are per-test credentials, generated fresh so nothing in the
// checks can be a constant the guest happened to have.
type secrets struct {
	pubKey, passHash, token string
}

func newSecrets(t *testing.T, dir string) secrets {
	t.Helper()
	key := filepath.Join(dir, "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "vmpx-e2e", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	hash, err := exec.Command("openssl", "passwd", "-6", "pw-"+testenv.RandHex(t, 8)).Output()
	if err != nil {
		t.Fatalf("openssl passwd -6: %v", err)
	}
	return secrets{pubKey: strings.TrimSpace(string(pub)), passHash: strings.TrimSpace(string(hash)), token: testenv.RandHex(t, 12)}
}

func userData(host string, s secrets) string {
	return fmt.Sprintf(`#cloud-config
hostname: %[1]s
fqdn: %[1]s.example.test
manage_etc_hosts: true
timezone: Europe/Berlin
users:
  - name: e2e
    gecos: vmpayload e2e
    shell: /bin/bash
    lock_passwd: false
    passwd: "%[2]s"
    sudo: "ALL=(ALL) NOPASSWD:ALL"
    ssh_authorized_keys:
      - %[3]s
write_files:
  - path: /etc/vmpayload-e2e/hello.txt
    permissions: "0640"
    owner: root:root
    content: "hello %[4]s\n"
runcmd:
  - [sh, -c, "mkdir -p /var/lib/vmpayload-e2e && echo %[4]s > /var/lib/vmpayload-e2e/runcmd-marker"]
`, host, s.passHash, s.pubKey, s.token)
}

// netAddrs are the documentation-range addresses a case assigns.
type netAddrs struct {
	mac, v4, v6 string
}

func noCloudSeed(host string, s secrets, n netAddrs) (meta, network string) {
	meta = fmt.Sprintf("instance-id: iid-%s\nlocal-hostname: %s\n", s.token, host)
	// Network config v1: cloud-init 22.4 mis-renders some v2 IPv6 routes.
	network = fmt.Sprintf(`version: 1
config:
  - type: physical
    name: vmpx0
    mac_address: "%s"
    mtu: 1400
    subnets:
      - type: static
        address: %s/24
        gateway: 192.0.2.1
      - type: static6
        address: %s/64
        gateway: "2001:db8::1"
  - type: nameserver
    address: [192.0.2.53]
    search: [example.test]
`, n.mac, n.v4, n.v6)
	return meta, network
}

// configDriveFiles gives the default gateways as each network's "gateway",
// as payload/cloudinit renders them: cloud-init 22.4 under ifupdown turns
// "routes" into "route add" lines that need net-tools, which the image lacks.
func configDriveFiles(host string, s secrets, n netAddrs) map[string]string {
	meta, _ := json.Marshal(map[string]any{
		"uuid": "3c1b9e7e-0000-4000-8000-" + s.token, "hostname": host, "name": host,
		"launch_index": 0, "availability_zone": "nova",
	})
	network, _ := json.Marshal(map[string]any{
		"links": []any{map[string]any{"id": "vmpx0", "type": "phy", "ethernet_mac_address": n.mac, "mtu": 1400}},
		"networks": []any{
			map[string]any{"id": "n4", "type": "ipv4", "link": "vmpx0", "ip_address": n.v4, "netmask": "255.255.255.0",
				"gateway": "192.0.2.1"},
			map[string]any{"id": "n6", "type": "ipv6", "link": "vmpx0", "ip_address": n.v6, "netmask": "ffff:ffff:ffff:ffff::",
				"gateway": "2001:db8::1"},
		},
		"services": []any{map[string]any{"type": "dns", "address": "192.0.2.53"}},
	})
	return map[string]string{
		"openstack/latest/meta_data.json":    string(meta),
		"openstack/latest/user_data":         userData(host, s),
		"openstack/latest/network_data.json": string(network),
	}
}

// TestBootE2E boots a real guest from a hand-made seed (cloud-localds /
// genisoimage, not vmpayload) and checks in the guest's report that
// cloud-init applied every setting: the baseline that tells a harness or
// image problem from an agent one. The suite × format × bus matrix runs
// through the agent in test/e2e; set VMPAYLOAD_E2E_SEED_MATRIX=1 to boot
// the hand-made seeds on every suite, format and bus as well.
func TestBootE2E(t *testing.T) {
	e2e(t)
	cases := []struct {
		name, suite, seed, machine, bus string
	}{
		{"bookworm-nocloud-pc-ide", Bookworm, "nocloud", "pc", BusIDE},
	}
	if os.Getenv("VMPAYLOAD_E2E_SEED_MATRIX") == "1" {
		cases = append(cases, []struct {
			name, suite, seed, machine, bus string
		}{
			{"bookworm-configdrive-q35-sata", Bookworm, "configdrive", "q35", BusSATA},
			{"bookworm-nocloud-pc-scsi", Bookworm, "nocloud", "pc", BusSCSI},
			{"trixie-nocloud-q35-sata", Trixie, "nocloud", "q35", BusSATA},
			{"trixie-configdrive-pc-ide", Trixie, "configdrive", "pc", BusIDE},
			{"trixie-nocloud-q35-scsi", Trixie, "nocloud", "q35", BusSCSI},
		}...)
	}
	if only := os.Getenv("VMPAYLOAD_E2E_ONLY"); only != "" {
		filtered := cases[:0]
		for _, c := range cases {
			if strings.Contains(c.name, only) {
				filtered = append(filtered, c)
			}
		}
		cases = filtered
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, img, accel, dir, s := bootSetup(t, tc.suite, 15*time.Minute)
			var err error
			host := fmt.Sprintf("vmpx-%d-%s", i, s.token[:6])
			n := netAddrs{mac: fmt.Sprintf("52:54:00:e2:e0:%02x", i+1), v4: fmt.Sprintf("192.0.2.%d", 10+i), v6: fmt.Sprintf("2001:db8::%x", 0x10+i)}
			iso := filepath.Join(dir, "seed.iso")
			var wantDS string
			switch tc.seed {
			case "nocloud":
				meta, network := noCloudSeed(host, s, n)
				err, wantDS = NoCloudISO(ctx, iso, userData(host, s), meta, network), "NoCloud"
			case "configdrive":
				err, wantDS = ConfigDriveISO(ctx, iso, configDriveFiles(host, s, n)), "ConfigDrive"
			}
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			g, rep := bootReport(ctx, t, img, Options{Machine: tc.machine, DomainType: accel, NICs: []NIC{{MAC: n.mac}}}, iso, tc.bus,
				filepath.Join("/var/tmp/vmpayload-e2e", "failed-"+tc.name+".serial.log"))
			toReport := time.Since(start)
			if err := g.WaitShutdown(ctx); err != nil {
				t.Errorf("guest did not power off after its report: %v", err)
			}
			t.Logf("TIMING %s accel=%s start->report %.1fs start->off %.1fs guest-uptime-at-report %.1fs cloud-init %s",
				tc.name, accel, toReport.Seconds(), time.Since(start).Seconds(), rep.Meta.UptimeSeconds, rep.CloudInitVersion)
			checkReport(t, rep, host, s, n, wantDS)
		})
	}
}

// TestNoSeedE2E boots through the agent-facing path (Prepare + XML, no
// payload CD-ROM at all): ds-identify finds no datasource and disables
// cloud-init, and the fallback report unit must still report and power off.
func TestNoSeedE2E(t *testing.T) {
	e2e(t)
	img := image(t, Bookworm)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	accel, _ := Accel(ctx, img)
	g, err := Prepare(ctx, img, Options{DomainType: accel, ExtraCmdline: "vmpx.paths=/etc/hostname"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Cleanup(context.Background()); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	x, err := g.XML()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(x, `device="cdrom"`) {
		t.Fatalf("Prepare's XML has a CD-ROM:\n%s", x)
	}
	if err := g.Define(ctx, x); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := WaitReport(ctx, g.SerialLog)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.WaitShutdown(ctx); err != nil {
		t.Errorf("no power-off after the report: %v", err)
	}
	t.Logf("TIMING no-seed start->report %.1fs", time.Since(start).Seconds())
	hostname, _ := rep.File("/etc/hostname")
	content, _ := hostname.Content()
	checks := []struct {
		name string
		got  any
		want any
	}{
		{"cloud-init disabled", rep.Meta.CloudInitDisabled, true},
		{"image hostname kept", rep.Hostname, "debian"},
		{"vmpx.paths file listed", string(content), "debian\n"},
		{"no e2e user", func() bool { _, ok := rep.User("e2e"); return ok }(), false},
		{"cmdline seen", strings.Contains(rep.Meta.Cmdline, "vmpx.paths=/etc/hostname"), true},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

func checkReport(t *testing.T, rep *Report, host string, s secrets, n netAddrs, wantDS string) {
	t.Helper()
	link, linkOK := rep.LinkByMAC(n.mac)
	file := func(p string) string {
		f, ok := rep.File(p)
		if !ok {
			return "<absent>"
		}
		b, _ := f.Content()
		return fmt.Sprintf("%s %s:%s %q", f.Mode, f.Owner, f.Group, b)
	}
	sudo := func() bool {
		for _, f := range rep.Sudoers {
			if b, _ := f.Content(); bytes.Contains(b, []byte("e2e ALL=(ALL) NOPASSWD:ALL")) {
				return true
			}
		}
		return false
	}
	hasRoute := func(rs []Route, gw string) bool {
		for _, r := range rs {
			if r.Dst == "default" && r.Gateway == gw && r.Dev == link.Name {
				return true
			}
		}
		return false
	}
	hash, _ := rep.ShadowHash("e2e")
	user, _ := rep.User("e2e")
	checks := []struct {
		name string
		got  any
		want any
	}{
		{"datasource", strings.Contains(rep.Result.V1.Datasource, "DataSource"+wantDS), true},
		{"no cloud-init errors", len(rep.Result.V1.Errors), 0},
		{"cloud-init status done", strings.Contains(rep.StatusLong.Out, "status: done"), true},
		{"cloud-init not disabled", rep.Meta.CloudInitDisabled, false},
		{"hostname", rep.Hostname, host},
		{"fqdn", rep.FQDN, host + ".example.test"},
		{"user shell", user.Shell, "/bin/bash"},
		{"user home", user.Home, "/home/e2e"},
		{"password hash", hash, s.passHash},
		{"sudoers", sudo(), true},
		{"authorized key", strings.Join(rep.UserAuthorizedKeys("e2e"), "\n"), s.pubKey},
		{"authorized_keys mode", func() string { f, _ := rep.File("/home/e2e/.ssh/authorized_keys"); return f.Mode + " " + f.Owner }(), "600 e2e"},
		{"write_files", file("/etc/vmpayload-e2e/hello.txt"), fmt.Sprintf("640 root:root %q", "hello "+s.token+"\n")},
		{"runcmd marker", file("/var/lib/vmpayload-e2e/runcmd-marker"), fmt.Sprintf("644 root:root %q", s.token+"\n")},
		{"timezone", strings.HasSuffix(rep.Timezone, "zoneinfo/Europe/Berlin"), true},
		{"NIC by MAC present", linkOK, true},
		{"IPv4 address", link.HasAddr(n.v4, 24), true},
		{"IPv6 address", link.HasAddr(n.v6, 64), true},
		{"MTU", link.MTU, 1400},
		{"IPv4 default route", hasRoute(rep.Routes, "192.0.2.1"), true},
		{"IPv6 default route", hasRoute(rep.Routes6, "2001:db8::1"), true},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	if t.Failed() {
		b, _ := json.MarshalIndent(map[string]any{"links": rep.Links, "routes": rep.Routes, "routes6": rep.Routes6,
			"network_config": rep.NetworkConfig, "status": rep.StatusLong, "problems": rep.LogProblems, "failed_units": rep.FailedUnits}, "", "  ")
		t.Logf("report details:\n%s", b)
	}
	t.Logf("resolv.conf: %q; failed units: %q; cloud-init log problems: %d lines", rep.ResolvConf, rep.FailedUnits, strings.Count(rep.LogProblems, "\n"))
}

// bootReport boots img with iso on bus (Boot), removes the guest when t
// ends (first keeping its serial log at keep, when set and t failed) and
// waits for the guest's report.
func bootReport(ctx context.Context, t *testing.T, img *Image, opts Options, iso, bus, keep string) (*Guest, *Report) {
	t.Helper()
	g, err := Boot(ctx, img, opts, iso, bus)
	if g != nil {
		t.Cleanup(func() {
			if t.Failed() && keep != "" {
				if b, err := os.ReadFile(g.SerialLog); err == nil {
					_ = os.WriteFile(keep, b, 0o644)
					t.Logf("serial log kept at %s", keep)
				}
			}
			if err := g.Cleanup(context.Background()); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	rep, err := g.WaitReport(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return g, rep
}

// bootSetup is what a boot test needs first: suite's image, a context
// ending after wait (or with t), the accelerator (TCG when the KVM probe
// fails), a directory and the secrets in it.
func bootSetup(t *testing.T, suite string, wait time.Duration) (context.Context, *Image, string, string, secrets) {
	t.Helper()
	img := image(t, suite)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	accel, err := Accel(ctx, img)
	if err != nil {
		t.Logf("KVM probe: %v (using TCG)", err)
	}
	dir := t.TempDir()
	return ctx, img, accel, dir, newSecrets(t, dir)
}
