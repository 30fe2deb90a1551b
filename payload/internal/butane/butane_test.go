package butane

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryVersionTranslates: each accepted variant version translates an
// empty config to the Ignition spec the table says it produces, and an
// unknown key in it is a warning (a problem), as with butane --strict.
func TestEveryVersionTranslates(t *testing.T) {
	for variant, versions := range Translators {
		for _, v := range versions {
			src := "variant: " + variant + "\nversion: " + v.Butane + "\n"
			out, spec, problems := Translate([]byte(src))
			if len(problems) > 0 || spec != v.Ignition {
				t.Errorf("%s %s: spec %q, problems %v", variant, v.Butane, spec, problems)
				continue
			}
			var head struct {
				Ignition struct{ Version string }
			}
			if err := json.Unmarshal(out, &head); err != nil || head.Ignition.Version != v.Ignition {
				t.Errorf("%s %s: %s: %v", variant, v.Butane, out, err)
			}
			_, _, problems = Translate([]byte(src + "nonsense: 1\n"))
			if len(problems) != 1 || !problems[0].Warning || problems[0].Path != "$.nonsense" || problems[0].Line != 3 {
				t.Errorf("%s %s: unknown key: %+v", variant, v.Butane, problems)
			}
		}
	}
}

// FuzzTranslate: no input makes Translate panic (Butane's own panics are
// recovered), every problem has a message, and a translated config says
// the spec Translate reports.
func FuzzTranslate(f *testing.F) {
	names, _ := filepath.Glob(filepath.Join("..", "ignition", "testdata", "butane", "*.bu"))
	for _, n := range names {
		if b, err := os.ReadFile(n); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("variant: fcos\nversion: 1.6.0\nstorage:\n  files:\n    - path: /x\n      contents:\n        local: y\n"))
	f.Add([]byte("variant: flatcar\nversion: 1.0.0\nstorage: {filesystems: [{device: /dev/vdb, format: ext4, path: /var}]}\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		out, spec, problems := Translate(src)
		for _, p := range problems {
			if p.Message == "" {
				t.Fatalf("problem without a message: %+v", p)
			}
		}
		if len(problems) == 0 && (spec == "" || !strings.Contains(string(out), `"version":"`+spec+`"`)) {
			t.Fatalf("translated without problems to spec %q: %s", spec, out)
		}
	})
}
