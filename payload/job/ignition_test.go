package job

import (
	"encoding/base64"
	"strings"
	"testing"

	ignerrors "github.com/coreos/ignition/v2/config/shared/errors"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// ign is a job of format ignition with members.
func ign(members string) string {
	if members == "" {
		return `{"version":1,"format":"ignition"}`
	}
	return `{"version":1,"format":"ignition",` + members + `}`
}

func TestIgnitionJobDecodesEveryField(t *testing.T) {
	doc := ign(`"ignition_delivery":"configdrive","media":"vfat","hostname":"node1.example.com","timezone":"Europe/Berlin",
		"users":[{"name":"core","password_hash":"` + testenv.HashA + `","ssh_authorized_keys":["` + testenv.KeyAlice + `"],"groups":["wheel"],"shell":"/bin/bash","sudo":"ALL=(ALL) NOPASSWD:ALL","lock_password":false}],
		"ssh_authorized_keys":["` + testenv.KeyAlice + `"],
		"files":[{"path":"/etc/motd","content":"hi\n","permissions":"0640","owner":"core:core"}],
		"ssh_host_keys":[{"type":"ed25519","private_key_secret":"host.key"}],
		"ignition":{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/x","contents":{"source":"data:,x"}}]}}`)
	j, r := Parse([]byte(doc))
	if !r.OK() {
		t.Fatal(r.Err())
	}
	if j.Format != FormatIgnition || j.IgnitionDelivery != DeliveryConfigDrive || j.Media != MediaVFAT {
		t.Errorf("format %q delivery %q media %q", j.Format, j.IgnitionDelivery, j.Media)
	}
	raw, field, err := IgnitionUserConfig(j)
	if err != nil || field != "ignition" || !strings.Contains(string(raw), `"version":"3.4.0"`) {
		t.Errorf("user config %s from %q: %v", raw, field, err)
	}
	// base64 gives the bytes as written
	text := `{"ignition": {"version": "3.6.0"}}`
	j, r = Parse([]byte(ign(`"ignition_base64":"` + base64.StdEncoding.EncodeToString([]byte(text)) + `"`)))
	if !r.OK() {
		t.Fatal(r.Err())
	}
	if raw, field, err := IgnitionUserConfig(j); err != nil || field != "ignition_base64" || string(raw) != text {
		t.Errorf("user config %q from %q: %v", raw, field, err)
	}
	if a := j.Apply(Defaults{}); a.IgnitionDelivery != DeliveryFwCfg {
		t.Errorf("default delivery %q, want fwcfg", a.IgnitionDelivery)
	}
	on := true
	if a := j.Apply(Defaults{GuestReport: &on}); a.GuestReport != nil {
		t.Errorf("the agent's guest_report reached an Ignition job: %v", *a.GuestReport)
	}
	// a cloud-init job gets no delivery
	if a := (Job{Version: 1}).Apply(Defaults{}); a.IgnitionDelivery != "" {
		t.Errorf("a nocloud job got delivery %q", a.IgnitionDelivery)
	}
}

// ctConfig is a spec 2.3.0 config written as the Container Linux Config
// Transpiler (ct) writes one: every section present, filesystem "root",
// empty verification objects.
const ctConfig = `{"ignition":{"config":{},"security":{"tls":{}},"timeouts":{},"version":"2.3.0"},"networkd":{},"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ9UCj6yFbzrJRqgbKp1+pjOWpNQWIeq40ujmhEHvz3p core@ct"]}]},"storage":{"files":[{"filesystem":"root","path":"/etc/motd","contents":{"source":"data:,written%20by%20ct%0A","verification":{}},"mode":420}]},"systemd":{"units":[{"contents":"[Service]\nType=oneshot\nExecStart=/usr/bin/echo hello\n[Install]\nWantedBy=multi-user.target\n","enabled":true,"name":"hello.service"}]}}`

func TestIgnitionValidation(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, c := range []struct {
		name, doc string
		want      []string // field|code, in order
		msg       string   // in the first problem's message
	}{
		{name: "minimal", doc: ign("")},
		{name: "every delivery", doc: ign(`"ignition_delivery":"nocloud","media":"vfat"`)},
		{name: "user config 3.0.0", doc: ign(`"ignition":{"ignition":{"version":"3.0.0"}}`)},
		{name: "user config 3.6.0", doc: ign(`"ignition":{"ignition":{"version":"3.6.0"}}`)},
		{name: "lock_password false is Ignition's way", doc: ign(`"users":[{"name":"alice","password":"pw","lock_password":false}]`)},

		{name: "bad delivery", doc: ign(`"ignition_delivery":"floppy"`), want: []string{"ignition_delivery|invalid"}, msg: `"floppy" is not an Ignition delivery`},
		{name: "fwcfg with vfat", doc: ign(`"media":"vfat"`), want: []string{"media|conflict"}, msg: `ignition_delivery "fwcfg" passes the config file itself`},
		{name: "blockdev with vfat", doc: ign(`"ignition_delivery":"blockdev","media":"vfat"`), want: []string{"media|conflict"}, msg: `ignition_delivery "blockdev" passes the config file itself`},
		{name: "ignition without the format", doc: v1(`"ignition":{"ignition":{"version":"3.0.0"}}`), want: []string{"ignition|conflict"}, msg: `only used with format "ignition"`},
		{name: "delivery without the format", doc: v1(`"format":"configdrive","ignition_delivery":"nocloud"`), want: []string{"ignition_delivery|conflict"}},
		{name: "both configs", doc: ign(`"ignition":{"ignition":{"version":"3.0.0"}},"ignition_base64":"` + b64(`{"ignition":{"version":"3.0.0"}}`) + `"`), want: []string{"ignition|conflict"}},
		{name: "not base64", doc: ign(`"ignition_base64":"***"`), want: []string{"ignition_base64|invalid"}, msg: "not valid base64"},
		{name: "ignition not an object", doc: ign(`"ignition":"{}"`), want: []string{"ignition|type"}},

		{name: "relative path", doc: ign(`"ignition":{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"etc/x"}]}}`),
			want: []string{"ignition.storage.files[0].path|invalid"}, msg: "Ignition refuses the config: " + ignerrors.ErrPathRelative.Error()},
		{name: "relative path in base64", doc: ign(`"ignition_base64":"` + b64(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"etc/x"}]}}`) + `"`),
			want: []string{"ignition_base64|invalid"}, msg: "(at $.storage.files.0.path): " + ignerrors.ErrPathRelative.Error()},
		{name: "duplicate user", doc: ign(`"ignition":{"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"a"},{"name":"a"}]}}`),
			want: []string{"ignition.passwd.users[1]|invalid"}, msg: ignerrors.ErrDuplicate.Error()},
		{name: "unknown key Ignition would ignore", doc: ign(`"ignition":{"ignition":{"version":"3.4.0"},"storage":{"fils":[]}}`),
			want: []string{"ignition.storage.fils|invalid"}, msg: "Ignition would ignore this"},
		{name: "experimental spec", doc: ign(`"ignition":{"ignition":{"version":"3.7.0-experimental"}}`), want: []string{"ignition.ignition.version|unsupported"}, msg: "experimental"},
		// issue 41: spec 2 is converted as Flatcar's Ignition converts it
		{name: "spec 2.2 converted", doc: ign(`"ignition":{"ignition":{"version":"2.2.0"}}`)},
		{name: "spec 2.3 ct output converted", doc: ign(`"ignition_base64":"` + b64(ctConfig) + `"`)},
		{name: "spec 2 networkd refused naming the converter", doc: ign(`"ignition":{"ignition":{"version":"2.3.0"},"networkd":{"units":[{"name":"00-eth0.network","contents":"[Match]\nName=eth0\n"}]}}`),
			want: []string{"ignition|invalid"}, msg: "the config is Ignition spec 2.3.0, which is converted to spec 3 with github.com/coreos/ign-converter"},
		{name: "spec 2 duplicate user refused by the converter", doc: ign(`"ignition":{"ignition":{"version":"2.3.0"},"passwd":{"users":[{"name":"a"},{"name":"a"}]}}`),
			want: []string{"ignition|invalid"}, msg: "ign-converter cannot translate the spec 2 config to spec 3: error at $.passwd.users.1: duplicate entry defined"},
		{name: "spec 1", doc: ign(`"ignition":{"ignitionVersion":1}`), want: []string{"ignition|unsupported"}},
		{name: "no version", doc: ign(`"ignition":{"storage":{}}`), want: []string{"ignition|unsupported"}},
		{name: "not JSON", doc: ign(`"ignition_base64":"` + b64("{\"ignition\":\n {\"version\": \"3.0.0\"}]") + `"`), want: []string{"ignition_base64|invalid"},
			msg: "Ignition refuses the config (line 2, column 22): invalid character ']'"},

		{name: "file over the hostname", doc: ign(`"hostname":"n1","files":[{"path":"/etc/hostname","content":"x"}]`), want: []string{"files[0].path|conflict"}, msg: "written from hostname"},
		{name: "file over a host key", doc: ign(`"ssh_host_keys":[{"type":"ed25519","private_key_secret":"k"}],"files":[{"path":"/etc/ssh/ssh_host_ed25519_key.pub","content":"x"}]`), want: []string{"files[0].path|conflict"}, msg: "ssh_host_keys[0]"},
		{name: "lock_password true", doc: ign(`"users":[{"name":"alice","lock_password":true}]`), want: []string{"users[0].lock_password|conflict"}},
	} {
		t.Run(c.name, func(t *testing.T) { wantProblems(t, c.doc, c.want, c.msg) })
	}
}

