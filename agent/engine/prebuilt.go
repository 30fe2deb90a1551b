package engine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/vmpayload/vmpayload/agent/result"
	"github.com/vmpayload/vmpayload/internal/atomicfile"
	"github.com/vmpayload/vmpayload/payload"
	"github.com/vmpayload/vmpayload/payload/image"
	"github.com/vmpayload/vmpayload/payload/job"
)

// MaxPrebuiltBytes bounds a prebuilt image: cloud-init seeds are kilobytes
// to a few megabytes, and the copy lives in the payload directory (often a
// tmpfs).
const MaxPrebuiltBytes = 64 << 20

// prebuiltFail is a prebuilt_image failure.
func prebuiltFail(format string, args ...any) error {
	return &failure{Code: result.CodePrebuiltImage, Field: "prebuilt_image", Err: fmt.Errorf(format, args...)}
}

// openPrebuilt opens p, which must lie in one of e.PrebuiltDirs, without
// following a symlink out of that directory (openat2 RESOLVE_BENEATH: a
// symlink or ".." that leaves it fails) nor any /proc magic link, and
// refuses anything but a regular file (devices, FIFOs, directories).
func (e *Engine) openPrebuilt(p string) (*os.File, error) {
	if len(e.PrebuiltDirs) == 0 {
		return nil, prebuiltFail("prebuilt image %q: prebuilt_image is disabled on this host (no prebuilt_dirs configured)", p)
	}
	for _, dir := range e.PrebuiltDirs {
		rel, err := filepath.Rel(filepath.Clean(dir), p)
		if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
			continue
		}
		dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, prebuiltFail("prebuilt image %q: opening prebuilt directory %s: %w", p, dir, err)
		}
		fd, err := unix.Openat2(dfd, rel, &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
		})
		unix.Close(dfd)
		switch {
		case errors.Is(err, unix.EXDEV):
			return nil, prebuiltFail("prebuilt image %q resolves outside prebuilt directory %s (a symlink or \"..\" leading out of it)", p, dir)
		case errors.Is(err, unix.ELOOP):
			return nil, prebuiltFail("prebuilt image %q is a symlink; give the file itself", p)
		case err != nil:
			return nil, prebuiltFail("prebuilt image %q: %w", p, err)
		}
		f := os.NewFile(uintptr(fd), p)
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, prebuiltFail("prebuilt image %q: %w", p, err)
		}
		if !st.Mode().IsRegular() {
			f.Close()
			return nil, prebuiltFail("prebuilt image %q is not a regular file (%s)", p, st.Mode().Type())
		}
		if st.Size() > MaxPrebuiltBytes {
			f.Close()
			return nil, prebuiltFail("prebuilt image %q is %d bytes; at most %d are accepted", p, st.Size(), MaxPrebuiltBytes)
		}
		return f, nil
	}
	return nil, prebuiltFail("prebuilt image %q is not under a prebuilt directory (prebuilt_dirs: %s)", p, strings.Join(e.PrebuiltDirs, ":"))
}

// copyPrebuilt copies the prebuilt image p into the payload directory as
// UUID-prebuilt-HASH.img and checks the copy, so that the bytes checked are
// the bytes libvirt attaches (the job's file may change after the check).
// It returns the copy's path and description.
func (e *Engine) copyPrebuilt(p, uuid string) (string, *result.Payload, error) {
	src, err := e.openPrebuilt(p)
	if err != nil {
		return "", nil, err
	}
	defer src.Close()
	tmp, err := atomicfile.Create(e.PayloadDir, "."+uuid+"-prebuilt-*.tmp")
	if err != nil {
		return "", nil, fmt.Errorf("copying prebuilt image %q into the payload directory: %w", p, err)
	}
	defer tmp.Abort() // after the commit, a no-op
	n, err := io.Copy(tmp, io.LimitReader(src, MaxPrebuiltBytes+1))
	if err == nil && n > MaxPrebuiltBytes {
		err = prebuiltFail("prebuilt image %q grew beyond %d bytes while being copied", p, MaxPrebuiltBytes)
	}
	if err == nil {
		err = e.setImagePerms(tmp.File)
	}
	if err == nil {
		err = tmp.Close() // fsyncs it
	}
	if err != nil {
		var f *failure
		if errors.As(err, &f) {
			return "", nil, err
		}
		return "", nil, fmt.Errorf("copying prebuilt image %q into the payload directory: %w", p, err)
	}
	info, err := image.Inspect(tmp.Name()) // the copy's bytes: its size and sha256 too
	if err != nil {
		return "", nil, prebuiltFail("prebuilt image %q is not a readable ISO9660 or vfat image: %w", p, err)
	}
	img := payload.Describe(info, "")
	if img.Format == "" {
		return "", nil, prebuiltFail("prebuilt image %q has label %q; cloud-init looks for \"cidata\" or \"config-2\"", p, info.Label)
	}
	dst := filepath.Join(e.PayloadDir, uuid+"-prebuilt-"+img.SHA256[:16]+payload.Extension(job.Media(img.Media)))
	reused := false
	if _, err := os.Lstat(dst); err == nil {
		reused = true // same content (the name carries its hash): replace it with the fresh copy anyway
	}
	if err := tmp.Commit(dst); err != nil {
		return "", nil, fmt.Errorf("installing the copy of prebuilt image %q: %w", p, err)
	}
	img.Path = dst
	e.claim(dst)
	return dst, &result.Payload{Image: img, Prebuilt: true, Reused: reused}, nil
}

// setImagePerms gives an image the configured mode and group.
func (e *Engine) setImagePerms(f *os.File) error {
	mode := e.ImageMode
	if mode == 0 {
		mode = 0o640
	}
	if err := f.Chmod(mode); err != nil {
		return err
	}
	if e.ImageGID >= 0 {
		return f.Chown(-1, e.ImageGID)
	}
	return nil
}
