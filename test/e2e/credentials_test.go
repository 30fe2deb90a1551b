package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/job/jobtest"
	"github.com/vmpayload/vmpayload/payload/kinds/credentials"
	"github.com/vmpayload/vmpayload/payload/secrets"
	"github.com/vmpayload/vmpayload/test/agenttest"
	"github.com/vmpayload/vmpayload/test/guest"
	"github.com/vmpayload/vmpayload/test/testenv"
)

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
// prompt on the console. /etc/vconsole.conf goes too (Debian 13's image
// has one): the job always gives firstboot.keymap, which 252 writes as it
// is; 257 in a boot leaves out a keymap the image does not have (the
// images have none) without prompting. The copy is sparse and edited with debugfs; the cached image is
// not touched.
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
	remove := []string{"/etc/hostname", "/etc/localtime", "/etc/locale.conf", "/etc/vconsole.conf", "/etc/machine-id"}
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

// credsJob maps a job document to its credentials the way the kind does:
// what the guest must find in /run/credentials/@system, independent of how
// the agent delivers them.
func credsJob(t *testing.T, doc map[string]any, sd secrets.Dir) ([]credentials.Credential, job.CredentialsDelivery) {
	t.Helper()
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	a := jobtest.Applied(t, b)
	creds, err := credentials.FromJob(a, sd)
	if err != nil {
		t.Fatal(err)
	}
	if errs := credentials.Check(creds, a.CredentialsDelivery); len(errs) > 0 {
		t.Fatalf("Check: %v", errs)
	}
	return creds, a.CredentialsDelivery
}

// credsCase is one guest of TestAgentCredentialsE2E.
type credsCase struct {
	suite    string
	delivery job.CredentialsDelivery
	// again: after the first boot, a host reboot (the agent rebuilds the
	// fw_cfg files from the recipe) and a plain `virsh start` boot the
	// guest a second time; then the libvirt hook alone rebuilds them at a
	// `virsh start`.
	again bool
}

func (c credsCase) name() string { return c.suite + "-" + string(c.delivery) }

// credsWant is what a credentials job asked of the guest.
type credsWant struct {
	host, tz, locale, keymap  string
	motd, issue, key          string
	filePath, fileContent     string
	dns, search               string
	rootHash                  string // fw_cfg only
	secretName, secretContent string // fw_cfg only
}

// TestAgentCredentialsE2E (issue 42): the agent runs a job of format
// "credentials" for a guest without any cloud-init datasource, in systemd's
// first-boot state (firstBootImage), on Debian 12 (systemd 252) and Debian
// 13 (systemd 257), once with credentials_delivery "smbios" and once with
// "fwcfg": the same non-secret settings go both ways (host name, time
// zone, locale, keymap, motd, issue, root's SSH key, DNS, a file by
// tmpfiles.extra, a text and a binary credential of the job's own);
// root's password hash and a credential from a secret go only by fw_cfg
// (validation refuses secrets on SMBIOS). The agent defines and starts the
// domain; the guest's report must show every credential in
// /run/credentials/@system with the bytes the kind maps the job to, and
// each setting applied where that systemd reads it: system.hostname only
// on 257 (252 has no credential for the host name: the test checks that
// the guest's name is not the job's), network.dns/search_domains only on
// 257 (253+, systemd-resolved). The definition must carry exactly the mapped
// credentials (OEM strings, or fw_cfg files with their bytes) and no
// secret, nor may QEMU's command line.
//
// Debian 13's fw_cfg guest then boots again without a job: after a host
// reboot (agent stopped, payload directory emptied, agent started: it
// rebuilds every credential file from the recipe) a plain `virsh start`
// must give the same credentials, byte for byte, and the every-boot
// settings again. Last the libvirt hook alone (agent stopped, payload
// directory emptied) must rebuild the files at `virsh start` before QEMU
// reads them; that start is destroyed at once, not booted. Five boots in
// all, run in parallel (the longest chain first).
func TestAgentCredentialsE2E(t *testing.T) {
	gate(t)
	t.Parallel()
	cases := []credsCase{
		{guest.Trixie, job.CredentialsFwCfg, true},
		{guest.Bookworm, job.CredentialsFwCfg, false},
		{guest.Bookworm, job.CredentialsSMBIOS, false},
		{guest.Trixie, job.CredentialsSMBIOS, false},
	}
	for _, c := range filter(cases, func(c credsCase) string { return "credentials-" + c.name() }) {
		t.Run(c.name(), func(t *testing.T) {
			t.Parallel()
			runCredsCase(t, c)
		})
	}
}

