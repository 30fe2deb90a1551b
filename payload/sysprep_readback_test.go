package payload_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/payloadtest"
	"github.com/vmpayload/vmpayload/test/testenv"
)

// xmlValues reads an XML document with encoding/xml and returns the text
// of every element by its path of local names ("unattend/settings/…"),
// in document order: what a reader of the file gets, CDATA and entities
// undone.
func xmlValues(t *testing.T, doc []byte) map[string][]string {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(doc))
	out := map[string][]string{}
	var path []string
	var text []*strings.Builder
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("encoding/xml cannot read the filled file: %v", err)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			path = append(path, tk.Name.Local)
			text = append(text, &strings.Builder{})
			for _, a := range tk.Attr {
				p := strings.Join(path, "/") + "/@" + a.Name.Local
				out[p] = append(out[p], a.Value)
			}
		case xml.CharData:
			if len(text) > 0 {
				text[len(text)-1].Write(tk)
			}
		case xml.EndElement:
			p := strings.Join(path, "/")
			out[p] = append(out[p], text[len(text)-1].String())
			path, text = path[:len(path)-1], text[:len(text)-1]
		}
	}
}

// unhide undoes Windows System Image Manager's hiding of a password
// (<PlainText>false</PlainText>): base64, UTF-16LE, the element's name at
// the end. It is what Windows does with the value.
func unhide(t *testing.T, v, element string) string {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(b)%2 != 0 {
		t.Fatalf("hidden password %q is not base64 of UTF-16: %v", v, err)
	}
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	s := string(utf16.Decode(u))
	p, ok := strings.CutSuffix(s, element)
	if !ok {
		t.Fatalf("hidden password decodes to %q, not ending in %q", s, element)
	}
	return p
}

