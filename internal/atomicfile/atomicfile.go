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
// that sync apart: it closes the file and renames it to path,
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
func SyncDir(dir string) error {
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