// TestIgnitionRefusesFieldsByName: every field with no Ignition meaning
// is refused under its own path, with a reason, never dropped; the same
// fields are accepted with format nocloud.
func TestIgnitionRefusesFieldsByName(t *testing.T) {
	fields := map[string]string{
		"instance_id":              `"instance_id":"i-1"`,
		"regenerate_ssh_host_keys": `"regenerate_ssh_host_keys":true`,
		"ssh_password_auth":        `"ssh_password_auth":false`,
		"nics":                     `"nics":[{"mac":"52:54:00:12:34:56","ipv4":{"method":"dhcp"}}]`,
		"network_config":           `"network_config":"version: 2\n"`,
		"runcmd":                   `"runcmd":["true"]`,
		"locale":                   `"locale":"C.UTF-8"`,
		"power_state":              `"power_state":{"mode":"reboot"}`,
		"phone_home":               `"phone_home":{"url":"http://192.0.2.1/x"}`,
		"random_seed":              `"random_seed":{"generate_bytes":32}`,
		"user_data":                `"user_data":"#cloud-config\n"`,
		"user_data_base64":         `"user_data_base64":"` + base64.StdEncoding.EncodeToString([]byte("#!/bin/sh\n")) + `"`,
		"user_data_secret":         `"user_data_secret":"ud"`,
		"vendor_data":              `"vendor_data":"#cloud-config\n"`,
		"vendor_data_base64":       `"vendor_data_base64":"` + base64.StdEncoding.EncodeToString([]byte("#cloud-config\n")) + `"`,
		"meta_data":                `"meta_data":{"a":1}`,
		"guest_report":             `"guest_report":true`,
	}
	for name, member := range fields {
		t.Run(name, func(t *testing.T) {
			if _, r := Parse([]byte(v1(member))); !r.OK() {
				t.Fatalf("with format nocloud: %v", r.Err())
			}
			_, r := Parse([]byte(ign(member)))
			if len(r.Errors) != 1 || r.Errors[0].Field != name || r.Errors[0].Code != CodeConflict {
				t.Fatalf("problems %v, want one conflict on %s", r.Errors, name)
			}
			if m := r.Errors[0].Message; !strings.HasPrefix(m, `format "ignition" cannot carry `+name+": ") || len(m) < len(name)+50 {
				t.Errorf("message %q gives no reason", m)
			}
		})
	}
	// dns needs nics; both are refused, each by name
	_, r := Parse([]byte(ign(`"dns":{"nameservers":["192.0.2.53"]},"nics":[{"mac":"52:54:00:12:34:56","ipv4":{"method":"dhcp"}}]`)))
	var got []string
	for _, e := range r.Errors {
		got = append(got, e.Field+"|"+e.Code)
	}
	if strings.Join(got, " ") != "dns|conflict nics|conflict" {
		t.Errorf("dns and nics: %v", got)
	}
	// user_data_mode replace
	_, r = Parse([]byte(ign(`"user_data_mode":"replace"`)))
	found := false
	for _, e := range r.Errors {
		found = found || (e.Field == "user_data_mode" && strings.HasPrefix(e.Message, `format "ignition" cannot carry`))
	}
	if !found {
		t.Errorf("user_data_mode replace not refused by name: %v", r.Errors)
	}
}

// An unknown format names every format the job accepts, ignition among
// them, at the field "format", quoting the value.
func TestUnknownFormatNamesIgnition(t *testing.T) {
	_, r := Parse([]byte(`{"version":1,"format":"coreos"}`))
	if len(r.Errors) != 1 || r.Errors[0].Field != "format" || r.Errors[0].Code != CodeInvalid {
		t.Fatalf("errors %+v, want one invalid format", r.Errors)
	}
	for _, want := range []string{`"coreos"`, `"nocloud"`, `"configdrive"`, `"ignition"`} {
		if !strings.Contains(r.Errors[0].Message, want) {
			t.Errorf("message %q does not say %s", r.Errors[0].Message, want)
		}
	}
}
