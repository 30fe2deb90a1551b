package sysprep

import (
	"encoding/xml"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

const tmpl = `<?xml version="1.0" encoding="utf-8"?>
<unattend xmlns="urn:schemas-microsoft-com:unattend">
  <v a="{{hostname}}">{{ hostname }}</v>
</unattend>
`

// TestFillEscapes fills a value with every character XML treats
// specially into an attribute and element text; xmllint, an independent
// reader, reads the value back from both.
func TestFillEscapes(t *testing.T) {
	if _, err := exec.LookPath("xmllint"); err != nil {
		t.Fatalf("xmllint is missing (install Debian's libxml2-utils; test/deps.sh does): %v", err)
	}
	for _, v := range []string{`a&b<c>d"e'f`, `]]>`, `&amp;`, "ünï €", "{{hostname}}", "tab\there"} {
		out, err := Fill(tmpl, map[string]string{Hostname: v})
		if err != nil {
			t.Fatalf("Fill(%q): %v", v, err)
		}
		p := filepath.Join(t.TempDir(), "u.xml")
		if err := os.WriteFile(p, []byte(out), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, expr := range []string{"string(/*/*/@a)", "string(/*/*)"} {
			got, err := exec.Command("xmllint", "--nonet", "--xpath", expr, p).Output()
			if err != nil {
				t.Fatalf("xmllint %s on %s: %v", expr, out, err)
			}
			if s := strings.TrimSuffix(string(got), "\n"); s != v {
				t.Errorf("%s reads back %q, want %q", expr, s, v)
			}
		}
	}
}

func TestFillRefusals(t *testing.T) {
	var ue *UnknownPlaceholderError
	if _, err := Fill(strings.Replace(tmpl, "{{hostname}}", "{{ComputerName}}", 1), map[string]string{Hostname: "x"}); !errors.As(err, &ue) || ue.Name != "ComputerName" {
		t.Errorf("unknown placeholder: %v", err)
	}
	var me *MissingValueError
	if _, err := Fill(tmpl, nil); !errors.As(err, &me) || me.Name != Hostname {
		t.Errorf("missing value: %v", err)
	}
	// a placeholder inside a tag name cannot be filled into well-formed XML
	var se *SyntaxError
	if _, err := Fill("<unattend xmlns=\"urn:schemas-microsoft-com:unattend\"><{{hostname}}/></unattend>", map[string]string{Hostname: "a b"}); !errors.As(err, &se) {
		t.Errorf("a placeholder in a tag name: %v", err)
	}
	if used, err := Placeholders("{{timezone}} {{ hostname }} {{timezone}}"); err != nil || strings.Join(used, ",") != "timezone,hostname" {
		t.Errorf("Placeholders = %v %v", used, err)
	}
}

func TestCheck(t *testing.T) {
	good := []string{
		tmpl,
		`<u:unattend xmlns:u="urn:schemas-microsoft-com:unattend"><u:settings/></u:unattend>`,
		"<!-- c --><unattend xmlns='urn:schemas-microsoft-com:unattend'/>\n<!-- after -->",
	}
	for _, s := range good {
		if err := Check(s); err != nil {
			t.Errorf("Check(%q): %v", s, err)
		}
	}
	bad := map[string]string{
		"":                          "no root element",
		"<unattend xmlns='urn:x'/>": "not an unattend answer file",
		"<u:unattend xmlns:u='urn:schemas-microsoft-com:unattend' xmlns='urn:schemas-microsoft-com:unattend'></unattend>": "not well-formed",
		"<unattend xmlns='urn:schemas-microsoft-com:unattend'><a></b></unattend>":                                         "not well-formed",
		"<unattend xmlns='urn:schemas-microsoft-com:unattend'/>trailing":                                                  "text outside the root element",
		"<unattend xmlns='urn:schemas-microsoft-com:unattend'>\xff</unattend>":                                            "not valid UTF-8",
	}
	for s, want := range bad {
		if err := Check(s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%q) = %v, want %q", s, err, want)
		}
	}
}

// FuzzFill: any value with characters XML can carry fills into an
// attribute, element text and a CDATA section and decodes back unchanged,
// and into a <Value> under <PlainText>false</PlainText> as its hidden
// form.
func FuzzFill(f *testing.F) {
	for _, s := range []string{"win-01", `a&b<c>"'`, "]]>", "\t", "€"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if v == "" || !utf8.ValidString(v) {
			return
		}
		for _, r := range v {
			if r < 0x20 && r != '\t' || r == 0xfffe || r == 0xffff || r >= 0xd800 && r < 0xe000 {
				return // XML cannot carry it (line ends are normalised)
			}
		}
		out, err := Fill(strings.Replace(tmpl, "</unattend>", "<c><![CDATA[{{hostname}}]]></c><P><Value>{{hostname}}</Value><PlainText>false</PlainText></P></unattend>", 1), map[string]string{Hostname: v})
		if err != nil {
			t.Fatalf("Fill(%q): %v", v, err)
		}
		var doc struct {
			V struct {
				A    string `xml:"a,attr"`
				Text string `xml:",chardata"`
			} `xml:"v"`
			C string `xml:"c"`
			P struct {
				Value string `xml:"Value"`
			} `xml:"P"`
		}
		if err := xml.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("decoding %q: %v", out, err)
		}
		if doc.V.A != v || doc.V.Text != v || doc.C != v || doc.P.Value != HiddenPassword(v, "P") {
			t.Fatalf("value %q reads back as attribute %q, text %q, CDATA %q, hidden %q", v, doc.V.A, doc.V.Text, doc.C, doc.P.Value)
		}
	})
}

