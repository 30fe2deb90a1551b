// Package spool implements vmpayload's spool directory protocol.
//
// Writers put a job in incoming/ by writing a dot file or a *.tmp file in the
// same directory and renaming it to NAME.json. The agent claims a job by
// renaming it into processing/, runs it, writes the result to done/ID.json or
// failed/ID.json (write to a temp file, fsync, rename) and then removes the
// job (done) or keeps it as failed/ID.job.json, mode 0600, so it can be fixed
// and dropped again. A job found in processing/ at start-up was interrupted
// and is run again, unless its result was already written: each result
// carries the claim token of the run that wrote it, so the outcome of every
// job is written exactly once.
package spool

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/internal/atomicfile"
	"github.com/vmpayload/vmpayload/payload/job"
)

// Subdirectories of a spool.
const (
	Incoming   = "incoming"
	Processing = "processing"
	Done       = "done"
	Failed     = "failed"
	// Rejected holds what was found in incoming/ under a job name but is
	// not a regular file (a directory, FIFO, symlink, socket or device),
	// moved aside under a name of its own once its result is written, so
	// that it blocks nothing (issue 44). Private to the agent (DirMode).
	Rejected = "rejected"
)

// DirMode is the mode of the spool's subdirectories.
const DirMode = 0o700

// Modes of the subdirectories with a spool group (OpenGroup): its members
// may create files in incoming/ but not list it, nor rename or delete files
// of others (sticky); they may read results they know the name of in done/
// and failed/ (results are their submitter's, OwnedResultMode) but not list or
// change those directories. processing/ stays DirMode.
const (
	GroupIncomingMode = 0o730 | os.ModeSticky
	GroupResultMode   = 0o710
)

// OwnedMode and OwnedResultMode are the modes of job and result files the
// agent gives to their submitter: the owner reads them, the agent through
// its own group (root's), which no submitter is in.
const (
	OwnedMode       = 0o640
	OwnedResultMode = 0o440
)

// ErrExists is returned by Put when a job with the same id is queued.
var ErrExists = errors.New("a job with this id is already queued")

// Spool is a spool directory.
type Spool struct {
	Root string
	// group is the spool_group's gid plus one (0: none, root only), so the
	// zero value is a root-only spool.
	group int
}

// OpenGroup is Open for a spool that the members of group gid may write
// jobs into (config spool_group; -1: root only). See GroupIncomingMode.
func OpenGroup(root string, gid int) (*Spool, error) {
	s := &Spool{Root: root, group: gid + 1}
	if gid < 0 {
		s.group = 0
	}
	if _, err := s.Heal(); err != nil {
		return nil, err
	}
	if err := s.removeStaleTemps(); err != nil {
		return nil, err
	}
	return s, nil
}

// Heal recreates the spool directory and its subdirectories where they are
// missing (an operator's rm -rf, a tmpfs remounted) with mode 0700, and
// returns the subdirectories it created. It refuses a symlink or any
// non-directory in their place. The agent calls it at start and again
// whenever it rescans, so that it heals without a restart.
func (s *Spool) Heal() (created []string, err error) {
	if err := os.MkdirAll(s.Root, 0o755); err != nil {
		return nil, fmt.Errorf("creating spool directory %s: %w", s.Root, err)
	}
	for _, d := range []string{Incoming, Processing, Done, Failed, Rejected} {
		p := filepath.Join(s.Root, d)
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			// Created private; setAccess then opens it to the spool_group.
			made, err := EnsureDir(p, DirMode, -1)
			if err != nil {
				return created, fmt.Errorf("spool: %w", err)
			}
			if made {
				created = append(created, d)
			}
		}
		if err := s.setAccess(p, d); err != nil {
			return created, fmt.Errorf("spool: %w", err)
		}
	}
	return created, nil
}

