package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestWriteFileAndAbort(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.json")
	if err := WriteFile(p, []byte("one"), 0o640, -1); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("two"), 0o600, -1); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	st, _ := os.Stat(p)
	if err != nil || string(b) != "two" || st.Mode().Perm() != 0o600 {
		t.Errorf("content %q mode %v err %v", b, st.Mode().Perm(), err)
	}
	// a write into a path whose directory is a file fails, leaving nothing
	if err := WriteFile(filepath.Join(p, "x"), []byte("x"), 0o600, -1); err == nil {
		t.Error("write under a file succeeded")
	}
	// an aborted file leaves nothing; a committed one cannot be aborted
	f, err := Create(dir, ".t-*.tmp")
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("half"))
	f.Abort()
	f.Abort()
	g, err := Create(dir, ".t-*.tmp")
	if err != nil {
		t.Fatal(err)
	}
	g.Write([]byte("whole"))
	if err := g.Commit(filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	g.Abort()
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 2 || names[0] != "a.json" || names[1] != "b" {
		t.Errorf("directory holds %q, want a.json and b only", names)
	}
	// a rename onto a directory fails and removes the temporary file
	h, _ := Create(dir, ".t-*.tmp")
	os.Mkdir(filepath.Join(dir, "d"), 0o700)
	os.WriteFile(filepath.Join(dir, "d", "keep"), nil, 0o600)
	if err := h.Commit(filepath.Join(dir, "d")); err == nil {
		t.Error("commit onto a non-empty directory succeeded")
	}
	if _, err := os.Stat(h.Name()); !os.IsNotExist(err) {
		t.Errorf("temporary file left after a failed commit: %v", err)
	}
}

func TestNothingHalfWritten(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "r.json")
	if err := WriteFile(p, []byte("old"), 0o600, -1); err != nil {
		t.Fatal(err)
	}
	f, err := Create(dir, ".r-*.tmp")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Abort()
	if _, err := f.Write([]byte("new, ")); err != nil {
		t.Fatal(err)
	}
	// written and even closed, the file is not under its name yet
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Fatalf("before Commit the path holds %q, want the old content", b)
	}
	if !strings.HasPrefix(filepath.Base(f.Name()), ".r-") || filepath.Dir(f.Name()) != dir {
		t.Errorf("temporary file %s: want a dot file in %s", f.Name(), dir)
	}
	if err := f.Commit(p); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "new, " {
		t.Fatalf("after Commit the path holds %q", b)
	}
}

func TestWriteFileOwner(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("chown to another user needs root")
	}
	p := filepath.Join(t.TempDir(), "owned")
	if err := WriteFile(p, []byte("x"), 0o640, 65534); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if uid := st.Sys().(*syscall.Stat_t).Uid; uid != 65534 || st.Mode().Perm() != 0o640 {
		t.Errorf("owner %d mode %v, want 65534 and 0640", uid, st.Mode().Perm())
	}
}

func TestSyncDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	if err := SyncDir(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("SyncDir of a missing directory: %v, want ErrNotExist", err)
	}
}
