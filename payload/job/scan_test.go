package job

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// scanSeeds are documents for the scanTree/parseTree comparison: the
// example jobs, the table's bad documents and the corners of JSON syntax.
func scanSeeds(t testing.TB) [][]byte {
	var out [][]byte
	paths, _ := filepath.Glob("../../configs/examples/*.json")
	if len(paths) == 0 {
		t.Fatal("no example jobs found")
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	for _, tc := range badCases() {
		out = append(out, []byte(tc.doc))
	}
	out = append(out, []byte(fullJob()))
	for _, s := range []string{
		`{}`, ` {"a":1} `, "{\"a\":1}\n\t\r ", `{"a":1}x`, `{"a":1}{}`, `{"a":1,}`, `{"a" 1}`, `{"a":}`, `{,}`, `{"a":1 "b":2}`,
		`[1,2]`, `"s"`, `1`, `null`, `{"a":[]}`, `{"a":[1,]}`, `{"a":[,1]}`, `{"a":[1 2]}`,
		`{"a":"\u00e9\ud83d\ude00\ud83d\u0041\ude00x\u0000\/\b\f\n\r\t\"\\"}`, `{"a":"\ud83d"}`, `{"a":"\ud83d\ud83d"}`,
		`{"a":"\x"}`, `{"a":"\'"}`, `{"a":"\u12"}`, `{"a":"\u12g4"}`, "{\"a\":\"tab\there\"}", `{"a":"é"}`,
		`{"a":-0,"b":1.5e+10,"c":-1E-2,"d":0.0,"e":123456789012345678901234567890}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`,
		`{"a":1e}`, `{"a":-}`, `{"a":+1}`, `{"a":tru}`, `{"a":truex}`, `{"a":nul}`, `{"a":false,"b":true,"c":null}`,
		`{"a":1,"a":2}`, `{"a":{"b":1,"b":{"c":1,"c":2}},"a":3}`, `{"l":[{"x":1,"x":2}]}`, `{"k\"ey":1,"k\"ey":2}`,
		`{"a":1`, `{"a":"x`, `{"a":"x\`, "", "  ", "\ufeff{}",
		strings.Repeat(`{"a":`, MaxDepth) + "1" + strings.Repeat("}", MaxDepth),
		strings.Repeat(`{"a":`, MaxDepth-1) + "1" + strings.Repeat("}", MaxDepth-1),
		strings.Repeat(`[`, MaxDepth+1) + strings.Repeat("]", MaxDepth+1),
	} {
		out = append(out, []byte(s))
	}
	return out
}

// checkScan compares scanTree with parseTree on one document: when scanTree
// accepts a document, parseTree must give the same tree and duplicates;
// when parseTree accepts one (without nesting too deep), so must scanTree.
func checkScan(t *testing.T, data []byte) {
	t.Helper()
	if !utf8.Valid(data) {
		return // decode rejects it before either runs
	}
	tree, dups, ok := scanTree(data)
	var r Report
	want, err := parseTree(data, &r)
	switch {
	case ok && err != nil:
		t.Errorf("scanTree accepts %q, parseTree says %v", data, err.Message)
	case ok && !reflect.DeepEqual(tree, want):
		t.Errorf("trees differ for %q:\nscanTree  %#v\nparseTree %#v", data, tree, want)
	case ok && !reflect.DeepEqual(dups, r.Errors):
		t.Errorf("duplicates differ for %q:\nscanTree  %v\nparseTree %v", data, dups, r.Errors)
	case !ok && err == nil:
		t.Errorf("parseTree accepts %q, scanTree does not", data)
	}
}

func TestScanTreeMatchesParseTree(t *testing.T) {
	seeds := scanSeeds(t)
	for _, s := range seeds {
		checkScan(t, s)
	}
	// mutations of the seeds: what a hand-edited job gets wrong
	rng := rand.New(rand.NewSource(14))
	alphabet := []byte(`{}[]:,"\ u0123456789abcdefnrtl.-+eE` + "\n\té")
	for i := 0; i < 5000; i++ {
		d := bytes.Clone(seeds[rng.Intn(len(seeds))])
		for n := rng.Intn(3) + 1; n > 0 && len(d) > 0; n-- {
			at := rng.Intn(len(d))
			c := alphabet[rng.Intn(len(alphabet))]
			switch rng.Intn(3) {
			case 0:
				d[at] = c
			case 1:
				d = append(d[:at], d[at+1:]...)
			default:
				d = append(d[:at], append([]byte{c}, d[at:]...)...)
			}
		}
		checkScan(t, d)
	}
}

func FuzzScanTree(f *testing.F) {
	for _, s := range scanSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(checkScan)
}

// TestDecodeLargeJobKeepsContent decodes a job with large escaped contents
// through the single pass and checks every byte arrives.
func TestDecodeLargeJobKeepsContent(t *testing.T) {
	body := strings.Repeat("line \"quoted\" \\ tab\t é ☃ \U0001F600\n", 800)
	var b strings.Builder
	b.WriteString(`{"version":1,"format":"nocloud","hostname":"h","files":[`)
	for i := 0; i < 20; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"path":"/srv/f` + string(rune('a'+i)) + `","content":`)
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(jsonString(body), "\n", "\\n"), "\t", "\\t"))
		b.WriteString(`}`)
	}
	b.WriteString(`]}`)
	j, err := Decode([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Files) != 20 {
		t.Fatalf("%d files, want 20", len(j.Files))
	}
	for _, f := range j.Files {
		if f.Content != body {
			t.Fatalf("%s: content differs (%d bytes, want %d)", f.Path, len(f.Content), len(body))
		}
	}
}

// jsonString quotes s for JSON, keeping newlines and tabs raw (the caller
// escapes them).
func jsonString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// BenchmarkDecode decodes the benchmark's large job (200 files, 1 MB of
// content; test/bench) and a small one.
func BenchmarkDecode(b *testing.B) {
	line := strings.Repeat("abcdefghij", 9) + "-bench-\n"
	body := strings.Repeat(line, 52)[:4999] + "\n"
	var large strings.Builder
	large.WriteString(`{"version":1,"format":"nocloud","hostname":"bench-01","files":[`)
	for i := 0; i < 200; i++ {
		if i > 0 {
			large.WriteByte(',')
		}
		large.WriteString(`{"path":"/srv/data/file-` + strings.Repeat("0", 3-len(itoa(i))) + itoa(i) + `.txt","content":`)
		large.WriteString(strings.ReplaceAll(jsonString(body), "\n", "\\n") + `}`)
	}
	large.WriteString(`]}`)
	for _, c := range []struct{ name, doc string }{{"large", large.String()}, {"full", fullJob()}} {
		data := []byte(c.doc)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for i := 0; i < b.N; i++ {
				if _, err := Decode(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
