package domxml

import (
	"strings"
	"testing"
)

const testNS = "https://example.org/ns/1"

// removeTestNS removes the metadata of testNS.
func removeTestNS(e *Edit) (bool, error) { return e.RemoveMetadata(testNS) }

func TestSetRemoveMetadata(t *testing.T) {
	base := "<domain type='kvm'>\n  <name>a</name>\n  <uuid>00000000-0000-0000-0000-000000000001</uuid>\n  <memory>1</memory>\n  <devices>\n    <disk type='file'/>\n  </devices>\n</domain>"
	other := "<domain type='kvm'>\n  <name>a</name>\n  <metadata>\n    <o:x xmlns:o='https://other/'>keep</o:x>\n  </metadata>\n  <devices/>\n</domain>"
	el := `<v:recipe xmlns:v="` + testNS + `" version="1"><v:job>{"a":1}</v:job></v:recipe>`
	el2 := `<w:recipe xmlns:w="` + testNS + `" version="2"/>`
	cases := []struct {
		name, in string
		wantIn   []string // substrings after Set
	}{
		{"no metadata yet", base, []string{"<metadata>", "version='1'", "<memory>1</memory>", "<disk type='file'/>"}},
		{"other namespace kept", other, []string{"<o:x xmlns:o='https://other/'>keep</o:x>", "version='1'"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x, err := SetMetadata(c.in, testNS, el)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.wantIn {
				if !strings.Contains(x, w) {
					t.Errorf("missing %q in\n%s", w, x)
				}
			}
			if i, j := strings.Index(x, "<uuid>"), strings.Index(x, "<metadata>"); strings.Contains(c.in, "<uuid>") && j < i {
				t.Errorf("metadata before uuid:\n%s", x)
			}
			// Setting again replaces, never duplicates.
			x2, err := SetMetadata(x, testNS, el2)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Count(x2, testNS) != 1 || !strings.Contains(x2, "version='2'") {
				t.Errorf("second set did not replace:\n%s", x2)
			}
			// Removing restores the original document byte for byte.
			back, removed, err := oneEdit(x2, removeTestNS)
			if err != nil || !removed {
				t.Fatalf("RemoveMetadata: %v %v", removed, err)
			}
			if back != c.in {
				t.Errorf("after set+remove:\n%s\nwant\n%s", back, c.in)
			}
			same, removed, err := oneEdit(back, removeTestNS)
			if err != nil || removed || same != back {
				t.Errorf("second remove: removed=%v err=%v", removed, err)
			}
		})
	}
	if _, err := SetMetadata(base, testNS, `<x:r xmlns:x="https://wrong/"/>`); err == nil {
		t.Error("element in another namespace accepted")
	}
	if _, err := SetMetadata(base, testNS, `<unclosed`); err == nil {
		t.Error("malformed element accepted")
	}
	if _, err := SetMetadata("<notdomain/>", testNS, el); err == nil {
		t.Error("non-domain accepted")
	}
}
