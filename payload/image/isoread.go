package image

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf16"
)

// The package's one ISO 9660 reader. It serves Inspect and ReadFile (an
// image file on disk, ours or a foreign one) and Write's check of the
// image it built (checkImage, on the bytes in memory, without copies).
// It is written independently of the writer: it reads what the volume
// descriptors and directory records say, as any ISO 9660 reader does.
//
// Names: a volume whose root carries the SUSP "SP" entry is read through
// its Rock Ridge NM names (following CE continuation areas); one without
// it through its Joliet tree when it has one (UCS-2 names); otherwise
// through the ISO 9660 identifiers, without the ";1" version and a
// trailing dot. Every field that points into the volume is checked
// against the size of the file before it is used, and the walk is bounded
// (depth, directories, records, continuation hops), so a damaged file
// yields an error, never a panic, a loop or an allocation larger than the
// file.

// Limits on the ISO walk, so a damaged image cannot make it loop or grow.
const (
	isoMaxDirs    = 4096
	isoMaxRecords = 100000
	isoMaxCEChain = 16
)

// Offsets inside an ISO 9660 volume descriptor (ECMA-119 8.4).
const (
	vdCreation     = 813
	vdModification = 830
	vdExpiration   = 847
	vdEffective    = 864
	vdRootRecord   = 156
)

// isoFile is a regular file of an ISO volume: its path and extent.
type isoFile struct {
	path string
	loc  uint32 // first block
	size uint32
}

// isoVolume is a read ISO 9660 volume.
type isoVolume struct {
	src    io.ReaderAt
	mem    []byte // the whole volume when it is in memory (then src is nil)
	size   int64  // bytes of the file (or of mem)
	label  string // primary volume identifier, trailing blanks and NULs removed
	blocks uint32 // volume space size from the primary volume descriptor
	files  []isoFile
	appID  string // primary application identifier, trailing blanks and NULs removed
	svd    []byte // the Joliet supplementary volume descriptor, if any

	joliet  bool            // names come from the Joliet tree
	rr      bool            // names come from Rock Ridge NM entries
	seen    map[uint32]bool // directory extents walked
	records int
}

// readISOBytes reads the ISO 9660 volume held in img.
func readISOBytes(img []byte) (*isoVolume, error) {
	return readISO(&isoVolume{mem: img, size: int64(len(img))})
}

func readISO(v *isoVolume) (*isoVolume, error) {
	var pvd, svd []byte
	for i := uint32(0); ; i++ {
		if i > 64 {
			return nil, fmt.Errorf("no volume descriptor set terminator in the first 64 descriptors")
		}
		vd, err := v.extent(16+i, isoBlock)
		if err != nil {
			return nil, fmt.Errorf("volume descriptor %d: %w", i, err)
		}
		if string(vd[1:6]) != "CD001" {
			return nil, fmt.Errorf("volume descriptor %d has no CD001 signature", i)
		}
		switch vd[0] {
		case 1:
			if pvd == nil {
				pvd = vd
			}
		case 2:
			if esc := vd[88:91]; svd == nil && esc[0] == 0x25 && esc[1] == 0x2f && (esc[2] == 0x40 || esc[2] == 0x43 || esc[2] == 0x45) {
				svd = vd // Joliet: UCS-2 level 1, 2 or 3
			}
		}
		if vd[0] == 255 {
			break
		}
	}
	if pvd == nil {
		return nil, fmt.Errorf("no primary volume descriptor")
	}
	if bs := binary.LittleEndian.Uint16(pvd[128:]); bs != isoBlock {
		return nil, fmt.Errorf("logical block size %d, want %d", bs, isoBlock)
	}
	v.label = strings.TrimRight(string(pvd[40:72]), " \x00")
	v.appID = strings.TrimRight(string(pvd[574:702]), " \x00")
	v.svd = svd
	v.blocks = binary.LittleEndian.Uint32(pvd[80:])

	root := pvd[vdRootRecord : vdRootRecord+34]
	loc, size := binary.LittleEndian.Uint32(root[2:]), binary.LittleEndian.Uint32(root[10:])
	rr, err := v.hasSUSP(loc, size)
	if err != nil {
		return nil, fmt.Errorf("root directory: %w", err)
	}
	switch {
	case rr:
		v.rr = true
	case svd != nil:
		if bs := binary.LittleEndian.Uint16(svd[128:]); bs != isoBlock {
			return nil, fmt.Errorf("joliet logical block size %d, want %d", bs, isoBlock)
		}
		v.joliet = true
		root = svd[vdRootRecord : vdRootRecord+34]
		loc, size = binary.LittleEndian.Uint32(root[2:]), binary.LittleEndian.Uint32(root[10:])
	}
	v.seen = map[uint32]bool{}
	if err := v.dir(loc, size, "", 0); err != nil {
		return nil, err
	}
	slices.SortFunc(v.files, func(a, b isoFile) int { return strings.Compare(a.path, b.path) })
	for i := 1; i < len(v.files); i++ {
		if v.files[i].path == v.files[i-1].path {
			return nil, fmt.Errorf("file %q listed twice", v.files[i].path)
		}
	}
	return v, nil
}

