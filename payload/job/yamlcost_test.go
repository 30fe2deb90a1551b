package job

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// cloudInitExamplesDir is where Debian's cloud-init package installs the
// examples of its documentation (read at test time, never copied here).
const cloudInitExamplesDir = "/usr/share/doc/cloud-init/examples"

// realYAMLInputs returns every real cloud-init input this repository
// tests with: the examples shipped with cloud-init and the judge's
// test data, decompressed.
func realYAMLInputs(t testing.TB) map[string]string {
	inputs := map[string]string{}
	for _, dir := range []string{cloudInitExamplesDir, "../../test/judge/testdata"} {
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			text, _, err := Gunzip(b, MaxContentBytes)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			inputs[p] = string(text)
			return nil
		})
		if err != nil {
			t.Fatalf("reading cloud-init inputs in %s (make test installs cloud-init with its examples): %v", dir, err)
		}
	}
	if len(inputs) < 60 {
		t.Fatalf("only %d real cloud-init inputs found; is cloud-init installed with its documentation?", len(inputs))
	}
	return inputs
}

// Every real cloud-init input fits the YAML limits with room to spare,
// and as user-data none is refused for its size.
func TestYAMLLimitsFitRealInputs(t *testing.T) {
	var maxBytes, maxTokens, maxNodes int
	for name, text := range realYAMLInputs(t) {
		if err := checkYAMLSize(text); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		maxBytes, maxTokens = max(maxBytes, len(text)), max(maxTokens, yamlTokens(text))
		if d, _, err := LoadYAMLMapping(text); err == nil && d != nil {
			maxNodes = max(maxNodes, countNodes(d))
		}
		var r Report
		validateUserDataText("user_data", text, &r)
		for _, e := range r.Errors {
			if e.Code == CodeTooLarge {
				t.Errorf("%s refused for its size: %s", name, e)
			}
		}
	}
	t.Logf("largest real input: %d bytes, %d tokens, %d nodes (limits %d, %d, %d)", maxBytes, maxTokens, maxNodes, MaxYAMLBytes, MaxYAMLTokens, MaxYAMLNodes)
	if maxTokens*10 > MaxYAMLTokens || maxNodes*10 > MaxYAMLNodes {
		t.Errorf("the limits leave less than 10× room over real inputs")
	}
}

func countNodes(d *yaml.Node) int {
	n, _ := countYAMLNodes(d)
	return n
}

