package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/kinds/credentials"
	"github.com/vmpayload/vmpayload/payload/secrets"
	"github.com/vmpayload/vmpayload/test/guest"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// credsRootHash is SHA-512 crypt of "vmpayload-example" with salt
// "vmpxexample" (openssl passwd -6).
const credsRootHash = "$6$vmpxexample$/MKuX02LcuQE7WE2Y3nex7axqhyDusZJC.aRY7RGXDuxO3syUKMUt9DqDneTPdwwDhQdtyr8VBfiX0.ujJsis0"

// firstBootImage makes a copy of img's root filesystem in dir that is in
// systemd's first-boot state for the settings credentials carry, as an
// image built for credentials (mkosi's) is: /etc/machine-id
// "uninitialized" (an empty one, the image's, is not a first boot:
// machine-id(5)), no /etc/hostname or /etc/localtime, and no locale file
// (Debian 13's systemd-firstboot writes /etc/locale.conf, Debian 12's
// /etc/default/locale, Debian's own patch). With rootUnset, root is not
// configured either, in the way that systemd's version asks for: 257 treats
// root as configured when /etc/shadow has a root entry ("Root account
// found"), so the copy drops that line; 252 when /etc/passwd and
// /etc/shadow both exist ("assuming root account has been initialized"),
// so the copy has no /etc/shadow at all (systemd-firstboot 252 then writes
// one holding root alone, mode 0000). Without rootUnset root stays
// configured: a guest whose job cannot carry root's password (SMBIOS
// refuses secrets) would otherwise sit at systemd-firstboot's password
// prompt on the console. The copy is sparse and edited with debugfs; the
// cached image is not touched. It keeps Debian 13's /etc/vconsole.conf: the
// image has no keymaps, so systemd-firstboot 257 could neither take
// firstboot.keymap ("Keymap ... is not installed") nor prompt for one;
// Debian 12's image has none and 252 writes any keymap it is given.
func firstBootImage(t *testing.T, img *guest.Image, dir string, rootUnset bool) *guest.Image {
	t.Helper()
	base := filepath.Join(dir, "base.raw")
	if out, err := exec.Command("cp", "--sparse=always", img.Base, base).CombinedOutput(); err != nil {
		t.Fatalf("copying %s: %v: %s", img.Base, err, out)
	}
	if err := os.Chmod(base, 0o644); err != nil {
		t.Fatal(err)
	}
	exists := func(p string) bool {
		out, _ := exec.Command("debugfs", "-R", "stat "+p, base).CombinedOutput()
		return !strings.Contains(string(out), "File not found")
	}
	remove := []string{"/etc/hostname", "/etc/localtime", "/etc/locale.conf", "/etc/machine-id"}
	if img.Suite == guest.Bookworm {
		remove = append(remove, "/etc/default/locale")
	}
	var cmds []string
	for _, p := range remove {
		if exists(p) {
			cmds = append(cmds, "rm "+p)
		}
	}
	machineID := filepath.Join(dir, "machine-id")
	if err := os.WriteFile(machineID, []byte("uninitialized\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	cmds = append(cmds, "write "+machineID+" /etc/machine-id", "set_inode_field /etc/machine-id mode 0100444")
	switch {
	case !rootUnset:
	case img.Suite == guest.Bookworm:
		cmds = append(cmds, "rm /etc/shadow")
	default:
		shadow, err := exec.Command("debugfs", "-R", "cat /etc/shadow", base).Output()
		if err != nil {
			t.Fatalf("reading /etc/shadow of the image: %v", err)
		}
		var kept []string
		for _, l := range strings.SplitAfter(string(shadow), "\n") {
			if l != "" && !strings.HasPrefix(l, "root:") {
				kept = append(kept, l)
			}
		}
		if len(kept) == strings.Count(string(shadow), "\n") {
			t.Fatalf("the image's /etc/shadow has no root entry:\n%s", shadow)
		}
		newShadow := filepath.Join(dir, "shadow")
		if err := os.WriteFile(newShadow, []byte(strings.Join(kept, "")), 0o640); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, "rm /etc/shadow", "write "+newShadow+" /etc/shadow",
			"set_inode_field /etc/shadow mode 0100640", "set_inode_field /etc/shadow uid 0", "set_inode_field /etc/shadow gid 42")
	}
	script := filepath.Join(dir, "debugfs.cmds")
	if err := os.WriteFile(script, []byte(strings.Join(cmds, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("debugfs", "-w", "-f", script, base).CombinedOutput(); err != nil || strings.Contains(string(out), "not found") {
		t.Fatalf("debugfs: %v\n%s", err, out)
	}
	for _, p := range remove {
		if p != "/etc/machine-id" && exists(p) {
			t.Fatalf("the first-boot copy still has %s", p)
		}
	}
	fb := *img
	fb.Base = base
	return &fb
}

// credsJob maps a job document to its credentials the way the kind does.
// The test delivers them itself (the agent cannot yet), so it enables the
// format that validation otherwise refuses.
func credsJob(t *testing.T, doc map[string]any, sd secrets.Dir) ([]credentials.Credential, job.CredentialsDelivery) {
	t.Helper()
	credentials.Enabled = true
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	j, r := job.ParseWith(b, job.Defaults{})
	if !r.OK() {
		t.Fatalf("job %s: %v", b, r.Err())
	}
	a := j.Apply(job.Defaults{})
	creds, err := credentials.FromJob(&a, sd)
	if err != nil {
		t.Fatal(err)
	}
	if errs := credentials.Check(creds, a.CredentialsDelivery); len(errs) > 0 {
		t.Fatalf("Check: %v", errs)
	}
	return creds, a.CredentialsDelivery
}

// TestCredentialsE2E (issue 42): a Debian 13 guest (systemd 257) in
// first-boot state, without any cloud-init datasource, takes its settings
// from systemd credentials alone, half of them as SMBIOS OEM strings and
// half as fw_cfg files, put into the definition by libvirtx/domxml from
// the credentials payload/kinds/credentials maps two jobs to (one with
// credentials_delivery "smbios", one "fwcfg" with root's password hash and
// a secret). The guest's report must show: the host name
// (system.hostname), the time zone and locale (firstboot.*), root's hash
// (passwd.hashed-password.root), root's authorized key, the motd and
// issue (login.*), a file written by tmpfiles.extra, the DNS server and
// search domain (network.*, systemd-resolved) and a custom credential, and
// every credential in /run/credentials/@system with the bytes it was given.
// The agent does not run these jobs yet (engine integration is issue 42's
// remaining part), so the test edits and starts the domain itself.
func TestCredentialsE2E(t *testing.T) {
	gate(t)
	for _, suite := range filter([]string{guest.Bookworm, guest.Trixie}, func(s string) string { return "credentials-" + s }) {
		t.Run(suite, func(t *testing.T) {
			t.Parallel()
			credentialsDirect(t, suite)
		})
	}
}

func credentialsDirect(t *testing.T, suite string) {
	ctx, cancel := context.WithTimeout(context.Background(), caseWait)
	defer cancel()
	img := image(t, suite)
	work := testenv.WorkDir(t, "creds-e2e-")
	fb := firstBootImage(t, img, work, true)

	sd := filepath.Join(work, "secrets")
	if err := os.Mkdir(sd, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sd, "app-token"), []byte("token-from-a-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	key := sshKey(t, "creds@e2e")
	motd := "credsweb: provisioned from systemd credentials\n"
	issue := "credsweb issue banner\n"
	fileContent := "written by tmpfiles.extra: 100% \\ ok\n"
	smbiosCreds, d1 := credsJob(t, map[string]any{
		"version": 1, "domain": "credsweb", "format": "credentials", "credentials_delivery": "smbios",
		"hostname": "credsweb", "timezone": "Europe/Berlin", "keymap": "de-latin1", "motd": motd,
		"dns":         map[string]any{"nameservers": []string{"192.0.2.53"}, "search": []string{"creds.example"}},
		"files":       []map[string]any{{"path": "/etc/vmpayload-e2e/credentials.txt", "content": fileContent, "permissions": "0640"}},
		"credentials": map[string]any{"vmpx.custom": "custom value", "vmpx.binary": map[string]any{"base64": "AAEC/w=="}},
	}, "")
	fwcfgCreds, d2 := credsJob(t, map[string]any{
		"version": 1, "domain": "credsweb", "format": "credentials", "credentials_delivery": "fwcfg",
		"locale": "C.UTF-8", "issue": issue,
		"users":              []map[string]any{{"name": "root", "password_hash": credsRootHash, "ssh_authorized_keys": []string{key}}},
		"credential_secrets": map[string]any{"vmpx.token": "app-token"},
	}, secrets.Dir(sd))
	if d1 != job.CredentialsSMBIOS || d2 != job.CredentialsFwCfg {
		t.Fatalf("deliveries %s, %s", d1, d2)
	}

	accel, _ := guest.Accel(ctx, img)
	paths := "/run/credentials/@system,/etc/motd.d,/etc/issue.d,/etc/locale.conf,/etc/default/locale,/etc/vconsole.conf,/etc/hostname"
	g, err := guest.Prepare(ctx, fb, guest.Options{Name: "cguest-direct-" + suite + "-" + testenv.RandHex(t, 4), DomainType: accel, ExtraCmdline: "vmpx.paths=" + paths})
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
	var sm []domxml.Credential
	for _, c := range smbiosCreds {
		if c.Secret {
			t.Fatalf("secret %s in the SMBIOS job", c.Name)
		}
		sm = append(sm, domxml.Credential{Name: c.Name, Value: c.Value})
	}
	if x, err = domxml.SetSMBIOSCredentials(x, sm, nil); err != nil {
		t.Fatal(err)
	}
	credDir := filepath.Join(g.Dir, "credentials")
	if err := os.Mkdir(credDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var files []domxml.CredentialFile
	for _, c := range fwcfgCreds {
		p := filepath.Join(credDir, c.Name)
		if err := os.WriteFile(p, c.Value, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, domxml.CredentialFile{Name: c.Name, File: p})
	}
	if x, err = domxml.SetFwCfgCredentials(x, files, nil); err != nil {
		t.Fatal(err)
	}
	if err := g.Define(ctx, x); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := guest.WaitReport(ctx, g.SerialLog)
	if err != nil {
		log, _ := os.ReadFile(g.SerialLog)
		t.Fatalf("%v\nserial console:\n%s", err, tail(string(log), 60))
	}
	t.Logf("TIMING credentials start->report %.1fs", time.Since(start).Seconds())
	if err := g.WaitShutdown(ctx); err != nil {
		t.Errorf("no power-off after the report: %v", err)
	}

	content := func(path string) string {
		f, ok := rep.File(path)
		if !ok {
			return fmt.Sprintf("<%s not in the report>", path)
		}
		b, _ := f.Content()
		return string(b)
	}
	hash, _ := rep.ShadowHash("root")
	checks := []struct {
		name      string
		got, want any
	}{
		{"no cloud-init datasource", rep.Meta.CloudInitDisabled, true},
		{"firstboot.timezone (SMBIOS)", strings.HasSuffix(rep.Timezone, "zoneinfo/Europe/Berlin"), true},
		{"passwd.hashed-password.root (fw_cfg)", hash, credsRootHash},
		{"ssh.authorized_keys.root (fw_cfg)", strings.Join(rep.UserAuthorizedKeys("root"), "\n"), key},
		{"login.motd (SMBIOS)", content("/etc/motd.d/50-provision.conf"), motd},
		{"login.issue (fw_cfg)", content("/etc/issue.d/50-provision.conf"), issue},
		{"tmpfiles.extra (SMBIOS)", content("/etc/vmpayload-e2e/credentials.txt"), fileContent},
	}
	if suite == guest.Trixie {
		checks = append(checks, []struct {
			name      string
			got, want any
		}{
			{"system.hostname (SMBIOS)", rep.Hostname, "credsweb"},
			{"firstboot.locale (fw_cfg)", content("/etc/locale.conf"), "LANG=C.UTF-8\n"},
			{"network.dns (SMBIOS)", strings.Contains(rep.Resolvectl, "192.0.2.53"), true},
			{"network.search_domains (SMBIOS)", strings.Contains(rep.Resolvectl, "creds.example"), true},
		}...)
	} else {
		checks = append(checks, []struct {
			name      string
			got, want any
		}{
			{"252 reads no system.hostname", rep.Hostname != "credsweb", true},
			{"firstboot.locale (fw_cfg)", content("/etc/default/locale"), "LANG=C.UTF-8\n"},
			{"firstboot.keymap (SMBIOS)", content("/etc/vconsole.conf"), "KEYMAP=de-latin1\n"},
		}...)
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
		}
	}
	if f, ok := rep.File("/etc/vmpayload-e2e/credentials.txt"); ok && f.Mode != "640" {
		t.Errorf("tmpfiles.extra file has mode %s, want 640", f.Mode)
	}
	// every credential reached PID 1 with its bytes, by either delivery
	for _, c := range slices.Concat(smbiosCreds, fwcfgCreds) {
		if got := content("/run/credentials/@system/" + c.Name); got != string(c.Value) {
			t.Errorf("credential %s in the guest: %q, want %q", c.Name, got, c.Value)
		}
	}
	if t.Failed() {
		log, _ := os.ReadFile(g.SerialLog)
		t.Logf("resolvectl:\n%s\nfailed units: %s\nserial console:\n%s", rep.Resolvectl, rep.FailedUnits, tail(string(log), 80))
	}
}