// setAccess gives spool subdirectory d (at p) its group and mode: private
// (DirMode, the agent's group) without a spool_group; with one, incoming/
// GroupIncomingMode and done/, failed/ GroupResultMode in that group.
// The group is set first, then the mode: never group access with the wrong
// group.
func (s *Spool) setAccess(p, d string) error {
	mode, group := os.FileMode(DirMode), os.Getegid()
	if s.group > 0 && d != Processing && d != Rejected {
		mode, group = GroupResultMode, s.group-1
		if d == Incoming {
			mode = GroupIncomingMode
		}
	}
	st, err := os.Lstat(p)
	if err != nil {
		return fmt.Errorf("checking spool directory %s: %w", p, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("spool directory %s is a %s: %w", p, kindOf(st.Mode()), ErrNotDir)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Gid) != group {
		if err := os.Lchown(p, -1, group); err != nil {
			return fmt.Errorf("setting group of %s: %w", p, err)
		}
	}
	if st.Mode()&(os.ModePerm|os.ModeSticky|os.ModeSetgid) != mode {
		if err := os.Chmod(p, mode); err != nil {
			return fmt.Errorf("setting mode of %s: %w", p, err)
		}
	}
	return nil
}

// ErrNotDir is returned by EnsureDir when a symlink or another non-directory
// sits where a directory should be.
var ErrNotDir = errors.New("not a directory (symlinks are refused)")

// EnsureDir makes sure p is a directory with permission mode, creating it
// (and, with mode 0755, missing parents) when it is missing; a directory it
// creates is given group gid unless gid is negative. It never follows a
// symlink at p: a symlink or other non-directory there is refused with
// ErrNotDir. created reports whether it made the directory.
func EnsureDir(p string, mode os.FileMode, gid int) (created bool, err error) {
	if err := os.Mkdir(p, mode); err == nil {
		created = true
	} else if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return false, fmt.Errorf("creating the parent of directory %s: %w", p, err)
		}
		if err := os.Mkdir(p, mode); err != nil && !errors.Is(err, os.ErrExist) {
			return false, fmt.Errorf("creating directory %s: %w", p, err)
		}
		created = true
	} else if !errors.Is(err, os.ErrExist) {
		return false, fmt.Errorf("creating directory %s: %w", p, err)
	}
	st, err := os.Lstat(p)
	if err != nil {
		return created, fmt.Errorf("checking directory %s: %w", p, err)
	}
	if !st.IsDir() {
		return false, fmt.Errorf("directory %s is a %s: %w", p, kindOf(st.Mode()), ErrNotDir)
	}
	if created && gid >= 0 {
		if err := os.Lchown(p, -1, gid); err != nil {
			return created, fmt.Errorf("setting the group of directory %s: %w", p, err)
		}
	}
	if st.Mode()&(os.ModePerm|os.ModeSticky|os.ModeSetgid) != mode {
		if err := os.Chmod(p, mode); err != nil {
			return created, fmt.Errorf("setting the mode of directory %s: %w", p, err)
		}
	}
	return created, nil
}

// kindOf names a file type for error messages.
func kindOf(m os.FileMode) string {
	if m&os.ModeSymlink != 0 || m.IsRegular() {
		return KindName(m)
	}
	return "special file (" + m.Type().String() + ")"
}

// KindName names the type of a file that is not a regular file, for the
// results of spool entries that are not jobs: "directory", "symlink",
// "named pipe (FIFO)", "socket", "character device", "block device".
func KindName(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&os.ModeSymlink != 0:
		return "symlink"
	case m&os.ModeNamedPipe != 0:
		return "named pipe (FIFO)"
	case m&os.ModeSocket != 0:
		return "socket"
	case m&os.ModeCharDevice != 0:
		return "character device"
	case m&os.ModeDevice != 0:
		return "block device"
	case m.IsRegular():
		return "regular file"
	default:
		return "special file (" + m.Type().String() + ")"
	}
}

// removeStaleTemps deletes the temp files of result writes (atomicfile.WriteFile)
// that a crash left in done/ and failed/. Only the agent writes there, and
// Open runs before it writes anything, so every such file is stale. Writers'
// temp files in incoming/ are theirs and are left alone.
func (s *Spool) removeStaleTemps() error {
	for _, sub := range []string{Done, Failed} {
		d := s.Dir(sub)
		ents, err := os.ReadDir(d)
		if err != nil {
			return fmt.Errorf("listing %s: %w", d, err)
		}
		for _, e := range ents {
			n := e.Name()
			if strings.HasPrefix(n, ".") && strings.HasSuffix(n, ".tmp") && e.Type().IsRegular() {
				if err := os.Remove(filepath.Join(d, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("removing stale temp file: %w", err)
				}
			}
		}
	}
	return nil
}

// Dir returns the path of a subdirectory.
func (s *Spool) Dir(sub string) string { return filepath.Join(s.Root, sub) }

// IsJobName reports whether a file name in incoming/ is a job ready to be
// claimed: NAME.json, not a dot file (a writer's temp file).
func IsJobName(name string) bool {
	return strings.HasSuffix(name, ".json") && !strings.HasPrefix(name, ".") && len(name) > len(".json") &&
		!strings.ContainsAny(name, "/\x00")
}

// IDFromName derives a job id from a spool file name: the name without
// ".json", made a valid id by job.IDFrom.
func IDFromName(name string) string {
	return job.IDFrom(strings.TrimSuffix(name, ".json"))
}

// list returns the job names in a subdirectory, oldest first.
func (s *Spool) list(sub string) ([]string, error) {
	d := s.Dir(sub)
	ents, err := os.ReadDir(d)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", d, err)
	}
	type item struct {
		name string
		mod  int64
	}
	var items []item
	for _, e := range ents {
		if !IsJobName(e.Name()) {
			continue
		}
		var mod int64
		if info, err := e.Info(); err == nil {
			mod = info.ModTime().UnixNano()
		}
		items = append(items, item{e.Name(), mod})
	}
	slices.SortFunc(items, func(a, b item) int { return cmp.Or(cmp.Compare(a.mod, b.mod), strings.Compare(a.name, b.name)) })
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.name
	}
	return out, nil
}

