package domxml

import (
	"os"
	"testing"
)

// BenchmarkReadIdentity reads the identity of a job's domain_xml (the
// live sample, 2.9 KB), as job validation does.
func BenchmarkReadIdentity(b *testing.B) {
	x, err := os.ReadFile("testdata/live-qemu.xml")
	if err != nil {
		b.Fatal(err)
	}
	s := string(x)
	b.ReportAllocs()
	for b.Loop() {
		if id, err := ReadIdentity(s); err != nil || id.Name == "" {
			b.Fatal(id, err)
		}
	}
}
