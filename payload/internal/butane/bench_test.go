package butane

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkTranslate translates the Butane configs of the ignition
// package's tests (users, files, units), one per iteration.
func BenchmarkTranslate(b *testing.B) {
	names, _ := filepath.Glob(filepath.Join("..", "ignition", "testdata", "butane", "*.bu"))
	var srcs [][]byte
	for _, n := range names {
		src, err := os.ReadFile(n)
		if err != nil {
			b.Fatal(err)
		}
		srcs = append(srcs, src)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, _, p := Translate(srcs[i%len(srcs)]); len(p) > 0 {
			b.Fatal(p)
		}
	}
}