// jolietFiles reads the Joliet tree (the supplementary volume descriptor
// with a UCS-2 escape sequence) and returns its files, sorted by path, as
// the primary walk does for its tree: names are the UCS-2 identifiers
// without a ";1" version and a trailing dot.
func (v *isoVolume) jolietFiles() ([]isoFile, error) {
	if v.svd == nil {
		return nil, fmt.Errorf("no Joliet volume descriptor")
	}
	if v.joliet {
		return v.files, nil // the primary walk read it
	}
	if bs := binary.LittleEndian.Uint16(v.svd[128:]); bs != isoBlock {
		return nil, fmt.Errorf("joliet logical block size %d, want %d", bs, isoBlock)
	}
	jv := &isoVolume{src: v.src, mem: v.mem, size: v.size, joliet: true, seen: map[uint32]bool{}}
	root := v.svd[vdRootRecord : vdRootRecord+34]
	if err := jv.dir(binary.LittleEndian.Uint32(root[2:]), binary.LittleEndian.Uint32(root[10:]), "", 0); err != nil {
		return nil, err
	}
	slices.SortFunc(jv.files, func(a, b isoFile) int { return strings.Compare(a.path, b.path) })
	for i := 1; i < len(jv.files); i++ {
		if jv.files[i].path == jv.files[i-1].path {
			return nil, fmt.Errorf("file %q listed twice", jv.files[i].path)
		}
	}
	return jv.files, nil
}

// layout is the ISO layout the volume declares (see Info.ISOLayout).
func (v *isoVolume) layout() ISOLayout {
	if v.appID == isoLayoutAppID {
		return ISOLayoutJolietTree
	}
	return ISOLayoutGoDiskfs
}

// extent returns size bytes from block on: a slice of the volume in
// memory, or a buffer read from the file. Extents that do not lie inside
// the file are refused before anything is allocated.
func (v *isoVolume) extent(block, size uint32) ([]byte, error) {
	off := int64(block) * isoBlock
	if off > v.size || int64(size) > v.size-off {
		return nil, fmt.Errorf("extent of %d bytes at block %d lies outside the %d-byte image", size, block, v.size)
	}
	if v.mem != nil {
		return v.mem[off : off+int64(size) : off+int64(size)], nil
	}
	b := make([]byte, size)
	if _, err := v.src.ReadAt(b, off); err != nil && !(errors.Is(err, io.EOF) && size == 0) {
		return nil, fmt.Errorf("read %d bytes at block %d: %w", size, block, err)
	}
	return b, nil
}

// data returns the bytes of f.
func (v *isoVolume) data(f isoFile) ([]byte, error) {
	b, err := v.extent(f.loc, f.size)
	if err != nil {
		return nil, fmt.Errorf("file %q: %w", f.path, err)
	}
	return b, nil
}

// find returns the file at path p.
func (v *isoVolume) find(p string) (isoFile, bool) {
	i, ok := slices.BinarySearchFunc(v.files, p, func(f isoFile, p string) int { return strings.Compare(f.path, p) })
	if !ok {
		return isoFile{}, false
	}
	return v.files[i], true
}

// hasSUSP reports whether the first record ("." of the root directory) of
// the directory extent at loc begins its System Use area with the SUSP
// "SP" entry, which announces Rock Ridge (IEEE P1281 5.3).
func (v *isoVolume) hasSUSP(loc, size uint32) (bool, error) {
	if size < 34 {
		return false, fmt.Errorf("directory extent of %d bytes", size)
	}
	head, err := v.extent(loc, min(size, isoBlock))
	if err != nil {
		return false, err
	}
	l := int(head[0])
	if l < 34 || l > len(head) || 33+int(head[32]) > l {
		return false, fmt.Errorf("bad first record of %d bytes", l)
	}
	su := head[min(suspStart(int(head[32])), l):l]
	return len(su) >= 7 && su[0] == 'S' && su[1] == 'P' && su[4] == 0xbe && su[5] == 0xef, nil
}

// suspStart is the offset of the System Use area in a record with an n-byte name.
func suspStart(n int) int { return 33 + n + 1 - n%2 }

