// Package golden compares test output with golden files in testdata: one
// place for the "-update rewrites, otherwise the bytes must be equal" rule
// of the project's golden tests.
package golden

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Compare fails t unless got equals the file at path byte for byte; with
// update it first writes got there (creating its directory).
func Compare(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the golden file (run with -update to create it): %v", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("output differs from %s (run with -update to accept it):\n%s", path, got)
	}
}