// Pending lists the jobs waiting in incoming/, oldest first.
func (s *Spool) Pending() ([]string, error) { return s.list(Incoming) }

// Interrupted lists the jobs left in processing/ (by a crash), oldest first.
func (s *Spool) Interrupted() ([]string, error) { return s.list(Processing) }

// Claimed is a job file taken into processing/.
type Claimed struct {
	// Name is the spool file name (NAME.json).
	Name string
	// Path is the file's path in processing/.
	Path string
	// Token identifies this claim (see Result.Claim).
	Token string
	// Data is the file's content, unless ReadErr is set.
	Data []byte
	// UID and GID own the file: the writer of a dropped job, the API
	// client for a job the agent queued on its behalf (see PutOwned).
	UID, GID uint32
	// ReadErr says why the content could not be read (not a regular file,
	// a symlink, too large, an I/O error); the job fails with it.
	ReadErr error
	// Mode is the entry's type as found (Lstat). An entry that is not a
	// regular file is never opened for reading; once its result is
	// written it is moved aside into rejected/ rather than removed (a
	// directory with files in it cannot be removed, issue 44).
	Mode os.FileMode
	// Foreign is set by the agent when the job's id is another
	// submitter's (a live job of theirs, or a result that ForeignID does
	// not see yet): Complete then writes ForeignResultPath, as for
	// ForeignID.
	Foreign bool
}

// ClaimAll moves each of names from incoming/ into processing/ and reads
// it, and syncs processing/ once for the whole batch instead of once per job
// (a burst of dropped jobs otherwise costs one directory fsync, a journal
// commit, per job in the intake loop). Every returned claim is durable
// before ClaimAll returns. It returns the claims in the order of names and,
// for the names it could not claim, their errors (wrapping os.ErrNotExist
// when another claimer got there first, ErrExists when a job of the same
// name is in processing/).
func (s *Spool) ClaimAll(names []string) ([]*Claimed, map[string]error) {
	errs := map[string]error{}
	moved := make([]string, 0, len(names))
	for _, name := range names {
		if err := s.move(name); err != nil {
			errs[name] = err
			continue
		}
		moved = append(moved, name)
	}
	if len(moved) == 0 {
		return nil, errs
	}
	if err := atomicfile.SyncDir(s.Dir(Processing)); err != nil {
		// The jobs stay in processing/ and run at the next start.
		for _, name := range moved {
			errs[name] = err
		}
		return nil, errs
	}
	claimed := make([]*Claimed, 0, len(moved))
	for _, name := range moved {
		c, err := s.Reclaim(name)
		if err != nil {
			errs[name] = err
			continue
		}
		claimed = append(claimed, c)
	}
	return claimed, errs
}

// move renames incoming/name into processing/ without replacing a job of
// the same name.
func (s *Spool) move(name string) error {
	if !IsJobName(name) {
		return fmt.Errorf("claiming %q: not a job file name", name)
	}
	src, dst := filepath.Join(s.Dir(Incoming), name), filepath.Join(s.Dir(Processing), name)
	if _, err := os.Lstat(dst); err == nil {
		// A job of the same name is running: leave this one for later.
		return fmt.Errorf("claiming %s: %w", name, ErrExists)
	}
	if err := renameEntry(src, dst); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("claiming %s: %w", name, ErrExists)
		}
		return fmt.Errorf("claiming %s: %w", name, &os.PathError{Op: "rename", Path: src, Err: err})
	}
	return nil
}

