package seal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestLoadOrCreateSealOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "secrets")
	p := filepath.Join(dir, ".recipe.key")
	k, err := LoadOrCreate(p)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", fi.Mode(), err)
	}
	id, blob := k.Seal([]byte("hash"), []byte("ad"))
	id2, blob2 := k.Seal([]byte("hash"), []byte("ad"))
	if id != id2 || !bytes.Equal(blob, blob2) {
		t.Fatal("sealing is not deterministic")
	}
	if bytes.Contains(blob, []byte("hash")) {
		t.Fatal("plaintext in blob")
	}
	k2, err := LoadOrCreate(p) // existing file: same key
	if err != nil || k2.Current() != k.Current() {
		t.Fatalf("reload: %v %v", k2, err)
	}
	pt, err := k2.Open(id, blob, []byte("ad"))
	if err != nil || string(pt) != "hash" {
		t.Fatalf("open: %q %v", pt, err)
	}
	if _, err := k2.Open(id, blob, []byte("other")); err == nil {
		t.Fatal("opened with other associated data")
	}
	blob[len(blob)-1] ^= 1
	if _, err := k2.Open(id, blob, []byte("ad")); err == nil {
		t.Fatal("opened an altered blob")
	}
}

func TestRotation(t *testing.T) {
	p := filepath.Join(t.TempDir(), "k")
	if err := Create(p); err != nil {
		t.Fatal(err)
	}
	old, _ := Load(p)
	oid, oblob := old.Seal([]byte("x"), nil)
	line, _ := NewKeyLine()
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(line)
	f.Close()
	k, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if k.Current() == oid || len(k.IDs()) != 2 {
		t.Fatalf("after rotation current %s ids %v", k.Current(), k.IDs())
	}
	if nid, _ := k.Seal([]byte("x"), nil); nid != k.Current() {
		t.Fatal("new blobs do not use the new key")
	}
	if pt, err := k.Open(oid, oblob, nil); err != nil || string(pt) != "x" {
		t.Fatalf("old blob after rotation: %v", err)
	}
	// a host with only the new key
	q := filepath.Join(t.TempDir(), "k")
	os.WriteFile(q, []byte(line), 0o600)
	nk, _ := Load(q)
	_, err = nk.Open(oid, oblob, nil)
	if !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), q) || !strings.Contains(err.Error(), oid) {
		t.Fatalf("missing key: %v", err)
	}
}

func TestLoadRefuses(t *testing.T) {
	d := t.TempDir()
	line, _ := NewKeyLine()
	cases := map[string]func(p string){
		"missing":  func(p string) {},
		"empty":    func(p string) { os.WriteFile(p, []byte("# none\n"), 0o600) },
		"mode0644": func(p string) { os.WriteFile(p, []byte(line), 0o644); os.Chmod(p, 0o644) },
		"symlink":  func(p string) { os.WriteFile(p+".t", []byte(line), 0o600); os.Symlink(p+".t", p) },
		"garbage":  func(p string) { os.WriteFile(p, []byte("c2VjcmV0\n"), 0o600) },
	}
	for name, mk := range cases {
		p := filepath.Join(d, name)
		mk(p)
		_, err := Load(p)
		if err == nil {
			t.Errorf("%s: loaded", name)
			continue
		}
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error does not name the file: %v", name, err)
		}
		if strings.Contains(err.Error(), "c2VjcmV0") {
			t.Errorf("%s: error quotes the key line", name)
		}
	}
	if _, err := LoadOrCreate(filepath.Join(d, "empty")); err == nil {
		t.Error("LoadOrCreate replaced a key file without keys")
	}
}

// BenchmarkSealOpen seals and opens a 2 KiB job with one key.
func BenchmarkSealOpen(b *testing.B) {
	k, err := Parse("bench", []byte("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n"))
	if err != nil {
		b.Fatal(err)
	}
	pt := bytes.Repeat([]byte("x"), 2048)
	ad := []byte("attributes")
	for b.Loop() {
		id, blob := k.Seal(pt, ad)
		if _, err := k.Open(id, blob, ad); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoad reads a key file with one key, as the hook does per run.
func BenchmarkLoad(b *testing.B) {
	p := filepath.Join(b.TempDir(), "k")
	if err := Create(p); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Load(p); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLoadOrCreateConcurrent: the agent's workers seal their first recipes
// at once, so several goroutines find the key file missing together. Every
// one must get the key the winner wrote (TestCrashSafety in CI once saw a
// loser return "the file does not exist" after the winner had linked it).
func TestLoadOrCreateConcurrent(t *testing.T) {
	for round := 0; round < 200; round++ {
		p := filepath.Join(t.TempDir(), "secrets", ".recipe.key")
		const n = 8
		ids := make([]string, n)
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				k, err := LoadOrCreate(p)
				errs[i] = err
				if err == nil {
					ids[i] = k.Current()
				}
			}(i)
		}
		close(start)
		wg.Wait()
		for i := 0; i < n; i++ {
			if errs[i] != nil {
				t.Fatalf("round %d, goroutine %d: %v", round, i, errs[i])
			}
			if ids[i] != ids[0] {
				t.Fatalf("round %d: goroutines got different keys %s and %s", round, ids[0], ids[i])
			}
		}
	}
}