// TestSysprepReadBack fills an answer file written in oVirt's manner
// (CRLF, every value in CDATA, oVirt's $Name$ placeholders) and one in
// Windows System Image Manager's (element text, {{name}} placeholders,
// passwords under <PlainText>false</PlainText>, a value in an attribute),
// with passwords holding & < " ' > and "]]>", builds the floppy and the
// CD-ROM, reads the file back from each image (mtools; isoinfo through
// Joliet) and reads every value with two XML parsers, encoding/xml and
// libxml2's xmllint: each is the job's value (a hidden password decoded as
// Windows decodes it). The oVirt file keeps its CRLF line ends byte for
// byte. On the old code the CDATA values read back escaped (&amp;…) and
// the hidden ones as plaintext.
func TestSysprepReadBack(t *testing.T) {
	for _, tool := range []string{"xmllint", "mcopy", "isoinfo"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing (test/deps.sh installs it): %v", tool, err)
		}
	}
	const (
		pc   = "unattend/settings/component/"
		oobe = pc + "UserAccounts/"
	)
	for _, style := range []string{"ovirt-style", "sim-style"} {
		tmpl, err := os.ReadFile(filepath.Join("testdata", "sysprep", style+".xml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, pw := range []string{`Adm1n&<"Pa'ss>!`, `Adm1n]]>Pa&ss]]`} {
			for _, medium := range []job.SysprepMedium{job.MediumFloppy, job.MediumCDROM} {
				t.Run(style+"/"+string(medium)+"/"+pw, func(t *testing.T) {
					sd := t.TempDir()
					domPW := `D0m]]>"&<'` + pw
					testenv.WriteFiles(t, sd, map[string]string{"admin": pw + "\n", "domain": domPW + "\n", "key": "ABCDE-FGHIJ-KLMNO-PQRST-UVWXY\n"})
					j := &job.Job{Version: 1, Format: job.FormatSysprep, Sysprep: string(tmpl), SysprepMedium: medium,
						Hostname: "win-01", Timezone: "Europe/Berlin", AdminPasswordSecret: "admin",
						JoinDomain: "ad.example.com", DomainAdmin: "joiner", DomainAdminPasswordSecret: "domain",
						MachineObjectOU: "OU=Servers,DC=ad,DC=example,DC=com", ProductKeySecret: "key",
						OrgName: `Example & "Co" <Ltd> ]]>`, InputLocale: "de-DE;0409:00000409", UILanguage: "en-US",
						SystemLocale: "de-DE", UserLocale: "de-CH"}
					r, err := payloadtest.Render(j, sd, payload.Options{})
					if err != nil {
						t.Fatal(err)
					}
					out := filepath.Join(t.TempDir(), r.ImageName("dom"))
					if _, err := r.Write(context.Background(), out, payload.Options{GID: -1, NoSync: true}); err != nil {
						t.Fatal(err)
					}
					var got []byte
					if medium == job.MediumFloppy {
						got, err = exec.Command("mcopy", "-n", "-i", out, "::/Unattend.xml", "-").Output()
					} else {
						got, err = exec.Command("isoinfo", "-J", "-i", out, "-x", "/Unattend.xml").Output()
					}
					if err != nil {
						t.Fatalf("reading Unattend.xml back from the %s: %v", medium, err)
					}
					if !bytes.Equal(got, r.Docs.Files[0].Data) {
						t.Fatalf("the %s holds %d bytes differing from the rendered %d", medium, len(got), len(r.Docs.Files[0].Data))
					}
					// line ends as written: as many CRLF as the template, no bare LF added or lost
					if a, b := bytes.Count(got, []byte("\r\n")), bytes.Count(tmpl, []byte("\r\n")); a != b || bytes.Count(got, []byte("\n")) != bytes.Count(tmpl, []byte("\n")) {
						t.Errorf("line ends changed: %d CRLF (template %d), %d LF (template %d)", a, b, bytes.Count(got, []byte("\n")), bytes.Count(tmpl, []byte("\n")))
					}
					hidden := style == "sim-style"
					want := map[string][]string{
						pc + "SetupUILanguage/UILanguage":                  {"en-US"},
						pc + "InputLocale":                                 {"de-DE;0409:00000409"},
						pc + "SystemLocale":                                {"de-DE"},
						pc + "UILanguage":                                  {"en-US"},
						pc + "UserLocale":                                  {"de-CH"},
						pc + "UserData/Organization":                       {j.OrgName},
						pc + "UserData/ProductKey/Key":                     {"ABCDE-FGHIJ-KLMNO-PQRST-UVWXY"},
						pc + "ComputerName":                                {"win-01"},
						pc + "TimeZone":                                    {"W. Europe Standard Time"},
						pc + "Identification/Credentials/Domain":           {"ad.example.com"},
						pc + "Identification/Credentials/Username":         {"joiner"},
						pc + "Identification/Credentials/Password":         {domPW},
						pc + "Identification/JoinDomain":                   {"ad.example.com"},
						pc + "Identification/MachineObjectOU":              {"OU=Servers,DC=ad,DC=example,DC=com"},
						oobe + "AdministratorPassword/Value":               {pw},
						oobe + "LocalAccounts/LocalAccount/Password/Value": {pw},
						pc + "AutoLogon/Password/Value":                    {pw},
					}
					if hidden {
						want["unattend/offlineImage/@source"] = []string{"wim:c:/sources/install.wim#" + j.OrgName}
						want[oobe+"LocalAccounts/LocalAccount/Description"] = []string{j.OrgName}
					} else {
						want[pc+"RegisteredOrganization"] = []string{j.OrgName}
					}
					owner := map[string]string{oobe + "AdministratorPassword/Value": "AdministratorPassword",
						oobe + "LocalAccounts/LocalAccount/Password/Value": "Password", pc + "AutoLogon/Password/Value": "Password"}
					vals := xmlValues(t, got)
					p := filepath.Join(t.TempDir(), "Unattend.xml")
					if err := os.WriteFile(p, got, 0o600); err != nil {
						t.Fatal(err)
					}
					for path, w := range want {
						// encoding/xml: every element at the path (locales
						// stand in two components of a pass, so the first
						// one found carries it)
						gv := vals[path]
						if len(gv) == 0 {
							t.Errorf("encoding/xml finds no %s", path)
							continue
						}
						v := gv[0]
						if o, ok := owner[path]; ok && hidden {
							v = unhide(t, v, o)
						}
						if v != w[0] {
							t.Errorf("encoding/xml reads %s = %q, want %q", path, v, w[0])
						}
						// xmllint: the same by XPath over local names
						var expr strings.Builder
						for _, step := range strings.Split(path, "/") {
							if a, ok := strings.CutPrefix(step, "@"); ok {
								expr.WriteString("/@*[local-name()='" + a + "']")
							} else {
								expr.WriteString("/*[local-name()='" + step + "']")
							}
						}
						x := xpath(t, p, "string(("+expr.String()+")[1])")
						if o, ok := owner[path]; ok && hidden {
							x = unhide(t, x, o)
						}
						if x != w[0] {
							t.Errorf("xmllint reads %s = %q, want %q", path, x, w[0])
						}
					}
					if hidden && bytes.Contains(got, []byte(pw)) {
						t.Errorf("the password stands in plaintext in a file whose PlainText is false")
					}
				})
			}
		}
	}
}