// renameEntry renames src to dst without replacing anything at dst. Moving
// a directory to another parent needs write permission on the directory
// itself (its ".." changes): a writer's mode-0700 directory refuses that to
// an agent without CAP_DAC_OVERRIDE (the packaged unit), which would leave it
// in incoming/ for good. Then the agent, which has CAP_CHOWN, takes the
// directory over for the rename (owner, then mode u+rwx) and gives it back
// (mode, then owner) in its new place, so that its owner still names its
// writer.
func renameEntry(src, dst string) error {
	err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
	if !errors.Is(err, unix.EACCES) && !errors.Is(err, unix.EPERM) {
		return err
	}
	var st unix.Stat_t
	if unix.Lstat(src, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return err
	}
	euid := os.Geteuid()
	if int(st.Uid) != euid {
		if unix.Lchown(src, euid, -1) != nil {
			return err
		}
	}
	perm := st.Mode & 0o7777
	if perm&0o700 != 0o700 {
		if unix.Chmod(src, perm|0o700) != nil {
			restoreEntry(src, st)
			return err
		}
	}
	if rerr := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE); rerr != nil {
		restoreEntry(src, st)
		return rerr
	}
	restoreEntry(dst, st)
	return nil
}

// restoreEntry gives p the mode and owner st recorded.
func restoreEntry(p string, st unix.Stat_t) {
	_ = unix.Chmod(p, st.Mode&0o7777)
	if int(st.Uid) != os.Geteuid() {
		_ = unix.Lchown(p, int(st.Uid), -1)
	}
}

// Reclaim opens a job in processing/: one ClaimAll moved there, or one left
// there by an earlier run.
func (s *Spool) Reclaim(name string) (*Claimed, error) {
	p := filepath.Join(s.Dir(Processing), name)
	c := &Claimed{Name: name, Path: p}
	st, err := os.Lstat(p)
	if err != nil {
		return nil, fmt.Errorf("reading claimed job %s: %w", p, err)
	}
	// The token is stable for the file's life in processing/ (rename and
	// chmod keep inode, size and mtime) and differs for a file dropped again.
	sys, _ := st.Sys().(*syscall.Stat_t)
	var ino uint64
	if sys != nil {
		ino = sys.Ino
		c.UID, c.GID = sys.Uid, sys.Gid
	}
	c.Token = fmt.Sprintf("%s@%d/%d/%d", name, st.ModTime().UnixNano(), ino, st.Size())
	c.Mode = st.Mode()
	if !c.Mode.IsRegular() {
		// Never opened: a FIFO or a device could block or act on open.
		c.ReadErr = fmt.Errorf("%s/%s is a %s, not a regular file; only regular files are jobs", Incoming, name, KindName(c.Mode))
		if c.Mode&os.ModeSymlink != 0 {
			c.ReadErr = fmt.Errorf("%s/%s is a symlink, not a regular file; symlinks are refused", Incoming, name)
		}
		return c, nil
	}
	c.Data, c.ReadErr = readJobFile(p)
	return c, nil
}

// readJobFile reads a job without following symlinks and refuses anything
// but a regular file of at most job.MaxJobBytes.
func readJobFile(p string) ([]byte, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, errors.New("the spool file is a symlink; symlinks are refused")
	}
	if err != nil {
		return nil, fmt.Errorf("opening the spool file: %w", err)
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading the spool file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("the spool file is a %s, not a regular file", KindName(st.Mode()))
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Nlink > 1 {
		// A writer could link a file it may not read (where the kernel
		// allows it) and read it back from the job's error.
		return nil, fmt.Errorf("the spool file has %d hard links; hard links are refused", sys.Nlink)
	}
	// Sized from the stat: io.ReadAll's doubling from 512 bytes copied a
	// typical job three times and kept up to half of it as slack for as
	// long as the job was queued (issue 14). A file that grows meanwhile
	// is still read to the end (up to the limit).
	size := min(max(st.Size(), 0), job.MaxJobBytes+1)
	data := make([]byte, 0, size+1)
	lr := io.LimitReader(f, job.MaxJobBytes+1)
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := lr.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if errors.Is(err, io.EOF) {
			return data, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the spool file: %w", err)
		}
	}
}

// ResultPath returns where the result of a job with this id and state goes.
func (s *Spool) ResultPath(id string, st result.State) string {
	sub := Done
	if st == result.StateFailed {
		sub = Failed
	}
	return filepath.Join(s.Dir(sub), id+".json")
}

