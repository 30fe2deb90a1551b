package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload/owner"
	"github.com/vmpayload/vmpayload/payload/recipe"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// sealJob carries a password, inline file content, inline user-data and a
// generated random seed: what a recipe used to keep in clear.
const sealJob = `{"version":1,"domain":"hooktest","hostname":"hooktest",
"users":[{"name":"ops","password":"Hook-Pw-Secret"}],
"files":[{"path":"/etc/app/token","content":"HOOK-FILE-SECRET"}],
"user_data":"#cloud-config\nruncmd:\n  - echo HOOK-USERDATA-SECRET\n",
"random_seed":{"generate_bytes":32}}`

// TestHookSealedRecipe: the domain XML vmpayload recipe prints holds none
// of the job's secret-ish values in clear; the hook opens the sealed recipe
// with the key file in secrets_dir and rebuilds the image byte-identical;
// without the key file it refuses the start naming the key file.
func TestHookSealedRecipe(t *testing.T) {
	f := newHookFixtureJob(t, sealJob)
	r, _, err := recipe.FromDomainXML(f.domainXML)
	must(t, err)
	if !r.Sealed() {
		t.Fatalf("the recipe is not sealed:\n%s", f.domainXML)
	}
	keys := recipe.KeyFile(f.secretsDir)
	if fi, err := os.Stat(keys); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file %s: %v %v", keys, fi, err)
	}
	for _, s := range []string{"Hook-Pw-Secret", "HOOK-FILE-SECRET", "HOOK-USERDATA-SECRET", "$6$", "password_hash", "random_seed", "user_data"} {
		if strings.Contains(f.domainXML, s) {
			t.Errorf("the domain XML holds %q in clear", s)
		}
	}
	must(t, os.Remove(f.image))
	code, _, stderr, _ := runHookCLI(t, strings.NewReader(f.domainXML), "--config", f.config, "hooktest", "prepare", "begin", "-")
	if code != 0 || testenv.SumOf(f.image) != f.sha256 {
		t.Fatalf("hook: exit %d, sha256 %s, want %s: %s", code, testenv.SumOf(f.image), f.sha256, stderr)
	}

	// a host the domain moved to without the key file
	must(t, os.Rename(keys, keys+".away"))
	must(t, os.Remove(f.image))
	code, _, stderr, _ = runHookCLI(t, strings.NewReader(f.domainXML), "--config", f.config, "hooktest", "prepare", "begin", "-")
	if code != 1 || !strings.Contains(stderr, keys) || !strings.Contains(stderr, "copy it from the host") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("without the key file: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(f.image); err == nil {
		t.Errorf("an image was written without the key")
	}
}

// TestHookRefusesOtherDomainsImage: a recipe placed into vm1's metadata that
// names vm2's image (vm2's UUID prefix, in the payload directory) is refused:
// vm2's image is neither replaced nor claimed.
func TestHookRefusesOtherDomainsImage(t *testing.T) {
	f := newHookFixture(t) // vm2: testDomainXML's UUID
	vm1UUID := "0d5e3f1a-7b2c-4d8e-9f01-23456789abcd"
	vm1 := strings.Replace(strings.Replace(f.domainXML, "6f1c1a8e-55b0-4a4e-9d1e-3c1f0b8a9e01</uuid>", vm1UUID+"</uuid>", 1), "<name>hooktest</name>", "<name>vm1</name>", 1)
	if !strings.Contains(vm1, vm1UUID) || !strings.Contains(vm1, f.image) {
		t.Fatalf("vm1's XML:\n%s", vm1)
	}
	must(t, os.WriteFile(f.image, []byte("vm2's bytes"), 0o640))
	must(t, owner.Claim(f.image, "vm2-host"))
	for _, op := range []string{"prepare", "migrate", "restore"} {
		code, _, stderr, _ := runHookCLI(t, strings.NewReader(vm1), "--config", f.config, "vm1", op, "begin", "-")
		if code != 1 || !strings.Contains(stderr, "does not start with this domain's UUID "+vm1UUID) {
			t.Errorf("%s: exit %d, stderr %q", op, code, stderr)
		}
		if b, _ := os.ReadFile(f.image); string(b) != "vm2's bytes" {
			t.Errorf("%s: vm2's image was replaced", op)
		}
		if o, err := owner.Of(f.image); err != nil || o != "vm2-host" {
			t.Errorf("%s: vm2's image owner is now %q (%v)", op, o, err)
		}
	}
	// vm2's own hook rebuilds it
	code, _, stderr, _ := runHookCLI(t, strings.NewReader(f.domainXML), "--config", f.config, "hooktest", "prepare", "begin", "-")
	if code != 0 || testenv.SumOf(f.image) != f.sha256 {
		t.Errorf("vm2's hook: exit %d %s", code, stderr)
	}
}

// TestHookOwnerMarkerSymlink: a .owners symlink in the payload directory is
// not followed when the hook claims the image: nothing is written where it
// points, and the start goes on (a failed claim is logged).
func TestHookOwnerMarkerSymlink(t *testing.T) {
	f := newHookFixture(t)
	elsewhere := filepath.Join(f.dir, "elsewhere")
	must(t, os.Mkdir(elsewhere, 0o700))
	must(t, os.RemoveAll(filepath.Join(f.payloadDir, owner.Dir)))
	must(t, os.Symlink(elsewhere, filepath.Join(f.payloadDir, owner.Dir)))
	must(t, os.Remove(f.image))
	code, _, stderr, logged := runHookCLI(t, strings.NewReader(f.domainXML), "--config", f.config, "hooktest", "prepare", "begin", "-")
	if code != 0 || testenv.SumOf(f.image) != f.sha256 {
		t.Fatalf("hook: exit %d: %s", code, stderr)
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Errorf("the claim followed the .owners symlink: %v", ents)
	}
	if !strings.Contains(strings.Join(logged, "\n"), "symlink") {
		t.Errorf("the refused claim is not logged: %q", logged)
	}
}
