package image

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
)

// Verification (issue 14). Write promises that what is on disk is exactly
// the image it built and that this image holds the spec's label, file list
// and bytes. It checks the two halves separately, each once:
//
//   - checkImage checks the in-memory image against the spec before anything
//     is written. ISO images are walked by isoContents, a small reader
//     independent of the writer (primary volume descriptor, directory
//     records, Rock Ridge NM names, CE continuation areas), which compares
//     every file's extent with the spec's bytes in place, without copies.
//     vfat images are parsed with go-diskfs's reader, as before.
//   - readBack reads the written file once, in chunks, and compares every
//     chunk with the in-memory image. Info.SHA256 is the hash of the
//     in-memory image, computed on a second goroutine while the file is
//     written and read back: once readBack has passed, it is the hash of the
//     file too.
//
// Together they give the guarantee the former full go-diskfs re-parse of the
// read-back file gave, at the cost of one read and one comparison. The go-diskfs
// reader still judges every image the tests build (Inspect, ReadFile), next
// to isoinfo, blkid and the real cloud-init.

// readBackChunk is the read size of readBack.
const readBackChunk = 64 << 10

// readBackBufs holds readBack's chunk buffers (readBackChunk bytes each):
// an agent burst read back 1000 images into a new buffer each, 15 % of all
// it allocated (issue 14).
var readBackBufs = sync.Pool{New: func() any { b := make([]byte, readBackChunk); return &b }}

// readBack reads the file p and compares it with img. Errors wrap
// ErrVerify.
func readBack(p string, img []byte) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("%w: read back: %w", ErrVerify, err)
	}
	defer f.Close()
	pb := readBackBufs.Get().(*[]byte)
	defer readBackBufs.Put(pb)
	buf := (*pb)[:min(readBackChunk, len(img)+1)]
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

// checkImage checks that img holds spec's label, file list and bytes and
// returns the Info it describes (without Path and SHA256). Errors wrap
// ErrVerify.
func checkImage(img []byte, spec Spec) (Info, error) {
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
		l, files, err := isoContents(img)
		if err != nil {
			return Info{}, fmt.Errorf("%w: read the built image: %w", ErrVerify, err)
		}
		label = l
		for p, b := range files {
			got = append(got, FileInfo{Path: p, Size: int64(len(b))})
		}
		slices.SortFunc(got, func(a, b FileInfo) int { return strings.Compare(a.Path, b.Path) })
		data = func(p string) ([]byte, error) { return files[p], nil }
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
	return Info{Label: label, FSType: fstype, Size: int64(len(img)), Files: want}, nil
}

func fileList(fs []FileInfo) string {
	var b strings.Builder
	for i, f := range fs {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s(%d)", f.Path, f.Size)
	}
	return b.String()
}

// isoContents reads the ISO 9660 image img: the primary volume label
// (trailing blanks and NULs removed) and every regular file of the Rock
// Ridge tree, by slash path, as a slice of img.
func isoContents(img []byte) (label string, files map[string][]byte, err error) {
	if len(img) < isoPVDOffset+isoBlock || len(img)%isoBlock != 0 {
		return "", nil, fmt.Errorf("%d bytes is not a whole iso9660 volume", len(img))
	}
	pvd := img[isoPVDOffset : isoPVDOffset+isoBlock]
	if pvd[0] != 1 || string(pvd[1:6]) != "CD001" {
		return "", nil, fmt.Errorf("no primary volume descriptor at block 16")
	}
	if bs := binary.LittleEndian.Uint16(pvd[128:]); bs != isoBlock {
		return "", nil, fmt.Errorf("logical block size %d, want %d", bs, isoBlock)
	}
	if blocks := binary.LittleEndian.Uint32(pvd[80:]); int64(blocks)*isoBlock != int64(len(img)) {
		return "", nil, fmt.Errorf("volume size %d blocks, the image has %d bytes", blocks, len(img))
	}
	label = strings.TrimRight(string(pvd[40:72]), " \x00")
	w := &isoContentWalker{img: img, files: map[string][]byte{}, seen: map[uint32]bool{}}
	root := pvd[vdRootRecord : vdRootRecord+34]
	if err := w.dir(binary.LittleEndian.Uint32(root[2:]), binary.LittleEndian.Uint32(root[10:]), "", 0); err != nil {
		return "", nil, err
	}
	return label, w.files, nil
}