// credsPaths are the guest files the report must list beyond its own.
var credsPaths = []string{"/run/credentials/@system", "/etc/motd.d", "/etc/issue.d", "/etc/locale.conf",
	"/etc/default/locale", "/etc/vconsole.conf", "/etc/hostname", "/etc/machine-id"}

func runCredsCase(t *testing.T, c credsCase) {
	ctx, cancel := context.WithTimeout(context.Background(), caseWait)
	defer cancel()
	tok := testenv.RandHex(t, 6)
	fwcfg := c.delivery == job.CredentialsFwCfg
	work := testenv.WorkDir(t, "vmpx-creds-")
	// root is left unconfigured only where the job configures it: on
	// SMBIOS systemd-firstboot would wait at its password prompt
	fb := firstBootImage(t, image(t, c.suite), work, fwcfg)
	a := sharedAgent(t)
	if c.again {
		a = startOwnAgent(t) // the host reboot stops it
	}
	v, x := newVMFrom(ctx, t, fb, guest.Options{Name: guest.NamePrefix + "creds-" + c.name() + "-" + tok,
		ExtraCmdline: "vmpx.paths=" + strings.Join(credsPaths, ",")}, guest.BusSCSI)
	v.agent = a
	if c.again {
		hookCfg := filepath.Join(a.Dir, "hook.yaml")
		if err := os.WriteFile(hookCfg, []byte(fmt.Sprintf("payload_dir: %s\nsecrets_dir: %s\n", a.PayloadDir, a.SecretsDir)), 0o644); err != nil {
			t.Fatal(err)
		}
		agenttest.InstallHook(t, "creds-"+tok, v.g.Name, hookCfg, a.Bin)
	}

	w := credsWant{host: "vmpx-creds-" + tok, tz: "Europe/Berlin", locale: "C.UTF-8", keymap: "de-latin1",
		motd: "motd of " + tok + ": from systemd credentials\n", issue: "issue of " + tok + "\n", key: sshKey(t, "root@creds-e2e"),
		filePath: "/etc/vmpayload-e2e/credentials.txt", fileContent: "written by tmpfiles.extra " + tok + ": 100% \\ ok\n",
		dns: "192.0.2.53", search: "creds.example"}
	doc := map[string]any{
		"version": 1, "domain": v.g.Name, "id": "creds-" + c.name() + "-" + tok, "action": "start", "domain_xml": x,
		"format": "credentials", "credentials_delivery": string(c.delivery),
		"hostname": w.host, "timezone": w.tz, "locale": w.locale, "keymap": w.keymap,
		"motd": w.motd, "issue": w.issue, "ssh_authorized_keys": []string{w.key},
		"dns":         map[string]any{"nameservers": []string{w.dns}, "search": []string{w.search}},
		"files":       []map[string]any{{"path": w.filePath, "content": w.fileContent, "permissions": "0640"}},
		"credentials": map[string]any{"vmpx.custom": "custom " + tok, "vmpx.binary": map[string]any{"base64": "AAEC/w=="}},
	}
	if fwcfg {
		w.rootHash = cryptSHA512(t, "root-"+tok, "")
		w.secretName, w.secretContent = "vmpx-creds-token-"+tok, "token "+tok+" from a secret\n"
		if err := os.MkdirAll(a.SecretsDir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(a.SecretsDir, w.secretName), []byte(w.secretContent), 0o600); err != nil {
			t.Fatal(err)
		}
		doc["users"] = []map[string]any{{"name": "root", "password_hash": w.rootHash}}
		doc["credential_secrets"] = map[string]any{"vmpx.token": w.secretName}
	}
	want, d := credsJob(t, doc, secrets.Dir(a.SecretsDir))
	if d != c.delivery {
		t.Fatalf("the job's delivery is %q, want %q", d, c.delivery)
	}

	r := v.run(ctx, doc)
	files := checkCredsDomain(ctx, t, v, r, c.delivery, want, w)
	rep1 := v.report(ctx)
	checkCredsReport(t, c.suite, rep1, w, want, "boot 1")
	v.shutdown(ctx)
	if !c.again || t.Failed() {
		return
	}

	// The host "reboots": the agent stops, the payload directory (a tmpfs)
	// is empty; the agent starts again and rebuilds every credential's file
	// from the recipe in the definition.
	hostReboot(t, a)
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	if err := waitFiles(files, want, 2*time.Minute); err != nil {
		t.Fatalf("after the agent's start: %v\n--- agent log tail ---\n%s", err, a.Tail(30))
	}
	v.start = time.Now()
	if o, err := guest.Virsh(ctx, v.g.URI, "start", v.g.Name); err != nil {
		t.Fatalf("virsh start after the host reboot: %v %s", err, o)
	}
	rep2 := v.report(ctx)
	checkCredsReport(t, c.suite, rep2, w, want, "boot 2 (host reboot, plain virsh start)")
	// a second boot is not a first one: systemd-firstboot did not run, the
	// machine keeps its id and the first boot's settings
	id1, id2 := rep1.Text("/etc/machine-id"), rep2.Text("/etc/machine-id")
	if id1 == "" || id1 == "uninitialized\n" || id2 != id1 {
		t.Errorf("machine-id: boot 1 %q, boot 2 %q; want one committed id", id1, id2)
	}
	v.shutdown(ctx)
	if t.Failed() {
		return
	}

	// The hook alone: the agent is not running, the payload directory is
	// empty; libvirt's prepare hook rebuilds the files before QEMU opens
	// them (QEMU fails to start without them). Not booted: destroyed at
	// once.
	hostReboot(t, a)
	start := time.Now()
	if o, err := guest.Virsh(ctx, v.g.URI, "start", v.g.Name); err != nil {
		t.Fatalf("virsh start with the hook alone: %v %s", err, o)
	}
	t.Logf("TIMING %s: virsh start with the hook rebuilding %d credential files took %.1fs", v.g.Name, len(files), time.Since(start).Seconds())
	if err := waitFiles(files, want, 0); err != nil {
		t.Errorf("the hook: %v", err)
	}
	if o, err := guest.Virsh(ctx, v.g.URI, "destroy", v.g.Name); err != nil {
		t.Errorf("virsh destroy: %v %s", err, o)
	}
}

