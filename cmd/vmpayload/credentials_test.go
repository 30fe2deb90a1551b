package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// TestCredentialsCommands (issue 42): validate accepts the credentials
// examples (their secrets resolved); build writes one 0600 file per
// credential for fw_cfg and none for SMBIOS, and prints the XML to add
// (sysinfo entries, or OEM strings and <smbios mode='sysinfo'/>), never a
// secret's content; --json lists names and files.
func TestCredentialsCommands(t *testing.T) {
	const ex = "../../configs/examples/credentials/"
	const sd = "../../configs/examples/secrets"
	for _, c := range []struct {
		job   string
		files int
		want  []string
	}{
		{"01-smbios.json", 0, []string{"<sysinfo type='smbios'>", "<entry>io.systemd.credential:system.hostname=web1</entry>", "<smbios mode='sysinfo'/>"}},
		{"02-fwcfg-secrets.json", 11, []string{"<sysinfo type='fwcfg'>", "<entry name='opt/io.systemd.credentials/db.password' file='"}},
	} {
		t.Run(c.job, func(t *testing.T) {
			if code, out, errb := runCLI(t, "validate", "--secrets-dir", sd, ex+c.job); code != 0 || !strings.Contains(out, "valid") {
				t.Fatalf("validate: exit %d %s %s", code, out, errb)
			}
			dir := filepath.Join(t.TempDir(), "out")
			code, out, errb := runCLI(t, "build", "--secrets-dir", sd, "-o", dir, ex+c.job)
			if code != 0 {
				t.Fatalf("build: exit %d %s", code, errb)
			}
			testenv.Contains(t, "build output", out, c.want, nil)
			ents, _ := os.ReadDir(dir)
			if len(ents) != c.files {
				t.Fatalf("%d files, want %d", len(ents), c.files)
			}
			secret, _ := os.ReadFile(filepath.Join(sd, "svc-password"))
			for _, e := range ents {
				fi, _ := e.Info()
				if fi.Mode().Perm() != 0o600 {
					t.Errorf("%s: mode %v", e.Name(), fi.Mode())
				}
				if e.Name() == "db.password" {
					if b, _ := os.ReadFile(filepath.Join(dir, e.Name())); string(b) != string(secret) {
						t.Errorf("db.password holds %q", b)
					}
				}
			}
			if strings.Contains(out, strings.TrimSpace(string(secret))) {
				t.Error("build printed the secret")
			}
			code, out, errb = runCLI(t, "build", "--json", "--secrets-dir", sd, "-o", dir, ex+c.job)
			var res valuesResult
			if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Format != "credentials" || len(res.Files) != c.files || len(res.Credentials) < 5 {
				t.Errorf("build --json: exit %d %s %s", code, out, errb)
			}
		})
	}
}

// TestRunCredentialsFlags: run's credentials flags make the job fields
// they name; a bad value is refused naming the flag and the field.
func TestRunCredentialsFlags(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	must(t, os.WriteFile(bin, []byte{0, 1, 0xff}, 0o600))
	motd := filepath.Join(dir, "motd")
	must(t, os.WriteFile(motd, []byte("hello\n"), 0o600))
	for _, c := range []struct {
		name string
		args []string
		want func(j *job.Job) bool
		err  string
	}{
		{"text, file, secret", []string{"--format", "credentials", "--credential", "a.b=c=d", "--credential-file", "my.bin=" + bin, "--credential-secret", "app.token=tok"},
			func(j *job.Job) bool {
				return j.Credentials["a.b"].Text == "c=d" && j.Credentials["my.bin"].Base64 == "AAH/" && j.CredentialSecrets["app.token"] == "tok" && j.CredentialsDelivery == job.CredentialsFwCfg
			}, ""},
		{"delivery, keymap, motd", []string{"--format", "credentials", "--credentials-delivery", "smbios", "--keymap", "us", "--motd-file", motd},
			func(j *job.Job) bool {
				return j.CredentialsDelivery == job.CredentialsSMBIOS && j.Keymap == "us" && j.Motd == "hello\n"
			}, ""},
		{"misspelt name", []string{"--format", "credentials", "--credential", "firstboot.timezon=UTC"}, nil, `--credential "firstboot.timezon": credentials.firstboot.timezon:`},
		{"no =", []string{"--format", "credentials", "--credential", "novalue"}, nil, `--credential "novalue": want NAME=VALUE`},
		{"secret by smbios", []string{"--format", "credentials", "--credentials-delivery", "smbios", "--credential-secret", "x.y=tok"}, nil, "credential_secrets.x.y"},
		{"with another format", []string{"--keymap", "us"}, nil, "keymap"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errb := runJob(t, "", append(c.args, "vm1")...)
			if c.err != "" {
				if code == 0 || !strings.Contains(errb, c.err) {
					t.Errorf("exit %d, stderr %q, want %q", code, errb, c.err)
				}
				return
			}
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errb)
			}
			j, rep := job.Parse([]byte(out))
			if err := rep.Err(); err != nil {
				t.Fatal(err)
			}
			if a := j.Apply(job.Defaults{}); !c.want(&a) {
				t.Errorf("job %s", out)
			}
		})
	}
}
