package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// fakeSync is a groupSync whose runs block until the test releases them.
type fakeSync struct {
	g       *groupSync
	started chan string // a run began (its key)
	release chan error  // ends the run in flight with this error
}

func newFakeSync() *fakeSync {
	f := &fakeSync{started: make(chan string), release: make(chan error)}
	f.g = &groupSync{do: func(dir string) error {
		f.started <- dir
		return <-f.release
	}}
	return f
}

// callers reports how many calls for key are inside sync.
func (f *fakeSync) callers(key string) int {
	f.g.mu.Lock()
	defer f.g.mu.Unlock()
	if st := f.g.keys[key]; st != nil {
		return st.callers
	}
	return 0
}

// waitCallers waits until n calls for key are inside sync (they are then
// waiting: the only run is held by the test).
func (f *fakeSync) waitCallers(key string, n int) {
	for f.callers(key) != n {
		runtime.Gosched()
	}
}

func TestGroupSyncSharesRuns(t *testing.T) {
	errDisk := errors.New("disk gone")
	cases := []struct {
		name       string
		first      error // the run in flight when the others arrive
		second     error // the run the others share
		late       int   // callers arriving during the first run
		wantFirst  error
		wantShared error
	}{
		{"both succeed", nil, nil, 3, nil, nil},
		{"one late caller", nil, nil, 1, nil, nil},
		{"first fails: the late callers' own run counts", errDisk, nil, 3, errDisk, nil},
		{"shared run fails: all its callers are told", nil, errDisk, 3, nil, errDisk},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSync()
			first := make(chan error, 1)
			go func() { first <- f.g.sync("d") }()
			if k := <-f.started; k != "d" {
				t.Fatalf("run for %q, want d", k)
			}
			// Callers arriving now may have changed d after the run began:
			// they must not be served by it.
			late := make(chan error, tc.late)
			for i := 0; i < tc.late; i++ {
				go func() { late <- f.g.sync("d") }()
			}
			f.waitCallers("d", 1+tc.late)
			f.release <- tc.first
			if err := <-first; !errors.Is(err, tc.wantFirst) || (err == nil) != (tc.wantFirst == nil) {
				t.Fatalf("first caller: %v, want %v", err, tc.wantFirst)
			}
			// Exactly one more run serves all the late callers.
			<-f.started
			f.release <- tc.second
			for i := 0; i < tc.late; i++ {
				if err := <-late; !errors.Is(err, tc.wantShared) || (err == nil) != (tc.wantShared == nil) {
					t.Fatalf("late caller: %v, want %v", err, tc.wantShared)
				}
			}
			select {
			case k := <-f.started:
				t.Fatalf("a third run (%s) for callers the second served", k)
			default:
			}
			if n := f.callers("d"); n != 0 {
				t.Fatalf("%d callers left", n)
			}
			f.g.mu.Lock()
			left := len(f.g.keys)
			f.g.mu.Unlock()
			if left != 0 {
				t.Fatalf("%d keys left after every caller returned", left)
			}
		})
	}
}

func TestGroupSyncKeysApart(t *testing.T) {
	f := newFakeSync()
	a := make(chan error, 1)
	go func() { a <- f.g.sync("a") }()
	if k := <-f.started; k != "a" {
		t.Fatalf("run for %q, want a", k)
	}
	// A run of a does not serve b, and does not hold it up.
	b := make(chan error, 1)
	go func() { b <- f.g.sync("b") }()
	if k := <-f.started; k != "b" {
		t.Fatalf("run for %q, want b", k)
	}
	f.release <- nil
	f.release <- nil
	if err := <-a; err != nil {
		t.Fatal(err)
	}
	if err := <-b; err != nil {
		t.Fatal(err)
	}
}

func TestGroupSyncAfterFailureRunsAgain(t *testing.T) {
	errDisk := errors.New("disk gone")
	f := newFakeSync()
	for i, want := range []error{errDisk, nil} {
		done := make(chan error, 1)
		go func() { done <- f.g.sync("d") }()
		<-f.started
		f.release <- want
		if err := <-done; err != want {
			t.Fatalf("call %d: %v, want %v (a new call needs a run of its own)", i, err, want)
		}
	}
}

func TestSyncDirReal(t *testing.T) {
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
