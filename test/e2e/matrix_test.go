package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	pimage "github.com/vmpayload/vmpayload/payload/image"
	"github.com/vmpayload/vmpayload/test/guest"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// sshKey returns a fresh public key line.
func sshKey(t *testing.T, comment string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "id")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", f).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	b, err := os.ReadFile(f + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// cryptSHA512 hashes password with salt the way crypt(3) "$6$" does, using
// openssl on the host.
func cryptSHA512(t *testing.T, password, salt string) string {
	t.Helper()
	args := []string{"passwd", "-6", "-stdin"}
	if salt != "" {
		args = append(args, "-salt", salt)
	}
	cmd := exec.Command("openssl", args...)
	cmd.Stdin = strings.NewReader(password + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("openssl passwd -6: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// verifyCrypt reports whether the crypt hash h verifies against password.
func verifyCrypt(t *testing.T, h, password string) bool {
	t.Helper()
	f := strings.Split(h, "$")
	if len(f) != 4 || f[1] != "6" {
		return false
	}
	return cryptSHA512(t, password, f[2]) == h
}

// fullCase is one full-feature job: every structured field of the job
// format, plus optional user-data merged into the generated config.
type fullCase struct {
	name, suite, format, media, machine, bus string
	// userData is "", "cloud-config" or "script" (merge mode).
	userData string
	// dhcp adds a second NIC with DHCPv4 and SLAAC. Nothing answers on
	// the guests' taps, so the guest's network start-up waits for its DHCP
	// client to give up (see docs/compatibility.md): one case per guest.
	dhcp bool
}

// want is what a full-feature job should produce in the guest.
type want struct {
	host, fqdn, tz, token string
	alicePW, bobHash      string
	aliceKey, defaultKey  string
	blob                  []byte
	big                   string // a text file of ~6 KB
	mac0, mac1, v4, v6    string
	datasource, userData  string
	format, media, bus    string
	dhcp                  bool
}

func fullJob(t *testing.T, i int, c fullCase) (map[string]any, want) {
	tok := testenv.RandHex(t, 6)
	w := want{
		host: fmt.Sprintf("vmpx-%d-%s", i, tok[:6]), tz: "Europe/Berlin", token: tok,
		alicePW: "pw-" + testenv.RandHex(t, 8), bobHash: cryptSHA512(t, "bob-"+testenv.RandHex(t, 8), ""),
		aliceKey: sshKey(t, "alice@vmpx-e2e"), defaultKey: sshKey(t, "ops@vmpx-e2e"),
		mac0: fmt.Sprintf("52:54:00:e3:%02x:01", i), mac1: fmt.Sprintf("52:54:00:e3:%02x:02", i),
		v4: fmt.Sprintf("192.0.2.%d", 10+i), v6: fmt.Sprintf("2001:db8::%x", 0x10+i),
		userData: c.userData, format: c.format, media: c.media, bus: c.bus, dhcp: c.dhcp,
	}
	w.fqdn = w.host + ".example.test"
	w.blob = []byte("\x00\x01\x02\xffblob-" + tok)
	w.big = strings.Repeat("big \"file\" of "+tok+": ü\t\\ ---\n", 6000/(len(tok)+25)+1)
	w.datasource = map[string]string{"nocloud": "DataSourceNoCloud", "configdrive": "DataSourceConfigDrive"}[c.format]
	job := map[string]any{
		"format": c.format, "media": c.media, "action": "start",
		"hostname": w.fqdn, "timezone": w.tz,
		"users": []any{
			map[string]any{"name": "alice", "password": w.alicePW, "ssh_authorized_keys": []string{w.aliceKey},
				"sudo": "ALL=(ALL) NOPASSWD:ALL", "groups": []string{"adm", "sudo"}, "shell": "/bin/bash", "lock_password": false},
			map[string]any{"name": "bob", "password_hash": w.bobHash, "lock_password": true, "shell": "/bin/sh"},
		},
		"ssh_authorized_keys": []string{w.defaultKey},
		"ssh_password_auth":   false,
		"dns":                 map[string]any{"nameservers": []string{"192.0.2.53", "2001:db8::53"}, "search": []string{"example.test"}},
		"nics": []any{
			map[string]any{"name": "lan0", "mac": w.mac0, "mtu": 1400,
				"ipv4": map[string]any{"method": "static", "address": w.v4 + "/24", "gateway": "192.0.2.1"},
				"ipv6": map[string]any{"method": "static", "address": w.v6 + "/64", "gateway": "2001:db8::1"}},
		},
		"files": []any{
			map[string]any{"path": "/etc/vmpayload-e2e/motd", "content": "hello " + tok + "\n", "permissions": "0644"},
			map[string]any{"path": "/etc/vmpayload-e2e/blob.bin", "content": base64.StdEncoding.EncodeToString(w.blob), "encoding": "base64",
				"permissions": "0600", "owner": "alice:alice"},
			map[string]any{"path": "/var/lib/vmpayload-e2e/tool.sh", "content": "#!/bin/sh\necho " + tok + "\n", "permissions": "0750", "owner": "root:adm"},
			// above cloudinit.PlainContentLimit: written base64 in user-data (issue 14)
			map[string]any{"path": "/etc/vmpayload-e2e/big.txt", "content": w.big, "permissions": "0640"},
		},
		"runcmd": []any{
			"echo " + tok + " > /var/lib/vmpayload-e2e/runcmd-shell",
			[]string{"touch", "/var/lib/vmpayload-e2e/runcmd-argv"},
		},
		"vendor_data": "#!/bin/sh\nmkdir -p /var/lib/vmpayload-e2e\necho vendor-" + tok + " > /var/lib/vmpayload-e2e/vendor-script\n",
	}
	if c.media == "iso" {
		// the guest kernel reads the payload's Joliet tree (what Windows
		// reads, issue 35): mount it with norock and hash every file
		label := map[string]string{"nocloud": "cidata", "configdrive": "config-2"}[c.format]
		job["runcmd"] = append(job["runcmd"].([]any), "mkdir -p /mnt/vmpx-joliet && mount -t iso9660 -o ro,norock \"$(blkid -L "+label+")\" /mnt/vmpx-joliet && "+
			"grep vmpx-joliet /proc/mounts > "+jolietListing+".mount && (cd /mnt/vmpx-joliet && find . -type f -exec sha256sum {} +) > "+jolietListing+"; umount /mnt/vmpx-joliet")
	}
	if c.dhcp {
		job["nics"] = append(job["nics"].([]any),
			map[string]any{"name": "lan1", "mac": w.mac1, "ipv4": map[string]any{"method": "dhcp"}, "ipv6": map[string]any{"method": "slaac"}})
	}
	switch c.userData {
	case "cloud-config":
		// In merge mode the user's scalar wins and lists are appended.
		w.tz = "Asia/Tokyo"
		job["user_data"] = "#cloud-config\ntimezone: Asia/Tokyo\nruncmd:\n  - [sh, -c, \"echo user-" + tok + " > /var/lib/vmpayload-e2e/user-runcmd\"]\n"
	case "script":
		job["user_data"] = "#!/bin/sh\nmkdir -p /var/lib/vmpayload-e2e\necho script-" + tok + " > /var/lib/vmpayload-e2e/user-script\n"
	}
	if c.userData != "" {
		job["user_data_mode"] = "merge"
	}
	return job, w
}

// TestAgentFullE2E runs the full-feature job through the agent for both
// formats on both guests, varying machine, CD-ROM bus, media and merge mode.
func TestAgentFullE2E(t *testing.T) {
	gate(t)
	// Parallel at the top level too, so the cases run alongside the
	// lifecycle tests instead of before them.
	t.Parallel()
	cases := []fullCase{
		{"bookworm-nocloud-pc-ide-iso-merge-cloudconfig-dhcp", guest.Bookworm, "nocloud", "iso", "pc", guest.BusIDE, "cloud-config", true},
		{"bookworm-configdrive-q35-sata-iso-merge-script", guest.Bookworm, "configdrive", "iso", "q35", guest.BusSATA, "script", false},
		{"trixie-nocloud-q35-scsi-iso", guest.Trixie, "nocloud", "iso", "q35", guest.BusSCSI, "", false},
		{"trixie-configdrive-pc-ide-iso-merge-cloudconfig-dhcp", guest.Trixie, "configdrive", "iso", "pc", guest.BusIDE, "cloud-config", true},
	}
	for i, c := range filter(cases, func(c fullCase) string { return c.name }) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), caseWait)
			defer cancel()
			job, w := fullJob(t, i+1, c)
			nics := []guest.NIC{{MAC: w.mac0}}
			if c.dhcp {
				nics = append(nics, guest.NIC{MAC: w.mac1})
			}
			v, x := newVM(ctx, t, c.suite, c.machine, c.bus, nics,
				"vmpx.paths=/etc/hosts,/var/lib/cloud/instance/user-data.txt")
			job["domain_xml"] = x
			r := v.run(ctx, job)
			if r.Device.Bus != c.bus || r.Payload.Format != c.format || r.Payload.Media != c.media || r.DomainState != "running" {
				t.Errorf("result: bus %q format %q media %q state %q; want %q %q %q running", r.Device.Bus, r.Payload.Format, r.Payload.Media, r.DomainState, c.bus, c.format, c.media)
			}
			rep := v.report(ctx)
			checkFull(t, rep, w)
			if c.media == "iso" {
				checkJoliet(t, rep, r.Payload.Path)
			}
			v.checkGuestDone(ctx, r, 1)
			v.shutdown(ctx)
		})
	}
}

