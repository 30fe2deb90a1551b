package cloudinit_test

import (
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/internal/cloudinit"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/payloadtest"
)

// The renderer takes only a job payload.Check passed: these tests render
// through it, as every caller does.

// render checks j (secrets in cloudinit.SecretsDir) and renders it.
func render(j job.Job, opt payload.Options) (*cloudinit.Documents, error) {
	r, err := payloadtest.Render(&j, cloudinit.SecretsDir, opt)
	if err != nil {
		return nil, err
	}
	return r.Docs, nil
}

// TestRenderSeeds checks the generated cloud-config and config-2 documents
// for root and the fields of issue 12.
func TestRenderSeeds(t *testing.T) {
	lockTrue := true
	seed := strings.Repeat("QUJD", 8)
	for _, c := range []struct {
		name string
		j    job.Job
		want []string // substrings of the user-data (nocloud) or meta_data.json (configdrive)
		not  []string
		file string
	}{
		{name: "root keeps unlocked", j: job.Job{Version: 1, Users: []job.User{{Name: "root", PasswordHash: "$6$s$h"}}},
			want: []string{"  - name: root\n    lock_passwd: false\n    hashed_passwd: $6$s$h\n"}, not: []string{"\n    passwd:"}, file: "user-data"},
		{name: "root without password stays unlocked", j: job.Job{Version: 1, Users: []job.User{{Name: "root", SSHAuthorizedKeys: []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ9UCj6yFbzrJRqgbKp1+pjOWpNQWIeq40ujmhEHvz3p r"}}}},
			want: []string{"name: root\n    lock_passwd: false\n    ssh_authorized_keys:"}, file: "user-data"},
		{name: "root locked on request", j: job.Job{Version: 1, Users: []job.User{{Name: "root", PasswordHash: "$6$s$h", LockPassword: &lockTrue}}},
			want: []string{"lock_passwd: true\n    hashed_passwd: $6$s$h"}, file: "user-data"},
		{name: "other users keep passwd", j: job.Job{Version: 1, Users: []job.User{{Name: "alice", PasswordHash: "$6$s$h"}}},
			want: []string{"passwd: $6$s$h"}, not: []string{"hashed_passwd"}, file: "user-data"},
		{name: "host key", j: job.Job{Version: 1, SSHHostKeys: []job.SSHHostKey{{Type: "ed25519", PrivateKeySecret: "host-ed25519"}}},
			want: []string{"ssh_deletekeys: true\nssh_keys:\n  ed25519_private: |\n    -----BEGIN OPENSSH PRIVATE KEY-----\n", "  ed25519_public: ssh-ed25519 AAAA"}, file: "user-data"},
		{name: "power state now, argv condition", j: job.Job{Version: 1, PowerState: &job.PowerState{Mode: "poweroff", Condition: &job.Command{Argv: []string{"true"}}}},
			want: []string{"power_state:\n  mode: poweroff\n  delay: now\n  condition:\n    - \"true\"\n"}, file: "user-data"},
		{name: "power state delayed", j: job.Job{Version: 1, PowerState: &job.PowerState{Mode: "reboot", DelayMinutes: 5, TimeoutSeconds: 120, Condition: &job.Command{Shell: "test -f /x"}}},
			want: []string{"  delay: 5\n  timeout: 120\n  condition: test -f /x\n"}, file: "user-data"},
		{name: "phone home all", j: job.Job{Version: 1, PhoneHome: &job.PhoneHome{URL: "http://h/"}},
			want: []string{"phone_home:\n  url: http://h/\n  post: all\n"}, file: "user-data"},
		{name: "locale", j: job.Job{Version: 1, Locale: "de_DE.UTF-8"}, want: []string{"locale: de_DE.UTF-8\n"}, file: "user-data"},
		{name: "random seed nocloud", j: job.Job{Version: 1, RandomSeed: &job.RandomSeed{Data: seed}},
			want: []string{"random_seed:\n  encoding: b64\n  data: " + seed + "\n"}, file: "user-data"},
		{name: "random seed configdrive", j: job.Job{Version: 1, Format: job.FormatConfigDrive, RandomSeed: &job.RandomSeed{Data: seed}},
			want: []string{`"random_seed": "` + seed + `"`}, file: "openstack/latest/meta_data.json"},
		{name: "random seed configdrive not in user-data", j: job.Job{Version: 1, Format: job.FormatConfigDrive, RandomSeed: &job.RandomSeed{Data: seed}},
			not: []string{"random_seed"}, file: "openstack/latest/user_data"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := render(c.j, payload.Options{})
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
	ed := cloudinit.ReadSecret(t, "host-ed25519")
	for _, c := range []struct {
		name  string
		j     job.Job
		field string
	}{
		{"host key unresolved", job.Job{Version: 1, SSHHostKeys: []job.SSHHostKey{{Type: "ed25519", PrivateKeySecret: "no-such-key"}}}, "ssh_host_keys[0].private_key_secret"},
		{"host key wrong type", job.Job{Version: 1, SSHHostKeys: []job.SSHHostKey{{Type: "rsa", PrivateKeySecret: "host-ed25519"}}}, "ssh_host_keys[0].private_key_secret"},
		{"replace drops seeds", job.Job{Version: 1, UserData: "#!/bin/sh\n", UserDataMode: job.ModeReplace, Locale: "C.UTF-8"}, "user_data_mode"},
		{"network_data with the default format", job.Job{Version: 1, NetworkData: map[string]any{"links": []any{map[string]any{"id": "l0", "type": "phy", "ethernet_mac_address": "52:54:00:00:00:01"}}}}, "network_data"},
		{"network_config on configdrive", job.Job{Version: 1, Format: job.FormatConfigDrive, NetworkConfig: "version: 2\n"}, "network_config"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := render(c.j, payload.Options{})
			if err == nil || !strings.Contains(err.Error(), c.field+":") {
				t.Fatalf("error %v, want one on %s", err, c.field)
			}
			if strings.Contains(err.Error(), "PRIVATE") || strings.Contains(err.Error(), strings.Split(ed, "\n")[1]) {
				t.Errorf("error quotes the private key: %v", err)
			}
		})
	}
	// generated seeds come from Options.Rand and are recorded
	d, err := render(job.Job{Version: 1, RandomSeed: &job.RandomSeed{GenerateBytes: 16}}, payload.Options{Rand: strings.NewReader(strings.Repeat("x", 16))})
	if err != nil || d.RandomSeed != "eHh4eHh4eHh4eHh4eHh4eA==" {
		t.Fatalf("generated seed %q, %v", d.RandomSeed, err)
	}
	if _, err := render(job.Job{Version: 1, RandomSeed: &job.RandomSeed{GenerateBytes: 16}}, payload.Options{Rand: strings.NewReader("short")}); err == nil {
		t.Errorf("a short random source gave no error")
	}
}