// Finished reports whether the claim already has its result (written before
// a crash), and returns it.
func (s *Spool) Finished(c *Claimed, id string) (result.Result, bool) {
	for _, st := range []result.State{result.StateDone, result.StateFailed} {
		r, err := s.ReadResult(id, st)
		if err == nil && r.Claim == c.Token {
			return r, true
		}
	}
	if b, err := os.ReadFile(s.ForeignResultPath(id, c.UID)); err == nil {
		var r result.Result
		if json.Unmarshal(b, &r) == nil && r.Claim == c.Token {
			return r, true
		}
	}
	return result.Result{}, false
}

// ResultOwner returns the submitter's uid of id's newest final result: the
// one the result records, else (a result of an older agent) the owner of
// its file. ok is false when id has no result.
func (s *Spool) ResultOwner(id string) (uid uint32, ok bool) {
	r, found := s.Lookup(id)
	if !found {
		return 0, false
	}
	if r.Submitter != nil {
		return r.Submitter.UID, true
	}
	fi, err := os.Lstat(s.ResultPath(id, r.State))
	if err != nil {
		return 0, false
	}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		return sys.Uid, true
	}
	return 0, false
}

// ReadResult reads the result file of id in the given final state.
func (s *Spool) ReadResult(id string, st result.State) (result.Result, error) {
	var r result.Result
	b, err := os.ReadFile(s.ResultPath(id, st))
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("reading result of %s: %w", id, err)
	}
	return r, nil
}

// Lookup returns the newest final result of id, if any.
func (s *Spool) Lookup(id string) (result.Result, bool) {
	var best result.Result
	found := false
	for _, st := range []result.State{result.StateDone, result.StateFailed} {
		r, err := s.ReadResult(id, st)
		if err != nil {
			continue
		}
		if !found || (r.FinishedAt != nil && best.FinishedAt != nil && r.FinishedAt.After(*best.FinishedAt)) {
			best, found = r, true
		}
	}
	return best, found
}

// ForeignID reports whether id's result in done/ or failed/ belongs to
// another submitter than c's owner: then c may not replace it (root may
// replace any). The agent fails such a job without running it, and Complete
// writes its result to ForeignResultPath instead.
func (s *Spool) ForeignID(c *Claimed, id string) bool {
	if c.UID == 0 {
		return false
	}
	for _, st := range []result.State{result.StateDone, result.StateFailed} {
		fi, err := os.Lstat(s.ResultPath(id, st))
		if err != nil {
			continue
		}
		if sys, ok := fi.Sys().(*syscall.Stat_t); ok && sys.Uid != c.UID {
			return true
		}
	}
	return false
}

// ForeignResultPath is where the result of a job refused by ForeignID goes:
// failed/ID.uidUID.json, its submitter's own name.
func (s *Spool) ForeignResultPath(id string, uid uint32) string {
	return filepath.Join(s.Dir(Failed), fmt.Sprintf("%s.uid%d.json", id, uid))
}

// Complete records a claim's final result: it writes the result file
// atomically (given to the job file's owner, mode OwnedResultMode, when
// that is not root), removes a stale result of the other state, and removes the job
// (done) or keeps it as failed/ID.job.json with mode 0600 (failed). A job
// whose id is another submitter's (ForeignID) gets ForeignResultPath and
// leaves the other's results alone. Each step is idempotent, so Complete
// can be repeated after a crash.
func (s *Spool) Complete(c *Claimed, r result.Result) error {
	r.Claim = c.Token
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding result of %s: %w", r.ID, err)
	}
	owner, perm := -1, os.FileMode(0o600)
	if c.UID != 0 && os.Geteuid() == 0 {
		owner, perm = int(c.UID), OwnedResultMode
	}
	if c.Foreign || s.ForeignID(c, r.ID) {
		if err := atomicfile.WriteFile(s.ForeignResultPath(r.ID, c.UID), append(b, '\n'), perm, owner); err != nil {
			return fmt.Errorf("writing result of %s: %w", r.ID, err)
		}
		return s.retire(c, result.Result{ID: r.ID, State: result.StateDone}) // no failed/ID.job.json of another's id
	}
	dst := s.ResultPath(r.ID, r.State)
	if err := atomicfile.WriteFile(dst, append(b, '\n'), perm, owner); err != nil {
		return fmt.Errorf("writing result of %s: %w", r.ID, err)
	}
	other := result.StateFailed
	if r.State == result.StateFailed {
		other = result.StateDone
	}
	if err := os.Remove(s.ResultPath(r.ID, other)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the stale result of %s: %w", r.ID, err)
	}
	return s.retire(c, r)
}

