package payload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/vmpayload/vmpayload/payload/image"
	"github.com/vmpayload/vmpayload/payload/internal/cloudinit"
	"github.com/vmpayload/vmpayload/payload/job"
	"github.com/vmpayload/vmpayload/payload/kinds"
)

// IgnitionConfigName is the name `vmpayload build` gives the Ignition
// config of a job delivered by fw_cfg, and the name it has in a result's
// file list.
const IgnitionConfigName = cloudinit.IgnitionConfigName

// LabelOf returns the filesystem label of the image of job j (defaults
// applied), as its kind gives it: "" for a payload that is a plain file
// (an Ignition config delivered by fw_cfg or as a block device).
func LabelOf(j job.Job) string { return kinds.Of(j.Format).Label(&j) }

// writeIgnitionFile writes the Ignition config of r (delivery fwcfg) to
// out atomically, with opt's mode and group, and describes it as a
// result: format "ignition", no media or label, its one file the config.
func (r *Rendered) writeIgnitionFile(ctx context.Context, out string, opt Options) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if len(r.Docs.Files) != 1 {
		return Result{}, fmt.Errorf("writing the Ignition config %s: %d documents rendered, want 1", out, len(r.Docs.Files))
	}
	data := r.Docs.Files[0].Data
	if fi, err := os.Lstat(out); err == nil && !fi.Mode().IsRegular() {
		return Result{}, fmt.Errorf("writing the Ignition config: output %q exists and is not a regular file (%s); refusing to replace it", out, image.FileKind(fi.Mode()))
	}
	mode := opt.Mode.Perm()
	if opt.Mode == 0 {
		mode = image.DefaultMode
	}
	if err := writeAtomic(out, "the Ignition config "+out, data, mode, opt); err != nil {
		return Result{}, err
	}
	return r.ignitionResult(out, data), nil
}

// ignitionResult describes the Ignition config data written at path.
func (r *Rendered) ignitionResult(path string, data []byte) Result {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	sum := sha256.Sum256(data)
	return Result{
		Image: Image{Path: abs, Format: string(r.Job.Format), Size: int64(len(data)),
			SHA256: hex.EncodeToString(sum[:]), InstanceID: r.Docs.InstanceID},
		ContentHash: r.Docs.ContentHash, Files: []string{IgnitionConfigName}, IgnitionSpec: r.Docs.IgnitionSpec,
	}
}

// reuseIgnitionFile is Reuse for an Ignition config delivered by fw_cfg:
// the regular file at path must hold exactly the rendered config.
func (r *Rendered) reuseIgnitionFile(path string) (Result, error) {
	if len(r.Docs.Files) != 1 {
		return Result{}, fmt.Errorf("reusing the Ignition config %s: %d documents rendered, want 1", path, len(r.Docs.Files))
	}
	want := r.Docs.Files[0].Data
	fi, err := os.Lstat(path)
	if err != nil {
		return Result{}, fmt.Errorf("reusing the Ignition config: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() != int64(len(want)) {
		return Result{}, fmt.Errorf("existing Ignition config %s is a %s of %d bytes, want a regular file of %d", path, image.FileKind(fi.Mode()), fi.Size(), len(want))
	}
	got, err := readNoFollow(path, len(want))
	if err != nil {
		return Result{}, fmt.Errorf("reusing the Ignition config: %w", err)
	}
	if !bytes.Equal(got, want) {
		return Result{}, fmt.Errorf("existing Ignition config %s holds other bytes", path)
	}
	return r.ignitionResult(path, want), nil
}

// readNoFollow reads up to max+1 bytes of the regular file at path, never
// through a symlink (images live in the payload directory, which the hook
// writes as root).
func readNoFollow(path string, max int) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return io.ReadAll(io.LimitReader(f, int64(max)+1))
}
