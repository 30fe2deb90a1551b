package spool

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestEnsureDir(t *testing.T) {
	tests := []struct {
		name        string
		nested      bool // under missing parents
		prep        func(t *testing.T, p string)
		wantCreated bool
		wantErr     error
	}{
		{name: "missing", wantCreated: true},
		{name: "missing parents", nested: true, wantCreated: true},
		{name: "existing with another mode", prep: func(t *testing.T, p string) { mustOK(t, os.Mkdir(p, 0o755)) }},
		{name: "symlink to a directory", prep: func(t *testing.T, p string) {
			mustOK(t, os.Symlink(t.TempDir(), p))
		}, wantErr: ErrNotDir},
		{name: "regular file", prep: func(t *testing.T, p string) { mustOK(t, os.WriteFile(p, nil, 0o600)) }, wantErr: ErrNotDir},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "d")
			if tt.nested {
				p = filepath.Join(t.TempDir(), "a", "b", "d")
			}
			if tt.prep != nil {
				tt.prep(t, p)
			}
			created, err := EnsureDir(p, 0o711, -1)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if created != tt.wantCreated {
				t.Errorf("created = %v, want %v", created, tt.wantCreated)
			}
			st, lerr := os.Lstat(p)
			if tt.wantErr != nil {
				if lerr != nil || st.IsDir() {
					t.Errorf("the refused %s was changed: %v %v", p, st, lerr)
				}
				return
			}
			if lerr != nil || !st.IsDir() || st.Mode().Perm() != 0o711 {
				t.Errorf("%s: %v %v, want a 0711 directory", p, st, lerr)
			}
		})
	}
}

// TestHealRecreatesSubdirectories removes the spool's subdirectories and
// checks that Heal brings them back with DirMode and names them.
func TestHealRecreatesSubdirectories(t *testing.T) {
	s, err := Open(t.TempDir())
	mustOK(t, err)
	for _, d := range []string{Incoming, Done} {
		mustOK(t, os.RemoveAll(s.Dir(d)))
	}
	created, err := s.Heal()
	mustOK(t, err)
	if len(created) != 2 || created[0] != Incoming || created[1] != Done {
		t.Errorf("created %v, want [incoming done]", created)
	}
	mustOK(t, os.RemoveAll(s.Dir(Failed)))
	mustOK(t, os.Symlink(t.TempDir(), s.Dir(Failed)))
	if _, err := s.Heal(); !errors.Is(err, ErrNotDir) {
		t.Errorf("Heal with a symlinked failed/: %v, want ErrNotDir", err)
	}
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
