package secrets

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "secrets")
	os.Mkdir(dir, 0o700)
	outside := filepath.Join(root, "outside")
	os.WriteFile(outside, []byte("TOP-SECRET-OUTSIDE"), 0o600)
	os.WriteFile(filepath.Join(dir, "pw"), []byte("hunter2\n"), 0o600)
	os.Symlink(outside, filepath.Join(dir, "link"))
	os.Mkdir(filepath.Join(dir, "sub"), 0o700)
	os.WriteFile(filepath.Join(dir, "big"), make([]byte, MaxSecretBytes+1), 0o600)
	d := Dir(dir)

	b, err := d.Read("pw")
	if err != nil || string(b) != "hunter2\n" {
		t.Fatalf("Read(pw) = %q, %v", b, err)
	}
	for _, c := range []struct {
		dir  Dir
		name string
		want error
	}{
		{d, "missing", ErrNotFound},
		{d, "../outside", ErrInvalidName},
		{d, outside, ErrInvalidName},
		{d, "..", ErrInvalidName},
		{d, ".hidden", ErrInvalidName},
		{d, "a/b", ErrInvalidName},
		{d, "", ErrInvalidName},
		{d, "link", ErrNotRegular},
		{d, "sub", ErrNotRegular},
		{d, "big", ErrTooLarge},
		{"", "pw", ErrNoDir},
	} {
		_, err := c.dir.Read(c.name)
		if !errors.Is(err, c.want) {
			t.Errorf("Read(%q) = %v, want %v", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "TOP-SECRET") {
			t.Errorf("error leaks secret content: %v", err)
		}
	}
}