func gzipText(t testing.TB, s string) []byte {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// bombCloudConfig is 16 MiB of cloud-config: a long runcmd list.
func bombCloudConfig() string {
	var b strings.Builder
	b.WriteString("#cloud-config\nruncmd:\n")
	for b.Len() < 16<<20-16 {
		b.WriteString("- [true, a]\n")
	}
	return b.String()
}

// YAML documents over a limit are refused before they cost memory, naming
// the field and the limit.
func TestYAMLLimitsRefuse(t *testing.T) {
	var lines strings.Builder
	lines.WriteString("#cloud-config\n")
	for i := 0; i < 100_000; i++ {
		fmt.Fprintf(&lines, "%x: v\n", i)
	}
	aliases := "#cloud-config\nx: &a v\ny: [" + strings.TrimSuffix(strings.Repeat("*a,", MaxYAMLAliases+1), ",") + "]\n"
	tests := []struct {
		name, field, doc, msg string
	}{
		{name: "gzip bomb of cloud-config", field: "user_data_base64",
			doc: `"user_data_base64":"` + base64.StdEncoding.EncodeToString(gzipText(t, bombCloudConfig())) + `"`,
			msg: fmt.Sprintf("bytes after gzip decompression) is refused: the YAML document is %d bytes; the limit is %d bytes (MaxYAMLBytes)", len(bombCloudConfig()), MaxYAMLBytes)},
		{name: "vendor-data bomb", field: "vendor_data_base64",
			doc: `"vendor_data_base64":"` + base64.StdEncoding.EncodeToString(gzipText(t, bombCloudConfig())) + `"`,
			msg: "(MaxYAMLBytes)"},
		{name: "flow list of many tokens", field: "user_data",
			doc: `"user_data":"#cloud-config\nx: [` + strings.Repeat("a,", 250_000) + `a]\n"`,
			msg: fmt.Sprintf("the limit is %d (MaxYAMLTokens)", MaxYAMLTokens)},
		{name: "many nodes", field: "user_data", doc: `"user_data":` + jsonText(lines.String()),
			msg: fmt.Sprintf("the limit is %d (MaxYAMLNodes)", MaxYAMLNodes)},
		{name: "many aliases", field: "user_data", doc: `"user_data":` + jsonText(aliases),
			msg: fmt.Sprintf("the limit is %d (MaxYAMLAliases)", MaxYAMLAliases)},
		{name: "archive", field: "user_data",
			doc: `"user_data_base64":"` + base64.StdEncoding.EncodeToString(gzipText(t, "#cloud-config-archive\n"+strings.Repeat("- a\n", 300_000))) + `"`,
			msg: "(MaxYAMLBytes)"},
		{name: "butane", field: "butane",
			doc: `"format":"ignition","butane":"variant: fcos\nversion: 1.5.0\nx: [` + strings.Repeat("a,", 250_000) + `a]\n"`,
			msg: "(MaxYAMLTokens)"},
		{name: "network_config", field: "network_config",
			doc: `"network_config":"version: 2\nx: [` + strings.Repeat("a,", 250_000) + `a]\n"`,
			msg: "(MaxYAMLTokens)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, r := Parse([]byte(v1(tt.doc)))
			for _, e := range r.Errors {
				if e.Code == CodeTooLarge && strings.HasPrefix(e.Field, strings.Split(tt.field, "_base64")[0]) && strings.Contains(e.Message, tt.msg) {
					return
				}
			}
			t.Errorf("no too_large problem for %s saying %q; got %v", tt.field, tt.msg, r.Errors)
		})
	}
}

// jsonText quotes s as a JSON string.
func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// bombJob is the job of issue 44: about 52 KB, whose user_data_base64 is
// gzip of 16 MiB of cloud-config.
func bombJob(t testing.TB) []byte {
	return []byte(v1(`"name":"bomb","user_data_base64":"` + base64.StdEncoding.EncodeToString(gzipText(t, bombCloudConfig())) + `"`))
}

// Reading the bomb allocates a bounded amount (the decompressed text, not
// a parse of it): under 200 MiB in all, where yaml.v3 alone would take over
// a gigabyte. Allocation is counted, not time, so the figure is the same
// on every run.
func TestYAMLBombMemoryBounded(t *testing.T) {
	doc := bombJob(t)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, r := Parse(doc)
	runtime.ReadMemStats(&after)
	if r.OK() {
		t.Fatal("the bomb was accepted")
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("bomb job of %d bytes: %d problems, %d MiB allocated", len(doc), len(r.Errors), alloc>>20)
	if alloc > 200<<20 {
		t.Errorf("reading a %d-byte job allocated %d MiB; the bound is 200 MiB", len(doc), alloc>>20)
	}
}

// BenchmarkParseGzipBomb is the cost of the bomb job (docs/reliability.md).
func BenchmarkParseGzipBomb(b *testing.B) {
	doc := bombJob(b)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		Parse(doc)
	}
}

// BenchmarkParseYAMLWorstAllowed is the cost of the costliest cloud-config
// within the limits: a flow list just under MaxYAMLTokens.
func BenchmarkParseYAMLWorstAllowed(b *testing.B) {
	doc := []byte(v1(`"user_data":"#cloud-config\nx: [` + strings.Repeat("a,", MaxYAMLTokens/2-10) + `a]\n"`))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		Parse(doc)
	}
}