// jolietListing is where fullJob's runcmd records the files the guest
// kernel sees in the payload's Joliet tree, with their SHA-256.
const jolietListing = "/var/lib/vmpayload-e2e/joliet-sha256"

// checkJoliet compares the files the guest kernel saw through the Joliet
// tree alone (mount -o norock) with every file of the image at img.
func checkJoliet(t *testing.T, rep *guest.Report, img string) {
	t.Helper()
	mounts, sums := rep.Text(jolietListing+".mount"), rep.Text(jolietListing)
	if !strings.Contains(mounts, "norock") {
		t.Errorf("Joliet: the guest did not mount the payload with norock: %q", mounts)
	}
	seen := rep.Sums(jolietListing)
	info, err := pimage.Inspect(img)
	if err != nil {
		t.Fatalf("Joliet: %v", err)
	}
	for _, f := range info.Files {
		b, err := pimage.ReadFile(img, f.Path)
		if err != nil {
			t.Fatalf("Joliet: %v", err)
		}
		if h := testenv.SHA256(b); seen[f.Path] != h {
			t.Errorf("Joliet: the guest kernel sees %q with sha256 %q, the image holds %s", f.Path, seen[f.Path], h)
		}
	}
	if len(seen) != len(info.Files) {
		t.Errorf("Joliet: the guest kernel sees %d files, the image holds %d:\n%s", len(seen), len(info.Files), sums)
	}
}

