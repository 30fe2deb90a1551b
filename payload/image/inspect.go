package image

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem"
	"github.com/diskfs/go-diskfs/filesystem/fat12"
	"github.com/diskfs/go-diskfs/filesystem/fat16"
	"github.com/diskfs/go-diskfs/filesystem/fat32"
)

// Limits on what Inspect walks, so a damaged image cannot make it loop.
const (
	maxWalkDepth   = 16
	maxWalkEntries = 10000
)

// imageSource is what a reader reads: the image file, or (verify) its bytes
// read in one call.
type imageSource interface {
	fs.File
	io.ReaderAt
}

// reader is an open image: an ISO 9660 volume read by the package's ISO
// reader (isoread.go), or a FAT volume read by go-diskfs.
type reader struct {
	f      imageSource
	iso    *isoVolume            // an ISO image
	fsys   filesystem.FileSystem // a FAT image
	fstype string
	size   int64
	fatLbl string // label from the FAT boot sector, fallback when the root has none
}

// Inspect reads the image at path (ISO9660, with Rock Ridge names when present,
// else Joliet names when present, read by the package's ISO reader; or
// FAT12/16/32, read by go-diskfs) and describes it. For an ISO image it
// also reads the Joliet tree, if any: Info.Joliet says whether it lists
// the same files as the primary tree (what Windows sees), Info.ISOLayout
// which layout the image declares. It never panics on damaged input: any
// failure to make sense of the file wraps ErrUnknownFormat; failures to open or
// read the file wrap the *fs.PathError.
func Inspect(p string) (info Info, err error) {
	r, err := openImage(p)
	if err != nil {
		return Info{}, err
	}
	defer r.close()
	return r.inspect(p)
}

// inspect describes the open image r (read from p), as Inspect does.
func (r *reader) inspect(p string) (info Info, err error) {
	defer func() {
		if v := recover(); v != nil {
			info, err = Info{}, fmt.Errorf("%w: inspect %s: reader failed: %v", ErrUnknownFormat, p, v)
		}
	}()

	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(r.f, 0, r.size)); err != nil {
		return Info{}, fmt.Errorf("hash image %s: %w", p, err)
	}
	files, err := r.walk()
	if err != nil {
		return Info{}, fmt.Errorf("%w: list files of %s: %w", ErrUnknownFormat, p, err)
	}
	info = Info{
		Path:   p,
		Label:  r.label(),
		FSType: r.fstype,
		Size:   r.size,
		SHA256: hex.EncodeToString(h.Sum(nil)),
		Files:  files,
	}
	if r.iso != nil {
		info.ISOLayout = r.iso.layout()
		// A Joliet tree that cannot be read or differs only clears the
		// flag: the image is described by its primary tree.
		j, err := r.iso.jolietFiles()
		info.Joliet = err == nil && sameTree(j, r.iso.files) == nil
	}
	return info, nil
}

// ReadFile returns the contents of the regular file name (slash-separated,
// relative, e.g. "openstack/latest/meta_data.json") inside the image at
// imagePath. A missing file yields an error wrapping fs.ErrNotExist.
func ReadFile(imagePath, name string) (data []byte, err error) {
	r, err := openImage(imagePath)
	if err != nil {
		return nil, err
	}
	defer r.close()
	defer func() {
		if v := recover(); v != nil {
			data, err = nil, fmt.Errorf("%w: read %q from %s: reader failed: %v", ErrUnknownFormat, name, imagePath, v)
		}
	}()
	b, err := r.readFile(name)
	if err != nil {
		return nil, fmt.Errorf("read %q from %s: %w", name, imagePath, err)
	}
	return b, nil
}

// openImage opens p and detects its filesystem.
func openImage(p string) (r *reader, err error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("open image: %w", err)
	}
	return newReader(f, p)
}

// newReader reads the image in f (named p in messages); it closes f on
// failure.
func newReader(f imageSource, p string) (r *reader, err error) {
	defer func() {
		if v := recover(); v != nil {
			r, err = nil, fmt.Errorf("%w: %s: reader failed: %v", ErrUnknownFormat, p, v)
		}
		if err != nil {
			_ = f.Close()
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat image: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrUnknownFormat, p)
	}
	r = &reader{f: f, size: st.Size()}

	head := make([]byte, isoPVDOffset+isoBlock)
	n, err := f.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read image header: %w", err)
	}
	head = head[:n]

	switch {
	case len(head) >= isoPVDOffset+isoBlock && head[isoPVDOffset] == 1 && string(head[isoPVDOffset+1:isoPVDOffset+6]) == "CD001":
		v, err := readISO(&isoVolume{src: f, size: r.size})
		if err != nil {
			return nil, fmt.Errorf("%w: %s: read iso9660: %w", ErrUnknownFormat, p, err)
		}
		r.iso, r.fstype = v, FSTypeISO9660
	default:
		kind, lbl, ok := fatKind(head, r.size)
		if !ok {
			return nil, fmt.Errorf("%w: %s: no iso9660 descriptor or FAT boot sector", ErrUnknownFormat, p)
		}
		var fsys filesystem.FileSystem
		b := file.New(f, true)
		switch kind {
		case 12:
			fsys, err = fat12.Read(b, r.size, 0, 0)
		case 16:
			fsys, err = fat16.Read(b, r.size, 0, 0)
		default:
			fsys, err = fat32.Read(b, r.size, 0, 0)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: read FAT%d: %w", ErrUnknownFormat, p, kind, err)
		}
		r.fsys, r.fstype, r.fatLbl = fsys, FSTypeVFAT, lbl
	}
	return r, nil
}

