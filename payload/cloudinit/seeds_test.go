package cloudinit

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/vmpayload/vmpayload/payload/job"
)

const secretsDir = "../../configs/examples/secrets"

func readSecret(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(secretsDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseHostKey(t *testing.T) {
	ed := readSecret(t, "host-ed25519")
	edPub := strings.TrimSpace(readSecret(t, "host-ed25519.pub"))
	ecPub := strings.TrimSpace(readSecret(t, "host-ecdsa.pub"))
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	smallPEM := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(small)}))
	encBlock, err := ssh.MarshalPrivateKeyWithPassphrase(small, "c", []byte("pass"))
	if err != nil {
		t.Fatal(err)
	}
	encrypted := string(pem.EncodeToMemory(encBlock))
	for _, c := range []struct {
		name, typ, priv, pub string
		wantErr              string
		wantPub              string
	}{
		{name: "ed25519 derived", typ: "ed25519", priv: ed, wantPub: strings.Join(strings.Fields(edPub)[:2], " ")},
		{name: "ed25519 given with comment", typ: "ed25519", priv: ed, pub: edPub, wantPub: edPub},
		{name: "crlf and trailing blank lines", typ: "ed25519", priv: strings.ReplaceAll(ed, "\n", "\r\n") + "\r\n\r\n", wantPub: strings.Join(strings.Fields(edPub)[:2], " ")},
		{name: "ecdsa", typ: "ecdsa", priv: readSecret(t, "host-ecdsa"), pub: ecPub, wantPub: ecPub},
		{name: "rsa", typ: "rsa", priv: readSecret(t, "host-rsa")},
		{name: "type mismatch", typ: "rsa", priv: ed, wantErr: "is an ed25519 key, not rsa"},
		{name: "public of another key", typ: "ed25519", priv: ed, pub: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ9UCj6yFbzrJRqgbKp1+pjOWpNQWIeq40ujmhEHvz3p x", wantErr: "not the public half"},
		{name: "not a key", typ: "ed25519", priv: "hello\n", wantErr: "does not hold an OpenSSH or PEM private key"},
		{name: "public key instead of private", typ: "ed25519", priv: edPub, wantErr: "does not hold"},
		{name: "encrypted", typ: "rsa", priv: encrypted, wantErr: "encrypted with a passphrase"},
		{name: "rsa too small", typ: "rsa", priv: smallPEM, wantErr: "1024 bits"},
	} {
		t.Run(c.name, func(t *testing.T) {
			hk, err := ParseHostKey(c.typ, c.priv, c.pub)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				for _, line := range strings.Split(c.priv, "\n") {
					if len(line) > 20 && strings.Contains(err.Error(), line) {
						t.Errorf("error quotes the private key: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(hk.Private, "-----\n") || strings.Contains(hk.Private, "\r") || strings.HasSuffix(hk.Private, "\n\n") {
				t.Errorf("private key text not normalised: %q", hk.Private[len(hk.Private)-10:])
			}
			if c.wantPub != "" && hk.Public != c.wantPub {
				t.Errorf("public %q, want %q", hk.Public, c.wantPub)
			}
		})
	}
}

// TestRenderSeeds checks the generated cloud-config and config-2 documents
// for root and the fields of issue 12.
func TestRenderSeeds(t *testing.T) {
	lockTrue := true
	ed := readSecret(t, "host-ed25519")
	seed := strings.Repeat("QUJD", 8)
	for _, c := range []struct {
		name string
		in   Input
		want []string // substrings of the user-data (nocloud) or meta_data.json (configdrive)
		not  []string
		file string
	}{
		{name: "root keeps unlocked", in: Input{Job: job.Job{Version: 1, Users: []job.User{{Name: "root", PasswordHash: "$6$s$h"}}}},
			want: []string{"  - name: root\n    lock_passwd: false\n    hashed_passwd: $6$s$h\n"}, not: []string{"\n    passwd:"}, file: "user-data"},
		{name: "root without password stays unlocked", in: Input{Job: job.Job{Version: 1, Users: []job.User{{Name: "root", SSHAuthorizedKeys: []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ9UCj6yFbzrJRqgbKp1+pjOWpNQWIeq40ujmhEHvz3p r"}}}}},
			want: []string{"name: root\n    lock_passwd: false\n    ssh_authorized_keys:"}, file: "user-data"},
		{name: "root locked on request", in: Input{Job: job.Job{Version: 1, Users: []job.User{{Name: "root", PasswordHash: "$6$s$h", LockPassword: &lockTrue}}}},
			want: []string{"lock_passwd: true\n    hashed_passwd: $6$s$h"}, file: "user-data"},
		{name: "other users keep passwd", in: Input{Job: job.Job{Version: 1, Users: []job.User{{Name: "alice", PasswordHash: "$6$s$h"}}}},
			want: []string{"passwd: $6$s$h"}, not: []string{"hashed_passwd"}, file: "user-data"},
		{name: "host key", in: Input{Job: job.Job{Version: 1, SSHHostKeys: []job.SSHHostKey{{Type: "ed25519", PrivateKeySecret: "k"}}}, HostKeys: []string{ed}},
			want: []string{"ssh_deletekeys: true\nssh_keys:\n  ed25519_private: |\n    -----BEGIN OPENSSH PRIVATE KEY-----\n", "  ed25519_public: ssh-ed25519 AAAA"}, file: "user-data"},
		{name: "power state now, argv condition", in: Input{Job: job.Job{Version: 1, PowerState: &job.PowerState{Mode: "poweroff", Condition: &job.Command{Argv: []string{"true"}}}}},
			want: []string{"power_state:\n  mode: poweroff\n  delay: now\n  condition:\n    - \"true\"\n"}, file: "user-data"},
		{name: "power state delayed", in: Input{Job: job.Job{Version: 1, PowerState: &job.PowerState{Mode: "reboot", DelayMinutes: 5, TimeoutSeconds: 120, Condition: &job.Command{Shell: "test -f /x"}}}},
			want: []string{"  delay: 5\n  timeout: 120\n  condition: test -f /x\n"}, file: "user-data"},
		{name: "phone home all", in: Input{Job: job.Job{Version: 1, PhoneHome: &job.PhoneHome{URL: "http://h/"}}},
			want: []string{"phone_home:\n  url: http://h/\n  post: all\n"}, file: "user-data"},
		{name: "locale", in: Input{Job: job.Job{Version: 1, Locale: "de_DE.UTF-8"}}, want: []string{"locale: de_DE.UTF-8\n"}, file: "user-data"},
		{name: "random seed nocloud", in: Input{Job: job.Job{Version: 1, RandomSeed: &job.RandomSeed{Data: seed}}},
			want: []string{"random_seed:\n  encoding: b64\n  data: " + seed + "\n"}, file: "user-data"},
		{name: "random seed configdrive", in: Input{Job: job.Job{Version: 1, Format: job.FormatConfigDrive, RandomSeed: &job.RandomSeed{Data: seed}}},
			want: []string{`"random_seed": "` + seed + `"`}, file: "openstack/latest/meta_data.json"},
		{name: "random seed configdrive not in user-data", in: Input{Job: job.Job{Version: 1, Format: job.FormatConfigDrive, RandomSeed: &job.RandomSeed{Data: seed}}},
			not: []string{"random_seed"}, file: "openstack/latest/user_data"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := Render(c.in, Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got string
			for _, f := range d.Files {
				if f.Path == c.file {
					got = string(f.Data)
				}
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("%s lacks %q:\n%s", c.file, w, got)
				}
			}
			for _, n := range c.not {
				if strings.Contains(got, n) {
					t.Errorf("%s has %q:\n%s", c.file, n, got)
				}
			}
		})
	}
}

func TestRenderSeedErrors(t *testing.T) {
	ed := readSecret(t, "host-ed25519")
	for _, c := range []struct {
		name  string
		in    Input
		field string
	}{
		{"host key unresolved", Input{Job: job.Job{Version: 1, SSHHostKeys: []job.SSHHostKey{{Type: "ed25519", PrivateKeySecret: "k"}}}}, "ssh_host_keys[0].private_key_secret"},
		{"host key wrong type", Input{Job: job.Job{Version: 1, SSHHostKeys: []job.SSHHostKey{{Type: "rsa", PrivateKeySecret: "k"}}}, HostKeys: []string{ed}}, "ssh_host_keys[0].private_key_secret"},
		{"replace drops seeds", Input{Job: job.Job{Version: 1, UserData: "#!/bin/sh\n", UserDataMode: job.ModeReplace, Locale: "C.UTF-8"}, UserData: "#!/bin/sh\n"}, "user_data_mode"},
		{"network_data with the default format", Input{Job: job.Job{Version: 1, NetworkData: map[string]any{"links": []any{map[string]any{"id": "l0", "type": "phy", "ethernet_mac_address": "52:54:00:00:00:01"}}}}}, "network_data"},
		{"network_config on configdrive", Input{Job: job.Job{Version: 1, Format: job.FormatConfigDrive, NetworkConfig: "version: 2\n"}}, "network_config"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Render(c.in, Options{})
			if err == nil || !strings.Contains(err.Error(), c.field+":") {
				t.Fatalf("error %v, want one on %s", err, c.field)
			}
			if strings.Contains(err.Error(), "PRIVATE") || strings.Contains(err.Error(), strings.Split(ed, "\n")[1]) {
				t.Errorf("error quotes the private key: %v", err)
			}
		})
	}
	// generated seeds come from Options.Rand and are recorded
	d, err := Render(Input{Job: job.Job{Version: 1, RandomSeed: &job.RandomSeed{GenerateBytes: 16}}}, Options{Rand: strings.NewReader(strings.Repeat("x", 16))})
	if err != nil || d.RandomSeed != "eHh4eHh4eHh4eHh4eHh4eA==" {
		t.Fatalf("generated seed %q, %v", d.RandomSeed, err)
	}
	if _, err := Render(Input{Job: job.Job{Version: 1, RandomSeed: &job.RandomSeed{GenerateBytes: 16}}}, Options{Rand: strings.NewReader("short")}); err == nil {
		t.Errorf("a short random source gave no error")
	}
}
