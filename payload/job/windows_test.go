package job

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/test/testenv"
)

// testCert returns a self-signed PEM certificate.
func testCert(t testing.TB) string {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "Administrator"},
		NotBefore: time.Unix(0, 0), NotAfter: time.Unix(1<<33, 0), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// win is a job for a Windows guest on a config drive with members.
func win(members string) string {
	doc := `{"version":1,"guest_os":"windows","format":"configdrive"`
	if members != "" {
		doc += "," + members
	}
	return doc + "}"
}

func TestWindowsGoodJobs(t *testing.T) {
	cert := testCert(t)
	for name, doc := range map[string]string{
		"minimal":         win(""),
		"explicit linux":  v1(`"guest_os":"linux","hostname":"a-very-long-linux-host-name"`),
		"everything":      win(`"hostname":"WIN-WEB01.example.com","admin_username":"Administrator","admin_password_secret":"win.pw","admin_certs":[` + jstr(cert) + `,` + jstr(cert) + `],"ssh_authorized_keys":["` + testenv.KeyAlice + `"],"nics":[{"name":"lan0","mac":"` + mac1 + `","mtu":1500,"ipv4":{"method":"static","address":"192.0.2.10/24","gateway":"192.0.2.1"},"ipv6":{"method":"static","address":"2001:db8::10/64","gateway":"fe80::1"}}],"dns":{"nameservers":["192.0.2.53"]},"user_data":"#ps1_sysnative\nWrite-Host hi\n","user_data_mode":"replace","meta_data":{"meta":{"kms_host":"kms.example.com"}}`),
		"15 characters":   win(`"hostname":"abcdefghijklmno"`),
		"cloud-config":    win(`"user_data":"#cloud-config\nset_timezone: UTC\n"`),
		"ec2 replace":     win(`"user_data":"<powershell>\nWrite-Host hi\n</powershell>\n","user_data_mode":"replace"`),
		"nocloud windows": v1(`"guest_os":"windows","hostname":"win1","ssh_authorized_keys":["` + testenv.KeyAlice + `"]`),
		"gzip script":     win(`"user_data_base64":"` + base64.StdEncoding.EncodeToString(testenv.Gzip(t, "rem cmd\r\ndir\r\n")) + `","user_data_mode":"replace"`),
	} {
		t.Run(name, func(t *testing.T) {
			if _, r := Parse([]byte(doc)); !r.OK() {
				t.Fatal(r.Err())
			}
		})
	}
}

func TestWindowsJobDecodesEveryField(t *testing.T) {
	cert := testCert(t)
	j, r := Parse([]byte(win(`"admin_username":"Administrator","admin_password_secret":"win.pw","admin_certs":[` + jstr(cert) + `]`)))
	if !r.OK() {
		t.Fatal(r.Err())
	}
	if !j.IsWindows() || j.AdminUsername != "Administrator" || j.AdminPasswordSecret != "win.pw" || !reflect.DeepEqual(j.AdminCerts, []string{cert}) {
		t.Errorf("decoded %q %q %q %q", j.GuestOS, j.AdminUsername, j.AdminPasswordSecret, j.AdminCerts)
	}
}

