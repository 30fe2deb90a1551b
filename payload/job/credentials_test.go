package job

import (
	"encoding/json"
	"testing"
)

const credsBase = `"version": 1, "domain": "creds-vm", "format": "credentials"`

// TestCredentialsDecode: every credentials field decodes, a value keeps its
// shape (text or {"base64": ...}) when written back.
func TestCredentialsDecode(t *testing.T) {
	doc := `{` + credsBase + `, "keymap": "de-latin1", "motd": "hi\n", "issue": "banner\n",
		"credentials": {"sysctl.extra": "kernel.panic=10\n", "my.blob": {"base64": "AAEC"}},
		"credential_secrets": {"passwd.hashed-password.root": "root-hash"},
		"credentials_delivery": "fwcfg"}`
	j, r := Parse([]byte(doc))
	if !r.OK() {
		t.Fatal(r.Err())
	}
	if j.Keymap != "de-latin1" || j.Motd != "hi\n" || j.Issue != "banner\n" || j.CredentialsDelivery != CredentialsFwCfg {
		t.Errorf("decoded %+v", j)
	}
	if v := j.Credentials["my.blob"]; !v.Binary || string(v.Bytes()) != "\x00\x01\x02" {
		t.Errorf("my.blob = %+v", v)
	}
	if v := j.Credentials["sysctl.extra"]; v.Binary || v.Text != "kernel.panic=10\n" {
		t.Errorf("sysctl.extra = %+v", v)
	}
	if j.CredentialSecrets["passwd.hashed-password.root"] != "root-hash" {
		t.Errorf("credential_secrets = %v", j.CredentialSecrets)
	}
	out, err := json.Marshal(j.Credentials)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"my.blob":{"base64":"AAEC"},"sysctl.extra":"kernel.panic=10\n"}`; string(out) != want {
		t.Errorf("written back as %s, want %s", out, want)
	}
	refs := j.SecretRefs()
	if len(refs) != 1 || refs[0] != (SecretRef{"credential_secrets.passwd.hashed-password.root", "root-hash"}) {
		t.Errorf("SecretRefs() = %v", refs)
	}
}

// TestCredentialsDelivery: without credentials_delivery a job goes by
// SMBIOS, or by fw_cfg when it carries a secret.
func TestCredentialsDelivery(t *testing.T) {
	for _, c := range []struct {
		doc  string
		want CredentialsDelivery
	}{
		{`{` + credsBase + `, "hostname": "a"}`, CredentialsSMBIOS},
		{`{` + credsBase + `, "users": [{"name": "root", "password_hash": "$6$s$h"}]}`, CredentialsFwCfg},
		{`{` + credsBase + `, "credential_secrets": {"x.y": "s"}}`, CredentialsFwCfg},
		{`{` + credsBase + `, "credentials_delivery": "smbios"}`, CredentialsSMBIOS},
	} {
		j, r := ParseWith([]byte(c.doc), Defaults{})
		if !r.OK() {
			t.Errorf("%s: %v", c.doc, r.Err())
			continue
		}
		if got := j.Apply(Defaults{}).CredentialsDelivery; got != c.want {
			t.Errorf("%s: delivery %q, want %q", c.doc, got, c.want)
		}
	}
}
