package spool

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// Retention bounds what done/, failed/ and rejected/ keep (config
// result_retention_count and result_retention_age). Zero values turn a
// bound off.
type Retention struct {
	// MaxCount is the most results each directory keeps; beyond it the
	// oldest go first.
	MaxCount int
	// MaxAge is how long a result is kept after it was (last) written.
	MaxAge time.Duration
}

// On reports whether r bounds anything.
func (r Retention) On() bool { return r.MaxCount > 0 || r.MaxAge > 0 }

// foreignRe matches the stem of a ForeignResultPath file: ID.uidUID.
var foreignRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(.+)\.uid[0-9]+$`) })

// pruneItem is one result (with the files that go with it).
type pruneItem struct {
	files []string // names in the directory; the result first
	ids   []string // job ids it may belong to (for busy)
	mod   time.Time
}

// Prune removes, in done/, failed/ and rejected/, the results older than
// r.MaxAge and, beyond r.MaxCount per directory, the oldest ones. A
// failed job's copy (failed/ID.job.json) goes with its result. A result of
// a job for which busy (which may be nil) reports true — queued, running,
// or with its result still being written — is never removed. It returns
// how many results (and rejected entries) it removed; an error of one
// removal does not stop the others.
func (s *Spool) Prune(r Retention, now time.Time, busy func(id string) bool) (int, error) {
	if !r.On() {
		return 0, nil
	}
	removed := 0
	var errs []error
	for _, sub := range []string{Done, Failed, Rejected} {
		items, err := s.pruneItems(sub)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// Oldest first; the name breaks ties, so the order is stable.
		slices.SortFunc(items, func(a, b pruneItem) int {
			return cmp.Or(a.mod.Compare(b.mod), strings.Compare(a.files[0], b.files[0]))
		})
		excess := 0
		if r.MaxCount > 0 && len(items) > r.MaxCount {
			excess = len(items) - r.MaxCount
		}
		for _, it := range items {
			old := r.MaxAge > 0 && now.Sub(it.mod) > r.MaxAge
			if !old && excess <= 0 {
				break // the rest are younger and within the count
			}
			if busy != nil && slices.ContainsFunc(it.ids, busy) {
				continue
			}
			if err := s.removeItem(sub, it); err != nil {
				errs = append(errs, err)
				continue
			}
			removed++
			excess--
		}
	}
	return removed, errors.Join(errs...)
}

// pruneItems lists the results in sub with their times.
func (s *Spool) pruneItems(sub string) ([]pruneItem, error) {
	d := s.Dir(sub)
	ents, err := os.ReadDir(d)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", d, err)
	}
	if sub == Rejected {
		items := make([]pruneItem, 0, len(ents))
		for _, e := range ents {
			info, err := e.Info()
			if err != nil {
				continue
			}
			// NAME.json.<claim>: the job id is the name's.
			id := e.Name()
			if i := strings.Index(id, ".json."); i > 0 {
				id = IDFromName(id[:i+len(".json")])
			}
			items = append(items, pruneItem{files: []string{e.Name()}, ids: []string{id}, mod: info.ModTime()})
		}
		return items, nil
	}
	names := map[string]os.DirEntry{}
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, ".") || !strings.HasSuffix(n, ".json") || !e.Type().IsRegular() {
			continue // temp files (removeStaleTemps) and anything not ours
		}
		names[n] = e
	}
	items := make([]pruneItem, 0, len(names))
	for n, e := range names {
		stem := strings.TrimSuffix(n, ".json")
		if sub == Failed {
			if id, ok := strings.CutSuffix(stem, ".job"); ok {
				if _, has := names[id+".json"]; has {
					continue // goes with its result, below
				}
			}
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		it := pruneItem{files: []string{n}, ids: []string{stem}, mod: info.ModTime()}
		if sub == Failed {
			if _, has := names[stem+".job.json"]; has {
				it.files = append(it.files, stem+".job.json")
			}
			if m := foreignRe().FindStringSubmatch(stem); m != nil {
				it.ids = append(it.ids, m[1])
			}
			if id, ok := strings.CutSuffix(stem, ".job"); ok {
				it.ids = append(it.ids, id)
			}
		}
		items = append(items, it)
	}
	return items, nil
}

// removeItem removes a result and the files that go with it; an entry of
// rejected/ is removed with what it holds (never following a symlink).
func (s *Spool) removeItem(sub string, it pruneItem) error {
	for _, n := range it.files {
		p := filepath.Join(s.Dir(sub), n)
		var err error
		if sub == Rejected {
			err = os.RemoveAll(p)
		} else {
			err = os.Remove(p)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing %s (result retention): %w", p, err)
		}
	}
	return nil
}
