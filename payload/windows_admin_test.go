package payload_test

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/job"
)

// adminAnswer is an answer file that carries only {{admin_password}}.
const adminAnswer = `<unattend xmlns="urn:schemas-microsoft-com:unattend"><settings pass="oobeSystem"><component name="Microsoft-Windows-Shell-Setup"><UserAccounts><AdministratorPassword><Value>{{admin_password}}</Value><PlainText>true</PlainText></AdministratorPassword></UserAccounts></component></settings></unattend>`

// adminJobs are a Windows config-drive job and a sysprep job naming the
// same admin_password_secret: one field, read by one check, for both
// formats (issue 35 items 2 and 3).
func adminJobs(t *testing.T) map[string][]byte {
	t.Helper()
	sp, err := json.Marshal(adminAnswer)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		"configdrive": []byte(`{"version":1,"guest_os":"windows","format":"configdrive","hostname":"win-01","admin_password_secret":"pw"}`),
		"sysprep":     []byte(`{"version":1,"format":"sysprep","guest_os":"windows","admin_password_secret":"pw","sysprep":` + string(sp) + `}`),
	}
}

// adminPassIn returns the administrator password the rendered payload
// gives Windows: meta_data.json meta.admin_pass (read with encoding/json)
// or the answer file's AdministratorPassword Value (read with
// encoding/xml).
func adminPassIn(t *testing.T, r *payload.Rendered) string {
	t.Helper()
	for _, f := range r.Docs.Files {
		switch {
		case strings.HasSuffix(f.Path, "meta_data.json"):
			var m struct {
				Meta struct {
					AdminPass string `json:"admin_pass"`
				} `json:"meta"`
			}
			if err := json.Unmarshal(f.Data, &m); err != nil {
				t.Fatalf("%s: %v", f.Path, err)
			}
			return m.Meta.AdminPass
		case f.Path == job.UnattendXML:
			var u struct {
				Value string `xml:"settings>component>UserAccounts>AdministratorPassword>Value"`
			}
			if err := xml.Unmarshal(f.Data, &u); err != nil {
				t.Fatalf("%s: %v", f.Path, err)
			}
			return u.Value
		}
	}
	t.Fatalf("no meta_data.json nor %s among the rendered files", job.UnattendXML)
	return ""
}

// checkRender checks doc with the secrets in dir and renders it; it fails t
// on a problem.
func checkRender(t *testing.T, doc []byte, dir string) *payload.Rendered {
	t.Helper()
	_, c, rep := payload.Check(doc, payload.CheckOptions{Secrets: true, SecretsDir: dir})
	if !rep.OK() {
		t.Fatal(rep.Err())
	}
	r, err := payload.Render(c, payload.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestAdminPasswordSecretBothFormats(t *testing.T) {
	const pw = `Adm1n&<"Pass">'é`
	dir := t.TempDir()
	write := func(content string) {
		if err := os.WriteFile(filepath.Join(dir, "pw"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name, doc := range adminJobs(t) {
		t.Run(name, func(t *testing.T) {
			write(pw + "\r\n")
			r := checkRender(t, doc, dir)
			if got := adminPassIn(t, r); got != pw {
				t.Errorf("the image gives Windows the password %q, want the secret's first line %q", got, pw)
			}
			// the password enters the content hash: another one is another image
			write("another-Pa55\n")
			r2 := checkRender(t, doc, dir)
			if r2.Docs.ContentHash == r.Docs.ContentHash {
				t.Errorf("another password gives the same content hash")
			}
			// every refusal of the one reading applies to both formats,
			// once, on the field, never quoting the secret
			for _, bad := range []struct{ what, content, code, msg string }{
				{"empty", "\n", job.CodeInvalid, "is empty"},
				{"two lines", "first-Line1\nsecond-Line2\n", job.CodeInvalid, "more than one line"},
				{"NUL", "nul-\x00-Byte\n", job.CodeInvalid, "more than one line or a NUL byte"},
				{"too long", strings.Repeat("Long-", 103) + "\n", job.CodeTooLarge, "longer than 512 bytes"},
				{"control character", "bell-\a-Char\n", job.CodeInvalid, "control characters"},
				{"invalid UTF-8", "bad-\xff\xfe-Utf\n", job.CodeInvalid, "invalid UTF-8"},
			} {
				write(bad.content)
				_, c, rep := payload.Check(doc, payload.CheckOptions{Secrets: true, SecretsDir: dir})
				if c != nil || len(rep.Errors) != 1 {
					t.Errorf("%s: want one problem and no checked job; got %v", bad.what, rep.Errors)
					continue
				}
				e := rep.Errors[0]
				if e.Field != "admin_password_secret" || e.Code != bad.code || !strings.Contains(e.Message, bad.msg) || !strings.Contains(e.Message, `secret "pw"`) {
					t.Errorf("%s: want admin_password_secret %s containing %q; got %v", bad.what, bad.code, bad.msg, e)
				}
				for _, part := range []string{"Line1", "Line2", "Byte", "Long-", "Char", "Utf"} {
					if strings.Contains(e.Message, part) {
						t.Errorf("%s: the message quotes the secret: %s", bad.what, e.Message)
					}
				}
			}
		})
	}
}
