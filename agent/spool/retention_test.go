package spool

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// TestPrune: results older than MaxAge go, then the oldest beyond MaxCount
// per directory; a failed job's copy goes with its result; a result of a
// job in flight is never removed (the next oldest goes instead); rejected/
// entries (a directory with its content) go by the same rules.
func TestPrune(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		ret  Retention
		busy []string
		// files by directory with their age in hours
		files    map[string]map[string]int
		wantLeft map[string][]string
		removed  int
	}{
		{
			name: "by age",
			ret:  Retention{MaxAge: 24 * time.Hour},
			files: map[string]map[string]int{
				Done:     {"old.json": 48, "new.json": 1},
				Failed:   {"f-old.json": 30, "f-old.job.json": 30, "f-new.json": 2, "f-new.job.json": 2, "x.uid1002.json": 100},
				Rejected: {"d.json.1-2-3": 50},
			},
			wantLeft: map[string][]string{Done: {"new.json"}, Failed: {"f-new.job.json", "f-new.json"}, Rejected: nil},
			removed:  4,
		},
		{
			name: "by count, oldest first",
			ret:  Retention{MaxCount: 2},
			files: map[string]map[string]int{
				Done:   {"a.json": 4, "b.json": 3, "c.json": 2, "d.json": 1},
				Failed: {"e.json": 5, "e.job.json": 5, "f.json": 1},
			},
			wantLeft: map[string][]string{Done: {"c.json", "d.json"}, Failed: {"e.job.json", "e.json", "f.json"}},
			removed:  2,
		},
		{
			name: "jobs in flight are spared",
			ret:  Retention{MaxCount: 2, MaxAge: 5 * time.Hour},
			busy: []string{"a", "x"},
			files: map[string]map[string]int{
				// a is too old and the oldest, but in flight: b goes for
				// its age, and c instead of a for the count.
				Done:   {"a.json": 9, "b.json": 8, "c.json": 2, "d.json": 1},
				Failed: {"x.uid7.json": 9},
			},
			wantLeft: map[string][]string{Done: {"a.json", "d.json"}, Failed: {"x.uid7.json"}},
			removed:  2,
		},
		{
			name:     "off",
			ret:      Retention{},
			files:    map[string]map[string]int{Done: {"a.json": 100000}},
			wantLeft: map[string][]string{Done: {"a.json"}},
		},
		{
			name:     "temp files and foreign names are left alone",
			ret:      Retention{MaxAge: time.Hour},
			files:    map[string]map[string]int{Done: {".a.json.123.tmp": 9, "README": 9}},
			wantLeft: map[string][]string{Done: {".a.json.123.tmp", "README"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(t.TempDir())
			mustOK(t, err)
			for sub, files := range tt.files {
				for name, age := range files {
					p := filepath.Join(s.Dir(sub), name)
					if sub == Rejected {
						mustOK(t, os.MkdirAll(filepath.Join(p, "inner"), 0o700))
						mustOK(t, os.WriteFile(filepath.Join(p, "inner", "f"), []byte("x"), 0o600))
					} else {
						mustOK(t, os.WriteFile(p, []byte("{}"), 0o600))
					}
					at := now.Add(-time.Duration(age) * time.Hour)
					mustOK(t, os.Chtimes(p, at, at))
				}
			}
			busy := func(id string) bool {
				for _, b := range tt.busy {
					if b == id {
						return true
					}
				}
				return false
			}
			n, err := s.Prune(tt.ret, now, busy)
			mustOK(t, err)
			if n != tt.removed {
				t.Errorf("removed %d, want %d", n, tt.removed)
			}
			for sub, want := range tt.wantLeft {
				ents, err := os.ReadDir(s.Dir(sub))
				mustOK(t, err)
				var got []string
				for _, e := range ents {
					got = append(got, e.Name())
				}
				sort.Strings(got)
				sort.Strings(want)
				if len(got) != len(want) {
					t.Errorf("%s: left %v, want %v", sub, got, want)
					continue
				}
				for i := range got {
					if got[i] != want[i] {
						t.Errorf("%s: left %v, want %v", sub, got, want)
						break
					}
				}
			}
		})
	}
}

// BenchmarkPruneSteady is the cost of one prune with done/ at its default
// limit (10000 results, none to remove), next to its floor measured in the
// same run: listing done/ and stating each entry.
func BenchmarkPruneSteady(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 10000; i++ {
		if err := os.WriteFile(filepath.Join(s.Dir(Done), fmt.Sprintf("job-%05d.json", i)), []byte("{}"), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("prune", func(b *testing.B) {
		r := Retention{MaxCount: 10000, MaxAge: 720 * time.Hour}
		for i := 0; i < b.N; i++ {
			if n, err := s.Prune(r, time.Now(), nil); err != nil || n != 0 {
				b.Fatal(n, err)
			}
		}
	})
	b.Run("list-and-stat", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for _, sub := range []string{Done, Failed, Rejected} {
				ents, err := os.ReadDir(s.Dir(sub))
				if err != nil {
					b.Fatal(err)
				}
				for _, e := range ents {
					if _, err := e.Info(); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	})
}
