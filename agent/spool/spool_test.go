package spool

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vmpayload/vmpayload/agent/result"
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
	if err := WriteFileAtomic(s.ResultPath("j2", result.StateDone), mustJSON(t, r), 0o600); err != nil {
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
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "x.json"), []byte("x"), 0o600); err == nil {
		t.Fatal("no error for a missing directory")
	}
	if err := WriteFileAtomic(filepath.Join(dir, "x.json"), []byte("x"), 0o600); err != nil {
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
	if err := syncDir(s.Dir(Processing)); err != nil {
		return nil, err
	}
	return s.open(name)
}