// credsSysinfo is what the test reads of a definition's credentials.
type credsSysinfo struct {
	Sysinfo []struct {
		Type    string   `xml:"type,attr"`
		OEM     []string `xml:"oemStrings>entry"`
		Entries []struct {
			Name string `xml:"name,attr"`
			File string `xml:"file,attr"`
		} `xml:"entry"`
	} `xml:"sysinfo"`
	SMBIOS struct {
		Mode string `xml:"mode,attr"`
	} `xml:"os>smbios"`
}

// checkCredsDomain checks the running domain the agent started: its
// definition carries every credential of want by delivery d and nothing
// else of systemd's (SMBIOS: one OEM string each, text or base64, and
// <smbios mode='sysinfo'/>; fw_cfg: one entry each whose file holds the
// value), and no secret of the job is in the definition, the result or
// QEMU's command line. It returns the fw_cfg files by credential name.
func checkCredsDomain(ctx context.Context, t *testing.T, v *vm, r result.Result, d job.CredentialsDelivery, want []credentials.Credential, w credsWant) map[string]string {
	t.Helper()
	live, err := guest.Virsh(ctx, v.g.URI, "dumpxml", v.g.Name)
	if err != nil {
		t.Fatal(err)
	}
	inactive, err := guest.Virsh(ctx, v.g.URI, "dumpxml", "--inactive", v.g.Name)
	if err != nil {
		t.Fatal(err)
	}
	var si credsSysinfo
	if err := xml.Unmarshal([]byte(live), &si); err != nil {
		t.Fatalf("domain XML: %v", err)
	}
	got := map[string][]byte{}
	files := map[string]string{}
	for _, s := range si.Sysinfo {
		for _, o := range s.OEM {
			if rest, ok := strings.CutPrefix(o, "io.systemd.credential:"); ok {
				n, val, _ := strings.Cut(rest, "=")
				got[n] = []byte(val)
			} else if rest, ok := strings.CutPrefix(o, "io.systemd.credential.binary:"); ok {
				n, val, _ := strings.Cut(rest, "=")
				b, err := base64.StdEncoding.DecodeString(val)
				if err != nil {
					t.Errorf("OEM string of %s: %v", n, err)
				}
				got[n] = b
			}
		}
		for _, e := range s.Entries {
			if n, ok := strings.CutPrefix(e.Name, job.FwCfgCredentialPrefix); ok {
				b, err := os.ReadFile(e.File)
				if err != nil {
					t.Errorf("fw_cfg entry %s: %v", e.Name, err)
				}
				got[n], files[n] = b, e.File
			}
		}
	}
	if d == job.CredentialsSMBIOS && si.SMBIOS.Mode != "sysinfo" {
		t.Errorf("SMBIOS delivery without <smbios mode='sysinfo'/> (mode %q): the guest would not see the OEM strings", si.SMBIOS.Mode)
	}
	if d == job.CredentialsSMBIOS && len(files) > 0 || d == job.CredentialsFwCfg && len(files) != len(got) {
		t.Errorf("delivery %s: %d credentials, %d of them by fw_cfg", d, len(got), len(files))
	}
	for _, c := range want {
		if b, ok := got[c.Name]; !ok || !bytes.Equal(b, c.Value) {
			t.Errorf("the definition carries %s as %q (present: %v), want %q", c.Name, b, ok, c.Value)
		}
		delete(got, c.Name)
	}
	for n := range got {
		t.Errorf("the definition carries credential %s that the job does not map to", n)
	}
	rj, _ := json.Marshal(r)
	cmdline := testenv.QEMUCmdline(t, v.g.Name)
	for _, s := range []string{w.rootHash, strings.TrimSpace(w.secretContent)} {
		if s == "" {
			continue
		}
		for where, text := range map[string]string{"live definition": live, "inactive definition": inactive, "result": string(rj), "QEMU command line": cmdline} {
			if strings.Contains(text, s) {
				t.Errorf("a secret of the job is in the %s", where)
			}
		}
	}
	if d == job.CredentialsSMBIOS && !strings.Contains(cmdline, "io.systemd.credential") {
		t.Errorf("QEMU's command line has no OEM string of a credential: %q", cmdline)
	}
	return files
}