// TestAgentVFATE2E boots a vfat payload. Linux refuses a FAT filesystem
// with 512-byte sectors on a CD-ROM's 2048-byte blocks ("FAT-fs (sr0):
// logical sector size too small for device"), so the agent attaches vfat
// payloads as a read-only virtio disk (SCSI where the domain has a SCSI
// controller) instead of a CD-ROM; cloud-init must find and apply it.
func TestAgentVFATE2E(t *testing.T) {
	ctx, tok := parallelCase(t, "vfat")
	mac := "52:54:00:e3:22:01"
	host := "vmpx-vfat-" + tok[:6]
	v, x := newVM(ctx, t, guest.Bookworm, "q35", guest.BusSATA, []guest.NIC{{MAC: mac}}, "")
	r := v.run(ctx, map[string]any{
		"id": "vfat-" + tok, "action": "start", "domain_xml": x, "media": "vfat", "format": "nocloud",
		"hostname": host + ".example.test",
		"files":    []any{map[string]any{"path": "/etc/vmpayload-e2e/vfat", "content": tok + "\n"}},
		"nics": []any{map[string]any{"name": "lan0", "mac": mac,
			"ipv4": map[string]any{"method": "static", "address": "198.51.100.22/24", "gateway": "198.51.100.1"}}},
	})
	rep := v.report(ctx)
	v.checkGuestDone(ctx, r, 1)
	log, _ := os.ReadFile(v.g.SerialLog)
	lan0, _ := rep.LinkByMAC(mac)
	runChecks(t, rep, append(cloudInitChecks(rep, "DataSourceNoCloud"),
		check{"agent built a vfat cidata image", r.Payload.Media + " " + r.Payload.Label, "vfat cidata"},
		check{"attached as a read-only virtio disk", r.Device.Kind + " " + r.Device.Bus, "disk virtio"},
		check{"no FAT sector-size refusal", bytes.Contains(log, []byte("logical sector size too small")), false},
		check{"host name applied", rep.Hostname, host},
		check{"file written", fileDesc(rep, "/etc/vmpayload-e2e/vfat"), fmt.Sprintf("644 root:root %q", tok+"\n")},
		check{"static address applied", lan0.HasAddr("198.51.100.22", 24), true},
	))
	v.shutdown(ctx)
}

