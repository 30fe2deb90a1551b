// Package atomicfile writes files so that readers see either nothing or the
// whole file, and a crash leaves no half-written file under the final name:
// a temporary file in the same directory is written, fsynced, renamed into
// place and the directory fsynced. The spool's job and result files, the
// payload images and the copies of prebuilt images all use it.
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// File is a temporary file that becomes Path only at Commit.
type File struct {
	*os.File
	// NoSync skips the file and directory fsyncs (tests and benchmarks
	// only).
	NoSync bool
	closed bool
	done   bool
}

// Create creates a temporary file in dir named by pattern (see
// os.CreateTemp; make it start with a dot so that directory scans skip
// it).
func Create(dir, pattern string) (*File, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return &File{File: f}, nil
}

// Close fsyncs (unless NoSync) and closes the file; the file stays under
// its temporary name, e.g. to be verified before Commit. Calling it again
// does nothing.
func (f *File) Close() error {
	if f.closed {
		return nil
	}
	f.closed = true
	var err error
	if !f.NoSync {
		err = f.File.Sync()
	}
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	return err
}

// Commit closes the file (see Close), renames it to path and fsyncs the
// directory (unless NoSync). After a failed rename the temporary file is
// removed; once renamed, only the directory sync can fail: the file is in
// place and complete, only its durability is unknown.
func (f *File) Commit(path string) error {
	if err := f.Rename(path); err != nil {
		return err
	}
	if f.NoSync {
		return nil
	}
	return SyncDir(filepath.Dir(path))
}

// Rename is Commit without the directory sync, for callers that report
// it apart (or batch it): it closes the file and renames it to path,
// removing it when either fails.
func (f *File) Rename(path string) error {
	if err := f.Close(); err != nil {
		f.Abort()
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		f.Abort()
		return err
	}
	f.done = true
	return nil
}

// Abort closes and removes the temporary file unless it was committed; it
// is meant for a defer and may be called any number of times.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	if !f.closed {
		f.closed = true
		_ = f.File.Close()
	}
	_ = os.Remove(f.Name())
}

// WriteFile writes data to path atomically with permission perm, owned by
// uid unless it is -1 (the owner is set before the file appears under its
// name).
func WriteFile(path string, data []byte, perm os.FileMode, uid int) error {
	f, err := Create(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer f.Abort()
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if uid >= 0 {
		if err := f.Chown(uid, -1); err != nil {
			return err
		}
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Commit(path)
}

// SyncDir fsyncs directory dir, so that a rename or a new file in it
// survives a crash. File systems that cannot sync a directory (EINVAL) are
// not an error.
//
// Concurrent calls for the same directory share their fsyncs (group
// commit): when SyncDir returns nil, an fsync of dir that started after
// the call did has completed, so every entry changed before the call is
// durable, as with a sync of its own. Callers arriving while a sync runs
// wait for it and share the next one, so a burst of jobs finishing
// together costs about one directory sync per sync time instead of one
// per job.
func SyncDir(dir string) error { return dirSyncs.sync(dir) }

// fsyncDir is one directory fsync.
func fsyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}

// dirSyncs coalesces the directory syncs of the process.
var dirSyncs = &groupSync{do: fsyncDir}

// groupSync runs do(dir) for callers of sync, sharing one run among the
// callers that arrive while an earlier run of the same key is in flight.
type groupSync struct {
	do func(dir string) error

	mu   sync.Mutex
	keys map[string]*syncState
}

// syncState is the group commit state of one directory. Runs are numbered
// from 1; a caller needs a run numbered above started at its arrival (the
// run in flight, if any, may have started before the caller's change).
type syncState struct {
	cond              *sync.Cond // on groupSync.mu
	started, finished uint64     // number of the last run started, finished
	running           bool
	// failed is the number of the last run that failed, failErr its error.
	failed  uint64
	failErr error
	callers int // in sync for this key; the state goes when none are left
}

func (g *groupSync) sync(dir string) error {
	g.mu.Lock()
	if g.keys == nil {
		g.keys = map[string]*syncState{}
	}
	st := g.keys[dir]
	if st == nil {
		st = &syncState{cond: sync.NewCond(&g.mu)}
		g.keys[dir] = st
	}
	st.callers++
	need := st.started + 1
	for st.finished < need {
		if st.running {
			st.cond.Wait()
			continue
		}
		st.running = true
		st.started++
		n := st.started
		g.mu.Unlock()
		err := g.do(dir)
		g.mu.Lock()
		st.running, st.finished = false, n
		if err != nil {
			st.failed, st.failErr = n, err
		}
		st.cond.Broadcast()
	}
	var err error
	if st.failed >= need {
		// the run this caller relies on, or one after it, failed: its
		// change may not be durable (a later success does not prove it,
		// as a failed fsync may have dropped the dirty state), so it is
		// told, conservatively, and writes again
		err = st.failErr
	}
	st.callers--
	if st.callers == 0 {
		delete(g.keys, dir)
	}
	g.mu.Unlock()
	return err
}