// TestSysprepNewSecretsStayOut: the domain account's password and the
// product key reach the image, but enter the content hash (the image's
// name) only through a slow hash: another password or key gives another
// name, and neither plaintext is in the job the recipe records or in a
// check's messages.
func TestSysprepNewSecretsStayOut(t *testing.T) {
	tmpl, err := os.ReadFile(filepath.Join("testdata", "sysprep", "ovirt-style.xml"))
	if err != nil {
		t.Fatal(err)
	}
	render := func(domPW, key string) *payload.Rendered {
		t.Helper()
		sd := t.TempDir()
		testenv.WriteFiles(t, sd, map[string]string{"admin": "Adm1n-pw\n", "domain": domPW + "\n", "key": key + "\n"})
		j := &job.Job{Version: 1, Format: job.FormatSysprep, Sysprep: string(tmpl),
			Hostname: "win-01", WindowsTimezone: "UTC", AdminPasswordSecret: "admin",
			JoinDomain: "EXAMPLE", DomainAdmin: "joiner", DomainAdminPasswordSecret: "domain",
			MachineObjectOU: "OU=Servers,DC=ad,DC=example,DC=com", ProductKeySecret: "key",
			OrgName: "Example", InputLocale: "de-DE", UILanguage: "en-US", SystemLocale: "de-DE", UserLocale: "de-CH"}
		r, err := payloadtest.Render(j, sd, payload.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(r.Docs.Files[0].Data, []byte(domPW)) || !bytes.Contains(r.Docs.Files[0].Data, []byte(key)) {
			t.Fatalf("the answer file lacks the secrets")
		}
		rj, _ := json.Marshal(r.Job)
		if bytes.Contains(rj, []byte(domPW)) || bytes.Contains(rj, []byte(key)) {
			t.Errorf("the rendered job (what the recipe records) holds a secret: %s", rj)
		}
		return r
	}
	a := render("D0main-pw-1", "AAAAA-BBBBB-CCCCC-DDDDD-EEEEE")
	if b := render("D0main-pw-1", "AAAAA-BBBBB-CCCCC-DDDDD-EEEEE"); b.Docs.ContentHash != a.Docs.ContentHash {
		t.Errorf("the same job gives content hashes %s and %s", a.Docs.ContentHash, b.Docs.ContentHash)
	}
	if b := render("D0main-pw-2", "AAAAA-BBBBB-CCCCC-DDDDD-EEEEE"); b.Docs.ContentHash == a.Docs.ContentHash {
		t.Errorf("another domain password gives the same content hash")
	}
	if b := render("D0main-pw-1", "AAAAA-BBBBB-CCCCC-DDDDD-FFFFF"); b.Docs.ContentHash == a.Docs.ContentHash {
		t.Errorf("another product key gives the same content hash")
	}
	// a product key that is none is refused without quoting it
	sd := t.TempDir()
	os.WriteFile(filepath.Join(sd, "key"), []byte("not-a-key-SECRETX\n"), 0o600)
	doc := []byte(`{"version":1,"format":"sysprep","sysprep":"<unattend xmlns=\"urn:schemas-microsoft-com:unattend\"><![CDATA[$ProductKey$]]></unattend>","product_key_secret":"key"}`)
	_, _, rep := payload.Check(doc, payload.CheckOptions{Secrets: true, SecretsDir: sd})
	if rep.OK() || !strings.Contains(rep.Err().Error(), `product_key_secret: secret "key" is not a Windows product key`) || strings.Contains(rep.Err().Error(), "SECRETX") {
		t.Errorf("report %v", rep.Err())
	}
}