func filter[T any](cases []T, name func(T) string) []T {
	only := os.Getenv("VMPAYLOAD_E2E_ONLY")
	if only == "" {
		return cases
	}
	var out []T
	for _, c := range cases {
		if strings.Contains(name(c), only) {
			out = append(out, c)
		}
	}
	return out
}

// gateCase is gate, then skips t unless VMPAYLOAD_E2E_ONLY lets the case
// name run.
func gateCase(t *testing.T, name string) {
	t.Helper()
	gate(t)
	if len(filter([]string{name}, func(s string) string { return s })) == 0 {
		t.Skip("filtered out by VMPAYLOAD_E2E_ONLY")
	}
}

// parallelCase is gateCase, then runs t in parallel; it returns the case's
// context (caseWait, cancelled when t ends) and a random token.
func parallelCase(t *testing.T, name string) (context.Context, string) {
	t.Helper()
	gateCase(t, name)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), caseWait)
	t.Cleanup(cancel)
	return ctx, testenv.RandHex(t, 6)
}

// check is one named observation; got and want are compared with ==.
type check struct {
	name      string
	got, want any
}

func runChecks(t *testing.T, rep *guest.Report, checks []check) {
	t.Helper()
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	if t.Failed() {
		b, _ := json.MarshalIndent(map[string]any{"links": rep.Links, "routes": rep.Routes, "routes6": rep.Routes6,
			"network_config": networkText(rep), "resolv_conf": rep.ResolvConf, "resolvectl": rep.Resolvectl,
			"status": rep.StatusLong, "problems": rep.LogProblems, "failed_units": rep.FailedUnits,
			"result": string(rep.ResultRaw)}, "", "  ")
		t.Logf("report details:\n%s", b)
	}
}

// fileDesc is "mode owner:group content" of path in the report.
func fileDesc(rep *guest.Report, path string) string {
	f, ok := rep.File(path)
	if !ok {
		return "<absent>"
	}
	b, _ := f.Content()
	return fmt.Sprintf("%s %s:%s %q", f.Mode, f.Owner, f.Group, b)
}

// networkText concatenates every rendered network configuration file.
func networkText(rep *guest.Report) string {
	var b strings.Builder
	for _, f := range rep.NetworkConfig {
		if c, ok := f.Content(); ok {
			fmt.Fprintf(&b, "### %s\n%s\n", f.Path, c)
		}
	}
	return b.String()
}

