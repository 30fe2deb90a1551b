package job

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestDecodeLargeJobKeepsContent decodes a job with large escaped contents
// and checks every byte arrives.
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
	j, rep := Parse([]byte(b.String()))
	if err := rep.Err(); err != nil {
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

// BenchmarkDecode decodes and validates the benchmark's large job (200
// files, 1 MB of content; test/bench), the example job with every section
// (02-full-nocloud) and a job with every field. Each document also runs
// through json.Unmarshal into an any ("peer"), a yardstick for comparing
// runs on a busy machine.
func BenchmarkDecode(b *testing.B) {
	line := strings.Repeat("abcdefghij", 9) + "-bench-\n"
	body := strings.Repeat(line, 52)[:4999] + "\n"
	var large strings.Builder
	large.WriteString(`{"version":1,"format":"nocloud","hostname":"bench-01","files":[`)
	for i := 0; i < 200; i++ {
		if i > 0 {
			large.WriteByte(',')
		}
		large.WriteString(`{"path":"/srv/data/file-` + strings.Repeat("0", 3-len(strconv.Itoa(i))) + strconv.Itoa(i) + `.txt","content":`)
		large.WriteString(strings.ReplaceAll(jsonString(body), "\n", "\\n") + `}`)
	}
	large.WriteString(`]}`)
	example, err := os.ReadFile("../../configs/examples/02-full-nocloud.json")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, doc string }{{"large", large.String()}, {"example", string(example)}, {"full", fullJob()}} {
		data := []byte(c.doc)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, r := Parse(data); r.Err() != nil {
					b.Fatal(r.Err())
				}
			}
		})
		b.Run(c.name+"/peer", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				var v any
				if err := json.Unmarshal(data, &v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
