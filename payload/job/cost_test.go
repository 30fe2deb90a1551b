package job

import (
	"fmt"
	"strings"
	"testing"
)

// maxProblems is MaxProblems, written out so that the test also runs (and
// fails) against code without it.
const maxProblems = 100

// Duplicate keys are reported with the line and column of the repeated
// key, in document order of discovery, however they nest and whatever
// characters come before them.
func TestDuplicateKeyPositions(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string // "field|line L, column C" in report order
	}{
		{name: "one line", doc: `{"version":1,"hostname":"a","hostname":"b"}`,
			want: []string{"hostname|line 1, column 29"}},
		{name: "later lines", doc: "{\"version\":1,\n\"meta_data\":{\"a\":1,\n  \"a\":2,\n\"b\":3, \"a\":4}}",
			want: []string{"meta_data.a|line 3, column 3", "meta_data.a|line 4, column 8"}},
		{name: "columns count characters", doc: "{\"version\":1,\"meta_data\":{\"é\":\"ü\",\"é\":1}}",
			want: []string{"meta_data.é|line 1, column 35"}},
		// The inner duplicate is found first (while reading the value of
		// the outer one), though it comes later in the document.
		{name: "nested inside a repeated key", doc: "{\"version\":1,\"meta_data\":{\"a\":1,\n\"a\":{\"b\":1,\n\"b\":2}}}",
			want: []string{"meta_data.a.b|line 3, column 1", "meta_data.a|line 2, column 1"}},
		{name: "escaped quote in key", doc: `{"version":1,"meta_data":{"x\"":1,"x\"":2}}`,
			want: []string{`meta_data.x"|line 1, column 35`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, r := Parse([]byte(tt.doc))
			var got []string
			for _, e := range r.Errors {
				if e.Code != CodeDuplicateKey {
					continue
				}
				_, pos, ok := strings.Cut(e.Message, "(again at ")
				if !ok {
					t.Fatalf("message without a position: %q", e.Message)
				}
				got = append(got, e.Field+"|"+strings.TrimSuffix(pos, ")"))
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("duplicates = %q, want %q", got, tt.want)
			}
		})
	}
}

// dupJob returns a job of about size bytes whose meta_data repeats "a":0.
func dupJob(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"version":1,"name":"dup","meta_data":{"a":0`)
	for b.Len() < size-8 {
		b.WriteString(`,"a":0`)
	}
	b.WriteString("}}")
	return []byte(b.String())
}

// A document with thousands of problems is answered with maxProblems of
// them, the last saying that there were more and how many.
func TestParseStopsAfterMaxProblems(t *testing.T) {
	tests := []struct {
		name string
		doc  []byte
		more int // at least this many said to be left out
	}{
		{name: "duplicate keys", doc: dupJob(60000), more: strings.Count(string(dupJob(60000)), `"a":0`) - 1 - maxProblems},
		{name: "unknown keys", doc: []byte(`{"version":1,` + unknownKeys(500) + `}`)},
		{name: "invalid list entries", doc: []byte(`{"version":1,"name":"v","users":[` + strings.TrimSuffix(strings.Repeat(`{"name":"0bad"},`, 300), ",") + `]}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, r := Parse(tt.doc)
			if len(r.Errors) != maxProblems {
				t.Fatalf("%d problems reported, want %d", len(r.Errors), maxProblems)
			}
			last := r.Errors[len(r.Errors)-1].Message
			want := fmt.Sprintf(" more; stopped after %d problems)", maxProblems)
			var more int
			_, tail, _ := strings.Cut(last, "(… and ")
			if _, err := fmt.Sscanf(tail, "%d", &more); err != nil || more < max(tt.more, 1) || !strings.HasSuffix(last, want) {
				t.Errorf("last message %q does not end with \"(… and N%s\", N ≥ %d", last, want, max(tt.more, 1))
			}
			for _, e := range r.Errors[:len(r.Errors)-1] {
				if strings.Contains(e.Message, "stopped after") {
					t.Errorf("not the last message but says it stopped: %q", e.Message)
				}
			}
		})
	}
	// Exactly maxProblems problems: all reported, none said to be missing.
	_, r := Parse([]byte(`{"version":1,` + unknownKeys(maxProblems-1) + `}`))
	if len(r.Errors) < maxProblems-1 {
		t.Fatalf("%d problems, want at least %d", len(r.Errors), maxProblems-1)
	}
	for _, e := range r.Errors {
		if strings.Contains(e.Message, "stopped after") {
			t.Errorf("a report of %d problems says it stopped: %q", len(r.Errors), e.Message)
		}
	}
}

func unknownKeys(n int) string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf(`"unknown%d":0`, i)
	}
	return strings.Join(keys, ",")
}

// BenchmarkParseDuplicateKeys1MB is the cost of a 1 MB job of repeated
// keys (docs/reliability.md): one pass, however many duplicates.
func BenchmarkParseDuplicateKeys1MB(b *testing.B) {
	doc := dupJob(MaxJobBytes)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		Parse(doc)
	}
}

// BenchmarkParseWorstJSON1MB is the costliest 1 MB job for the JSON reader:
// meta_data holding a list of half a million numbers.
func BenchmarkParseWorstJSON1MB(b *testing.B) {
	doc := []byte(`{"version":1,"name":"w","meta_data":{"a":[0` + strings.Repeat(",0", MaxJobBytes/2-40) + `]}}`)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		Parse(doc)
	}
}