// fatKind recognises a FAT boot sector and returns the FAT type by cluster
// count (the rule every FAT driver uses) and the label in the boot sector.
// fileSize bounds the volume: a volume larger than the file is rejected, so
// the go-diskfs reader never sizes buffers from fields pointing past the file.
func fatKind(bs []byte, fileSize int64) (kind int, label string, ok bool) {
	if len(bs) < 512 || bs[510] != 0x55 || bs[511] != 0xaa {
		return 0, "", false
	}
	le16 := func(o int) uint32 { return uint32(binary.LittleEndian.Uint16(bs[o:])) }
	le32 := func(o int) uint32 { return binary.LittleEndian.Uint32(bs[o:]) }
	bps := le16(11)
	spc := uint32(bs[13])
	rsvd := le16(14)
	nfats := uint32(bs[16])
	rootEnt := le16(17)
	tot := le16(19)
	if tot == 0 {
		tot = le32(32)
	}
	fatSz := le16(22)
	fat32 := fatSz == 0
	if fat32 {
		fatSz = le32(36)
	}
	if (bps != 512 && bps != 1024 && bps != 2048 && bps != 4096) || spc == 0 || spc&(spc-1) != 0 ||
		rsvd == 0 || nfats == 0 || fatSz == 0 || tot == 0 {
		return 0, "", false
	}
	if int64(tot)*int64(bps) > fileSize {
		return 0, "", false
	}
	rootSecs := (rootEnt*32 + bps - 1) / bps
	meta := uint64(rsvd) + uint64(nfats)*uint64(fatSz) + uint64(rootSecs)
	if meta >= uint64(tot) {
		return 0, "", false
	}
	clusters := (uint64(tot) - meta) / uint64(spc)
	lblOff := 43
	if fat32 {
		lblOff = 71
	}
	label = strings.TrimRight(string(bs[lblOff:lblOff+11]), " \x00")
	switch {
	case fat32:
		return 32, label, true
	case clusters < 4085:
		return 12, label, true
	default:
		return 16, label, true
	}
}

func (r *reader) close() {
	if r.fsys != nil {
		_ = r.fsys.Close()
	}
	_ = r.f.Close()
}

func (r *reader) label() string {
	if r.iso != nil {
		return r.iso.label
	}
	l := strings.TrimRight(r.fsys.Label(), " \x00")
	if r.fstype == FSTypeVFAT && (l == "" || l == "NO NAME") && r.fatLbl != "NO NAME" {
		l = r.fatLbl
	}
	return l
}

// walk lists the regular files of the image, sorted by path.
func (r *reader) walk() ([]FileInfo, error) {
	var files []FileInfo
	if r.iso != nil {
		for _, f := range r.iso.files {
			files = append(files, FileInfo{Path: f.path, Size: int64(f.size)})
		}
		return files, nil
	}
	seen := 0
	var visit func(dir string, depth int) error
	visit = func(dir string, depth int) error {
		if depth > maxWalkDepth {
			return fmt.Errorf("directory %q nested deeper than %d levels", dir, maxWalkDepth)
		}
		entries, err := r.fsys.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("read directory %q: %w", dir, err)
		}
		for _, e := range entries {
			seen++
			if seen > maxWalkEntries {
				return fmt.Errorf("more than %d entries", maxWalkEntries)
			}
			name := e.Name()
			if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
				continue
			}
			p := path.Join(dir, name)
			switch {
			case e.IsDir():
				if err := visit(p, depth+1); err != nil {
					return err
				}
			case e.Type().IsRegular():
				fi, err := e.Info()
				if err != nil {
					return fmt.Errorf("stat %q: %w", p, err)
				}
				files = append(files, FileInfo{Path: p, Size: fi.Size()})
			}
		}
		return nil
	}
	if err := visit(".", 0); err != nil {
		return nil, err
	}
	slices.SortFunc(files, func(a, b FileInfo) int { return strings.Compare(a.Path, b.Path) })
	return files, nil
}

// readFile returns the bytes of a regular file in the image.
func (r *reader) readFile(name string) ([]byte, error) {
	name = strings.TrimPrefix(name, "/")
	if !fs.ValidPath(name) || name == "." {
		return nil, fmt.Errorf("invalid file name %q: %w", name, fs.ErrInvalid)
	}
	if r.iso != nil {
		f, ok := r.iso.find(name)
		if !ok {
			return nil, fmt.Errorf("%w: no regular file %q in the image", fs.ErrNotExist, name)
		}
		return r.iso.data(f)
	}
	st, err := r.fsys.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", fs.ErrNotExist, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%q is not a regular file: %w", name, fs.ErrInvalid)
	}
	if st.Size() > r.size {
		return nil, fmt.Errorf("%w: %q claims %d bytes in a %d-byte image", ErrUnknownFormat, name, st.Size(), r.size)
	}
	f, err := r.fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("open %q: %w", name, err)
	}
	defer f.Close()
	// One read of exactly the recorded size from offset 0: go-diskfs v1.9.4's
	// FAT12 File.Read, resumed in the middle of a cluster, copies up to the
	// end of that cluster even past the end of the file, so reading in chunks
	// (io.ReadAll) returned bytes the file does not have.
	b := make([]byte, st.Size())
	n, err := io.ReadFull(f, b)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) && n < len(b) {
		return nil, fmt.Errorf("%w: %q read %d bytes, directory says %d", ErrUnknownFormat, name, n, st.Size())
	}
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", name, err)
	}
	return b, nil
}
