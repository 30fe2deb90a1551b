package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/test/agenttest"
)

// TestMain removes the binary agenttest built for the real-process tests.
func TestMain(m *testing.M) {
	code := m.Run()
	agenttest.RemoveBinary()
	os.Exit(code)
}

func runCLI(t testing.TB, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"version": 1, "hostname": "-x-", "nics": [{"mac": "nope"}], "extra": 1}`), 0o600)
	code, out, _ := runCLI(t, "validate", "../../configs/examples/02-full-nocloud.json")
	if code != 0 || !strings.Contains(out, "valid") {
		t.Errorf("valid job: exit %d, %q", code, out)
	}
	code, out, _ = runCLI(t, "validate", bad)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 1 || len(lines) != 3 {
		t.Fatalf("invalid job: exit %d, output %q", code, out)
	}
	for _, want := range []string{`extra: unknown field "extra"`, `hostname: "-x-"`, `nics[0].mac: "nope"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runCLI(t, "validate", "--json", bad)
	var rep struct {
		Valid  bool `json:"valid"`
		Errors []struct{ Field, Code, Message string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 || rep.Valid || len(rep.Errors) != 3 || rep.Errors[0].Code == "" {
		t.Errorf("--json: exit %d %+v %v", code, rep, err)
	}
	if code, _, _ := runCLI(t, "validate", filepath.Join(dir, "missing.json")); code != 2 {
		t.Errorf("missing file: exit %d, want 2", code)
	}
	if code, _, _ := runCLI(t, "validate"); code != 2 {
		t.Errorf("no argument: exit %d, want 2", code)
	}
}

func TestBuildAndInspect(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "seed.iso")
	// flags after the positional argument work too
	code, stdout, stderr := runCLI(t, "build", "../../configs/examples/03-full-configdrive.json", "-o", out, "--mode", "0600")
	if code != 0 {
		t.Fatalf("build: exit %d %s", code, stderr)
	}
	for _, want := range []string{"label=config-2", "instance-id=", "sha256=", out} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q: %s", want, stdout)
		}
	}
	st, err := os.Stat(out)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("image mode %v %v", st, err)
	}
	// a real tool agrees on the label
	if b, err := exec.Command("blkid", "-p", "-s", "LABEL", "-o", "value", out).Output(); err != nil || strings.TrimSpace(string(b)) != "config-2" {
		t.Errorf("blkid label %q %v", b, err)
	}
	code, stdout, _ = runCLI(t, "inspect", "--json", out)
	var info struct {
		Label, FSType string
		Files         []struct{ Path string }
		Joliet        bool
	}
	if err := json.Unmarshal([]byte(stdout), &info); err != nil || code != 0 || info.Label != "config-2" || info.FSType != "iso9660" || len(info.Files) != 4 || !info.Joliet {
		t.Errorf("inspect: %d %+v %v", code, info, err)
	}
	// the config-2 ISO has a Joliet tree (issue 35), and inspect says so
	if code, stdout, _ = runCLI(t, "inspect", out); code != 0 || !strings.Contains(stdout, "joliet:  yes, every file\n") {
		t.Errorf("inspect: %d %s", code, stdout)
	}
	code, stdout, _ = runCLI(t, "inspect", "--cat", "openstack/latest/meta_data.json", out)
	if code != 0 || !strings.Contains(stdout, `"uuid"`) {
		t.Errorf("inspect --cat: %d %q", code, stdout)
	}
	// invalid job: exit 1, nothing written
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"version": 2}`), 0o600)
	code, _, stderr = runCLI(t, "build", "-o", filepath.Join(dir, "no.iso"), bad)
	if code != 1 || !strings.Contains(stderr, "version") {
		t.Errorf("bad job: exit %d %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "no.iso")); !os.IsNotExist(err) {
		t.Errorf("an image was written for an invalid job")
	}
	// secrets need --secrets-dir
	code, _, stderr = runCLI(t, "build", "-o", filepath.Join(dir, "s.iso"), "../../configs/examples/11-secrets.json")
	if code != 1 || !strings.Contains(stderr, "users[0].password_secret") {
		t.Errorf("secret without --secrets-dir: exit %d %q", code, stderr)
	}
	code, _, stderr = runCLI(t, "build", "--secrets-dir", "../../configs/examples/secrets", "-o", filepath.Join(dir, "s.iso"), "../../configs/examples/11-secrets.json")
	if code != 0 {
		t.Errorf("secret with --secrets-dir: exit %d %q", code, stderr)
	}
}

func TestHelpAndUnknown(t *testing.T) {
	code, out, _ := runCLI(t, "help")
	for _, c := range []string{"agent", "build", "inspect", "status", "submit", "validate", "version"} {
		if !strings.Contains(out, "  "+c) {
			t.Errorf("help lacks %s", c)
		}
	}
	if code != 0 {
		t.Errorf("help exit %d", code)
	}
	if code, _, _ := runCLI(t, "frobnicate"); code != 2 {
		t.Errorf("unknown command exit %d", code)
	}
	if code, out, _ := runCLI(t); code != 2 || !strings.Contains(out, "  validate") {
		t.Errorf("no arguments: exit %d, want 2 and the usage: %s", code, out)
	}
	for _, h := range [][]string{{"-h"}, {"--help"}, {"-help"}, {"help", "build"}, {"build", "-h"}, {"build", "-help"}} {
		if code, out, _ := runCLI(t, h...); code != 0 || !strings.Contains(out, "Usage:") {
			t.Errorf("%q: exit %d %s", h, code, out)
		}
	}
	// flag errors are usage errors
	if code, _, errb := runCLI(t, "build", "--mode"); code != 2 || !strings.Contains(errb, "mode") {
		t.Errorf("flag without its value: exit %d %q", code, errb)
	}
	if code, _, errb := runCLI(t, "build", "job.json"); code != 2 || !strings.Contains(errb, "-o") {
		t.Errorf("build without -o: exit %d %q", code, errb)
	}
}
