package domxml

import (
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

// tokenWellFormed is the check scan replaced: the decoder's Token, which
// matches end tags itself (and translates namespaces).
func tokenWellFormed(s string) bool {
	dec := xml.NewDecoder(strings.NewReader(s))
	dec.Strict = true
	depth := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return depth == 0
		}
		if err != nil {
			return false
		}
		switch tok.(type) {
		case xml.StartElement:
			depth++
		case xml.EndElement:
			depth--
		}
	}
}

func TestScanMatchesTokenCheck(t *testing.T) {
	cases := []struct {
		name, xml string
		ok        bool
	}{
		{"simple", "<domain><name>x</name></domain>", true},
		{"self-closed", "<domain><devices/></domain>", true},
		{"prefixed", `<domain><metadata><v:r xmlns:v="urn:x"><v:a/></v:r></metadata></domain>`, true},
		{"undeclared prefix", `<domain><v:r></v:r></domain>`, true},
		{"mismatch", "<domain><name>x</domain>", false},
		{"prefix mismatch", `<domain><a:x xmlns:a="u" xmlns:b="u"></b:x></domain>`, false},
		{"stray end", "<domain></domain></domain>", false},
		{"unclosed", "<domain><name>", false},
		{"truncated tag", "<domain", false},
		{"comment and pi", "<?xml version='1.0'?><!-- c --><domain/>", true},
		{"cdata", "<domain><description><![CDATA[<x>]]></description></domain>", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := scan(tc.xml)
			if (err == nil) != tc.ok {
				t.Fatalf("scan(%q) = %v, want ok %v", tc.xml, err, tc.ok)
			}
			if ref := tokenWellFormed(tc.xml); ref != tc.ok {
				t.Fatalf("the decoder's Token says ok %v for %q; the table is wrong", ref, tc.xml)
			}
		})
	}
}

// TestScanRefusesDuplicateAttributes: an attribute given twice is not
// well-formed XML (libvirt's libxml2 refuses it); the scan refuses it by
// name and a document without one passes (a fuzz crasher of
// FuzzSetPayloadDrive: <address type='drive' … type='1 '/>).
func TestScanRefusesDuplicateAttributes(t *testing.T) {
	for _, tc := range []struct {
		doc, want string
	}{
		{`<domain><devices><disk><address type='drive' bus='0' type='1'/></disk></devices></domain>`, "attribute type given twice in <address>"},
		{`<domain a='1' a='2'/>`, "attribute a given twice in <domain>"},
		{`<domain><metadata><v:r xmlns:v='urn:x' v:a='1' v:a='2'/></metadata></domain>`, "attribute v:a given twice"},
		{`<domain><devices><disk><address type='drive' bus='0' target='1'/></disk></devices></domain>`, ""},
		{`<domain><metadata><v:r xmlns:v='urn:x' v:a='1' a='2'/></metadata></domain>`, ""},
	} {
		_, _, err := scan(tc.doc)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("scan(%s) = %v, want %q", tc.doc, err, tc.want)
		}
	}
}
