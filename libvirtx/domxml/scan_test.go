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