func member(rep *guest.Report, group, user string) bool {
	g, ok := rep.Group(group)
	if !ok {
		return false
	}
	for _, m := range g.Members {
		if m == user {
			return true
		}
	}
	return false
}

func sudoRule(rep *guest.Report, rule string) bool {
	for _, f := range rep.Sudoers {
		if b, _ := f.Content(); bytes.Contains(b, []byte(rule)) {
			return true
		}
	}
	return false
}

func hasDefault(rs []guest.Route, gw, dev string) bool {
	for _, r := range rs {
		if r.Dst == "default" && r.Gateway == gw && r.Dev == dev {
			return true
		}
	}
	return false
}

// cloudInitClean reports the datasource check and the absence of errors in
// result.json.
func cloudInitChecks(rep *guest.Report, datasource string) []check {
	return []check{
		{"result.json present", len(rep.ResultRaw) > 0, true},
		{"result.json datasource " + datasource, strings.Contains(rep.Result.V1.Datasource, datasource), true},
		{"result.json errors", strings.Join(rep.Result.V1.Errors, "; "), ""},
		{"cloud-init status done", strings.Contains(rep.StatusLong.Out, "status: done"), true},
	}
}

// dhcpRE and slaacRE recognise a DHCPv4 and an IPv6 router-advertisement
// configuration of lan1 in ENI (bookworm) or netplan/networkd (trixie).
// cloud-init 25.1's netplan renderer writes SLAAC ("ipv6_slaac" in
// network_data.json) as "dhcp6: true", which networkd runs as DHCP=yes with
// router advertisements accepted: netplan has no RA-only switch that
// cloud-init uses (docs/compatibility.md).
var (
	dhcpRE  = regexp.MustCompile(`(?m)^iface lan1 inet dhcp$|^\s*dhcp4: true$`)
	slaacRE = regexp.MustCompile(`(?m)^iface lan1 inet6 auto$|^\s*accept-ra: true$|^\s*dhcp6: true$`)
)