type isoContentWalker struct {
	img     []byte
	files   map[string][]byte
	seen    map[uint32]bool
	records int
}

// extent returns img[block*2048 : block*2048+size] or an error.
func (w *isoContentWalker) extent(block, size uint32) ([]byte, error) {
	off := int64(block) * isoBlock
	if off > int64(len(w.img)) || int64(size) > int64(len(w.img))-off {
		return nil, fmt.Errorf("extent of %d bytes at block %d lies outside the %d-byte image", size, block, len(w.img))
	}
	return w.img[off : off+int64(size)], nil
}

func (w *isoContentWalker) dir(loc, size uint32, prefix string, depth int) error {
	if depth > maxWalkDepth {
		return fmt.Errorf("directory %q nested deeper than %d levels", prefix, maxWalkDepth)
	}
	if w.seen[loc] {
		return fmt.Errorf("directory %q: extent at block %d already seen", prefix, loc)
	}
	w.seen[loc] = true
	buf, err := w.extent(loc, size)
	if err != nil {
		return fmt.Errorf("directory %q: %w", prefix, err)
	}
	for p := 0; p < len(buf); {
		l := int(buf[p])
		if l == 0 { // rest of this block is padding
			p = (p/isoBlock + 1) * isoBlock
			continue
		}
		if l < 34 || p+l > len(buf) {
			return fmt.Errorf("directory %q: record of %d bytes at %d overruns its extent", prefix, l, p)
		}
		if w.records++; w.records > isoMaxRecords {
			return fmt.Errorf("more than %d directory records", isoMaxRecords)
		}
		rec := buf[p : p+l]
		p += l
		nameLen := int(rec[32])
		if 33+nameLen > l {
			return fmt.Errorf("directory %q: record name overruns the record", prefix)
		}
		if nameLen == 1 && (rec[33] == 0 || rec[33] == 1) {
			continue // "." and ".."
		}
		su := 33 + nameLen + 1 - nameLen%2
		name, err := w.rrName(rec[min(su, l):])
		if err != nil {
			return fmt.Errorf("directory %q: record %q: %w", prefix, rec[33:33+nameLen], err)
		}
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
			return fmt.Errorf("directory %q: bad Rock Ridge name %q", prefix, name)
		}
		path := prefix + name
		loc, size := binary.LittleEndian.Uint32(rec[2:]), binary.LittleEndian.Uint32(rec[10:])
		if rec[25]&0x02 != 0 {
			if err := w.dir(loc, size, path+"/", depth+1); err != nil {
				return err
			}
			continue
		}
		if _, dup := w.files[path]; dup {
			return fmt.Errorf("file %q listed twice", path)
		}
		if w.files[path], err = w.extent(loc, size); err != nil {
			return fmt.Errorf("file %q: %w", path, err)
		}
	}
	return nil
}

// rrName returns the Rock Ridge name (the NM entries, concatenated) in the
// System Use area su, following CE continuation areas.
func (w *isoContentWalker) rrName(su []byte) (string, error) {
	var name []byte
	found := false
	for hops := 0; ; hops++ {
		var next []byte
		for q := 0; q+4 <= len(su); {
			el := int(su[q+2])
			if el < 4 || q+el > len(su) {
				break // padding
			}
			e := su[q : q+el]
			switch string(e[:2]) {
			case "NM":
				if el < 5 {
					return "", fmt.Errorf("NM entry of %d bytes", el)
				}
				name = append(name, e[5:]...)
				found = true
			case "CE":
				if el < 28 {
					return "", fmt.Errorf("CE entry of %d bytes", el)
				}
				off, n := binary.LittleEndian.Uint32(e[12:]), binary.LittleEndian.Uint32(e[20:])
				if off >= isoBlock || n > isoBlock {
					return "", fmt.Errorf("continuation area of %d bytes at offset %d", n, off)
				}
				ce, err := w.extent(binary.LittleEndian.Uint32(e[4:]), off+n)
				if err != nil {
					return "", fmt.Errorf("continuation area: %w", err)
				}
				next = ce[off:]
			}
			if string(e[:2]) == "ST" {
				break
			}
			q += el
		}
		if next == nil {
			break
		}
		if hops >= isoMaxCEChain {
			return "", fmt.Errorf("more than %d chained continuation areas", isoMaxCEChain)
		}
		su = next
	}
	if !found {
		return "", fmt.Errorf("no Rock Ridge name")
	}
	return string(name), nil
}
