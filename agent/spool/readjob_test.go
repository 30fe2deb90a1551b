package spool

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/vmpayload/vmpayload/payload/job"
)

// TestReadJobFile: a job file is read whole whatever its size, into a
// buffer sized from the stat (no slack to keep while it is queued), and a
// file over the limit is cut at one byte past it (the parser refuses it).
func TestReadJobFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
		want int // bytes read
	}{
		{"empty", 0, 0},
		{"one byte", 1, 1},
		{"typical", 1500, 1500},
		{"at the limit", job.MaxJobBytes, job.MaxJobBytes},
		{"over the limit", job.MaxJobBytes + 4096, job.MaxJobBytes + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := bytes.Repeat([]byte("0123456789abcdef"), tc.size/16+1)[:tc.size]
			p := filepath.Join(t.TempDir(), "j.json")
			if err := os.WriteFile(p, data, 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := readJobFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data[:tc.want]) {
				t.Errorf("read %d bytes, want the first %d of the file", len(got), tc.want)
			}
			if cap(got) > tc.want+1 {
				t.Errorf("buffer capacity %d for %d bytes: slack kept with the queued job", cap(got), tc.want)
			}
		})
	}
}