// waitFiles waits up to wait (0: checks once) until every fw_cfg file of
// files holds the value want maps its credential to.
func waitFiles(files map[string]string, want []credentials.Credential, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		var bad []string
		for _, c := range want {
			if b, err := os.ReadFile(files[c.Name]); err != nil || !bytes.Equal(b, c.Value) {
				bad = append(bad, fmt.Sprintf("%s (%v)", c.Name, err))
			}
		}
		if len(bad) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("credential files not rebuilt byte for byte: %s", strings.Join(bad, ", "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkCredsReport checks one boot's report against the job: every
// credential in /run/credentials/@system with its bytes, and each setting
// applied where suite's systemd reads it (docs/credentials.md).
func checkCredsReport(t *testing.T, suite string, rep *guest.Report, w credsWant, want []credentials.Credential, boot string) {
	t.Helper()
	content := func(path string) string {
		f, ok := rep.File(path)
		if !ok {
			return fmt.Sprintf("<%s not in the report>", path)
		}
		b, _ := f.Content()
		return string(b)
	}
	checks := []check{
		{"no cloud-init datasource", rep.Meta.CloudInitDisabled, true},
		{"firstboot.timezone", strings.HasSuffix(rep.Timezone, "zoneinfo/"+w.tz), true},
		{"ssh.authorized_keys.root", strings.Join(rep.UserAuthorizedKeys("root"), "\n"), w.key},
		{"login.motd", content("/etc/motd.d/50-provision.conf"), w.motd},
		{"login.issue", content("/etc/issue.d/50-provision.conf"), w.issue},
		{"tmpfiles.extra", content(w.filePath), w.fileContent},
	}
	if f, ok := rep.File(w.filePath); !ok || f.Mode != "640" {
		t.Errorf("%s: tmpfiles.extra file %s: mode %q (present: %v), want 640", boot, w.filePath, f.Mode, ok)
	}
	if w.rootHash != "" {
		hash, _ := rep.ShadowHash("root")
		checks = append(checks, check{"passwd.hashed-password.root", hash, w.rootHash})
	}
	switch suite {
	case guest.Trixie:
		checks = append(checks,
			check{"system.hostname (257)", rep.Hostname, w.host},
			check{"firstboot.locale (257: /etc/locale.conf)", content("/etc/locale.conf"), "LANG=" + w.locale + "\n"},
			check{"network.dns (257, systemd-resolved)", strings.Contains(rep.Resolvectl, w.dns), true},
			check{"network.search_domains (257, systemd-resolved)", strings.Contains(rep.Resolvectl, w.search), true},
		)
	case guest.Bookworm:
		checks = append(checks,
			// 252 reads no credential for the host name (system.hostname
			// is 254, firstboot.hostname later than 257)
			check{"252 reads no system.hostname", rep.Hostname != w.host, true},
			// Debian's 252 writes the locale to /etc/default/locale
			check{"firstboot.locale (252: /etc/default/locale)", content("/etc/default/locale"), "LANG=" + w.locale + "\n"},
			// 252 writes any keymap; 257 in a boot leaves out one the
			// image does not have (the images have none), without a prompt
			check{"firstboot.keymap (252)", content("/etc/vconsole.conf"), "KEYMAP=" + w.keymap + "\n"},
		)
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %s: got %q, want %q", boot, c.name, c.got, c.want)
		}
	}
	for _, c := range want {
		if got := content("/run/credentials/@system/" + c.Name); got != string(c.Value) {
			t.Errorf("%s: credential %s in the guest: %q, want %q", boot, c.Name, got, c.Value)
		}
	}
	if t.Failed() {
		t.Logf("%s: resolvectl:\n%s\nfailed units: %s", boot, rep.Resolvectl, rep.FailedUnits)
	}
}
