package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/vmpayload/vmpayload/internal/atomicfile"
)

// tempPattern names the staging file next to the destination.
const tempPattern = ".vmpayload-image-*.tmp"

// Write builds the image described by spec and places it at out.
//
// The image is built in memory and checked (label, file list and every
// file's bytes, see checkImage), written to a temporary file in
// filepath.Dir(out) with opt.Mode and opt.GID applied, fsynced, read back and
// compared with the built image byte for byte (readBack), then renamed to out
// and the directory fsynced (both fsyncs are skipped with opt.NoSync). A
// failed check wraps ErrVerify. On any error nothing is left behind: no
// temporary file; an existing out is left untouched. With opt.ExpectSHA256 set, an image with another hash is not
// written (ErrChecksum), except that in ISOLayoutGoDiskfs an ISO spec's
// legacy Joliet layout is tried as well (see Options.ExpectSHA256 and
// legacyJolietRetry).
//
// ISO images are built in opt.ISOLayout, by default the newest
// (ISOLayoutJolietTree), whose Joliet tree needs names Joliet can hold:
// characters of the Basic Multilingual Plane, none of "*:;?", no trailing
// '.'. Every medium takes path components of at most 64 characters
// (printable; non-ASCII UTF-8 only on ISO), at most 8 levels deep.
//
// Input problems wrap ErrInvalidSpec (and ErrTooLarge for oversized content);
// I/O failures wrap the underlying *fs.PathError, so errors.Is(err,
// syscall.ENOSPC) works; a cancelled ctx yields an error wrapping ctx.Err().
func Write(ctx context.Context, spec Spec, out string, opt Options) (Info, error) {
	dirs, err := validateSpec(spec)
	if err != nil {
		return Info{}, err
	}
	if out == "" {
		return Info{}, fmt.Errorf("%w: empty output path", ErrInvalidSpec)
	}
	// The rename below would replace whatever out is: never a device node
	// (`-o /dev/null` once replaced the host's /dev/null with an image), a
	// directory entry of another kind, or a symlink.
	if fi, err := os.Lstat(out); err == nil && !fi.Mode().IsRegular() {
		return Info{}, fmt.Errorf("%w: output %q exists and is not a regular file (%s); refusing to replace it", ErrInvalidSpec, out, FileKind(fi.Mode()))
	}
	mode := opt.Mode.Perm()
	if opt.Mode == 0 {
		mode = DefaultMode
	}
	if err := ctx.Err(); err != nil {
		return Info{}, fmt.Errorf("write image %s: %w", out, err)
	}

	var img []byte
	layout := opt.ISOLayout
	if layout == ISOLayoutLatest {
		layout = ISOLayoutNewest
	}
	switch spec.Media {
	case MediaISO:
		if layout > ISOLayoutNewest {
			return Info{}, fmt.Errorf("%w: ISO layout %d is unknown to this version (the newest is %d)", ErrInvalidSpec, layout, ISOLayoutNewest)
		}
		if layout == ISOLayoutJolietTree {
			if err := validateJoliet(spec); err != nil {
				return Info{}, err
			}
		}
		img, err = buildISO(ctx, spec, dirs, layout.variant())
	case MediaVFAT, MediaFloppy:
		layout = 0
		img, err = buildVFAT(ctx, spec, dirs)
	}
	if err != nil {
		return Info{}, fmt.Errorf("build %s image for %s: %w", spec.Media, out, err)
	}
	info, err := checkImage(img, spec, layout.variant())
	if err != nil {
		return Info{}, fmt.Errorf("check %s image for %s: %w", spec.Media, out, err)
	}
	if err := ctx.Err(); err != nil {
		return Info{}, fmt.Errorf("write image %s: %w", out, err)
	}
	sum := sha256Hex(img)
	if opt.ExpectSHA256 != "" {
		if sum != opt.ExpectSHA256 && layout == ISOLayoutGoDiskfs {
			legacy, legacySum, err := legacyJolietRetry(ctx, spec, dirs, img)
			if err != nil {
				return Info{}, fmt.Errorf("build the legacy %s image for %s: %w", spec.Media, out, err)
			}
			if legacy == nil || legacySum != opt.ExpectSHA256 {
				also := ""
				if legacy != nil {
					also = fmt.Sprintf(" (%s in the pre-fix Joliet layout)", legacySum)
				}
				return Info{}, fmt.Errorf("%w: the %s image for %s would have sha256 %s%s, expected %s", ErrChecksum, spec.Media, out, sum, also, opt.ExpectSHA256)
			}
			if info, err = checkImage(legacy, spec, isoLegacyJoliet); err != nil {
				return Info{}, fmt.Errorf("check the legacy %s image for %s: %w", spec.Media, out, err)
			}
			img, sum = legacy, legacySum
		} else if sum != opt.ExpectSHA256 {
			return Info{}, fmt.Errorf("%w: the %s image for %s would have sha256 %s, expected %s", ErrChecksum, spec.Media, out, sum, opt.ExpectSHA256)
		}
	}
	if spec.Media == MediaISO {
		info.ISOLayout = layout
	}

	dir := filepath.Dir(out)
	tmp, err := atomicfile.Create(dir, tempPattern)
	if err != nil {
		return Info{}, fmt.Errorf("create temporary image in %s: %w", dir, err)
	}
	tmp.NoSync = opt.NoSync
	defer tmp.Abort()

	if _, err := tmp.Write(img); err != nil {
		return Info{}, fmt.Errorf("write temporary image: %w", err)
	}
	if err := tmp.Chmod(mode); err != nil {
		return Info{}, fmt.Errorf("set mode %o on temporary image: %w", mode, err)
	}
	if opt.GID >= 0 {
		if err := tmp.Chown(-1, opt.GID); err != nil {
			return Info{}, fmt.Errorf("set group %d on temporary image: %w", opt.GID, err)
		}
	}
	if err := tmp.Close(); err != nil {
		return Info{}, fmt.Errorf("sync temporary image: %w", err)
	}

	if err := readBack(tmp.Name(), img); err != nil {
		return Info{}, err
	}
	info.SHA256 = sum
	if err := ctx.Err(); err != nil {
		return Info{}, fmt.Errorf("write image %s: %w", out, err)
	}
	if err := tmp.Rename(out); err != nil {
		return Info{}, fmt.Errorf("move image into place: %w", err)
	}
	info.Path = out
	if opt.NoSync {
		return info, nil
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		// The image is in place and complete; only its durability is unknown.
		return Info{}, err
	}
	return info, nil
}

