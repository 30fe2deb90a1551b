package job

import (
	"encoding/base64"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// unattendT is a minimal answer file using every placeholder.
const unattendT = `<?xml version="1.0" encoding="utf-8"?>
<unattend xmlns="urn:schemas-microsoft-com:unattend">
  <settings pass="specialize">
    <component name="Microsoft-Windows-Shell-Setup" processorArchitecture="amd64" publicKeyToken="31bf3856ad364e35" language="neutral" versionScope="nonSxS">
      <ComputerName>{{hostname}}</ComputerName>
      <TimeZone>{{timezone}}</TimeZone>
    </component>
  </settings>
  <settings pass="oobeSystem">
    <component name="Microsoft-Windows-Shell-Setup" processorArchitecture="amd64" publicKeyToken="31bf3856ad364e35" language="neutral" versionScope="nonSxS">
      <UserAccounts><AdministratorPassword><Value>{{admin_password}}</Value><PlainText>true</PlainText></AdministratorPassword></UserAccounts>
    </component>
  </settings>
</unattend>
`

// sp is a job of format sysprep with members.
func sp(members string) string {
	return `{"version":1,"format":"sysprep",` + members + `}`
}

const spFull = `"hostname":"win-01","timezone":"Europe/Berlin","admin_password_secret":"winpw"`

func TestSysprepJobDecodesEveryField(t *testing.T) {
	j, r := Parse([]byte(sp(`"sysprep":` + jstr(unattendT) + `,` + spFull + `,"sysprep_file_name":"Autounattend.xml","sysprep_medium":"cdrom","media":"iso","domain":"w1"`)))
	if !r.OK() {
		t.Fatal(r.Err())
	}
	if j.Format != FormatSysprep || j.SysprepFileName != AutounattendXML || j.SysprepMedium != MediumCDROM || j.AdminPasswordSecret != "winpw" || j.Sysprep != unattendT {
		t.Errorf("decoded %+v", j)
	}
	// defaults: floppy, Unattend.xml, vfat; no guest report
	j, r = Parse([]byte(sp(`"sysprep_secret":"answer","windows_timezone":"W. Europe Standard Time"`)))
	if !r.OK() {
		t.Fatal(r.Err())
	}
	on := true
	a := j.Apply(Defaults{GuestReport: &on})
	if a.SysprepMedium != MediumFloppy || a.SysprepFileName != UnattendXML || a.Media != MediaVFAT || a.GuestReport != nil {
		t.Errorf("defaults: medium %q name %q media %q guest_report %v", a.SysprepMedium, a.SysprepFileName, a.Media, a.GuestReport)
	}
	if a := a.Apply(Defaults{}); a.Media != MediaVFAT {
		t.Errorf("Apply is not idempotent: media %q", a.Media)
	}
	if tz := SysprepTimezone(&a); tz != "W. Europe Standard Time" {
		t.Errorf("SysprepTimezone = %q", tz)
	}
	c := Job{Version: 1, Format: FormatSysprep, SysprepMedium: MediumCDROM}.Apply(Defaults{})
	if c.Media != MediaISO {
		t.Errorf("cdrom media %q, want iso", c.Media)
	}
	// base64 gives the same text, byte order mark allowed
	j, r = Parse([]byte(sp(`"sysprep_base64":"` + base64.StdEncoding.EncodeToString([]byte("\uFEFF"+unattendT)) + `",` + spFull)))
	if !r.OK() {
		t.Fatal(r.Err())
	}
}

func TestSysprepValidation(t *testing.T) {
	ok := `"sysprep":` + jstr(unattendT) + `,` + spFull
	noPH := `<unattend xmlns="urn:schemas-microsoft-com:unattend"/>`
	for _, c := range []struct {
		name, doc, field, code, want string
	}{
		{"no answer file", sp(spFull), "sysprep", CodeRequired, "needs the answer file"},
		{"two answer files", sp(ok + `,"sysprep_secret":"x"`), "sysprep", CodeConflict, "only one of sysprep, sysprep_base64 and sysprep_secret"},
		{"bad medium", sp(ok + `,"sysprep_medium":"usb"`), "sysprep_medium", CodeInvalid, `"usb" is not a sysprep medium`},
		{"medium and media disagree", sp(ok + `,"sysprep_medium":"floppy","media":"iso"`), "media", CodeConflict, `takes media "vfat"`},
		{"bad file name", sp(ok + `,"sysprep_file_name":"answer.xml"`), "sysprep_file_name", CodeInvalid, `"answer.xml" is not an answer file name`},
		{"long computer name", sp(strings.Replace(ok, "win-01", "windows-server-0001", 1)), "hostname", CodeInvalid, `"windows-server-0001" is not a Windows computer name`},
		{"fqdn computer name", sp(strings.Replace(ok, "win-01", "win.example.com", 1)), "hostname", CodeInvalid, "one label"},
		{"unmapped IANA zone", sp(strings.Replace(ok, "Europe/Berlin", "Factory", 1)), "timezone", CodeNotFound, `"Factory" has no Windows time zone`},
		{"unknown Windows zone", sp(strings.Replace(ok, `"timezone":"Europe/Berlin"`, `"windows_timezone":"Berlin Time"`, 1)), "windows_timezone", CodeNotFound, `"Berlin Time" is not a Windows time zone name`},
		{"both zones", sp(ok + `,"windows_timezone":"UTC"`), "windows_timezone", CodeConflict, "only one of timezone"},
		{"bad secret name", sp(strings.Replace(ok, "winpw", "../pw", 1)), "admin_password_secret", CodeInvalid, `"../pw" is not a secret name`},
		{"not XML", sp(`"sysprep":"<unattend xmlns=\"urn:schemas-microsoft-com:unattend\">\n<settings>\n</unattend>"`), "sysprep", CodeInvalid, `line 3: not well-formed XML: element <settings> closed by </unattend>: "</unattend>"`},
		{"wrong root", sp(`"sysprep":"<unattended xmlns=\"urn:schemas-microsoft-com:unattend\"/>"`), "sysprep", CodeInvalid, `the root element is <unattended>`},
		{"wrong namespace", sp(`"sysprep":"<unattend xmlns=\"urn:example\"/>"`), "sysprep", CodeInvalid, `in namespace "urn:example"`},
		{"no namespace", sp(`"sysprep":"<unattend/>"`), "sysprep", CodeInvalid, `in namespace ""`},
		{"undefined entity", sp(`"sysprep":"<unattend xmlns=\"urn:schemas-microsoft-com:unattend\">&nbsp;</unattend>"`), "sysprep", CodeInvalid, "not well-formed XML"},
		{"two roots", sp(`"sysprep":"<unattend xmlns=\"urn:schemas-microsoft-com:unattend\"/><unattend xmlns=\"urn:schemas-microsoft-com:unattend\"/>"`), "sysprep", CodeInvalid, "a second root element"},
		{"UTF-16 declared", sp(`"sysprep":"<?xml version=\"1.0\" encoding=\"utf-16\"?><unattend xmlns=\"urn:schemas-microsoft-com:unattend\"/>"`), "sysprep", CodeInvalid, `encoding "utf-16"`},
		{"unknown placeholder", sp(`"sysprep":"<unattend xmlns=\"urn:schemas-microsoft-com:unattend\">{{ComputerName}}</unattend>"`), "sysprep", CodeInvalid, "unknown placeholder {{ComputerName}}; the placeholders are {{hostname}}, {{admin_password}}, {{timezone}}"},
		{"placeholder without value", sp(`"sysprep":` + jstr(unattendT) + `,"hostname":"w1","timezone":"UTC"`), "admin_password_secret", CodeRequired, "uses {{admin_password}} or $AdminPassword$"},
		{"value without placeholder", sp(`"sysprep":` + jstr(noPH) + `,"hostname":"w1"`), "hostname", CodeConflict, "no {{hostname}} or $ComputerName$ placeholder, so hostname would be dropped"},
		{"windows zone without placeholder", sp(`"sysprep":` + jstr(noPH) + `,"windows_timezone":"UTC"`), "windows_timezone", CodeConflict, "no {{timezone}} or $TimeZone$ placeholder"},
		{"hidden value not alone", sp(`"sysprep":"<unattend xmlns=\"urn:schemas-microsoft-com:unattend\"><P><Value>x{{admin_password}}</Value><PlainText>false</PlainText></P></unattend>","admin_password_secret":"pw"`), "sysprep", CodeInvalid, "{{admin_password}}: a <Value> whose <PlainText> is false holds base64 text"},
		{"placeholder in a processing instruction", sp(`"sysprep":"<?x $ComputerName$?><unattend xmlns=\"urn:schemas-microsoft-com:unattend\"/>","hostname":"w1"`), "sysprep", CodeInvalid, "$ComputerName$: a placeholder in a processing instruction"},
		{"bad base64", sp(`"sysprep_base64":"%%%"`), "sysprep_base64", CodeInvalid, `"%%%" is not valid base64`},
		{"cloud-init field", sp(ok + `,"runcmd":["echo"]`), "runcmd", CodeConflict, `format "sysprep" cannot carry runcmd`},
		{"guest report", sp(ok + `,"guest_report":true`), "guest_report", CodeConflict, `cannot carry guest_report`},
		{"sysprep field elsewhere", `{"version":1,"sysprep_medium":"floppy"}`, "sysprep_medium", CodeConflict, `only used with format "sysprep"`},
		{"windows zone elsewhere", `{"version":1,"format":"configdrive","windows_timezone":"UTC"}`, "windows_timezone", CodeConflict, `only used with format "sysprep"`},
	} {
		t.Run(c.name, func(t *testing.T) { wantProblem(t, c.doc, c.field, c.code, c.want) })
	}
	if _, r := Parse([]byte(sp(ok))); !r.OK() {
		t.Errorf("the good job is refused: %v", r.Err())
	}
}

// The Windows fields of issue 35 meet on a sysprep job and on a config
// drive: guest_os, admin_password_secret (one field for both formats),
// admin_username and admin_certs. Each problem is reported exactly once,
// by exactly one of the cloudbase and sysprep kinds' checks.
func TestSysprepWithWindowsFields(t *testing.T) {
	ok := `"sysprep":` + jstr(unattendT) + `,` + spFull
	type fe struct{ field, code string }
	for _, c := range []struct {
		name, doc string
		want      []fe // every error, in any order; none for a good job
		msg       string
	}{
		{"sysprep without guest_os", sp(ok), nil, ""},
		{"sysprep with guest_os windows", sp(ok + `,"guest_os":"windows"`), nil, ""},
		{"sysprep with guest_os linux", sp(ok + `,"guest_os":"linux"`), []fe{{"guest_os", CodeConflict}}, `guest_os must be "windows" or left out, not "linux"`},
		{"sysprep with an unknown guest_os", sp(ok + `,"guest_os":"macos"`), []fe{{"guest_os", CodeInvalid}}, `"macos" is not a guest operating system`},
		{"sysprep with admin_username", sp(ok + `,"guest_os":"windows","admin_username":"Administrator"`), []fe{{"admin_username", CodeConflict}}, `format "sysprep" cannot carry admin_username`},
		{"sysprep with admin_certs", sp(ok + `,"admin_certs":["x"]`), []fe{{"admin_certs", CodeConflict}}, `format "sysprep" cannot carry admin_certs`},
		{"sysprep windows long computer name", sp(strings.Replace(ok, "win-01", "windows-server-0001", 1) + `,"guest_os":"windows"`), []fe{{"hostname", CodeInvalid}}, `"windows-server-0001" is not a Windows computer name`},
		{"sysprep bad admin secret name", sp(strings.Replace(ok, "winpw", "../pw", 1) + `,"guest_os":"windows"`), []fe{{"admin_password_secret", CodeInvalid}}, `"../pw" is not a secret name`},
		{"sysprep with butane", sp(ok + `,"butane":"variant: fcos\nversion: 1.5.0\n"`), []fe{{"butane", CodeConflict}}, `only used with format "ignition"`},
		{"sysprep with user_data", sp(ok + `,"user_data":"#ps1_sysnative\nWrite-Host hi\n"`), []fe{{"user_data", CodeConflict}}, `format "sysprep" cannot carry user_data`},
		{"sysprep windows with user_data_base64", sp(ok + `,"guest_os":"windows","user_data_base64":"%%%"`), []fe{{"user_data_base64", CodeConflict}}, `format "sysprep" cannot carry user_data_base64`},
		{"sysprep with ignition", sp(ok + `,"ignition":{"ignition":{"version":"3.4.0"}}`), []fe{{"ignition", CodeConflict}}, `only used with format "ignition"`},
		{"windows config drive with admin password", win(`"hostname":"win-01","admin_password_secret":"winpw"`), nil, ""},
		{"windows config drive bad admin secret name", win(`"admin_password_secret":"../pw"`), []fe{{"admin_password_secret", CodeInvalid}}, `"../pw" is not a secret name`},
		{"windows config drive with windows_timezone", win(`"windows_timezone":"UTC"`), []fe{{"windows_timezone", CodeConflict}}, `only used with format "sysprep"`},
		{"linux nocloud with admin password", v1(`"admin_password_secret":"winpw"`), []fe{{"admin_password_secret", CodeConflict}}, `needs guest_os "windows"`},
		{"windows nocloud with admin password", v1(`"guest_os":"windows","admin_password_secret":"winpw"`), []fe{{"admin_password_secret", CodeConflict}}, "only from a config drive"},
		{"ignition with admin password", v1(`"format":"ignition","admin_password_secret":"winpw"`), []fe{{"admin_password_secret", CodeConflict}}, `needs guest_os "windows"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, r := Parse([]byte(c.doc))
			var got []fe
			for _, e := range r.Errors {
				got = append(got, fe{e.Field, e.Code})
			}
			if len(got) != len(c.want) {
				t.Fatalf("want %v; got %v", c.want, r.Errors)
			}
			for i, w := range c.want {
				if got[i] != w || !strings.Contains(r.Errors[i].Message, c.msg) {
					t.Fatalf("want %v with %q; got %v", c.want, c.msg, r.Errors)
				}
			}
		})
	}
}

// unattendOvirt uses oVirt's placeholder names, each of them, in CDATA.
const unattendOvirt = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\r\n<unattend xmlns=\"urn:schemas-microsoft-com:unattend\">\r\n" +
	"<a><![CDATA[$ComputerName$]]></a><a><![CDATA[$AdminPassword$]]></a><a><![CDATA[$TimeZone$]]></a>" +
	"<a><![CDATA[$JoinDomain$]]></a><a><![CDATA[$DomainAdmin$]]></a><a><![CDATA[$DomainAdminPassword$]]></a>" +
	"<a><![CDATA[$MachineObjectOU$]]></a><a><![CDATA[$ProductKey$]]></a><a><![CDATA[$OrgName$]]></a>" +
	"<a><![CDATA[$InputLocale$]]></a><a><![CDATA[$UILanguage$]]></a><a><![CDATA[$SystemLocale$]]></a>" +
	"<a><![CDATA[$UserLocale$]]></a><a><![CDATA[$SetupUiLanguageUiLanguage$]]></a>\r\n</unattend>\r\n"

const spOvirtFields = `"hostname":"win-01","timezone":"Europe/Berlin","admin_password_secret":"winpw",` +
	`"join_domain":"ad.example.com","domain_admin":"joiner","domain_admin_password_secret":"joinpw",` +
	`"machine_object_ou":"OU=Servers,DC=ad,DC=example,DC=com","product_key_secret":"key","org_name":"Example & Co",` +
	`"input_locale":"de-DE;0409:00000409","ui_language":"en-US","system_locale":"de-DE","user_locale":"de-CH"`

// TestSysprepOvirtFields: every oVirt placeholder has a job field; each
// new field is validated with a message naming it and quoting its value
// (never a secret), is refused outside format "sysprep", and a value the
// answer file has no placeholder for is refused (it would be dropped).
func TestSysprepOvirtFields(t *testing.T) {
	ok := `"sysprep":` + jstr(unattendOvirt) + `,` + spOvirtFields
	j, r := Parse([]byte(sp(ok)))
	if !r.OK() {
		t.Fatalf("an oVirt answer file with every field: %v", r.Err())
	}
	if j.JoinDomain != "ad.example.com" || j.DomainAdmin != "joiner" || j.DomainAdminPasswordSecret != "joinpw" || j.MachineObjectOU == "" ||
		j.ProductKeySecret != "key" || j.OrgName != "Example & Co" || j.InputLocale == "" || j.UILanguage != "en-US" || j.SystemLocale != "de-DE" || j.UserLocale != "de-CH" {
		t.Errorf("decoded %+v", j)
	}
	set := func(field, val string) string {
		i := strings.Index(ok, `"`+field+`":`)
		if i < 0 {
			t.Fatalf("no %s", field)
		}
		k := i + len(field) + 3
		e := k + 1 + strings.Index(ok[k+1:], `"`)
		return ok[:k] + `"` + val + ok[e:]
	}
	for _, c := range []struct {
		name, doc, field, code, want string
	}{
		{"bad domain", sp(set("join_domain", "ad example")), "join_domain", CodeInvalid, `"ad example" is not a domain name`},
		{"bad domain admin", sp(set("domain_admin", "a/b")), "domain_admin", CodeInvalid, `"a/b" is not a Windows account name`},
		{"bad domain password secret name", sp(set("domain_admin_password_secret", "../x")), "domain_admin_password_secret", CodeInvalid, `"../x" is not a secret name`},
		{"bad OU", sp(set("machine_object_ou", "Servers")), "machine_object_ou", CodeInvalid, `"Servers" is not the distinguished name of an OU`},
		{"bad product key secret name", sp(set("product_key_secret", ".k")), "product_key_secret", CodeInvalid, `".k" is not a secret name`},
		{"org name with a control character", sp(set("org_name", `a\u0007b`)), "org_name", CodeInvalid, `"a\ab" holds control characters`},
		{"long org name", sp(set("org_name", strings.Repeat("o", 300))), "org_name", CodeTooLarge, "longer than 256 bytes"},
		{"bad input locale", sp(set("input_locale", "de-DE;german")), "input_locale", CodeInvalid, `"de-DE;german" is not a list of input locales`},
		{"bad ui language", sp(set("ui_language", "English")), "ui_language", CodeInvalid, `"English" is not a language tag`},
		{"bad system locale", sp(set("system_locale", "de_DE")), "system_locale", CodeInvalid, `"de_DE" is not a language tag`},
		{"bad user locale", sp(set("user_locale", "1")), "user_locale", CodeInvalid, `"1" is not a language tag`},
		{"placeholder without value", sp(strings.Replace(ok, `"product_key_secret":"key",`, "", 1)), "product_key_secret", CodeRequired, "uses {{product_key}} or $ProductKey$"},
		{"setup language without value", sp(strings.Replace(ok, `,"ui_language":"en-US"`, "", 1)), "ui_language", CodeRequired, "uses {{ui_language}} or $SetupUiLanguageUiLanguage$ or $UILanguage$"},
		{"value without placeholder", sp(`"sysprep":` + jstr(unattendT) + `,` + spFull + `,"org_name":"x"`), "org_name", CodeConflict, "no {{org_name}} or $OrgName$ placeholder, so org_name would be dropped"},
		{"join_domain elsewhere", `{"version":1,"join_domain":"ad.example.com"}`, "join_domain", CodeConflict, `only used with format "sysprep"`},
		{"product key elsewhere", `{"version":1,"format":"configdrive","guest_os":"windows","product_key_secret":"key"}`, "product_key_secret", CodeConflict, `only used with format "sysprep"`},
		{"domain password elsewhere", `{"version":1,"format":"ignition","domain_admin_password_secret":"p"}`, "domain_admin_password_secret", CodeConflict, `only used with format "sysprep"`},
		{"locale elsewhere", `{"version":1,"ui_language":"en-US","input_locale":"de-DE","system_locale":"de-DE","user_locale":"de-DE","org_name":"x","domain_admin":"a","machine_object_ou":"OU=a"}`, "user_locale", CodeConflict, `only used with format "sysprep"`},
	} {
		t.Run(c.name, func(t *testing.T) { wantProblem(t, c.doc, c.field, c.code, c.want) })
	}
}

// TestSecretFieldsByTag: the secret fields are discoverable by their json
// tags (every one ends in "_secret"), the new sysprep ones included.
func TestSecretFieldsByTag(t *testing.T) {
	var names []string
	rt := reflect.TypeOf(Job{})
	for i := 0; i < rt.NumField(); i++ {
		tag, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if strings.HasSuffix(tag, "_secret") {
			names = append(names, tag)
		}
	}
	for _, want := range []string{"admin_password_secret", "sysprep_secret", "domain_admin_password_secret", "product_key_secret"} {
		if !slices.Contains(names, want) {
			t.Errorf("secret field %s not found among %v", want, names)
		}
	}
}

// wantProblem parses doc and fails t unless one of its problems is code
// under field with a message containing msg.
func wantProblem(t *testing.T, doc, field, code, msg string) {
	t.Helper()
	_, r := Parse([]byte(doc))
	for _, e := range r.Errors {
		if e.Field == field && e.Code == code && strings.Contains(e.Message, msg) {
			return
		}
	}
	t.Errorf("want %s %s containing %q; got %v", field, code, msg, r.Errors)
}
