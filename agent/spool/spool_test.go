package spool

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/internal/atomicfile"
	"github.com/vmpayload/vmpayload/payload/job"
)

func TestIsJobNameAndID(t *testing.T) {
	for _, c := range []struct {
		name string
		job  bool
		id   string
	}{
		{"web-01.json", true, "web-01"},
		{".web-01.json", false, ""},
		{"web-01.json.tmp", false, ""},
		{"x.tmp", false, ""},
		{".json", false, ""},
		{"a b$c.json", true, "a_b_c"},
		{"-lead.json", true, "job-lead"},
	} {
		if got := IsJobName(c.name); got != c.job {
			t.Errorf("IsJobName(%q) = %v", c.name, got)
		}
		if c.job {
			if got := IDFromName(c.name); got != c.id {
				t.Errorf("IDFromName(%q) = %q, want %q", c.name, got, c.id)
			}
		}
	}
}

func open(t *testing.T) *Spool {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "spool"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{Incoming, Processing, Done, Failed} {
		st, err := os.Stat(s.Dir(d))
		if err != nil || st.Mode().Perm() != DirMode {
			t.Fatalf("%s: %v %v", d, st.Mode(), err)
		}
	}
	return s
}

func TestPutClaimComplete(t *testing.T) {
	s := open(t)
	if err := s.Put("j1", []byte(`{"version":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Put("j1", []byte(`{}`)); !errors.Is(err, ErrExists) {
		t.Fatalf("second Put of a queued id: %v", err)
	}
	names, _ := s.Pending()
	if len(names) != 1 || names[0] != "j1.json" {
		t.Fatalf("pending %v", names)
	}
	c, err := s.Claim("j1.json")
	if err != nil || string(c.Data) != `{"version":1}` || c.ReadErr != nil || c.Token == "" {
		t.Fatalf("claim: %+v %v", c, err)
	}
	if _, err := s.Claim("j1.json"); err == nil {
		t.Fatal("claimed twice")
	}
	// crash before completion: the job is interrupted, not finished
	if _, done := s.Finished(c, "j1"); done {
		t.Fatal("finished before a result was written")
	}
	now := time.Now()
	r := result.Result{ID: "j1", State: result.StateFailed, ReceivedAt: now}
	r.Fail(result.CodeLibvirt, "boom", "")
	if err := s.Complete(c, r); err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(s.Dir(Failed), "j1.job.json")
	if st, err := os.Stat(kept); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("failed job not kept 0600: %v %v", st, err)
	}
	if got, ok := s.Lookup("j1"); !ok || got.State != result.StateFailed || got.Claim != c.Token {
		t.Fatalf("lookup %+v %v", got, ok)
	}
	// fixed and dropped again: the new outcome replaces the failed one
	if err := s.Put("j1", []byte(`{"version":1,"fixed":1}`)); err != nil {
		t.Fatal(err)
	}
	c2, err := s.Claim("j1.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, done := s.Finished(c2, "j1"); done {
		t.Fatal("the earlier run's result was taken for the new claim's")
	}
	if err := s.Complete(c2, result.Result{ID: "j1", State: result.StateDone}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.ResultPath("j1", result.StateFailed)); !os.IsNotExist(err) {
		t.Errorf("stale failed result kept next to the done one")
	}
	if ents, _ := os.ReadDir(s.Dir(Processing)); len(ents) != 0 {
		t.Errorf("processing not empty: %v", ents)
	}
}

func TestRecoveryAfterCrashBetweenResultAndRetire(t *testing.T) {
	s := open(t)
	if err := s.Put("j2", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	c, _ := s.Claim("j2.json")
	// simulate: result written, process killed before the job left processing/
	r := result.Result{ID: "j2", State: result.StateDone, Claim: c.Token}
	if err := atomicfile.WriteFile(s.ResultPath("j2", result.StateDone), mustJSON(t, r), 0o600, -1); err != nil {
		t.Fatal(err)
	}
	names, _ := s.Interrupted()
	if len(names) != 1 {
		t.Fatalf("interrupted %v", names)
	}
	c2, err := s.Reclaim(names[0])
	if err != nil {
		t.Fatal(err)
	}
	if c2.Token != c.Token {
		t.Fatalf("token changed across reopen: %q vs %q", c2.Token, c.Token)
	}
	got, done := s.Finished(c2, "j2")
	if !done {
		t.Fatal("the written result was not recognised")
	}
	if err := s.Complete(c2, got); err != nil {
		t.Fatal(err)
	}
	if names, _ := s.Interrupted(); len(names) != 0 {
		t.Fatalf("still interrupted: %v", names)
	}
}

func TestClaimRefusesSymlinksAndOversize(t *testing.T) {
	s := open(t)
	target := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(target, []byte(`{"version":1}`), 0o600)
	if err := os.Symlink(target, filepath.Join(s.Dir(Incoming), "link.json")); err != nil {
		t.Fatal(err)
	}
	c, err := s.Claim("link.json")
	if err != nil {
		t.Fatal(err)
	}
	if c.ReadErr == nil || c.Data != nil {
		t.Fatalf("symlink was followed: data %q err %v", c.Data, c.ReadErr)
	}
	big := make([]byte, 2<<20)
	os.WriteFile(filepath.Join(s.Dir(Incoming), "big.json"), big, 0o600)
	c, err = s.Claim("big.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Data) > 1<<20+1 {
		t.Fatalf("read %d bytes of an oversized job", len(c.Data))
	}
	if err := os.Mkdir(filepath.Join(s.Dir(Incoming), "dir.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	c, err = s.Claim("dir.json")
	if err != nil || c.ReadErr == nil {
		t.Fatalf("directory claimed as a job: %v %v", c, err)
	}
	if st, err := os.Lstat(target); err != nil || !st.Mode().IsRegular() {
		t.Errorf("symlink target touched")
	}
}

func TestWriteFileAtomicLeavesNothingOnError(t *testing.T) {
	dir := t.TempDir()
	if err := atomicfile.WriteFile(filepath.Join(dir, "missing", "x.json"), []byte("x"), 0o600, -1); err == nil {
		t.Fatal("no error for a missing directory")
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "x.json"), []byte("x"), 0o600, -1); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "x.json" {
		t.Fatalf("dir holds %v", ents)
	}
}

func TestTokenSurvivesChmod(t *testing.T) {
	s := open(t)
	s.Put("j3", []byte(`{}`))
	c, _ := s.Claim("j3.json")
	os.Chmod(c.Path, 0o644)
	c2, err := s.Reclaim("j3.json")
	if err != nil || c2.Token != c.Token {
		t.Fatalf("token changed by chmod: %q vs %q (%v)", c2.Token, c.Token, err)
	}
}

func TestOpenRemovesStaleResultTemps(t *testing.T) {
	root := t.TempDir()
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(s.Dir(Done), ".job-1.json.123.tmp")
	writer := filepath.Join(s.Dir(Incoming), ".job-2.tmp")
	result := filepath.Join(s.Dir(Failed), "job-3.json")
	for _, p := range []string{stale, writer, result} {
		if err := os.WriteFile(p, []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Errorf("stale result temp file survived Open: %v", err)
	}
	for _, p := range []string{writer, result} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s removed by Open: %v", p, err)
		}
	}
}

// Open creates the spool's directories if needed (mode 0700) and returns it.
func Open(root string) (*Spool, error) { return OpenGroup(root, -1) }

// Claim moves incoming/name into processing/ and reads it. It returns
// os.ErrNotExist (wrapped) when another claimer got there first.
func (s *Spool) Claim(name string) (*Claimed, error) {
	if err := s.move(name); err != nil {
		return nil, err
	}
	if err := atomicfile.SyncDir(s.Dir(Processing)); err != nil {
		return nil, err
	}
	return s.Reclaim(name)
}

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

func TestClaimAll(t *testing.T) {
	s := open(t)
	for _, id := range []string{"a", "b", "c"} {
		if err := s.Put(id, []byte(`{"version":1,"id":"`+id+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	// "b" is also running under the same name: it must stay waiting
	if err := os.WriteFile(filepath.Join(s.Dir(Processing), "b.json"), []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	claimed, errs := s.ClaimAll([]string{"a.json", "b.json", "c.json", "gone.json", "../x.json"})
	if len(claimed) != 2 || claimed[0].Name != "a.json" || claimed[1].Name != "c.json" {
		t.Fatalf("claimed %+v", claimed)
	}
	for _, c := range claimed {
		if c.Token == "" || c.ReadErr != nil || len(c.Data) == 0 {
			t.Errorf("claim %+v", c)
		}
		if _, err := os.Stat(c.Path); err != nil {
			t.Errorf("%s not in processing/: %v", c.Name, err)
		}
	}
	if !errors.Is(errs["b.json"], ErrExists) || !errors.Is(errs["gone.json"], os.ErrNotExist) || errs["../x.json"] == nil || len(errs) != 3 {
		t.Errorf("errors %v", errs)
	}
	if names, _ := s.Pending(); len(names) != 1 || names[0] != "b.json" {
		t.Errorf("pending after ClaimAll: %v", names)
	}
	if c, errs := s.ClaimAll(nil); len(c) != 0 || len(errs) != 0 {
		t.Errorf("empty batch: %v %v", c, errs)
	}
}

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