// TestFillReaderContexts: a value is written as the reader of the file
// reads it — raw in CDATA (a "]]>" split across sections), escaped in
// text and attributes, hidden as Windows System Image Manager hides it
// under <PlainText>false</PlainText> — and read back by encoding/xml as
// the value itself; the CRLF line ends stay. The old Fill escaped the
// value in CDATA too (Windows read "&amp;…") and wrote the plaintext
// under PlainText false.
func TestFillReaderContexts(t *testing.T) {
	const doc = "<unattend xmlns=\"urn:schemas-microsoft-com:unattend\">\r\n" +
		"<C><![CDATA[{{admin_password}}]]></C>\r\n" +
		"<T>{{admin_password}}</T>\r\n" +
		"<A v=\"{{admin_password}}\"/>\r\n" +
		"<AdministratorPassword><Value>{{admin_password}}</Value><PlainText>false</PlainText></AdministratorPassword>\r\n" +
		"<Password><PlainText> False </PlainText><Value><![CDATA[{{admin_password}}]]></Value></Password>\r\n" +
		"<Password><Value>{{admin_password}}</Value><PlainText>true</PlainText></Password>\r\n" +
		"</unattend>\r\n"
	for _, pw := range []string{`Adm1n&<"Pa'ss>!`, `x]]>y`, `]]>]]>`, "ünï€"} {
		out, err := Fill(doc, map[string]string{AdminPassword: pw})
		if err != nil {
			t.Fatalf("Fill(%q): %v", pw, err)
		}
		if strings.Count(out, "\r\n") != strings.Count(doc, "\r\n") || strings.Count(out, "\n") != strings.Count(doc, "\n") {
			t.Errorf("line ends changed: %q", out)
		}
		var u struct {
			C string `xml:"C"`
			T string `xml:"T"`
			A struct {
				V string `xml:"v,attr"`
			} `xml:"A"`
			Admin struct {
				Value string `xml:"Value"`
			} `xml:"AdministratorPassword"`
			Pw []struct {
				Value string `xml:"Value"`
			} `xml:"Password"`
		}
		if err := xml.Unmarshal([]byte(out), &u); err != nil {
			t.Fatalf("reading %q: %v", out, err)
		}
		hidden := func(v, el string) string { return HiddenPassword(v, el) }
		for _, c := range []struct{ where, got, want string }{
			{"CDATA", u.C, pw}, {"text", u.T, pw}, {"attribute", u.A.V, pw},
			{"AdministratorPassword (PlainText false)", u.Admin.Value, hidden(pw, "AdministratorPassword")},
			{"Password (PlainText False, CDATA)", u.Pw[0].Value, hidden(pw, "Password")},
			{"Password (PlainText true)", u.Pw[1].Value, pw},
		} {
			if c.got != c.want {
				t.Errorf("password %q in %s reads back %q, want %q", pw, c.where, c.got, c.want)
			}
		}
	}
	// the hiding applied to "P@ssw0rd" as the
	// administrator password (UTF-16LE of "P@ssw0rdAdministratorPassword")
	if got := HiddenPassword("P@ssw0rd", "AdministratorPassword"); got != "UABAAHMAcwB3ADAAcgBkAEEAZABtAGkAbgBpAHMAdAByAGEAdABvAHIAUABhAHMAcwB3AG8AcgBkAA==" {
		t.Errorf("HiddenPassword = %s", got)
	}
	// a hidden value must be the placeholder alone; a placeholder in a
	// processing instruction is not filled
	var pe *PlacementError
	for _, bad := range []string{
		`<unattend xmlns="urn:schemas-microsoft-com:unattend"><P><Value>x{{admin_password}}</Value><PlainText>false</PlainText></P></unattend>`,
		`<?pi {{admin_password}}?><unattend xmlns="urn:schemas-microsoft-com:unattend"/>`,
		`<unattend xmlns="urn:schemas-microsoft-com:unattend"><!-- {{admin_password}} --></unattend>`,
	} {
		if _, err := Fill(bad, map[string]string{AdminPassword: "a--b"}); !errors.As(err, &pe) || strings.Contains(err.Error(), "a--b") {
			t.Errorf("Fill(%q) = %v, want a PlacementError without the value", bad, err)
		}
	}
	// oVirt's names are placeholders as they are; other $...$ are text
	out, err := Fill(`<unattend xmlns="urn:schemas-microsoft-com:unattend"><a>$ComputerName$</a><b>$OEM$ $Foo$</b></unattend>`, map[string]string{Hostname: "w1"})
	if err != nil || !strings.Contains(out, "<a>w1</a><b>$OEM$ $Foo$</b>") {
		t.Errorf("oVirt names: %q, %v", out, err)
	}
}
