package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/libvirtx/domxml"
	"github.com/vmpayload/vmpayload/payload/recipe"
)

// TestHookCredentials (issue 42): `vmpayload recipe --domain-xml` for a
// credentials job writes one 0600 file per credential (fw_cfg), or none
// (SMBIOS), and the domain XML with the entries or OEM strings and the
// recipe; after the payload directory is emptied (a host reboot) the hook
// rebuilds every credential file byte for byte before QEMU starts (a
// secret's too), and has nothing to do for SMBIOS. A vanished secret fails
// the hook naming it, writing nothing.
func TestHookCredentials(t *testing.T) {
	dir := t.TempDir()
	payloadDir, secretsDir := filepath.Join(dir, "payload"), filepath.Join(dir, "secrets")
	must(t, os.MkdirAll(secretsDir, 0o700))
	const secret = "cint-hook-secret"
	must(t, os.WriteFile(filepath.Join(secretsDir, "tok"), []byte(secret), 0o600))
	domPath := filepath.Join(dir, "dom.xml")
	must(t, os.WriteFile(domPath, []byte(testDomainXML), 0o600))
	f := &hookFixture{dir: dir, payloadDir: payloadDir, secretsDir: secretsDir}
	cfg := f.writeConfig(t, "")
	recipeOf := func(jobText string) (string, *recipe.Recipe) {
		t.Helper()
		jobPath := filepath.Join(dir, "job.json")
		must(t, os.WriteFile(jobPath, []byte(jobText), 0o600))
		code, out, stderr := runCLI(t, "recipe", "--payload-dir", payloadDir, "--secrets-dir", secretsDir, "--domain-xml", domPath, jobPath)
		if code != 0 {
			t.Fatalf("recipe: exit %d: %s", code, stderr)
		}
		rc, ok, err := recipe.FromDomainXML(out)
		if err != nil || !ok {
			t.Fatalf("no recipe: %v\n%s", err, out)
		}
		if strings.Contains(out, secret) {
			t.Error("the secret is in the domain XML")
		}
		return out, rc
	}

	t.Run("fwcfg", func(t *testing.T) {
		x, rc := recipeOf(`{"version":1,"domain":"hooktest","format":"credentials","credentials_delivery":"fwcfg","timezone":"UTC","credential_secrets":{"app.token":"tok"}}`)
		ents, err := domxml.FwCfgEntries(x)
		if err != nil || len(ents) != 2 || len(rc.Files()) != 2 {
			t.Fatalf("entries %v (%v), files %v", ents, err, rc.Files())
		}
		want := map[string]string{"app.token": secret, "firstboot.timezone": "UTC"}
		checkFiles := func() {
			t.Helper()
			for _, en := range ents {
				b, err := os.ReadFile(en.File)
				fi, _ := os.Stat(en.File)
				if n := strings.TrimPrefix(en.Name, domxml.CredentialFwCfgPrefix); err != nil || string(b) != want[n] || fi.Mode().Perm() != 0o600 {
					t.Errorf("%s: %q %v", en.Name, b, err)
				}
			}
		}
		checkFiles()
		for _, f := range rc.Files() {
			must(t, os.Remove(f))
		}
		code, stdout, stderr, logged := runHookCLI(t, strings.NewReader(x), "--config", cfg, "--", "hooktest", "prepare", "begin", "-")
		if code != 0 || stdout != "" || stderr != "" {
			t.Fatalf("hook: exit %d %q %q", code, stdout, stderr)
		}
		checkFiles()
		if len(logged) != 1 || !strings.Contains(logged[0], "rebuilt") || strings.Contains(logged[0], secret) {
			t.Errorf("logged %q", logged)
		}
		// intact: nothing to do
		if code, _, stderr, logged := runHookCLI(t, strings.NewReader(x), "--config", cfg, "--", "hooktest", "prepare", "begin", "-"); code != 0 || len(logged) != 0 {
			t.Errorf("intact: exit %d %q %q", code, stderr, logged)
		}
		// the secret vanished: refused by name, nothing written
		for _, f := range rc.Files() {
			must(t, os.Remove(f))
		}
		must(t, os.Rename(filepath.Join(secretsDir, "tok"), filepath.Join(secretsDir, "tok.away")))
		defer os.Rename(filepath.Join(secretsDir, "tok.away"), filepath.Join(secretsDir, "tok"))
		code, _, stderr, _ = runHookCLI(t, strings.NewReader(x), "--config", cfg, "--", "hooktest", "prepare", "begin", "-")
		if code == 0 || !strings.Contains(stderr, `secret "tok" does not exist`) {
			t.Errorf("secret gone: exit %d %q", code, stderr)
		}
		for _, f := range rc.Files() {
			if _, err := os.Lstat(f); err == nil {
				t.Errorf("%s written without its secret", f)
			}
		}
	})
	t.Run("smbios", func(t *testing.T) {
		x, rc := recipeOf(`{"version":1,"domain":"hooktest","format":"credentials","credentials_delivery":"smbios","hostname":"hooktest"}`)
		if len(rc.Files()) != 0 || !strings.Contains(x, "<entry>io.systemd.credential:system.hostname=hooktest</entry>") || !strings.Contains(x, "<smbios mode='sysinfo'/>") {
			t.Fatalf("files %v\n%s", rc.Files(), x)
		}
		code, stdout, stderr, logged := runHookCLI(t, strings.NewReader(x), "--config", cfg, "--", "hooktest", "prepare", "begin", "-")
		if code != 0 || stdout != "" || stderr != "" || len(logged) != 0 {
			t.Errorf("hook: exit %d %q %q %q", code, stdout, stderr, logged)
		}
	})
}