// TestWindowsBadJobs: every bad Windows field is refused by name, quoting
// the value (never a password), and nothing else is reported.
func TestWindowsBadJobs(t *testing.T) {
	cert := testCert(t)
	key := "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIB9Vk9eEdI0XHvPf6J6gHP6e2U7fMzj8V3b5GvJ8aVjz\n-----END PRIVATE KEY-----\n"
	for _, tc := range []badCase{
		{name: "unknown guest_os", doc: v1(`"guest_os":"Windows"`), want: []string{"guest_os|invalid"}},
		{name: "hostname over 15", doc: win(`"hostname":"abcdefghijklmnop.example.com"`), want: []string{"hostname|invalid"}, msg: "NetBIOS limit is 15"},
		{name: "hostname all digits", doc: win(`"hostname":"12345.example.com"`), want: []string{"hostname|invalid"}},
		{name: "hostname not RFC 1123", doc: win(`"hostname":"web_1"`), want: []string{"hostname|invalid"}},
		{name: "admin fields without windows", doc: v1(`"format":"configdrive","admin_username":"Admin","admin_password_secret":"pw","admin_certs":[` + jstr(cert) + `]`),
			want: []string{"admin_username|conflict", "admin_password_secret|conflict", "admin_certs|conflict"}},
		{name: "admin fields on nocloud", doc: v1(`"guest_os":"windows","admin_username":"Admin","admin_password_secret":"pw"`),
			want: []string{"admin_username|conflict", "admin_password_secret|conflict"}, msg: "only from a config drive"},
		{name: "ignition", doc: v1(`"guest_os":"windows","format":"ignition"`), want: []string{"guest_os|conflict"}},
		{name: "bad admin_username", doc: win(`"admin_username":"ad/min"`), want: []string{"admin_username|invalid"}},
		{name: "long admin_username", doc: win(`"admin_username":"abcdefghijklmnopqrstu"`), want: []string{"admin_username|invalid"}},
		{name: "dots admin_username", doc: win(`"admin_username":"..."`), want: []string{"admin_username|invalid"}},
		{name: "bad secret name", doc: win(`"admin_password_secret":"../pw"`), want: []string{"admin_password_secret|invalid"}},
		{name: "cert not PEM", doc: win(`"admin_certs":["MIIBxyz"]`), want: []string{"admin_certs[0]|invalid"}},
		{name: "cert is a key", doc: win(`"admin_certs":[` + jstr(key) + `]`), want: []string{"admin_certs[0]|invalid"}, msg: "PRIVATE KEY"},
		{name: "two certs in one", doc: win(`"admin_certs":[` + jstr(cert+cert) + `]`), want: []string{"admin_certs[0]|invalid"}},
		{name: "cert garbage DER", doc: win(`"admin_certs":["-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"]`), want: []string{"admin_certs[0]|invalid"}},
		{name: "users", doc: win(`"users":[{"name":"alice"}]`), want: []string{"users|conflict"}},
		{name: "files runcmd timezone", doc: win(`"files":[{"path":"/x","content":"y"}],"runcmd":["dir"],"timezone":"UTC"`),
			want: []string{"files|conflict", "runcmd|conflict", "timezone|conflict"}},
		{name: "linux-only settings", doc: win(`"locale":"C.UTF-8","ssh_password_auth":true,"regenerate_ssh_host_keys":true,"power_state":{"mode":"reboot"},"phone_home":{"url":"https://x.example/"},"random_seed":{"generate_bytes":32},"vendor_data":"#cloud-config\n{}\n","guest_report":true`),
			want: []string{"locale|conflict", "ssh_password_auth|conflict", "regenerate_ssh_host_keys|conflict", "power_state|conflict", "phone_home|conflict", "random_seed|conflict", "vendor_data|conflict", "guest_report|conflict"}},
		{name: "dns search", doc: win(`"nics":[{"mac":"` + mac1 + `","ipv4":{"method":"dhcp"}}],"dns":{"search":["example.com"]}`), want: []string{"dns.search|conflict"}},
		{name: "ps1 in merge mode", doc: win(`"user_data":"#ps1_sysnative\nWrite-Host hi\n"`), want: []string{"user_data|conflict"}, msg: `set user_data_mode to "replace"`},
		{name: "cmd in explicit merge", doc: win(`"user_data":"rem cmd\r\ndir\r\n","user_data_mode":"merge"`), want: []string{"user_data|conflict"}, msg: `"rem cmd" batch script`},
		{name: "x86 base64 in merge", doc: win(`"user_data_base64":"` + base64.StdEncoding.EncodeToString([]byte("#ps1_x86\nx\n")) + `"`), want: []string{"user_data_base64|conflict"}, msg: "#ps1_x86"},
		{name: "ec2 in merge", doc: win(`"user_data":"<script>dir</script>"`), want: []string{"user_data|conflict"}},
		{name: "unknown user data", doc: win(`"user_data":"Write-Host hi\n","user_data_mode":"replace"`), want: []string{"user_data|invalid"}, msg: "cloudbase-init would ignore"},
		{name: "ps1 with leading space", doc: win(`"user_data":" #ps1\nWrite-Host hi\n","user_data_mode":"replace"`), want: []string{"user_data|invalid"}},
		{name: "upper-case ps1", doc: win(`"user_data":"#PS1\nWrite-Host hi\n","user_data_mode":"replace"`), want: []string{"user_data|invalid"}},
		{name: "bad cloud-config", doc: win(`"user_data":"#cloud-config\n- a\n"`), want: []string{"user_data|invalid"}},
		{name: "meta admin_pass inline", doc: win(`"meta_data":{"admin_pass":"hunter2"}`), want: []string{"meta_data.admin_pass|invalid"}, msg: "admin_password_secret", noQuote: true},
		{name: "meta admin_pass inline nocloud", doc: v1(`"guest_os":"windows","meta_data":{"admin_pass":"hunter2"}`), want: []string{"meta_data.admin_pass|invalid"}, noQuote: true},
		{name: "meta.meta twice", doc: win(`"admin_username":"Admin","admin_password_secret":"pw","meta_data":{"meta":{"admin_username":"Other","admin_pass":"hunter2"}}`),
			want: []string{"meta_data.meta.admin_username|conflict", "meta_data.meta.admin_pass|invalid"}, noQuote: true},
		{name: "meta.meta not an object", doc: win(`"admin_username":"Admin","meta_data":{"meta":"x"}`), want: []string{"meta_data.meta|conflict"}},
		{name: "meta cert chunks twice", doc: win(`"admin_certs":[` + jstr(cert) + `],"meta_data":{"meta":{"admin_cert0":"x"}}`), want: []string{"meta_data.meta.admin_cert0|conflict"}},
		{name: "meta keys twice", doc: win(`"ssh_authorized_keys":["` + testenv.KeyAlice + `"],"meta_data":{"keys":[]}`), want: []string{"meta_data.keys|conflict"}},
		{name: "prebuilt with admin", doc: win(`"prebuilt_image":"/var/lib/x.iso","admin_username":"Admin"`), want: []string{"prebuilt_image|conflict"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, r := Parse([]byte(tc.doc))
			want := append([]string(nil), tc.want...)
			sort.Strings(want)
			if got := pairs(r.Errors); !reflect.DeepEqual(got, want) {
				t.Fatalf("errors:\n got  %q\n want %q\nreport: %v", got, want, r.Err())
			}
			for _, e := range r.Errors {
				if !tc.noQuote {
					checkQuoted(t, tc.doc, e)
				}
				if strings.Contains(e.Message, "hunter2") {
					t.Errorf("%s: a password is echoed: %s", e.Field, e.Message)
				}
			}
			if tc.msg != "" && !strings.Contains(r.Err().Error(), tc.msg) {
				t.Errorf("no message mentions %q: %v", tc.msg, r.Err())
			}
		})
	}
}