func checkFull(t *testing.T, rep *guest.Report, w want) {
	t.Helper()
	lan0, _ := rep.LinkByMAC(w.mac0)
	lan1, _ := rep.LinkByMAC(w.mac1)
	alice, _ := rep.User("alice")
	bob, _ := rep.User("bob")
	aliceHash, _ := rep.ShadowHash("alice")
	bobHash, _ := rep.ShadowHash("bob")
	net := networkText(rep)
	dns := rep.ResolvConf + rep.Resolvectl + net
	ud, _ := rep.File("/var/lib/cloud/instance/user-data.txt")
	udText, _ := ud.Content()
	checks := append(cloudInitChecks(rep, w.datasource),
		check{"hostname", rep.Hostname, w.host},
		check{"fqdn", rep.FQDN, w.fqdn},
		check{"alice shell", alice.Shell, "/bin/bash"},
		check{"alice in adm", member(rep, "adm", "alice"), true},
		check{"alice in sudo", member(rep, "sudo", "alice"), true},
		check{"alice sudo rule", sudoRule(rep, "alice ALL=(ALL) NOPASSWD:ALL"), true},
		check{"alice shadow hash is SHA-512 crypt", strings.HasPrefix(aliceHash, "$6$"), true},
		check{"alice shadow hash verifies against the job's password", verifyCrypt(t, aliceHash, w.alicePW), true},
		check{"alice authorized_keys", strings.Join(rep.UserAuthorizedKeys("alice"), "\n"), w.aliceKey},
		check{"bob shell", bob.Shell, "/bin/sh"},
		check{"bob shadow: the job's hash, locked", bobHash, "!" + w.bobHash},
		check{"default user authorized_keys", strings.Join(rep.UserAuthorizedKeys("debian"), "\n"), w.defaultKey},
		check{"timezone", strings.TrimPrefix(rep.Timezone, "/usr/share/zoneinfo/"), w.tz},
		check{"file motd", fileDesc(rep, "/etc/vmpayload-e2e/motd"), fmt.Sprintf("644 root:root %q", "hello "+w.token+"\n")},
		check{"file blob.bin (base64, deferred owner)", fileDesc(rep, "/etc/vmpayload-e2e/blob.bin"), fmt.Sprintf("600 alice:alice %q", w.blob)},
		check{"file big.txt (6 KB: base64 in user-data)", fileDesc(rep, "/etc/vmpayload-e2e/big.txt"), fmt.Sprintf("640 root:root %q", w.big)},
		check{"file tool.sh", fileDesc(rep, "/var/lib/vmpayload-e2e/tool.sh"), fmt.Sprintf("750 root:adm %q", "#!/bin/sh\necho "+w.token+"\n")},
		check{"runcmd shell string", fileDesc(rep, "/var/lib/vmpayload-e2e/runcmd-shell"), fmt.Sprintf("644 root:root %q", w.token+"\n")},
		check{"runcmd argv", fileDesc(rep, "/var/lib/vmpayload-e2e/runcmd-argv"), "644 root:root \"\""},
		check{"vendor-data script ran", fileDesc(rep, "/var/lib/vmpayload-e2e/vendor-script"), fmt.Sprintf("644 root:root %q", "vendor-"+w.token+"\n")},
		check{"lan0 renamed by MAC", lan0.Name, "lan0"},
		check{"lan0 IPv4", lan0.HasAddr(w.v4, 24), true},
		check{"lan0 IPv6", lan0.HasAddr(w.v6, 64), true},
		check{"lan0 MTU", lan0.MTU, 1400},
		check{"IPv4 default route via lan0", hasDefault(rep.Routes, "192.0.2.1", "lan0"), true},
		check{"IPv6 default route via lan0", hasDefault(rep.Routes6, "2001:db8::1", "lan0"), true},
		check{"DNS server 192.0.2.53 configured", strings.Contains(dns, "192.0.2.53"), true},
		check{"DNS server 2001:db8::53 configured", strings.Contains(dns, "2001:db8::53"), true},
		check{"DNS search example.test configured", strings.Contains(dns, "example.test"), true},
	)
	if w.dhcp {
		checks = append(checks,
			check{"lan1 renamed by MAC", lan1.Name, "lan1"},
			check{"lan1 DHCPv4 rendered", dhcpRE.MatchString(net), true},
			check{"lan1 SLAAC rendered", slaacRE.MatchString(net), true})
	}
	switch w.userData {
	case "cloud-config":
		checks = append(checks,
			check{"merged user runcmd appended", fileDesc(rep, "/var/lib/vmpayload-e2e/user-runcmd"), fmt.Sprintf("644 root:root %q", "user-"+w.token+"\n")},
			// the guest reporter (a boothook part) comes first, so the
			// merged #cloud-config is the second part of a multipart
			check{"user-data.txt is MIME multipart with the merged #cloud-config", bytes.Contains(udText, []byte("multipart/mixed")) &&
				bytes.Contains(udText, []byte("text/cloud-boothook")) && bytes.Contains(udText, []byte("\n#cloud-config\n")), true},
			// the user's text kept, the generated part merged under cloud-init's Merge-Type (issue 18)
			check{"generated part merged with Merge-Type", bytes.Contains(udText, []byte("Merge-Type: dict(no_replace,recurse_list)+list(prepend)+str()")), true})
	case "script":
		checks = append(checks,
			check{"merged user script ran", fileDesc(rep, "/var/lib/vmpayload-e2e/user-script"), fmt.Sprintf("644 root:root %q", "script-"+w.token+"\n")},
			check{"user-data.txt is MIME multipart", bytes.Contains(udText, []byte("multipart/mixed")), true})
	}
	runChecks(t, rep, checks)
	t.Logf("observed: cloud-init %s, datasource %q, resolv.conf %q, recoverable errors %v, failed units %q",
		rep.CloudInitVersion, rep.Result.V1.Datasource, rep.ResolvConf, rep.Result.V1.RecoverableErrors, rep.FailedUnits)
	t.Logf("rendered network config:\n%s", net)
}
