package image

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

// TestVFATReadBackEverySize writes vfat images whose user-data has every
// size around the first cluster boundaries and reads each back through the
// verifying Write and ReadFile. go-diskfs's FAT12 reader, resumed in the
// middle of a cluster, returns bytes past a file's end; reading in chunks
// made verification reject good images (found by the agent e2e tests).
func TestVFATReadBackEverySize(t *testing.T) {
	dir := t.TempDir()
	for size := 1; size <= 5000; size += 7 {
		data := bytes.Repeat([]byte{'x'}, size)
		spec := Spec{Media: MediaVFAT, Label: "cidata", Entries: []Entry{
			{Path: "meta-data", Data: []byte("instance-id: iid-1\n")},
			{Path: "user-data", Data: data},
		}}
		out := filepath.Join(dir, fmt.Sprintf("%d.img", size))
		if _, err := Write(context.Background(), spec, out, Options{GID: -1, NoSync: true}); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		got, err := ReadFile(out, "user-data")
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("size %d: read %d bytes back", size, len(got))
		}
	}
}