// legacyJolietRetry builds spec in the legacy ISO layout (isoLegacyJoliet),
// for an expected sha256 the current image img does not have: images built
// before issue 14's fix have a zeroed Joliet root when their last file is
// empty or a multiple of 2048 bytes, and their recipes record those bytes.
// It returns the legacy image and its sha256, or nil when spec is not an
// ISO spec or its legacy layout is the current one (then no legacy image
// can match either).
func legacyJolietRetry(ctx context.Context, spec Spec, dirs []string, img []byte) ([]byte, string, error) {
	if spec.Media != MediaISO {
		return nil, "", nil
	}
	legacy, err := buildISO(ctx, spec, dirs, isoLegacyJoliet)
	if err != nil {
		return nil, "", err
	}
	if bytes.Equal(legacy, img) {
		return nil, "", nil
	}
	return legacy, sha256Hex(legacy), nil
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// FileKind names the type of a non-regular file for error messages
// ("symbolic link", "directory", "character device", …).
func FileKind(m os.FileMode) string {
	switch {
	case m&os.ModeSymlink != 0:
		return "symbolic link"
	case m.IsDir():
		return "directory"
	case m&os.ModeCharDevice != 0:
		return "character device"
	case m&os.ModeDevice != 0:
		return "block device"
	case m&os.ModeNamedPipe != 0:
		return "named pipe"
	case m&os.ModeSocket != 0:
		return "socket"
	}
	return "special file"
}
