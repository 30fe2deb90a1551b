package job

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
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
