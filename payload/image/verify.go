package image

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
)

// Verification (issue 14). Write promises that what is on disk is exactly
// the image it built and that this image holds the spec's label, file list
// and bytes. It checks the two halves separately, each once:
//
//   - checkImage checks the in-memory image against the spec before anything
//     is written. ISO images are read by the package's ISO reader
//     (isoread.go, the one Inspect and ReadFile use, written independently
//     of the writer), and every file's extent is compared with the spec's
//     bytes in place, without copies. vfat images are parsed with
//     go-diskfs's reader, as before.
//   - readBack reads the written file once, in chunks, and compares every
//     chunk with the in-memory image. Info.SHA256 is the hash of the
//     in-memory image: once readBack has passed, it is the hash of the file
//     too.
//
// Together they give the guarantee the former full go-diskfs re-parse of the
// read-back file gave, at the cost of one read and one comparison. The tests
// judge the images with real third-party readers: isoinfo, xorriso, blkid,
// the kernel and the real cloud-init.

// readBackChunk is the read size of readBack.
const readBackChunk = 64 << 10

// readBack reads the file p and compares it with img. Errors wrap
// ErrVerify.
func readBack(p string, img []byte) error {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0) // never through a symlink put in its place
	if err != nil {
		return fmt.Errorf("%w: read back: %w", ErrVerify, err)
	}
	defer f.Close()
	buf := make([]byte, min(readBackChunk, len(img)+1))
	var off int
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if off+n > len(img) {
				return fmt.Errorf("%w: read back %s: the file is longer than the %d-byte image", ErrVerify, p, len(img))
			}
			if !bytes.Equal(buf[:n], img[off:off+n]) {
				return fmt.Errorf("%w: read back %s: bytes %d-%d differ from the built image", ErrVerify, p, off, off+n-1)
			}
			off += n
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: read back %s: %w", ErrVerify, p, err)
		}
	}
	if off != len(img) {
		return fmt.Errorf("%w: read back %s: %d bytes, the built image has %d", ErrVerify, p, off, len(img))
	}
	return nil
}

// checkImage checks that img, built in variant v (ISO only), holds spec's
// label, file list and bytes and returns the Info it describes (without
// Path, SHA256 and ISOLayout). For isoJolietTree it also checks the Joliet
// tree: exactly the primary tree's files, at the same extents (so with
// the same bytes), under the same names. Errors wrap ErrVerify.
func checkImage(img []byte, spec Spec, v isoVariant) (Info, error) {
	want := make([]FileInfo, 0, len(spec.Entries))
	for _, e := range spec.Entries {
		want = append(want, FileInfo{Path: e.Path, Size: int64(len(e.Data))})
	}
	slices.SortFunc(want, func(a, b FileInfo) int { return strings.Compare(a.Path, b.Path) })

	var label, fstype string
	var got []FileInfo
	var data func(path string) ([]byte, error)
	switch spec.Media {
	case MediaISO:
		fstype = FSTypeISO9660
		if len(img) < isoPVDOffset+isoBlock || len(img)%isoBlock != 0 {
			return Info{}, fmt.Errorf("%w: %d bytes is not a whole iso9660 volume", ErrVerify, len(img))
		}
		vol, err := readISOBytes(img)
		if err != nil {
			return Info{}, fmt.Errorf("%w: read the built image: %w", ErrVerify, err)
		}
		if int64(vol.blocks)*isoBlock != int64(len(img)) || !vol.rr {
			return Info{}, fmt.Errorf("%w: volume of %d blocks (Rock Ridge %v), the image has %d bytes", ErrVerify, vol.blocks, vol.rr, len(img))
		}
		if v == isoJolietTree {
			jfiles, err := vol.jolietFiles()
			if err != nil {
				return Info{}, fmt.Errorf("%w: read the Joliet tree of the built image: %w", ErrVerify, err)
			}
			if err := sameTree(jfiles, vol.files); err != nil {
				return Info{}, fmt.Errorf("%w: the Joliet tree of the built image: %w", ErrVerify, err)
			}
		}
		label = vol.label
		for _, f := range vol.files {
			got = append(got, FileInfo{Path: f.path, Size: int64(f.size)})
		}
		data = func(p string) ([]byte, error) {
			f, ok := vol.find(p)
			if !ok {
				return nil, fmt.Errorf("no file %q", p)
			}
			return vol.data(f)
		}
	default:
		r, err := newReader(&memFile{buf: img, max: int64(len(img))}, "built image")
		if err != nil {
			return Info{}, fmt.Errorf("%w: read the built image: %w", ErrVerify, err)
		}
		defer r.close()
		fstype = r.fstype
		if fstype != FSTypeVFAT {
			return Info{}, fmt.Errorf("%w: filesystem type %q, want %q", ErrVerify, fstype, FSTypeVFAT)
		}
		label = r.label()
		if got, err = r.walk(); err != nil {
			return Info{}, fmt.Errorf("%w: list files of the built image: %w", ErrVerify, err)
		}
		data = r.readFile
	}
	if label != spec.Label {
		return Info{}, fmt.Errorf("%w: label %q, want %q", ErrVerify, label, spec.Label)
	}
	if !slices.Equal(got, want) {
		return Info{}, fmt.Errorf("%w: files [%s], want [%s]", ErrVerify, fileList(got), fileList(want))
	}
	for _, e := range spec.Entries {
		b, err := data(e.Path)
		if err != nil {
			return Info{}, fmt.Errorf("%w: read %q: %w", ErrVerify, e.Path, err)
		}
		if !bytes.Equal(b, e.Data) {
			return Info{}, fmt.Errorf("%w: %q has %d bytes that differ from the %d requested", ErrVerify, e.Path, len(b), len(e.Data))
		}
	}
	return Info{Label: label, FSType: fstype, Size: int64(len(img)), Files: want, Joliet: spec.Media == MediaISO && v == isoJolietTree}, nil
}

// sameTree reports how the Joliet tree's files j differ from the primary
// tree's p (both sorted by path): a file missing from either, or one at
// another extent.
func sameTree(j, p []isoFile) error {
	for i := 0; i < max(len(j), len(p)); i++ {
		switch {
		case i >= len(j):
			return fmt.Errorf("lacks %q", p[i].path)
		case i >= len(p) || j[i].path < p[i].path:
			return fmt.Errorf("lists %q, which the primary tree lacks", j[i].path)
		case j[i].path > p[i].path:
			return fmt.Errorf("lacks %q", p[i].path)
		case j[i] != p[i]:
			return fmt.Errorf("%q has %d bytes at block %d, the primary tree %d bytes at block %d", j[i].path, j[i].size, j[i].loc, p[i].size, p[i].loc)
		}
	}
	return nil
}

func fileList(fs []FileInfo) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = fmt.Sprintf("%s(%d)", f.Path, f.Size)
	}
	return strings.Join(s, " ")
}
