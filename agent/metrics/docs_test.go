package metrics

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// notMetrics are vmpayload_ words in the docs that are not metric names.
var notMetrics = []string{
	"vmpayload_",             // package file names (vmpayload_<version>_amd64.deb) and "vmpayload_* names"
	"vmpayload_guest_",       // "vmpayload_guest_* metrics"
	"vmpayload_guest_report", // the guest report's JSON key
}

// TestDocs: docs/metrics.md lists exactly the metrics of Defs with their
// type and labels, and every vmpayload_ name in README.md and docs/*.md is
// a metric (or a histogram's series) with the labels and values it quotes.
func TestDocs(t *testing.T) {
	defs := map[string]Def{}
	for _, d := range Defs {
		defs[Prefix+d.Name] = d
	}

	// The table of docs/metrics.md.
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `(vmpayload_[a-z0-9_]+)` \\| ([a-z]+) \\| ([^|]*)\\|")
	listed := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name, typ, labels := m[1], m[2], strings.TrimSpace(m[3])
		listed[name] = true
		d, ok := defs[name]
		if !ok {
			t.Errorf("docs/metrics.md lists %s, which the agent does not expose", name)
			continue
		}
		if typ != string(d.Type) {
			t.Errorf("docs/metrics.md: %s is a %s, not a %s", name, d.Type, typ)
		}
		want := ""
		if len(d.Labels) > 0 {
			want = "`" + strings.Join(d.Labels, "`, `") + "`"
		}
		if len(d.Values) > 0 {
			want += ": `" + strings.Join(d.Values, "`, `") + "`"
		}
		if labels != want {
			t.Errorf("docs/metrics.md: %s labels %q, want %q", name, labels, want)
		}
	}
	for name := range defs {
		if !listed[name] {
			t.Errorf("%s is not documented in docs/metrics.md", name)
		}
	}

	// Every name in the docs, with any labels it quotes.
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join("..", "..", "README.md"))
	word := regexp.MustCompile(`vmpayload_[a-z0-9_]*(\{[a-z_]+="[^"]*"\})?`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range word.FindAllString(string(b), -1) {
			name, labels, _ := strings.Cut(w, "{")
			if slices.Contains(notMetrics, name) {
				continue
			}
			d, ok := defs[name]
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, cut := strings.CutSuffix(name, suffix); !ok && cut && defs[base].Type == Histogram {
					d, ok = defs[base], true
				}
			}
			if !ok {
				t.Errorf("%s names %s, which the agent does not expose", filepath.Base(f), name)
				continue
			}
			if labels == "" {
				continue
			}
			label, values, _ := strings.Cut(strings.TrimSuffix(labels, `"}`), `="`)
			if !slices.Contains(d.Labels, label) {
				t.Errorf("%s: %s has no label %q (labels %v)", filepath.Base(f), name, label, d.Labels)
			}
			for _, v := range strings.Split(values, "|") {
				if len(d.Values) > 0 && !slices.Contains(d.Values, v) {
					t.Errorf("%s: %s{%s=%q}: not one of %v", filepath.Base(f), name, label, v, d.Values)
				}
			}
		}
	}
}
