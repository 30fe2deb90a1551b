package credentials_test

import (
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload/job"
)

const credsBase = `"version": 1, "domain": "creds-vm", "format": "credentials"`

// TestCredentialsValidate: each bad input gets an error naming its field.
func TestCredentialsValidate(t *testing.T) {
	on := true
	_ = on
	cases := []struct {
		name  string
		extra string
		field string
		msg   string
	}{
		{"near miss", `"credentials": {"firstboot.timezon": "UTC"}`, "credentials.firstboot.timezon", `looks like "firstboot.timezone"`},
		{"near miss case", `"credentials": {"Login.Motd": "x"}`, "credentials.Login.Motd", `looks like "login.motd"`},
		{"near miss dash", `"credentials": {"ssh.authorized-keys.root": "x"}`, "credentials.ssh.authorized-keys.root", `looks like "ssh.authorized_keys.root"`},
		{"near miss family", `"credentials": {"network.netwrok.10-a": "x"}`, "credentials.network.netwrok.10-a", `looks like "network.network.*"`},
		{"NUL in text", `"credentials": {"my.cred": "a\u0000b"}`, "credentials.my.cred", "NUL"},
		{"bad base64", `"credentials": {"my.cred": {"base64": "!!"}}`, "credentials.my.cred.base64", "not valid base64"},
		{"slash", `"credentials": {"a/b": "x"}`, "credentials.a/b", "'/'"},
		{"equals", `"credentials": {"a=b": "x"}`, "credentials.a=b", "'='"},
		{"colon", `"credentials": {"a:b": "x"}`, "credentials.a:b", "':'"},
		{"space", `"credentials": {"a b": "x"}`, "credentials.a b", "printable ASCII"},
		{"fw_cfg name too long", `"credentials_delivery": "fwcfg", "credentials": {"this.name.is.much.too.long.for": "x"}`, "credentials.this.name.is.much.too.long.for", "at most 55"},
		{"secret on smbios", `"credentials_delivery": "smbios", "credential_secrets": {"my.key": "k"}`, "credential_secrets.my.key", "every host user"},
		{"root hash on smbios", `"credentials_delivery": "smbios", "users": [{"name": "root", "password_hash": "$6$s$h"}]`, "users[0].password_hash", "every host user"},
		{"bad secret name", `"credential_secrets": {"my.key": "../k"}`, "credential_secrets.my.key", "not a secret name"},
		{"generated twice", `"hostname": "a", "credentials": {"system.hostname": "b"}`, "credentials.system.hostname", "already set by hostname"},
		{"other user", `"users": [{"name": "alice"}]`, "users[0].name", "root only"},
		{"root sudo", `"users": [{"name": "root", "sudo": "ALL=(ALL) ALL"}]`, "users[0].sudo", "cannot carry sudo"},
		{"runcmd", `"runcmd": ["true"]`, "runcmd", "cannot carry runcmd"},
		{"user_data", `"user_data": "#cloud-config\n"`, "user_data", "cannot carry user_data"},
		{"media", `"media": "iso"`, "media", "not on a medium"},
		{"guest_report", `"guest_report": true`, "guest_report", "cannot carry guest_report"},
		{"windows", `"guest_os": "windows"`, "guest_os", "systemd"},
		{"delivery", `"credentials_delivery": "floppy"`, "credentials_delivery", "not a credentials delivery"},
		{"NUL in motd", `"motd": "a\u0000"`, "motd", "NUL"},
		{"file NUL", `"files": [{"path": "/x", "content": "AA==", "encoding": "base64"}]`, "files[0].content", "NUL"},
		{"file quote", `"files": [{"path": "/x\"y", "content": "a"}]`, "files[0].path", "tmpfiles.extra"},
		{"long hostname", `"hostname": "` + strings.Repeat("a", 60) + `.example"`, "hostname", "64"},
		{"plaintext root password", `"users": [{"name": "root", "password_secret": "pw"}]`, "users[0].password_secret", "password_hash"},
		{"keymap space", `"keymap": "de latin1"`, "keymap", "single word"},
		{"field elsewhere", `"format": "nocloud", "keymap": "de"`, "keymap", `only used with format "credentials"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := `{` + credsBase + `, ` + c.extra + `}`
			if strings.Contains(c.extra, `"format"`) {
				doc = `{"version": 1, "domain": "creds-vm", ` + c.extra + `}`
			}
			_, r := job.ParseWith([]byte(doc), job.Defaults{})
			for _, e := range r.Errors {
				if e.Field == c.field && strings.Contains(e.Message, c.msg) {
					return
				}
			}
			t.Errorf("no error on %s containing %q; got %v", c.field, c.msg, r.Errors)
		})
	}
}

// TestCredentialsGood: a job using every carried field validates, DNS
// without NICs included (systemd-resolved takes network.dns globally).
func TestCredentialsGood(t *testing.T) {
	doc := `{` + credsBase + `, "hostname": "web1", "timezone": "Europe/Berlin", "locale": "de_DE.UTF-8",
		"keymap": "de-latin1", "motd": "Welcome\n", "issue": "web1\n",
		"users": [{"name": "root", "password_hash": "$6$salt$hash",
		           "ssh_authorized_keys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBMrxxmLbWjI2s3TgXXfqc0oGAxt3VQQFyYFHw3ah0/L root@host"]}],
		"dns": {"nameservers": ["192.0.2.53"], "search": ["example.net"]},
		"files": [{"path": "/etc/demo.txt", "content": "hello\n", "permissions": "0640", "owner": "root:root"}],
		"credentials": {"sysctl.extra": "kernel.panic=10\n", "network.network.10-x": "[Match]\n"},
		"credentials_delivery": "fwcfg"}`
	_, r := job.ParseWith([]byte(doc), job.Defaults{GuestReport: new(bool)})
	if !r.OK() {
		t.Fatal(r.Err())
	}
	// the agent's guest_report true does not reach a credentials job
	on := true
	j, r := job.ParseWith([]byte(`{`+credsBase+`, "hostname": "a"}`), job.Defaults{GuestReport: &on})
	if !r.OK() {
		t.Fatal(r.Err())
	}
	if a := j.Apply(job.Defaults{GuestReport: &on}); a.GuestReport != nil || a.Media != "" {
		t.Errorf("applied job has guest_report %v, media %q", a.GuestReport, a.Media)
	}
}