func (s *Spool) retire(c *Claimed, r result.Result) error {
	if r.State == result.StateFailed && c.ReadErr == nil {
		// Keep a copy the agent owns with mode 0600 (the dropped file may
		// belong to another user, and chmod of it would need CAP_FOWNER),
		// without its passwords (RedactJob).
		keep := filepath.Join(s.Dir(Failed), r.ID+".job.json")
		if err := atomicfile.WriteFile(keep, RedactJob(c.Data), 0o600, -1); err != nil {
			return fmt.Errorf("keeping failed job %s: %w", r.ID, err)
		}
	}
	if c.Mode != 0 && !c.Mode.IsRegular() {
		return s.moveAside(c)
	}
	// No sync of processing/ after the removal: if a crash undoes it, the
	// job is found in processing/ at the next start, its result already
	// carries this claim's token, and it is only retired (see Finished).
	if err := os.Remove(c.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing finished job %s: %w", c.Path, err)
	}
	return nil
}

// moveAside moves a claimed entry that is not a regular file from
// processing/ into rejected/, under its name, its claim's inode and time
// and a counter: a name no other entry has (the rename never replaces).
// A directory with files in it cannot be removed, and the agent has no
// business deleting what a writer put inside; an operator (or the result
// retention) removes it from rejected/.
func (s *Spool) moveAside(c *Claimed) error {
	if _, err := os.Lstat(c.Path); errors.Is(err, os.ErrNotExist) {
		return nil // moved already (a crash after the move)
	}
	base := c.Name
	if sum := strings.LastIndexByte(c.Token, '@'); sum >= 0 {
		base += "." + strings.NewReplacer("/", "-").Replace(c.Token[sum+1:])
	}
	for i := 0; ; i++ {
		dst := filepath.Join(s.Dir(Rejected), base)
		if i > 0 {
			dst = fmt.Sprintf("%s.%d", dst, i)
		}
		err := renameEntry(c.Path, dst)
		if err == nil {
			return nil
		}
		if errors.Is(err, os.ErrNotExist) {
			if _, lerr := os.Lstat(c.Path); errors.Is(lerr, os.ErrNotExist) {
				return nil
			}
		}
		if !errors.Is(err, unix.EEXIST) || i >= 1000 {
			return fmt.Errorf("moving %s (a %s) aside into %s: %w", c.Path, KindName(c.Mode), s.Dir(Rejected), err)
		}
	}
}

// Put writes a job into incoming/ the way writers must: a dot temp file in
// the same directory, fsynced, then renamed to ID.json. It refuses an id that
// is already waiting or running.
func (s *Spool) Put(id string, data []byte) error { return s.PutOwned(id, data, -1) }

// PutOwned is Put for a job submitted by another user: when uid is not -1
// and the agent runs as root, the file is given to uid (mode OwnedMode, the
// agent's group) before it appears
// in incoming/, so that its owner names the submitter as for a dropped file
// (also after a crash, when the job is run again from processing/).
func (s *Spool) PutOwned(id string, data []byte, uid int) error {
	name := id + ".json"
	for _, sub := range []string{Incoming, Processing} {
		if _, err := os.Lstat(filepath.Join(s.Dir(sub), name)); err == nil {
			return fmt.Errorf("queueing job %s: %w", id, ErrExists)
		}
	}
	dst := filepath.Join(s.Dir(Incoming), name)
	tmp, err := os.CreateTemp(s.Dir(Incoming), "."+id+".*.tmp")
	if err != nil {
		return fmt.Errorf("queueing job %s: %w", id, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil && uid >= 0 && os.Geteuid() == 0 {
		// The group stays the agent's, readable: the agent reads it back
		// through the group, without CAP_DAC_READ_SEARCH (the packaged unit
		// has CAP_CHOWN only).
		// Mode first: once the file is the submitter's, changing its mode
		// would need CAP_FOWNER.
		if err = tmp.Chmod(OwnedMode); err == nil {
			err = tmp.Chown(uid, -1)
		}
		if err != nil {
			err = fmt.Errorf("giving it to its submitter: %w", err)
		}
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("queueing job %s: %w", id, err)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, tmp.Name(), unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("queueing job %s: %w", id, ErrExists)
		}
		return fmt.Errorf("queueing job %s: %w", id, err)
	}
	return atomicfile.SyncDir(s.Dir(Incoming))
}
