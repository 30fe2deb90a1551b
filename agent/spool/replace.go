package spool

import (
	"encoding/json"
	"fmt"
	"os"
	"syscall"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/internal/atomicfile"
)

// ReplaceResult rewrites the result file of a finished job (done/ or
// failed/, by r.State) with r, atomically (temp file, fsync, rename) and
// with the file's owner and mode kept: a consumer reading it sees the old
// document or the new one, never a part. It is how a job's result gains
// its guest section after the job finished. The file must exist: a result
// is never created here.
func (s *Spool) ReplaceResult(r result.Result) error {
	p := s.ResultPath(r.ID, r.State)
	fi, err := os.Lstat(p)
	if err != nil {
		return fmt.Errorf("replacing the result of %s: %w", r.ID, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("replacing the result of %s: %s is not a regular file", r.ID, p)
	}
	owner := -1
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		owner = int(st.Uid)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the result of %s: %w", r.ID, err)
	}
	if err := atomicfile.WriteFile(p, append(b, '\n'), fi.Mode().Perm(), owner); err != nil {
		return fmt.Errorf("replacing the result of %s: %w", r.ID, err)
	}
	return nil
}