// dir walks the directory extent at loc (size bytes) whose path is prefix
// and collects its files.
func (v *isoVolume) dir(loc, size uint32, prefix string, depth int) error {
	if depth > maxWalkDepth {
		return fmt.Errorf("directory %q nested deeper than %d levels", prefix, maxWalkDepth)
	}
	if v.seen[loc] {
		return fmt.Errorf("directory %q: extent at block %d already seen", prefix, loc)
	}
	v.seen[loc] = true
	if len(v.seen) > isoMaxDirs {
		return fmt.Errorf("more than %d directories", isoMaxDirs)
	}
	buf, err := v.extent(loc, size)
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
		if v.records++; v.records > isoMaxRecords {
			return fmt.Errorf("more than %d directory records", isoMaxRecords)
		}
		rec := buf[p : p+l]
		p += l
		nameLen := int(rec[32])
		if 33+nameLen > l {
			return fmt.Errorf("directory %q: record name overruns the record", prefix)
		}
		id := rec[33 : 33+nameLen]
		if nameLen == 1 && (id[0] == 0 || id[0] == 1) {
			continue // "." and ".."
		}
		isDir := rec[25]&0x02 != 0
		name, err := v.name(id, rec[min(suspStart(nameLen), l):], isDir)
		if err != nil {
			return fmt.Errorf("directory %q: record %q: %w", prefix, id, err)
		}
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
			return fmt.Errorf("directory %q: bad name %q", prefix, name)
		}
		path := prefix + name
		eloc, esize := binary.LittleEndian.Uint32(rec[2:]), binary.LittleEndian.Uint32(rec[10:])
		if isDir {
			if err := v.dir(eloc, esize, path+"/", depth+1); err != nil {
				return err
			}
			continue
		}
		if off := int64(eloc) * isoBlock; off > v.size || int64(esize) > v.size-off {
			return fmt.Errorf("file %q: extent of %d bytes at block %d lies outside the %d-byte image", path, esize, eloc, v.size)
		}
		v.files = append(v.files, isoFile{path: path, loc: eloc, size: esize})
	}
	return nil
}

// name is the name of a record with identifier id and System Use area su.
func (v *isoVolume) name(id, su []byte, isDir bool) (string, error) {
	if v.rr {
		name, found, err := v.rrName(su)
		if err != nil || found {
			return name, err
		}
		// a record without NM: its ISO 9660 identifier, as below
	}
	var name string
	if v.joliet {
		if len(id)%2 != 0 {
			return "", fmt.Errorf("joliet identifier of odd length %d", len(id))
		}
		u := make([]uint16, len(id)/2)
		for i := range u {
			u[i] = binary.BigEndian.Uint16(id[2*i:])
		}
		name = string(utf16.Decode(u))
	} else {
		name = string(id)
	}
	if !isDir {
		if i := strings.LastIndexByte(name, ';'); i >= 0 {
			name = name[:i]
		}
		name = strings.TrimSuffix(name, ".")
	}
	return name, nil
}

// rrName returns the Rock Ridge name (the NM entries, concatenated) in the
// System Use area su, following CE continuation areas; found is false when
// there is no NM entry.
func (v *isoVolume) rrName(su []byte) (name string, found bool, err error) {
	var b []byte
	for hops := 0; ; hops++ {
		var next []byte
	entries:
		for q := 0; q+4 <= len(su); {
			el := int(su[q+2])
			if el < 4 || q+el > len(su) {
				break // padding
			}
			e := su[q : q+el]
			q += el
			switch string(e[:2]) {
			case "NM":
				if el < 5 {
					return "", false, fmt.Errorf("NM entry of %d bytes", el)
				}
				b = append(b, e[5:]...)
				found = true
			case "CE":
				if el < 28 {
					return "", false, fmt.Errorf("CE entry of %d bytes", el)
				}
				off, n := binary.LittleEndian.Uint32(e[12:]), binary.LittleEndian.Uint32(e[20:])
				if off >= isoBlock || n > isoBlock {
					return "", false, fmt.Errorf("continuation area of %d bytes at offset %d", n, off)
				}
				ce, err := v.extent(binary.LittleEndian.Uint32(e[4:]), off+n)
				if err != nil {
					return "", false, fmt.Errorf("continuation area: %w", err)
				}
				next = ce[off:]
			case "ST":
				break entries
			}
		}
		if next == nil {
			break
		}
		if hops >= isoMaxCEChain {
			return "", false, fmt.Errorf("more than %d chained continuation areas", isoMaxCEChain)
		}
		su = next
	}
	return string(b), found, nil
}