// TestWindowsNoGuestReport: the agent's guest_report default never reaches
// a Windows job (the reporter is a cloud-init boothook).
func TestWindowsNoGuestReport(t *testing.T) {
	on := true
	j, r := ParseWith([]byte(win(`"hostname":"win1"`)), Defaults{GuestReport: &on})
	if !r.OK() {
		t.Fatal(r.Err())
	}
	if a := j.Apply(Defaults{GuestReport: &on}); a.GuestReport != nil {
		t.Errorf("guest_report %v on a Windows job", *a.GuestReport)
	}
	j, _ = ParseWith([]byte(v1(`"hostname":"lin1"`)), Defaults{GuestReport: &on})
	if a := j.Apply(Defaults{GuestReport: &on}); a.GuestReport == nil || !*a.GuestReport {
		t.Errorf("a Linux job lost the agent's guest_report")
	}
}

func TestClassifyWindowsUserData(t *testing.T) {
	for s, want := range map[string]WindowsUserDataKind{
		"#ps1_sysnative\nx":                WinKindPS1,
		"#ps1\nx":                          WinKindPS1,
		"#ps1_x86\nx":                      WinKindPS1x86,
		"rem cmd\r\ndir":                   WinKindCmd,
		"rem   cmd\tdir":                   WinKindCmd,
		"#!/usr/bin/env python\nprint(1)":  WinKindPython,
		"#!/bin/bash\n":                    WinKindShell,
		"<powershell>x</powershell>":       WinKindEC2,
		"echo\n<script>dir</script>":       WinKindEC2,
		"#ps1\n<script>x</script>":         WinKindPS1, // its order: ps1 first
		"#cloud-config\nwrite_files: []\n": WinKindCloudConfig,
		"## template: jinja\n#ps1\nx":      WinKindTemplate,
		"Content-Type: multipart/mixed; boundary=x\nMIME-Version: 1.0\n\n--x--\n": WinKindMultipart,
		"-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n":          WinKindCertificate,
		"#PS1\nx":            WinKindUnknown,
		" #ps1\nx":           WinKindUnknown,
		"#ps1_sysnativex":    WinKindUnknown,
		"REM CMD\r\ndir":     WinKindUnknown,
		"Write-Host hi":      WinKindUnknown,
		" #cloud-config\n{}": WinKindUnknown,
	} {
		if got := ClassifyWindowsUserData(s); got != want {
			t.Errorf("ClassifyWindowsUserData(%q) = %q, want %q", s, got, want)
		}
	}
}
