package credentials

import (
	"bytes"
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/job/jobtest"
	"github.com/vmpayload/vmpayload/payload/secrets"
	"github.com/vmpayload/vmpayload/test/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// secretsDir makes a real secrets directory with the secrets the test
// jobs name.
func secretsDir(t *testing.T) secrets.Dir {
	t.Helper()
	d := t.TempDir()
	testenv.WriteFiles(t, d, map[string]string{
		"wg-private": "wg-private-key-bytes\n",
		"root-hash":  "$6$salt$fromsecret",
	})
	return secrets.Dir(d)
}

func loadJob(t *testing.T, path string) *job.Job {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return jobtest.Applied(t, b)
}

// render writes the credentials in a form a reviewer can read: each
// credential's name, field and secrecy, then its value as it is (text) or
// as base64 (anything that is not UTF-8 text), with a note where the value
// has no newline at its end.
func render(creds []Credential) string {
	var b strings.Builder
	for _, c := range creds {
		secret := ""
		if c.Secret {
			secret = ", secret"
		}
		fmt.Fprintf(&b, "--- %s (from %s%s)\n", c.Name, c.Field, secret)
		switch {
		case !utf8.Valid(c.Value) || bytes.ContainsAny(c.Value, "\x00\r"):
			fmt.Fprintf(&b, "base64:%s\n", base64.StdEncoding.EncodeToString(c.Value))
		case bytes.HasSuffix(c.Value, []byte("\n")):
			b.Write(c.Value)
		default:
			b.Write(c.Value)
			b.WriteString("\n\\ no newline at end\n")
		}
	}
	return b.String()
}

// TestFromJobGolden: each job in testdata maps to the credentials in its
// .golden file (rewrite with -update), sorted by name, the same twice.
func TestFromJobGolden(t *testing.T) {
	jobs, _ := filepath.Glob("testdata/*.json")
	if len(jobs) < 3 {
		t.Fatalf("found only %v", jobs)
	}
	sd := secretsDir(t)
	for _, p := range jobs {
		t.Run(filepath.Base(p), func(t *testing.T) {
			j := loadJob(t, p)
			creds, err := FromJob(j, sd)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := FromJob(j, sd)
			got := render(creds)
			if render(again) != got {
				t.Error("two mappings of one job differ")
			}
			if errs := Check(creds, j.CredentialsDelivery); len(errs) > 0 {
				t.Errorf("Check: %v", errs)
			}
			gold := strings.TrimSuffix(p, ".json") + ".golden"
			if *update {
				if err := os.WriteFile(gold, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(gold)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("credentials differ from %s:\n%s", gold, got)
			}
			// the names the job package predicts are exactly these
			gen := generated(j)
			for _, c := range creds {
				if _, ok := gen[c.Name]; !ok && !strings.HasPrefix(c.Field, "credential") {
					t.Errorf("credential %s (from %s) is not in generated", c.Name, c.Field)
				}
				delete(gen, c.Name)
			}
			if len(gen) > 0 {
				t.Errorf("generated names %v, which FromJob does not produce", gen)
			}
		})
	}
}

// TestTmpfilesRoundTrip: systemd-tmpfiles itself (the host's, 252 as in
// Debian 12) writes every job file byte for byte, with its mode and
// owner, from the tmpfiles.extra lines, spaces, '%', backslashes, tabs
// and bytes outside ASCII included.
func TestTmpfilesRoundTrip(t *testing.T) {
	tool, err := exec.LookPath("systemd-tmpfiles")
	if err != nil {
		t.Fatalf("systemd-tmpfiles is needed to check the tmpfiles.extra lines: %v", err)
	}
	files := []job.File{
		{Path: "/etc/demo/hello.txt", Content: "hello 100% world\n\ttab \\ backslash \\n %h\n", Permissions: "0640"},
		{Path: "/srv/with space.bin", Content: base64.StdEncoding.EncodeToString([]byte{1, 2, 0x7f, 0x80, 0xff, ' ', '\n'}), Encoding: job.EncodingBase64},
		{Path: "/etc/%percent", Content: "  leading and trailing  "},
		{Path: "/etc/empty", Content: ""},
	}
	lines, err := tmpfilesLines(files)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	conf := filepath.Join(dir, "extra.conf")
	if err := os.WriteFile(conf, lines, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(tool, "--create", "--root="+root, conf).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-tmpfiles: %v\n%s\nlines:\n%s", err, out, lines)
	}
	for _, f := range files {
		want := []byte(f.Content)
		if f.Encoding == job.EncodingBase64 {
			want, _ = base64.StdEncoding.DecodeString(f.Content)
		}
		got, err := os.ReadFile(filepath.Join(root, f.Path))
		if err != nil {
			t.Errorf("%s: %v\nlines:\n%s", f.Path, err, lines)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s holds %q, want %q (line %q)", f.Path, got, want, lines)
		}
		if f.Permissions != "" {
			st, _ := os.Stat(filepath.Join(root, f.Path))
			if fmt.Sprintf("%04o", st.Mode().Perm()) != f.Permissions {
				t.Errorf("%s has mode %o, want %s", f.Path, st.Mode().Perm(), f.Permissions)
			}
		}
	}
}

// TestCheck: systemd's size limits and QEMU's SMBIOS room are reported
// naming the field.
func TestCheck(t *testing.T) {
	big := Credential{Name: "big", Value: bytes.Repeat([]byte("x"), MaxCredentialBytes+1), Field: "credentials.big"}
	if errs := Check([]Credential{big}, job.CredentialsFwCfg); len(errs) == 0 || errs[0].Field != "credentials.big" {
		t.Errorf("over 1 MiB: %v", errs)
	}
	mid := Credential{Name: "mid", Value: bytes.Repeat([]byte("x"), 40000), Field: "credentials.mid"}
	mid2 := mid
	mid2.Name = "mid2"
	if errs := Check([]Credential{mid, mid2}, job.CredentialsFwCfg); len(errs) != 0 {
		t.Errorf("80 kB by fw_cfg: %v", errs)
	}
	errs := Check([]Credential{mid, mid2}, job.CredentialsSMBIOS)
	if len(errs) != 1 || errs[0].Field != "credentials_delivery" || !strings.Contains(errs[0].Message, "fwcfg") {
		t.Errorf("80 kB by SMBIOS: %v", errs)
	}
}

// TestFromJobSecretMissing: a secret that cannot be read is an error
// naming the field, not the content.
func TestFromJobSecretMissing(t *testing.T) {
	j := &job.Job{Version: 1, Format: job.FormatCredentials, CredentialSecrets: job.CredentialSecrets{"x.y": "absent"}}
	_, err := FromJob(j, secrets.Dir(t.TempDir()))
	if err == nil || !strings.Contains(err.Error(), "credential_secrets.x.y") {
		t.Errorf("error %v", err)
	}
}

// TestExamples: the jobs in configs/examples/credentials validate and map
// within the limits of their delivery.
func TestExamples(t *testing.T) {
	paths, _ := filepath.Glob("../../../configs/examples/credentials/*.json")
	if len(paths) < 2 {
		t.Fatalf("found %v", paths)
	}
	for _, p := range paths {
		j := loadJob(t, p)
		creds, err := FromJob(j, secrets.Dir("../../../configs/examples/secrets"))
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if errs := Check(creds, j.CredentialsDelivery); len(errs) > 0 {
			t.Errorf("%s: %v", p, errs)
		}
		if len(creds) < 8 {
			t.Errorf("%s: only %d credentials", p, len(creds))
		}
	}
}
